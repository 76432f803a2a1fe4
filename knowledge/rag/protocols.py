"""The providers' contracts: the seed's protocols (``Embedder``, ``Chunker``, ``RAGBackend``), the
optional capabilities Quarry's providers add (each a ``runtime_checkable`` Protocol, so ``RAGService``
asks ``isinstance`` instead of probing attributes), and the helpers that read an embedder's identity.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from knowledge.rag.types import PreparedDocument, RAGChunk, RAGDocument, RAGHit, RAGQuery, ResolvedNamespace, Stored, Trigger, Vector


# --- protocols --------------------------------------------------------------------
#
# The seed's contracts, exactly: an Embedder is ``embed`` alone, a Chunker is ``split``,
# a RAGBackend is six methods. Anything more is an optional capability that the service
# looks for (``isinstance``, these being ``runtime_checkable``) and does without; the protocols below the seed's name them.


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: exactly one non-empty, finite vector per text, in order.

    Optional capabilities the service uses when present:

    - ``model_id: str``, stored with every vector it makes (a changed id re-embeds).
      Without it the service derives one: ``<module>.<qualified class name>/<dimension>``
      of the innermost embedder (wrappers name what they wrap in ``__wrapped__``), the
      dimension being that of the vectors seen. Two different embedders of one class and
      one dimension therefore share an id: give them a ``model_id`` to keep them apart.
    - ``dimension: int``: every vector must have it.
    - ``batch_size: int``: texts per call when the caller follows progress.
    - a keyword argument ``kind`` (``"document"`` or ``"query"``) on ``embed``, for models
      that embed queries and passages differently; it is passed only when ``embed`` takes it.
    """

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


@runtime_checkable
class Chunker(Protocol):
    """Splits a document into a non-empty sequence of non-empty chunk texts, in source order.

    The texts need not be substrings of the document; those that are get character offsets.
    Optional: ``spans(text) -> [(start, end), ...]`` gives the offsets directly (``FixedSizeChunker``).
    """

    def split(self, document: RAGDocument) -> Sequence[str]: ...


@runtime_checkable
class RAGBackend(Protocol):
    """Storage and search for chunks, per namespace (the seed's six methods).

    ``replace`` receives complete document identities and all their new chunks; it
    atomically removes the documents' previous chunks and publishes the new ones (a
    document without chunks in ``chunks`` is removed). ``fetch`` returns the chunks that
    exist, in the requested order. ``search`` applies filters, ranking, descending score
    order, ``min_score`` and ``limit`` in the datastore. Results may be lists or tuples.

    Optional capabilities (see ``DocumentStore``, ``SyncDocumentStore``, ``EmbeddingCache``; ``supports_rerank``)
    are detected by the service.
    """

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]) -> None: ...

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None: ...

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> Sequence[RAGChunk]: ...

    async def search(self, query: RAGQuery) -> Sequence[RAGHit]: ...


@runtime_checkable
class DocumentStore(Protocol):
    """Optional backend capability: store whole documents (text, hashes, offsets) and audit writes.

    When a backend has both methods the service writes through them instead of
    ``replace``/``delete``; Quarry's backends record the actor and trigger of each write in
    the same transaction. ``replace_documents`` says what it stored and left for the background
    (``Stored``); ``delete_documents`` how many of the documents existed.
    """

    async def replace_documents(
        self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger
    ) -> Stored: ...

    async def delete_documents(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int: ...


@runtime_checkable
class SyncDocumentStore(Protocol):
    """Optional backend capability: ``replace_documents`` as a plain call that writes through Django's
    connection on the calling thread, so its statements join the caller's transaction on the backend's
    database (``RAGService.write_ingest``: a lease check and a status change commit with the chunks)."""

    def replace_documents_sync(
        self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger
    ) -> Stored: ...


@runtime_checkable
class EmbeddingCache(Protocol):
    """Optional backend capability: the stored vectors of these documents' chunks for one model,
    keyed by ``(chunk_id, content_hash)``, so the service skips re-embedding unchanged chunks."""

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> Mapping[tuple[str, str], Vector]: ...


@runtime_checkable
class EmbeddingModels(Protocol):
    """Optional backend capability: the model ids of the vectors these documents' chunks hold.

    Lets the service find the derived id (``embedder_model_id``) of an embedder that declares
    neither ``model_id`` nor ``dimension`` without embedding a text first to learn its dimension:
    every chunk of an ingest then goes to the embedder in the same calls."""

    async def embedding_models(self, namespace: str, document_ids: Sequence[str]) -> Collection[str]: ...


@runtime_checkable
class VectorStore(Protocol):
    """Optional backend capability: vectors kept as they are computed, before their chunks are written,
    by ``(namespace, model_id, content_hash)``. The service hands each embedding batch to
    ``cache_embeddings`` at once and asks ``cached_embeddings`` first, so an ingestion interrupted
    half-way (a killed worker, a lost lease, a cancel) is resumed, not started over."""

    async def cached_embeddings(self, namespace: str, model_id: str, digests: Sequence[str]) -> Mapping[str, Vector]: ...

    async def cache_embeddings(self, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None: ...



@runtime_checkable
class NamespaceResolver(Protocol):
    """Optional backend capability: a namespace's tenant, the model of its vectors and its size, in one
    round trip (None: no such tenant); ``RAGService`` asks once and hands it down in ``RAGQuery.resolved``."""

    async def resolve_namespace(self, namespace: str) -> ResolvedNamespace | None: ...


@runtime_checkable
class Reranking(Protocol):
    """Optional backend capability: ``supports_rerank is True`` lets ``RAGQuery.rerank`` reach the backend."""

    supports_rerank: bool

# --- optional capabilities of providers ----------------------------------------------


def takes_keyword(function: object, name: str) -> bool:
    """Whether ``function`` accepts the keyword argument ``name`` (or any keyword)."""
    try:
        parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False  # no signature to read (a C callable): call it the plain way
    return any(
        (p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) or p.kind is p.VAR_KEYWORD for p in parameters
    )


DEFAULT_RELEVANCE_FLOOR = 0.30


def relevance_floor(embedder: object | None) -> float:
    """The cosine similarity below which this embedder's semantic-only hits are not about the question:
    the embedder's ``relevance_floor`` (an optional attribute, of the innermost embedder), else 0.30,
    the value measured for all-MiniLM-L6-v2. Models spread cosines differently (bge-small's unrelated
    pairs score about as high as MiniLM's related ones), so one number cannot serve them all."""
    value = getattr(innermost(embedder), "relevance_floor", None) if embedder is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1.0 <= value < 1.0:
        return DEFAULT_RELEVANCE_FLOOR
    return float(value)


def calibrated_similarity(similarity: float, floor: float) -> float:
    """``similarity`` on the scale of a model whose floor is ``DEFAULT_RELEVANCE_FLOOR`` (MiniLM's):
    the floor maps to it and 1.0 to 1.0, linearly, so thresholds tuned on one model carry over."""
    return 1.0 - (1.0 - similarity) * (1.0 - DEFAULT_RELEVANCE_FLOOR) / (1.0 - floor)


def innermost(provider: object) -> object:
    """The provider a chain of wrappers wraps (each names the next in ``__wrapped__``, as ``functools.wraps`` does)."""
    seen: set[int] = set()
    while (wrapped := getattr(provider, "__wrapped__", None)) is not None and id(wrapped) not in seen:
        seen.add(id(provider))
        provider = wrapped
    return provider


def declared_model_id(embedder: object) -> str | None:
    model_id = getattr(embedder, "model_id", None)
    return model_id if isinstance(model_id, str) and model_id else None


def declared_dimension(embedder: object) -> int | None:
    dimension = getattr(embedder, "dimension", None)
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        return None
    return dimension


def embedder_model_id(embedder: object, dimension: int | None) -> str | None:
    """The id stored with this embedder's vectors: its ``model_id`` when it declares one, else
    ``<module>.<qualified class name>/<dimension>`` of the innermost embedder (None while the
    dimension is unknown). See ``Embedder`` for what sharing a derived id means."""
    declared = declared_model_id(embedder)
    if declared is not None:
        return declared
    if dimension is None:
        return None
    cls = type(innermost(embedder))
    return f"{cls.__module__}.{cls.__qualname__}/{dimension}"[:200]


def derived_dimension(embedder: object, model_id: str) -> int | None:
    """The dimension ``model_id`` names when it is the id ``embedder_model_id`` derives for this
    embedder (``<module>.<qualified class name>/<dimension>``); None for any other id."""
    if declared_model_id(embedder) is not None:
        return None
    cls = type(innermost(embedder))
    prefix = f"{cls.__module__}.{cls.__qualname__}/"
    rest = model_id[len(prefix):] if model_id.startswith(prefix) else ""
    if not rest.isdigit() or embedder_model_id(embedder, int(rest)) != model_id:
        return None  # not ours (or cut at 200 characters, where the dimension cannot be read back)
    return int(rest)


def embedder_label(embedder: object) -> str:
    """How error messages name an embedder."""
    return declared_model_id(embedder) or type(innermost(embedder)).__qualname__
