"""``RAGService``'s embedding: vectors for an ingestion (reusing stored ones, resuming an interrupted
run from the backend's cache, learning an undeclared dimension), batches with progress, and the checks
on what an embedder returns (count, dimension, finite, non-zero; stored unit-length).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from knowledge.rag import limits
from knowledge.rag.checks import Piece, is_sequence
from knowledge.rag.errors import EmbedderError, RAGTypeError, RAGValidationError
from knowledge.rag.protocols import (
    Embedder,
    EmbeddingCache,
    EmbeddingModels,
    VectorStore,
    declared_dimension,
    derived_dimension,
    embedder_label,
    embedder_model_id,
    takes_keyword,
)
from knowledge.rag.types import EmbedKind, RAGDocument, Vector, check_vector, content_hash, embedding_input

# Texts per embedding call when the caller follows progress (embedders without a batch_size).
PROGRESS_BATCH = 32


class ServiceEmbedding:
    """The embedding half of ``RAGService`` (a mixin: it reads the service's ``backend`` and ``embedder``
    and keeps what it learns of the embedder on the service, so a follow-the-model switch resets it)."""

    backend: Any
    embedder: Embedder | None
    _dimension_seen: int | None
    _kind_for: tuple[object, bool] | None

    async def _document_vectors(
        self, namespace: str, planned: list[tuple[RAGDocument, list[Piece]]], on_progress: Callable[[float], None] | None,
        on_counts: Callable[[int, int], None] | None = None,
    ) -> tuple[dict[str, Vector], str | None]:
        """Vectors by content hash for every chunk (reused where the backend holds them), and the model id."""
        if self.embedder is None:
            if on_progress is not None:
                on_progress(1.0)  # nothing to embed: still one cancellation point before the write
            return {}, None
        items: dict[str, str] = {}
        for doc, pieces in planned:
            for piece in pieces:
                text = embedding_input(doc.title, piece.text)
                items.setdefault(content_hash(text), text)
        vectors: dict[str, Vector] = {}
        model_id = embedder_model_id(self.embedder, self._expected_dimension())
        # The dimension a derived model id was read back from the store with, not yet seen from the embedder.
        provisional: int | None = None
        if model_id is None:
            # An embedder without model_id or dimension: its id needs the dimension of its vectors.
            model_id, provisional, probe = await self._stored_derived_id(namespace, [doc.id for doc, _ in planned])
            if probe:
                # The backend cannot say under which id it holds these documents' vectors: embed one
                # text first to learn it (it would be embedded anyway unless unchanged).
                first = next(iter(items.items()))
                vectors.update(await self._embed_many([first], kind="document"))
                model_id = embedder_model_id(self.embedder, self._dimension_seen)
        if isinstance(self.backend, EmbeddingCache) and model_id is not None:
            known: Mapping[tuple[str, str], Vector] = await self.backend.known_embeddings(namespace, [doc.id for doc, _ in planned], model_id)
            for (_, digest), vector in known.items():
                vectors.setdefault(digest, vector)
        missing = [(digest, text) for digest, text in items.items() if digest not in vectors]
        cache = self.backend if isinstance(self.backend, VectorStore) else None
        if missing and cache is not None and model_id is not None:
            # Vectors an interrupted run of this work computed before it stopped.
            vectors.update(await cache.cached_embeddings(namespace, model_id, [digest for digest, _ in missing]))
            missing = [(digest, text) for digest, text in missing if digest not in vectors]
        store: Callable[[dict[str, Vector]], Any] | None = None
        # Not under a provisional id: vectors of another dimension must never be cached under it.
        if cache is not None and model_id is not None and provisional is None:
            resolved_model = model_id

            async def store(batch: dict[str, Vector]) -> None:
                await cache.cache_embeddings(namespace, resolved_model, batch)

        reused = len(items) - len(missing)
        if on_counts is not None:
            on_counts(reused, len(items))
        vectors.update(await self._embed_many(
            missing, kind="document", on_progress=on_progress, store=store, reused=reused, total=len(items), on_counts=on_counts,
        ))
        if provisional is not None and self._dimension_seen not in (None, provisional):
            # The embedder's vectors changed dimension since the stored ones were made: those cannot
            # be reused beside them. Start over under the id of the dimension now seen (rare: the
            # freshly computed vectors are computed once more).
            return await self._document_vectors(namespace, planned, on_progress, on_counts)
        if model_id is None:
            model_id = embedder_model_id(self.embedder, self._dimension_seen)  # everything was embedded above
        if on_progress is not None and not missing:
            on_progress(1.0)
        return vectors, model_id

    async def _stored_derived_id(self, namespace: str, document_ids: list[str]) -> tuple[str | None, int | None, bool]:
        """For an embedder declaring neither model id nor dimension: ``(model id, its dimension, probe)``.

        The id (and the dimension it names) of the vectors of this embedder the backend holds for
        these documents, read back without an embedding call (``embedding_models``, an optional
        capability); ``(None, None, False)`` when it holds none, since nothing could be reused then
        and every text goes to the embedder in the same calls. ``probe`` is True when the backend can
        give vectors back (``known_embeddings``) but cannot say under which id: the caller then
        embeds one text first to learn it.
        """
        assert self.embedder is not None
        if not isinstance(self.backend, EmbeddingModels):
            return None, None, isinstance(self.backend, EmbeddingCache)
        stored = await self.backend.embedding_models(namespace, document_ids)
        dimensions = sorted({d for m in stored if (d := derived_dimension(self.embedder, m)) is not None})
        if not dimensions:
            return None, None, False
        # Several (the embedder changed dimension between ingests): any is a guess; a wrong one is
        # caught when the first new vector arrives. With nothing to embed, the guess stands: the
        # unchanged chunks keep the vectors they have (give such an embedder a model_id or dimension).
        return embedder_model_id(self.embedder, dimensions[-1]), dimensions[-1], False

    def _expected_dimension(self) -> int | None:
        assert self.embedder is not None
        return declared_dimension(self.embedder) or self._dimension_seen

    async def _embed_many(
        self, items: list[tuple[str, str]], *, kind: EmbedKind, on_progress: Callable[[float], None] | None = None,
        store: Callable[[dict[str, Vector]], Any] | None = None, reused: int = 0, total: int | None = None,
        on_counts: Callable[[int, int], None] | None = None,
    ) -> dict[str, Vector]:
        """Embed ``(digest, text)`` items in batches. ``store`` (async) receives each batch's vectors as
        soon as they are computed; progress counts the ``reused`` vectors of ``total`` as done."""
        out: dict[str, Vector] = {}
        total = len(items) + reused if total is None else total
        step = limits.MAX_EMBED_BATCH
        if on_progress is not None:
            # Smaller calls so progress (and cancellation) moves during long work; the
            # embedder's own batch size keeps provider round trips as large as before.
            size = getattr(self.embedder, "batch_size", None)
            size = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else PROGRESS_BATCH
            step = min(limits.MAX_EMBED_BATCH, size)
        for i in range(0, len(items), step):
            batch = items[i : i + step]
            vectors = await self._embed_checked([text for _, text in batch], kind=kind)
            computed = {digest: vector for (digest, _), vector in zip(batch, vectors, strict=True)}
            out.update(computed)
            if store is not None:
                await store(computed)
            done = reused + i + len(batch)
            if on_counts is not None:
                on_counts(done, total)
            if on_progress is not None:
                on_progress(min(1.0, done / total))
        return out

    async def _call_embedder(self, texts: list[str], kind: EmbedKind) -> Any:
        embedder = self.embedder
        assert embedder is not None
        # The seed's embedder is embed(texts); Quarry's also take kind= (query vs document
        # roles). Read the signature once per embedder, never guess from a TypeError.
        if self._kind_for is None or self._kind_for[0] is not embedder:
            self._kind_for = (embedder, takes_keyword(embedder.embed, "kind"))
        if self._kind_for[1]:
            return await embedder.embed(texts, kind=kind)  # type: ignore[call-arg]
        return await embedder.embed(texts)

    async def _embed_checked(self, texts: list[str], *, kind: EmbedKind) -> list[Vector]:
        assert self.embedder is not None
        label = embedder_label(self.embedder)
        if not 1 <= len(texts) <= limits.MAX_EMBED_BATCH:
            raise RAGValidationError("texts", f"embedding batches from 1 to {limits.MAX_EMBED_BATCH} texts, got {len(texts)}")
        try:
            raw = await self._call_embedder(texts, kind)
        except (RAGValidationError, RAGTypeError, EmbedderError):
            raise
        except Exception as exc:
            raise EmbedderError(f"embedder {label} failed: {exc}") from exc
        if not is_sequence(raw) or len(raw) != len(texts):
            got = len(raw) if is_sequence(raw) else type(raw).__name__
            raise EmbedderError(f"embedder {label} returned {got} vectors for {len(texts)} texts")
        vectors: list[Vector] = []
        for index, item in enumerate(raw):
            try:
                vector = check_vector(item, f"embedding[{index}]")
            except (RAGValidationError, RAGTypeError) as exc:
                raise EmbedderError(f"embedder {label} returned a bad vector: {exc}") from None
            norm = math.sqrt(math.fsum(x * x for x in vector))
            if norm == 0.0:
                raise EmbedderError(f"embedder {label} returned an all-zero vector for input {index}")
            # Stored unit-length: cosine similarity becomes a dot product in every backend.
            vectors.append(tuple(x / norm for x in vector))
        dims = {len(v) for v in vectors}
        expected = self._expected_dimension()
        if len(dims) != 1 or (expected is not None and dims != {expected}):
            raise EmbedderError(
                f"embedder {label} returned vectors of dimension {sorted(dims)}, expected one dimension"
                + (f" ({expected})" if expected else "")
            )
        if self._dimension_seen is None:
            self._dimension_seen = dims.pop()
        return vectors
