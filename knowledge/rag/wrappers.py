"""Generic wrappers around the RAG API's providers.

- ``GuardedBackend``: a backend whose ``replace`` runs two hooks inside the chunk swap's
  own transaction (the document pipeline checks its lease there and records the outcome).
- ``RetryingEmbedder``: an embedder that retries a failed batch with exponential backoff.

Both delegate everything else unchanged, so a service over them behaves exactly like
one over what they wrap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from knowledge.rag.errors import ConfigurationError, EmbedderError, RAGTypeError, RAGValidationError
from knowledge.rag.types import Embedder, RAGBackend, RAGChunk, RAGHit, RAGQuery, Trigger

logger = logging.getLogger(__name__)


class GuardedBackend:
    """A ``RAGBackend`` (on Django's database) whose ``replace`` runs ``before`` and ``after`` in the chunk swap's transaction.

    ``before`` takes row locks and may raise to abandon the write; ``after`` records the
    outcome atomically with the new chunks. Everything else delegates.
    """

    def __init__(self, inner: RAGBackend, *, before: Callable[[], None], after: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.before = before
        self.after = after
        self.using = getattr(inner, "using", "default")

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def replace(self, namespace: str, documents: Sequence[Any], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._replace, thread_sensitive=True)(namespace, documents, actor, trigger)

    def _replace(self, namespace: str, documents: Sequence[Any], actor: str | None, trigger: Trigger) -> int:
        with transaction.atomic(using=self.using):
            self.before()
            # Thread-sensitive all the way down: the backend's own sync code runs on this
            # thread, so its statements join this transaction.
            stored = async_to_sync(self.inner.replace)(namespace, documents, actor=actor, trigger=trigger)
            if self.after is not None:
                self.after()
        return stored

    async def delete(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        return await self.inner.delete(namespace, document_ids, actor=actor, trigger=trigger)

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> Sequence[RAGChunk]:
        return await self.inner.fetch(namespace, chunk_ids)

    async def search(self, query: RAGQuery) -> Sequence[RAGHit]:
        return await self.inner.search(query)

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Any]:
        return await self.inner.known_embeddings(namespace, document_ids, model_id)  # type: ignore[attr-defined]


class RetryingEmbedder:
    """An ``Embedder`` that retries a failed batch ``retries`` times, waiting ``delay_seconds``,
    then twice that, and so on; then raises ``EmbedderError`` with the last error.

    Errors of our own input or configuration are raised at once: trying again cannot help.
    """

    def __init__(self, inner: Embedder, *, retries: int, delay_seconds: float) -> None:
        if retries < 0 or delay_seconds < 0:
            raise ValueError("retries and delay_seconds must not be negative")
        self.inner = inner
        self.model_id = getattr(inner, "model_id", None)
        self.dimension = getattr(inner, "dimension", None)
        self.batch_size = getattr(inner, "batch_size", None)
        self.retries = retries
        self.delay = delay_seconds

    async def embed(self, texts: Sequence[str], *, kind: Literal["document", "query"] = "document") -> list[list[float]]:
        for attempt in range(self.retries + 1):
            try:
                return await self.inner.embed(texts, kind=kind)
            except (RAGValidationError, RAGTypeError, ConfigurationError):
                raise
            except Exception as exc:
                if attempt == self.retries:
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise EmbedderError(f"{exc}{tries}") from exc
                logger.warning("embedding batch failed (attempt %s of %s), retrying: %s", attempt + 1, self.retries + 1, exc)
                await asyncio.sleep(self.delay * 2**attempt)
        raise AssertionError("unreachable")
