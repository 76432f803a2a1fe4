"""Generic wrappers around the RAG API's providers.

- ``RetryingEmbedder``: an embedder that retries a failed batch with exponential backoff.

A wrapper has exactly the optional capabilities of what it wraps (``hasattr`` answers as it
would for the inner provider), so a service over it behaves like one over what it wraps:
a wrapper around a plain ``embed(texts)`` embedder does not pretend to have a model id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from knowledge.rag.errors import ConfigurationError, EmbedderError, RAGTypeError, RAGValidationError
from knowledge.rag.protocols import Embedder, takes_keyword

logger = logging.getLogger(__name__)


def _delegate(wrapper: object, name: str) -> Any:
    """``getattr(inner, name)`` for a wrapper's ``__getattr__``: optional capabilities pass through, dunders do not."""
    inner = wrapper.__dict__.get("inner")
    if inner is None or (name.startswith("__") and name.endswith("__")):
        raise AttributeError(name)
    return getattr(inner, name)


class RetryingEmbedder:
    """An ``Embedder`` that retries a failed batch ``retries`` times, waiting ``delay_seconds``,
    then twice that, and so on; then raises ``EmbedderError`` with the last error.

    Errors of our own input or configuration are raised at once: trying again cannot help.
    ``model_id``, ``dimension``, ``batch_size`` (and anything else) are the inner embedder's,
    present only when it has them; ``__wrapped__`` names it, so an embedder without a
    ``model_id`` gets the same derived id wrapped or not. ``kind`` reaches the inner
    embedder only when its ``embed`` takes it.
    """

    def __init__(self, inner: Embedder, *, retries: int, delay_seconds: float) -> None:
        if retries < 0 or delay_seconds < 0:
            raise ValueError("retries and delay_seconds must not be negative")
        self.inner = inner
        self.__wrapped__ = inner
        self.retries = retries
        self.delay = delay_seconds
        self._inner_takes_kind = takes_keyword(inner.embed, "kind")

    def __getattr__(self, name: str) -> Any:
        return _delegate(self, name)

    async def embed(self, texts: Sequence[str], *, kind: Literal["document", "query"] = "document") -> Sequence[Sequence[float]]:
        for attempt in range(self.retries + 1):
            try:
                if self._inner_takes_kind:
                    return await self.inner.embed(texts, kind=kind)  # type: ignore[call-arg]
                return await self.inner.embed(texts)
            except (RAGValidationError, RAGTypeError, ConfigurationError):
                raise
            except Exception as exc:
                if attempt == self.retries:
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise EmbedderError(f"{exc}{tries}") from exc
                logger.warning("embedding batch failed (attempt %s of %s), retrying: %s", attempt + 1, self.retries + 1, exc)
                await asyncio.sleep(self.delay * 2**attempt)
        raise AssertionError("unreachable")
