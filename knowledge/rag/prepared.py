"""``PreparedIngest``: an ingest validated, chunked and embedded, not yet written.

``RAGService.prepare_ingest`` makes one (the slow half: the embedder's calls, outside any transaction);
``RAGService.write_ingest`` writes it (the short half, which may run inside the caller's transaction,
beside a lease check and a status change). See ``RAGService.ingest_documents`` for both at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from knowledge.rag.checks import Piece, prepared_chunks
from knowledge.rag.types import PreparedDocument, RAGChunk, RAGDocument, Trigger, Vector, content_hash, embedding_input


@dataclass(frozen=True)
class PreparedIngest:
    """Documents with their chunks (``planned``) and those chunks' vectors, by content hash, of ``model_id``.

    ``namespace_model``: the namespace's model the vectors were made for when the service follows it
    (see ``PreparedDocument.namespace_model``); the write refuses them once the namespace moved on.
    ``trigger`` and ``actor`` are the write's audit. The progress callbacks are kept for
    ``RAGService.embed_again``, which embeds with the same ones.
    """

    namespace: str
    planned: tuple[tuple[RAGDocument, tuple[Piece, ...]], ...]
    vectors: Mapping[str, Vector] = field(repr=False)
    model_id: str | None
    namespace_model: str | None
    trigger: Trigger
    actor: str | None
    on_progress: Callable[[float], None] | None = field(default=None, repr=False, compare=False)
    on_counts: Callable[[int, int], None] | None = field(default=None, repr=False, compare=False)

    @property
    def total_chunks(self) -> int:
        return sum(len(pieces) for _, pieces in self.planned)

    def documents(self) -> tuple[PreparedDocument, ...]:
        """The whole documents, for a backend that stores them (``DocumentStore``, ``SyncDocumentStore``)."""
        return tuple(
            PreparedDocument(document=doc, content_hash=content_hash(doc.text), namespace_model=self.namespace_model,
                             chunks=tuple(prepared_chunks(doc, list(pieces), self.vectors, self.model_id)))
            for doc, pieces in self.planned
        )

    def chunks(self) -> tuple[RAGChunk, ...]:
        """The chunks alone, for a backend of the seed's contract (``RAGBackend.replace``)."""
        return tuple(
            RAGChunk(
                f"{doc.id}:{ordinal}", doc.id, self.namespace, piece.text, doc.title, doc.uri, doc.metadata,
                self.vectors.get(content_hash(embedding_input(doc.title, piece.text))), start_char=piece.start, end_char=piece.end,
            )
            for doc, pieces in self.planned
            for ordinal, piece in enumerate(pieces)
        )
