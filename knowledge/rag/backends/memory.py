"""A bounded, process-local backend with the same contract as PostgreSQL.

For tests, demos and embedding Quarry's API in a script. Keyword ranking is
Okapi BM25 over a simple English tokenizer (lowercase words, stop words
dropped); semantic ranking is exact cosine; hybrid is RRF of the two, or their normalised
score fusion (``RAGQuery.fusion``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knowledge.rag.backends.chunks import documents_from_chunks
from knowledge.rag.errors import CapacityError
from knowledge.rag.fusion import FUSION_DEPTH, cosine, rrf, score_fusion
from knowledge.rag.types import (
    FilterValue,
    Fusion,
    PreparedDocument,
    Stored,
    RAGChunk,
    RAGHit,
    RAGQuery,
    Scalar,
    SearchMode,
    Trigger,
    Vector,
)

_WORD = re.compile(r"[a-z0-9]+")
# PostgreSQL's English stop words, so both backends agree on what a term is.
STOP_WORDS = frozenset(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself "
    "it its itself they them their theirs themselves what which who whom this that these those am is are was were be "
    "been being have has had having do does did doing a an the and but if or because as until while of at by for with "
    "about against between into through during before after above below to from up down in out on off over under again "
    "further then once here there when where why how all any both each few more most other some such no nor not only "
    "own same so than too very s t can will just don should now".split()
)
K1 = 1.2
B = 0.75


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


@dataclass
class _Stored:
    chunk: RAGChunk  # as reads return it: without its vector (the projection Postgres makes too)
    vector: Vector | None
    content_hash: str
    embedding_model: str | None
    terms: Counter[str]
    length: int


class MemoryBackend:
    """Holds at most ``max_chunks`` chunks across all namespaces; refuses to grow past it.

    The seed's six methods, plus Quarry's optional capabilities: ``replace_documents`` and
    ``delete_documents`` (kept in ``audit``), ``known_embeddings``, ``embedding_models``, re-ranking.
    A namespace is any safe identity: it exists once something is written to it.
    """

    supports_rerank = True

    def __init__(self, max_chunks: int = 100_000) -> None:
        if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:
            raise ValueError("max_chunks must be a positive integer")
        self.max_chunks = max_chunks
        # namespace -> document id -> chunks in order
        self._docs: dict[str, dict[str, list[_Stored]]] = {}
        self._lock = asyncio.Lock()
        self.audit: list[dict[str, object]] = []

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _count(self) -> int:
        return sum(len(chunks) for docs in self._docs.values() for chunks in docs.values())

    # --- the seed's writes -------------------------------------------------------

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]) -> None:
        documents, emptied = documents_from_chunks(namespace, document_ids, chunks)
        async with self._lock:
            self._store(namespace, documents, emptied)

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None:
        async with self._lock:
            self._remove(namespace, document_ids)

    # --- Quarry's audited writes -----------------------------------------------------

    async def replace_documents(self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger) -> Stored:
        async with self._lock:
            added = self._store(namespace, documents, [])
            self.audit.append({"namespace": namespace, "action": "ingest", "actor": actor, "trigger": trigger,
                               "document_ids": [p.document.id for p in documents], "chunk_count": added})
            return Stored(added)  # searchable and complete at once: nothing left for the background

    async def delete_documents(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        async with self._lock:
            found, chunks = self._remove(namespace, document_ids)
            self.audit.append({"namespace": namespace, "action": "delete", "actor": actor, "trigger": trigger,
                               "document_ids": found, "chunk_count": chunks})
            return len(found)

    def _store(self, namespace: str, documents: Sequence[PreparedDocument], emptied: Sequence[str]) -> int:
        """Swap these documents' chunks (and drop ``emptied`` documents) at once; the caller holds the lock."""
        docs = self._docs.setdefault(namespace, {})
        removed = sum(len(docs.get(p.document.id, [])) for p in documents) + sum(len(docs.get(d, [])) for d in emptied)
        added = sum(len(p.chunks) for p in documents)
        if self._count() - removed + added > self.max_chunks:
            raise CapacityError(f"the memory backend holds at most {self.max_chunks} chunks")
        for prepared in documents:
            doc = prepared.document
            stored = []
            for c in prepared.chunks:
                chunk = RAGChunk(
                    c.chunk_id, doc.id, namespace, c.text, doc.title, doc.uri, dict(doc.metadata),
                    start_char=c.start_char, end_char=c.end_char,
                )
                terms = Counter(tokenize(f"{doc.title or ''} {c.text}"))
                stored.append(_Stored(chunk, c.embedding, c.content_hash, c.embedding_model, terms, sum(terms.values())))
            docs[doc.id] = stored
        for document_id in emptied:
            docs.pop(document_id, None)
        return added

    def _remove(self, namespace: str, document_ids: Sequence[str]) -> tuple[list[str], int]:
        docs = self._docs.get(namespace, {})
        found = [d for d in dict.fromkeys(document_ids) if d in docs]
        return found, sum(len(docs.pop(d)) for d in found)

    # --- reads -------------------------------------------------------------------

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        wanted = set(chunk_ids)
        found = {s.chunk.chunk_id: s.chunk for chunks in self._docs.get(namespace, {}).values() for s in chunks if s.chunk.chunk_id in wanted}
        return [found[i] for i in dict.fromkeys(chunk_ids) if i in found]

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        docs = self._docs.get(namespace, {})
        return {
            (s.chunk.chunk_id, s.content_hash): s.vector
            for d in document_ids
            for s in docs.get(d, [])
            if s.vector is not None and s.embedding_model == model_id
        }

    async def embedding_models(self, namespace: str, document_ids: Sequence[str]) -> set[str]:
        """The model ids of the vectors these documents' chunks hold."""
        docs = self._docs.get(namespace, {})
        return {s.embedding_model for d in document_ids for s in docs.get(d, []) if s.vector is not None and s.embedding_model}

    async def search(self, query: RAGQuery) -> list[RAGHit]:
        pool = [s for chunks in self._docs.get(query.namespace, {}).values() for s in chunks if _matches(s.chunk.metadata, query.filters)]
        depth = max(query.limit, FUSION_DEPTH) if query.mode is SearchMode.HYBRID else query.limit
        keyword = self._bm25(pool, query.text, depth) if query.mode is not SearchMode.SEMANTIC else []
        semantic = self._cosine(pool, query, depth) if query.mode is not SearchMode.KEYWORD else []
        hits: list[RAGHit] = []
        if query.mode is SearchMode.KEYWORD:
            hits = [RAGHit(s.chunk, score, keyword_score=score) for s, score in keyword]
        elif query.mode is SearchMode.SEMANTIC:
            hits = [RAGHit(s.chunk, score, semantic_similarity=score) for s, score in semantic]
        else:
            by_id = {s.chunk.chunk_id: s for s, _ in keyword + semantic}
            kw = {s.chunk.chunk_id: score for s, score in keyword}
            assert query.vector is not None
            fused = rrf([[s.chunk.chunk_id for s, _ in keyword], [s.chunk.chunk_id for s, _ in semantic]], k=query.rrf_k)
            rrf_of = {chunk_id: (score, rank) for chunk_id, score, rank in fused}
            order: list[tuple[str, float, float | None, float | None]] = [(chunk_id, score, None, None) for chunk_id, score, _ in fused]
            if query.fusion is Fusion.SCORE:
                order = list(score_fusion([(s.chunk.chunk_id, v) for s, v in keyword], [(s.chunk.chunk_id, v) for s, v in semantic],
                                          query.fusion_weight, depth=depth, rrf_k=query.rrf_k))
            for chunk_id, score, kw_norm, sem_norm in order:
                s = by_id[chunk_id]
                similarity = cosine(query.vector, s.vector) if _comparable(s, query) else None
                rrf_score, rank = rrf_of[chunk_id]
                hits.append(RAGHit(s.chunk, score, rrf_score=rrf_score, rrf_rank=rank, semantic_similarity=similarity,
                                   keyword_score=kw.get(chunk_id), keyword_norm=kw_norm, semantic_norm=sem_norm))
            if query.rerank:
                hits.sort(key=lambda h: -(h.semantic_similarity if h.semantic_similarity is not None else -2.0))
                hits = [dataclasses.replace(h, score=h.semantic_similarity if h.semantic_similarity is not None else -1.0) for h in hits]
        if query.min_score is not None:
            hits = [h for h in hits if h.score >= query.min_score]
        return hits[: query.limit]

    def _bm25(self, pool: list[_Stored], text: str, depth: int) -> list[tuple[_Stored, float]]:
        terms = set(tokenize(text))
        if not terms or not pool:
            return []
        n = len(pool)
        avgdl = sum(s.length for s in pool) / n or 1.0
        df = {t: sum(1 for s in pool if t in s.terms) for t in terms}
        scored = []
        for s in pool:
            score = 0.0
            for t in terms:
                tf = s.terms.get(t, 0)
                if tf:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * s.length / avgdl))
            if score > 0:
                scored.append((s, score))
        scored.sort(key=lambda x: (-x[1], x[0].chunk.chunk_id))
        return scored[:depth]

    def _cosine(self, pool: list[_Stored], query: RAGQuery, depth: int) -> list[tuple[_Stored, float]]:
        assert query.vector is not None
        scored = [(s, cosine(query.vector, s.vector)) for s in pool if _comparable(s, query)]
        scored.sort(key=lambda x: (-x[1], x[0].chunk.chunk_id))
        return scored[:depth]


def _comparable(stored: _Stored, query: RAGQuery) -> bool:
    """A stored vector answers a query vector of the same model and dimension (as in PostgreSQL)."""
    return (
        stored.vector is not None and query.vector is not None and len(stored.vector) == len(query.vector)
        and (stored.embedding_model or None) == (query.embedding_model or None)
    )


def _same(a: Scalar, b: Scalar) -> bool:
    """JSON equality: booleans are not numbers, 1 == 1.0, strings compare exactly."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _matches(metadata: Mapping[str, Scalar], filters: Mapping[str, FilterValue]) -> bool:
    for name, wanted in filters.items():
        if name not in metadata:
            return False
        value = metadata[name]
        options = wanted if isinstance(wanted, tuple) else (wanted,)
        if not any(_same(value, option) for option in options):
            return False
    return True
