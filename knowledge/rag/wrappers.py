"""Generic wrappers around the RAG API's providers.

- ``GuardedBackend``: a backend whose writes run two hooks inside the chunk swap's
  own transaction (the document pipeline checks its lease there and records the outcome).
- ``RetryingEmbedder``: an embedder that retries a failed batch with exponential backoff.

Both have exactly the optional capabilities of what they wrap (``hasattr`` answers as it
would for the inner provider), so a service over them behaves like one over what they wrap:
a wrapper around a backend of the seed's contract does not pretend to reuse embeddings,
and a wrapper around a plain ``embed(texts)`` embedder does not pretend to have a model id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from knowledge.rag.errors import ConfigurationError, EmbedderError, RAGTypeError, RAGValidationError
from knowledge.rag.protocols import Embedder, RAGBackend, takes_keyword
from knowledge.rag.types import PreparedDocument, RAGChunk, RAGHit, RAGQuery, Stored, Trigger

logger = logging.getLogger(__name__)


def _delegate(wrapper: object, name: str) -> Any:
    """``getattr(inner, name)`` for a wrapper's ``__getattr__``: optional capabilities pass through, dunders do not."""
    inner = wrapper.__dict__.get("inner")
    if inner is None or (name.startswith("__") and name.endswith("__")):
        raise AttributeError(name)
    return getattr(inner, name)


class GuardedBackend:
    """A ``RAGBackend`` (on Django's database) whose writes run ``before`` and ``after`` in the chunk swap's transaction.

    ``before`` takes row locks and may raise to abandon the write; ``after`` records the
    outcome atomically with the new chunks. Both the seed's ``replace`` and Quarry's
    ``replace_documents`` (present only when the inner backend has it) are guarded; their
    atomicity with the hooks holds for a backend that writes through Django's connection
    on the calling thread, as ``PostgresBackend`` does. Everything else delegates.
    """

    def __init__(self, inner: RAGBackend, *, before: Callable[[], None], after: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.before = before
        self.after = after
        self.using = getattr(inner, "using", "default")

    def __getattr__(self, name: str) -> Any:
        if name == "replace_documents":
            _delegate(self, name)  # AttributeError when the inner backend has no such capability
            return self._replace_documents
        return _delegate(self, name)

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]) -> None:
        await sync_to_async(self._guarded, thread_sensitive=True)(self.inner.replace, namespace, document_ids, chunks)

    async def _replace_documents(self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger) -> Stored:
        inner = self.inner.replace_documents  # type: ignore[attr-defined]
        return await sync_to_async(self._guarded, thread_sensitive=True)(inner, namespace, documents, actor=actor, trigger=trigger)

    def _guarded(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with transaction.atomic(using=self.using):
            self.before()
            # Thread-sensitive all the way down: the backend's own sync code runs on this
            # thread, so its statements join this transaction.
            result = async_to_sync(write)(*args, **kwargs)
            if self.after is not None:
                self.after()
        return result

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None:
        await self.inner.delete(namespace, document_ids)

    async def fetch(self, namespace: str, chunk_ids: Sequence[str], **reader: Any) -> Sequence[RAGChunk]:
        return await self.inner.fetch(namespace, chunk_ids, **reader)

    async def search(self, query: RAGQuery) -> Sequence[RAGHit]:
        return await self.inner.search(query)


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
