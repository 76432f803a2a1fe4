"""The backend of the seed's "Build another backend": its skeleton, with bodies.

The class and method signatures are the seed's (only the import line differs); the
bodies are a small datastore of our own, as a provider extension would bring, so
the service can be run over a backend that knows nothing of Quarry: it returns
tuples, has none of Quarry's optional capabilities (no ``replace_documents``, no
``known_embeddings``, no re-ranking) and keeps its chunks as it got them, vectors
included. ``calls`` records every method called, so tests can show that bad input
never reaches it. ``lie`` makes ``search`` break the contract in one chosen way.

Hybrid scoring follows the seed's description: lexical and non-negative cosine scores,
weighted equally.
"""

from __future__ import annotations

import math
import re

from collections.abc import Sequence
from knowledge.rag import RAGChunk, RAGHit, RAGQuery

_WORD = re.compile(r"\w+")


class CompanySearchBackend:
    def __init__(self, lie: str | None = None) -> None:
        self.rows: dict[tuple[str, str], RAGChunk] = {}  # (namespace, chunk_id): the primary key
        self.calls: list[str] = []
        self.lie = lie
        self.started = False

    async def start(self) -> None:
        self.calls.append("start")
        self.started = True

    async def close(self) -> None:
        self.calls.append("close")
        self.started = False

    async def replace(
        self,
        namespace: str,
        document_ids: Sequence[str],
        chunks: Sequence[RAGChunk],
    ) -> None:
        self.calls.append("replace")
        assert self.started, "the service starts its backend before use"
        replaced = set(document_ids)
        rows = {key: chunk for key, chunk in self.rows.items() if not (key[0] == namespace and chunk.document_id in replaced)}
        rows.update({(namespace, chunk.chunk_id): chunk for chunk in chunks})
        self.rows = rows  # one assignment: readers see the old chunks or the new ones

    async def delete(
        self, namespace: str, document_ids: Sequence[str]
    ) -> None:
        self.calls.append("delete")
        gone = set(document_ids)
        self.rows = {key: chunk for key, chunk in self.rows.items() if not (key[0] == namespace and chunk.document_id in gone)}

    async def fetch(
        self, namespace: str, chunk_ids: Sequence[str]
    ) -> Sequence[RAGChunk]:
        self.calls.append("fetch")
        found = tuple(self.rows[(namespace, i)] for i in chunk_ids if (namespace, i) in self.rows)
        if self.lie == "namespace" and found:
            first = found[0]
            return (RAGChunk(first.chunk_id, first.document_id, "someone-else", first.text), *found[1:])
        if self.lie == "type" and found:
            return ({"chunk_id": found[0].chunk_id},)
        return found

    async def search(self, query: RAGQuery) -> Sequence[RAGHit]:
        self.calls.append("search")
        terms = set(_WORD.findall(query.text.lower()))
        scored: list[tuple[float, RAGChunk]] = []
        for (namespace, _), chunk in self.rows.items():
            if namespace != query.namespace or not _matches(chunk, query.filters):
                continue
            lexical = len(terms & set(_WORD.findall(f"{chunk.title or ''} {chunk.text}".lower()))) / max(1, len(terms))
            similarity = _cosine(query.vector, chunk.embedding)
            if query.mode.value == "keyword":
                score = lexical
            elif query.mode.value == "semantic":
                score = similarity if similarity is not None else None
            else:
                score = 0.5 * lexical + 0.5 * max(0.0, similarity or 0.0)
            if score is None or (query.mode.value != "semantic" and score <= 0):
                continue
            if query.min_score is not None and score < query.min_score:
                continue
            scored.append((score, chunk))
        scored.sort(key=lambda pair: (-pair[0], pair[1].chunk_id))
        hits = tuple(RAGHit(chunk, score) for score, chunk in scored[: query.limit])
        return self._lie(query, hits)

    def _lie(self, query: RAGQuery, hits: tuple[RAGHit, ...]) -> tuple:  # type: ignore[type-arg]
        if self.lie is None or not hits:
            return hits
        first = hits[0].chunk
        if self.lie == "namespace":
            other = RAGChunk(first.chunk_id, first.document_id, "someone-else", first.text)
            return (RAGHit(other, hits[0].score), *hits[1:])
        if self.lie == "order":
            return (*hits[1:], RAGHit(first, hits[0].score - 10.0), RAGHit(RAGChunk("late:0", "late", query.namespace, "late"), 99.0))
        if self.lie == "count":
            return tuple(RAGHit(RAGChunk(f"extra-{i}:0", f"extra-{i}", query.namespace, "extra"), 1.0) for i in range(query.limit + 1))
        if self.lie == "type":
            return ({"chunk": first, "score": 1.0},)
        if self.lie == "min_score":
            return (*hits, RAGHit(first, -100.0))
        raise AssertionError(self.lie)


def _matches(chunk: RAGChunk, filters: object) -> bool:
    for name, wanted in dict(filters).items():  # type: ignore[call-overload]
        if name not in chunk.metadata:
            return False
        value = chunk.metadata[name]
        options = wanted if isinstance(wanted, tuple) else (wanted,)
        # JSON equality: booleans are not numbers, strings are not numbers.
        if not any(type(value) is type(option) or (isinstance(value, int | float) and isinstance(option, int | float)
                   and not isinstance(value, bool) and not isinstance(option, bool)) for option in options if value == option):
            return False
    return True


def _cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if a is None or b is None or len(a) != len(b):
        return None
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else None
