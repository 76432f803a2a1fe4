"""The seed's ``replace(namespace, document_ids, chunks)`` in terms of Quarry's whole-document writes.

Quarry's backends store documents (text, hashes, offsets) and audit every write
(``replace_documents``); the seed's contract hands a backend chunks only. This turns
such a call into what ``replace_documents`` takes, so both forms share one write path.
"""

from __future__ import annotations

from collections.abc import Sequence

from knowledge.rag import limits
from knowledge.rag.errors import RAGTypeError, RAGValidationError
from knowledge.rag.types import (
    PreparedChunk,
    PreparedDocument,
    RAGChunk,
    RAGDocument,
    check_identifier,
    content_hash,
    embedding_input,
)

# The document text a chunks-only replacement stores: its chunks in order, with this between them.
JOINER = "\n\n"


def documents_from_chunks(
    namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]
) -> tuple[list[PreparedDocument], list[str]]:
    """``(documents to store, document ids left without chunks)`` for a seed-style ``replace``.

    Each stored document's text is its chunks' texts in ordinal order, joined by a blank
    line, so every chunk keeps offsets into it; its title, URI and metadata are those of its
    chunks, which must agree (Quarry keeps them per document). Vectors carry no model id.
    A document id without chunks is to be deleted. Raises ``RAGValidationError`` or
    ``RAGTypeError`` for chunks of another namespace or of a document not being replaced.
    """
    if isinstance(document_ids, str) or not isinstance(document_ids, Sequence):
        raise RAGTypeError("document_ids", "must be a list of ids")
    if len(document_ids) > limits.MAX_DOCUMENTS_PER_INGEST:
        raise RAGValidationError("document_ids", f"at most {limits.MAX_DOCUMENTS_PER_INGEST} documents per ingestion request, got {len(document_ids)}")
    if isinstance(chunks, str) or not isinstance(chunks, Sequence):
        raise RAGTypeError("chunks", "must be a list of RAGChunk")
    if len(chunks) > limits.MAX_CHUNKS_PER_INGEST:
        raise RAGValidationError("chunks", f"at most {limits.MAX_CHUNKS_PER_INGEST} chunks per ingestion request, got {len(chunks)}")
    ids = list(dict.fromkeys(check_identifier("document_ids", i, limits.DOCUMENT_ID_RE, "document id") for i in document_ids))
    by_document: dict[str, list[RAGChunk]] = {i: [] for i in ids}
    seen: set[str] = set()
    for chunk in chunks:
        if not isinstance(chunk, RAGChunk):
            raise RAGTypeError("chunks", f"must contain RAGChunk values, got {type(chunk).__name__}")
        if chunk.namespace != namespace:
            raise RAGValidationError("chunks", f"chunk {chunk.chunk_id} belongs to namespace {chunk.namespace!r}, not {namespace!r}")
        if chunk.document_id not in by_document:
            raise RAGValidationError("chunks", f"chunk {chunk.chunk_id} belongs to document {chunk.document_id}, which is not being replaced")
        if chunk.chunk_id != f"{chunk.document_id}:{chunk.ordinal}":
            raise RAGValidationError("chunks", f"chunk id {chunk.chunk_id} must be '<document id>:<n>' of its document {chunk.document_id}")
        if chunk.chunk_id in seen:
            raise RAGValidationError("chunks", f"chunk ids must be unique within one request; repeated: {chunk.chunk_id}")
        seen.add(chunk.chunk_id)
        by_document[chunk.document_id].append(chunk)

    documents: list[PreparedDocument] = []
    for document_id, own in by_document.items():
        if not own:
            continue
        own.sort(key=lambda c: c.ordinal)
        first = own[0]
        if any((c.title, c.uri, dict(c.metadata)) != (first.title, first.uri, dict(first.metadata)) for c in own):
            raise RAGValidationError("chunks", f"the chunks of document {document_id} must share one title, uri and metadata")
        prepared: list[PreparedChunk] = []
        position = 0
        for chunk in own:
            start = position
            position += len(chunk.text)
            prepared.append(PreparedChunk(
                chunk_id=chunk.chunk_id, ordinal=chunk.ordinal, text=chunk.text, start_char=start, end_char=position,
                content_hash=content_hash(embedding_input(chunk.title, chunk.text)), embedding=chunk.embedding, embedding_model=None,
            ))
            position += len(JOINER)
        document = RAGDocument(document_id, JOINER.join(c.text for c in own), first.title, first.uri, first.metadata)
        documents.append(PreparedDocument(document=document, content_hash=content_hash(document.text), chunks=tuple(prepared)))
    emptied = [i for i, own in by_document.items() if not own]
    return documents, emptied
