"""``RAGService``: the one entry point for ingesting, searching and fetching chunks.

The service validates every request before an embedder or backend sees it,
chunks and embeds documents (reusing the embeddings of unchanged chunks), and
re-checks every backend result, so a faulty backend raises instead of leaking
another namespace's data or breaking the ordering contract.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self

from knowledge.rag import limits
from knowledge.rag.chunking import FixedSizeChunker, chunk_spans
from knowledge.rag.errors import (
    BackendContractError,
    ConfigurationError,
    EmbedderError,
    RAGTypeError,
    RAGValidationError,
)
from knowledge.graph.types import Neighborhood, Picture, Triplet
from knowledge.rag.types import (
    Chunker,
    Embedder,
    EmbedKind,
    Filters,
    GraphSearchResult,
    PreparedChunk,
    PreparedDocument,
    RAGBackend,
    RAGChunk,
    RAGDocument,
    RAGHit,
    RAGQuery,
    SearchMode,
    Trigger,
    Vector,
    check_identifier,
    check_limit,
    check_text,
    check_vector,
)

Namespace = str | Callable[[], str]

# Texts per embedding call when the caller follows progress (embedders without a batch_size).
PROGRESS_BATCH = 32


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_input(document: RAGDocument, chunk_text: str) -> str:
    """What the embedder sees for a chunk: the document title, then the chunk.

    The title places a chunk cut from the middle of a long document in context.
    A chunk's ``content_hash`` is the hash of this text, so a changed title or
    chunk text means a new embedding and nothing else does.
    """
    return f"{document.title}\n\n{chunk_text}" if document.title else chunk_text


class RAGService:
    """Ingest, search, fetch and delete chunks in one namespace.

    ``namespace`` is a fixed string or a zero-argument callable resolved on every
    call (e.g. the current tenant). Use as ``async with service:`` or call
    ``start()``/``close()``.
    """

    def __init__(
        self,
        backend: RAGBackend,
        *,
        embedder: Embedder | None = None,
        chunker: Chunker | None = None,
        namespace: Namespace,
        rrf_k: int = 60,
        rerank: bool = False,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.chunker: Chunker = chunker or FixedSizeChunker()
        self._namespace = namespace
        self.rrf_k = rrf_k
        self.rerank = rerank
        self._started = False

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        if not self._started:
            await self.backend.start()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self.backend.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    @property
    def namespace(self) -> str:
        value = self._namespace() if callable(self._namespace) else self._namespace
        return check_identifier("namespace", value, limits.NAMESPACE_RE, "namespace")

    # --- writes ----------------------------------------------------------------

    async def ingest(
        self,
        documents: Sequence[RAGDocument],
        *,
        trigger: Trigger = "user",
        actor: str | None = None,
        on_progress: Callable[[float], None] | None = None,
    ) -> int:
        """Replace each document's chunks completely; return the number of chunks stored.

        All documents of one call are validated, chunked and embedded first; if
        anything fails, nothing is written and previous chunks stay as they were.

        ``on_progress``, when given, is called with the fraction (0..1) of the
        texts to embed that are done, after every embedding batch, and with 1.0
        just before the write when nothing needed embedding. It runs on the event
        loop, so it must not block; an exception it raises aborts the ingest
        before anything is written (a worker's cancellation point).
        """
        namespace = self.namespace
        docs = self._check_documents(documents)
        _check_trigger(trigger)
        planned = [(doc, chunk_spans(self.chunker, doc)) for doc in docs]
        total_chunks = sum(len(spans) for _, spans in planned)
        if total_chunks > limits.MAX_CHUNKS_PER_INGEST:
            raise RAGValidationError("documents", f"at most {limits.MAX_CHUNKS_PER_INGEST} chunks per ingestion request, got {total_chunks}")
        for doc, spans in planned:
            if not spans:
                raise RAGValidationError(f"documents[{doc.id}].text", "has no text to index")
            for start, end in spans:
                if end - start > limits.MAX_CHARS_PER_CHUNK:
                    raise RAGValidationError("chunks", f"at most {limits.MAX_CHARS_PER_CHUNK} characters per chunk, got {end - start}")
        if not self._started:
            await self.start()

        vectors: dict[str, Vector] = {}
        missing: dict[str, str] = {}
        model_id = self.embedder.model_id if self.embedder else None
        if self.embedder is not None:
            known = await self.backend.known_embeddings(namespace, [d.id for d in docs], self.embedder.model_id)
            reuse = {text_hash: vector for (_, text_hash), vector in known.items()}
            for doc, spans in planned:
                for start, end in spans:
                    text = embedding_input(doc, doc.text[start:end])
                    digest = content_hash(text)
                    if digest not in reuse:
                        missing.setdefault(digest, text)
            vectors.update(reuse)
            vectors.update(await self._embed_many(list(missing.items()), kind="document", on_progress=on_progress))
        if on_progress is not None and not missing:
            on_progress(1.0)  # nothing was embedded: still one cancellation point before the write

        prepared: list[PreparedDocument] = []
        for doc, spans in planned:
            chunks = []
            for ordinal, (start, end) in enumerate(spans):
                text = doc.text[start:end]
                digest = content_hash(embedding_input(doc, text))
                chunks.append(
                    PreparedChunk(
                        chunk_id=f"{doc.id}:{ordinal}",
                        ordinal=ordinal,
                        text=text,
                        start_char=start,
                        end_char=end,
                        content_hash=digest,
                        embedding=vectors.get(digest),
                        embedding_model=model_id,
                    )
                )
            prepared.append(PreparedDocument(document=doc, content_hash=content_hash(doc.text), chunks=tuple(chunks)))
        stored = await self.backend.replace(namespace, prepared, actor=actor, trigger=trigger)
        if stored != total_chunks:
            raise BackendContractError(f"backend stored {stored} chunks, expected {total_chunks}")
        return stored

    async def delete(self, document_ids: Sequence[str], *, trigger: Trigger = "user", actor: str | None = None) -> int:
        """Delete documents and all their chunks; return how many documents existed."""
        namespace = self.namespace
        ids = _check_ids(document_ids, "document_ids", limits.DOCUMENT_ID_RE, "document id", limits.MAX_DOCUMENTS_PER_INGEST)
        _check_trigger(trigger)
        if not self._started:
            await self.start()
        return await self.backend.delete(namespace, ids, actor=actor, trigger=trigger)

    # --- reads -----------------------------------------------------------------

    async def search(
        self,
        text: str,
        mode: SearchMode | str = SearchMode.HYBRID,
        limit: int = 8,
        filters: Filters | None = None,
        min_score: float | None = None,
        *,
        rrf_k: int | None = None,
        rerank: bool | None = None,
        graph: bool = False,
    ) -> list[RAGHit]:
        """Ranked hits, best first, at most ``limit``, all with ``score >= min_score``.

        ``graph``: hybrid search with the knowledge graph's leg (see ``graph_search``).
        """
        if graph:
            if SearchMode.parse(mode) is not SearchMode.HYBRID:
                raise RAGValidationError("graph_search", f"graph search joins hybrid search; it cannot be used with mode {SearchMode.parse(mode).value}")
            return (await self.graph_search(text, limit=limit, filters=filters, min_score=min_score, rrf_k=rrf_k)).hits
        namespace = self.namespace
        # Validate everything (as a keyword query) before the embedder sees the text.
        probe = RAGQuery(
            text, namespace, mode=SearchMode.KEYWORD, limit=limit, filters=filters or {}, min_score=min_score,
            rrf_k=self.rrf_k if rrf_k is None else rrf_k,
        )
        mode = SearchMode.parse(mode)
        vector: Vector | None = None
        if mode is not SearchMode.KEYWORD:
            if self.embedder is None:
                raise ConfigurationError(f"{mode.value} search needs an embedder; this service has none (keyword search works)")
            vector = (await self._embed_checked([text], kind="query"))[0]
        query = RAGQuery(
            probe.text, namespace, mode=mode, limit=probe.limit, filters=probe.filters, min_score=probe.min_score,
            vector=vector, rrf_k=probe.rrf_k, rerank=self.rerank if rerank is None else bool(rerank),
            embedding_model=self.embedder.model_id if self.embedder else None,
        )
        if not self._started:
            await self.start()
        hits = await self.backend.search(query)
        return self._recheck_hits(query, hits)

    # --- the knowledge graph (an optional capability of the backend) ---------------------------

    @property
    def has_graph(self) -> bool:
        """Whether the backend keeps a knowledge graph (the PostgreSQL backend does; the memory one does not)."""
        return callable(getattr(self.backend, "graph_search", None))

    def _graph_backend(self) -> Any:
        if not self.has_graph:
            raise ConfigurationError(f"graph search needs a backend with a knowledge graph; {type(self.backend).__name__} has none")
        return self.backend

    async def _query(self, text: str, *, limit: int, filters: Filters | None, min_score: float | None = None,
                     rrf_k: int | None = None, graph: bool = False) -> RAGQuery:
        """A validated hybrid query (keyword when there is no embedder), its text embedded."""
        namespace = self.namespace
        probe = RAGQuery(text, namespace, mode=SearchMode.KEYWORD, limit=limit, filters=filters or {}, min_score=min_score,
                         rrf_k=self.rrf_k if rrf_k is None else rrf_k)
        vector = (await self._embed_checked([text], kind="query"))[0] if self.embedder is not None else None
        return RAGQuery(
            probe.text, namespace, mode=SearchMode.HYBRID if vector is not None else SearchMode.KEYWORD, limit=probe.limit,
            filters=probe.filters, min_score=probe.min_score, vector=vector, rrf_k=probe.rrf_k,
            embedding_model=self.embedder.model_id if self.embedder else None, graph=graph and vector is not None,
        )

    async def graph_search(
        self, text: str, limit: int = 8, filters: Filters | None = None, min_score: float | None = None, *, rrf_k: int | None = None
    ) -> GraphSearchResult:
        """Hybrid search whose fusion adds the knowledge graph's ranked chunks as a third list.

        Seeds are the top hybrid hits and the entities the query names; hits the graph leg
        ranked carry ``graph_score`` and ``graph_path`` (the entity names that led to them).
        The result also says what the leg went through (``leg.nodes``, ``leg.relations``).
        Needs an embedder (hybrid search) and a backend with a graph (``ConfigurationError`` otherwise).
        """
        backend = self._graph_backend()
        if self.embedder is None:
            raise ConfigurationError("graph search joins hybrid search, which needs an embedder; this service has none")
        query = await self._query(text, limit=limit, filters=filters, min_score=min_score, rrf_k=rrf_k, graph=True)
        if not self._started:
            await self.start()
        result = await backend.graph_search(query)
        if not isinstance(result, GraphSearchResult):
            raise BackendContractError(f"backend graph_search returned {type(result).__name__}, expected GraphSearchResult")
        self._recheck_hits(query, result.hits)
        return result

    async def graph_triplets(self, text: str, limit: int = 10, filters: Filters | None = None) -> list[Triplet]:
        """Relations the knowledge graph holds about ``text``'s entities and its top hits', best first,
        each with the chunk that states it (``Triplet.chunk_id``)."""
        backend = self._graph_backend()
        query = await self._query(text, limit=limit, filters=filters)
        if not self._started:
            await self.start()
        return list(await backend.graph_triplets(query))

    async def graph_neighbors(self, entity: str, limit: int = 10) -> Neighborhood:
        """The entity named ``entity`` (exactly, else the most mentioned whose name starts so), the chunks
        about it, and its neighbours with the chunks that link them."""
        backend = self._graph_backend()
        name = check_text("entity", entity, limits.MAX_QUERY_CHARS)
        check_limit(limit)
        if not self._started:
            await self.start()
        return await backend.graph_neighbors(self.namespace, name, limit=limit)

    async def graph_picture(self, chunk_ids: Sequence[str], *, expand: bool = False) -> Picture:
        """How these chunks connect through the entities they mention (``expand``: with other documents' chunks)."""
        backend = self._graph_backend()
        ids = _check_ids(chunk_ids, "ids", limits.CHUNK_ID_RE, "chunk id ('<document id>:<n>')", limits.MAX_LIMIT)
        if not self._started:
            await self.start()
        return await backend.graph_picture(self.namespace, ids, expand=expand)

    async def fetch(self, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        """The chunks with these ids, in the requested order; unknown ids are omitted."""
        namespace = self.namespace
        ids = _check_ids(chunk_ids, "ids", limits.CHUNK_ID_RE, "chunk id ('<document id>:<n>')", limits.MAX_FETCH_IDS)
        if not self._started:
            await self.start()
        chunks = await self.backend.fetch(namespace, ids)
        by_id: dict[str, RAGChunk] = {}
        for chunk in chunks:
            if not isinstance(chunk, RAGChunk):
                raise BackendContractError(f"backend returned {type(chunk).__name__} from fetch, expected RAGChunk")
            if chunk.namespace != namespace:
                raise BackendContractError(f"backend returned chunk {chunk.chunk_id} of another namespace from fetch")
            if chunk.chunk_id not in ids:
                raise BackendContractError(f"backend returned chunk {chunk.chunk_id} that was not requested")
            by_id[chunk.chunk_id] = chunk
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    # --- internals -------------------------------------------------------------

    def _check_documents(self, documents: Sequence[RAGDocument]) -> list[RAGDocument]:
        if isinstance(documents, RAGDocument) or not isinstance(documents, Sequence):
            raise RAGTypeError("documents", "must be a list of RAGDocument")
        docs = list(documents)
        if not docs:
            raise RAGValidationError("documents", "at least 1 document per ingestion request")
        if len(docs) > limits.MAX_DOCUMENTS_PER_INGEST:
            raise RAGValidationError("documents", f"at most {limits.MAX_DOCUMENTS_PER_INGEST} documents per ingestion request, got {len(docs)}")
        for doc in docs:
            if not isinstance(doc, RAGDocument):
                raise RAGTypeError("documents", f"must contain RAGDocument values, got {type(doc).__name__}")
        ids = [d.id for d in docs]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise RAGValidationError("documents", f"document ids must be unique ids within one request; repeated: {', '.join(dupes)}")
        total = sum(len(d.text) for d in docs)
        if total > limits.MAX_CHARS_PER_INGEST:
            raise RAGValidationError("documents", f"at most {limits.MAX_CHARS_PER_INGEST} characters per ingestion request, got {total}")
        return docs

    async def _embed_many(
        self, items: list[tuple[str, str]], *, kind: EmbedKind, on_progress: Callable[[float], None] | None = None
    ) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        step = limits.MAX_EMBED_BATCH
        if on_progress is not None:
            # Smaller calls so progress (and cancellation) moves during long work; the
            # embedder's own batch size keeps provider round trips as large as before.
            step = min(limits.MAX_EMBED_BATCH, max(1, int(getattr(self.embedder, "batch_size", 0) or PROGRESS_BATCH)))
        for i in range(0, len(items), step):
            batch = items[i : i + step]
            vectors = await self._embed_checked([text for _, text in batch], kind=kind)
            out.update({digest: vector for (digest, _), vector in zip(batch, vectors, strict=True)})
            if on_progress is not None:
                on_progress(min(1.0, (i + len(batch)) / len(items)))
        return out

    async def _embed_checked(self, texts: list[str], *, kind: EmbedKind) -> list[Vector]:
        assert self.embedder is not None
        if not 1 <= len(texts) <= limits.MAX_EMBED_BATCH:
            raise RAGValidationError("texts", f"embedding batches hold 1 to {limits.MAX_EMBED_BATCH} texts, got {len(texts)}")
        try:
            raw = await self.embedder.embed(texts, kind=kind)
        except (RAGValidationError, RAGTypeError, EmbedderError):
            raise
        except Exception as exc:
            raise EmbedderError(f"embedder {self.embedder.model_id} failed: {exc}") from exc
        if not isinstance(raw, Sequence) or len(raw) != len(texts):
            got = len(raw) if isinstance(raw, Sequence) else type(raw).__name__
            raise EmbedderError(f"embedder {self.embedder.model_id} returned {got} vectors for {len(texts)} texts")
        vectors: list[Vector] = []
        for index, item in enumerate(raw):
            try:
                vector = check_vector(item, f"embedding[{index}]")
            except (RAGValidationError, RAGTypeError) as exc:
                raise EmbedderError(f"embedder {self.embedder.model_id} returned a bad vector: {exc}") from None
            norm = math.sqrt(math.fsum(x * x for x in vector))
            if norm == 0.0:
                raise EmbedderError(f"embedder {self.embedder.model_id} returned an all-zero vector for input {index}")
            # Stored unit-length: cosine similarity becomes a dot product in every backend.
            vectors.append(tuple(x / norm for x in vector))
        dims = {len(v) for v in vectors}
        expected = self.embedder.dimension
        if len(dims) != 1 or (expected is not None and dims != {expected}):
            raise EmbedderError(
                f"embedder {self.embedder.model_id} returned vectors of dimension {sorted(dims)}, expected one dimension"
                + (f" ({expected})" if expected else "")
            )
        return vectors

    def _recheck_hits(self, query: RAGQuery, hits: object) -> list[RAGHit]:
        if not isinstance(hits, list):
            raise BackendContractError(f"backend search returned {type(hits).__name__}, expected a list of RAGHit")
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
        return hits


def _check_trigger(trigger: str) -> None:
    if trigger not in ("user", "agent"):
        raise RAGValidationError("trigger", f"must be 'user' or 'agent', got {trigger!r}")


def _check_ids(values: Sequence[str], field: str, pattern: object, what: str, maximum: int) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise RAGTypeError(field, "must be a list of ids")
    ids = list(values)
    if not ids:
        raise RAGValidationError(field, "at least 1 id")
    if len(ids) > maximum:
        raise RAGValidationError(field, f"at most {maximum} ids per request, got {len(ids)}")
    return [check_identifier(field, v, pattern, what) for v in ids]
