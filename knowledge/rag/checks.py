"""What ``RAGService`` checks, outside its state: a request before any embedder or backend sees it
(documents, chunker output, ids, trigger), and a backend's answer after (``recheck_hits``), so a faulty
backend raises instead of leaking another namespace's data or breaking the ordering contract.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from knowledge.rag import limits
from knowledge.rag.chunking import chunker_output, locate
from knowledge.rag.errors import BackendContractError, RAGTypeError, RAGValidationError
from knowledge.rag.protocols import Chunker, DocumentStore
from knowledge.rag.scripts import reads, scripts_read_by
from knowledge.rag.types import PreparedChunk, RAGDocument, RAGHit, RAGQuery, Vector, check_identifier, content_hash, embedding_input


class Piece:
    """One chunk of a planned ingestion: its text and offsets in the document (None: not a slice)."""

    __slots__ = ("end", "start", "text")

    def __init__(self, text: str, start: int | None, end: int | None) -> None:
        self.text, self.start, self.end = text, start, end


def plan_documents(chunker: Chunker, docs: list[RAGDocument]) -> list[tuple[RAGDocument, list[Piece]]]:
    """Each document's chunks (as ``chunker`` cuts them) with their offsets, checked: the seed's bounds (characters per
    chunk, then chunks per request), then the rest (types, empty chunks, NUL characters)."""
    outputs: list[tuple[RAGDocument, list[object], list[tuple[int, int]] | None]] = []
    complete = True
    read = 0
    for doc in docs:
        if read > limits.MAX_CHUNKS_PER_INGEST:
            complete = False  # already over the bound: the rest cannot bring it back
            break
        pieces, spans, whole = chunker_output(chunker, doc, limits.MAX_CHUNKS_PER_INGEST + 1 - read)
        complete = complete and whole
        read += len(pieces)
        outputs.append((doc, pieces, spans))
    for doc, pieces, _ in outputs:
        for index, piece in enumerate(pieces):
            if isinstance(piece, str) and len(piece) > limits.MAX_CHARS_PER_CHUNK:
                raise RAGValidationError(
                    f"documents[{doc.id}].chunks[{index}]", f"at most {limits.MAX_CHARS_PER_CHUNK} characters per chunk, got {len(piece)}"
                )
    if read > limits.MAX_CHUNKS_PER_INGEST or not complete:
        got = f"got {read}" if complete else f"got more than {limits.MAX_CHUNKS_PER_INGEST}"
        raise RAGValidationError("documents", f"at most {limits.MAX_CHUNKS_PER_INGEST} chunks per ingestion request, {got}")
    planned: list[tuple[RAGDocument, list[Piece]]] = []
    for doc, pieces, spans in outputs:
        if not pieces:
            raise RAGValidationError(f"documents[{doc.id}].text", "has no text to index")
        for index, piece in enumerate(pieces):
            where = f"documents[{doc.id}].chunks[{index}]"
            if not isinstance(piece, str):
                raise RAGTypeError(where, f"a chunker must return strings, got {type(piece).__name__}")
            if not piece.strip():
                raise RAGValidationError(where, "a chunker returned an empty chunk")
            if "\x00" in piece:
                raise RAGValidationError(where, "must not contain NUL characters")
        texts: list[str] = pieces  # type: ignore[assignment]  # all strings, checked above
        offsets = spans if spans is not None else locate(doc.text, texts)
        planned.append((doc, [Piece(t, start, end) for t, (start, end) in zip(texts, offsets, strict=True)]))
    return planned


def prepared_chunks(doc: RAGDocument, pieces: list[Piece], vectors: Mapping[str, Vector], model_id: str | None) -> list[PreparedChunk]:
    out = []
    for ordinal, piece in enumerate(pieces):
        digest = content_hash(embedding_input(doc.title, piece.text))
        out.append(PreparedChunk(
            chunk_id=f"{doc.id}:{ordinal}", ordinal=ordinal, text=piece.text, start_char=piece.start, end_char=piece.end,
            content_hash=digest, embedding=vectors.get(digest), embedding_model=model_id,
        ))
    return out


def document_store(backend: object) -> DocumentStore | None:
    """The backend as a ``DocumentStore`` when it has both methods (Quarry's backends)."""
    return backend if isinstance(backend, DocumentStore) else None


def is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def readable(hits: tuple[RAGHit, ...], embedder: object) -> tuple[RAGHit, ...]:
    """``hits`` without the cosines ``embedder`` cannot vouch for (``knowledge.rag.scripts``): a hit whose
    text it cannot read loses its ``semantic_similarity``, and goes when only that cosine found it (an
    English model puts short Chinese texts at 0.45-0.6 from any English question). Order and scores are
    the backend's, so what remains is still best first."""
    if scripts_read_by(embedder) is None:
        return hits
    kept: list[RAGHit] = []
    for hit in hits:
        if reads(embedder, hit.chunk.text):
            kept.append(hit)
        elif hit.keyword_score is not None or hit.graph_path:
            kept.append(dataclasses.replace(hit, semantic_similarity=None))
    return tuple(kept)


def recheck_hits(query: RAGQuery, hits: object) -> tuple[RAGHit, ...]:
    if not is_sequence(hits):
        raise BackendContractError(f"backend search returned {type(hits).__name__}, expected a sequence of RAGHit")
    assert isinstance(hits, Sequence)
    if len(hits) > query.limit:
        raise BackendContractError(f"backend returned {len(hits)} hits for limit {query.limit}")
    seen: set[str] = set()
    previous = math.inf
    for hit in hits:
        if not isinstance(hit, RAGHit):
            raise BackendContractError(f"backend returned {type(hit).__name__} from search, expected RAGHit")
        if hit.chunk.namespace != query.namespace:
            raise BackendContractError(f"backend returned chunk {hit.chunk.chunk_id} of another namespace")
        if hit.score > previous + 1e-9:
            raise BackendContractError("backend returned hits out of descending score order")
        if query.min_score is not None and hit.score < query.min_score - 1e-12:
            raise BackendContractError(f"backend returned a hit scored {hit.score} below min_score {query.min_score}")
        if hit.chunk.chunk_id in seen:
            raise BackendContractError(f"backend returned chunk {hit.chunk.chunk_id} twice")
        seen.add(hit.chunk.chunk_id)
        previous = hit.score
    return tuple(hits)


def check_documents(documents: Sequence[RAGDocument]) -> list[RAGDocument]:
    """The request's documents: a sequence, then the seed's bounds (count, total characters)."""
    if isinstance(documents, RAGDocument) or not is_sequence(documents):
        raise RAGTypeError("documents", "must be a list of RAGDocument")
    docs = list(documents)
    if not docs:
        raise RAGValidationError("documents", "at least 1 document per ingestion request")
    if len(docs) > limits.MAX_DOCUMENTS_PER_INGEST:
        raise RAGValidationError("documents", f"at most {limits.MAX_DOCUMENTS_PER_INGEST} documents per ingestion request, got {len(docs)}")
    for doc in docs:
        if not isinstance(doc, RAGDocument):
            raise RAGTypeError("documents", f"must contain RAGDocument values, got {type(doc).__name__}")
    total = sum(len(d.text) for d in docs)
    if total > limits.MAX_CHARS_PER_INGEST:
        raise RAGValidationError("documents", f"at most {limits.MAX_CHARS_PER_INGEST} characters per ingestion request, got {total}")
    return docs


def check_trigger(trigger: str) -> None:
    if trigger not in ("user", "agent"):
        raise RAGValidationError("trigger", f"must be 'user' or 'agent', got {trigger!r}")


def check_ids(values: Sequence[str], field: str, pattern: object, what: str, maximum: int) -> list[str]:
    if not is_sequence(values):
        raise RAGTypeError(field, "must be a list of ids")
    ids = list(values)
    if not ids:
        raise RAGValidationError(field, "at least 1 id")
    if len(ids) > maximum:
        raise RAGValidationError(field, f"at most {maximum} ids per request, got {len(ids)}")
    return [check_identifier(field, v, pattern, what) for v in ids]
