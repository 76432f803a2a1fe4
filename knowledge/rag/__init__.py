"""Quarry's typed, async RAG API (DESIGN section 4), after the seed "Harnest RAG Extension".

Both import styles of the seed work and give the same object::

    from knowledge import rag                      # Quarry's own code
    from knowledge.rag import RAGService, rag      # the seed's "from harnest.extensions.rag import ..."

    async with rag.postgres(embedder=rag.default_embedder(), namespace="acme") as service:
        await service.ingest([rag.RAGDocument("faq", "Quarry is a knowledge base.")])
        hits = await service.search("what is quarry?")

Where Quarry differs from the seed on purpose:

- ``rag.postgres`` stores chunks in Django's database (``DATABASES[using]``, the
  ``knowledge_chunk`` table of the migrations), so it takes no DSN, ``table``, ``pool``
  or ``setup_schema``; its namespaces are tenant slugs and must exist as tenants.
- ``namespace`` is required: every chunk belongs to a tenant, and there is no shared default.
- Reads return chunks without their vectors (the vectors stay in the datastore), so a
  fetched chunk equals the same chunk in a search hit.
- The service embeds up to 1,000 texts per call (the embedder's ``batch_size`` when it
  follows progress) instead of the seed's ``batch_size=100`` option.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from knowledge.rag.chunking import FixedSizeChunker
from knowledge.rag.embedding import BgeSmallEmbedder, LiteLLMEmbedder, LocalEmbedder
from knowledge.rag.errors import (
    BackendContractError,
    CapacityError,
    ConfigurationError,
    EmbedderError,
    EmbeddingModelChanged,
    NamespaceNotFound,
    RAGError,
    RAGTypeError,
    RAGValidationError,
)
from knowledge.rag.graph_types import GraphCandidate, GraphLeg, GraphNode, GraphRelation, Neighbor, Neighborhood, Picture, Triplet
from knowledge.rag.factory import (
    default_embedder, graph_reads, reader_for_principal, reader_of, rerank, rerank_depth, reranker, tenant_embedder, tenant_service,
)
from knowledge.rag.reranking import RERANK_CHOICES, ColbertReranker, Reranked, RerankedHit, parse_rerank
from knowledge.rag.types import DEFAULT_FUSION_WEIGHT
from knowledge.rag.service import Namespace, RAGService
from knowledge.rag.scripts import reads, script_of
from knowledge.rag.prepared import PreparedIngest
from knowledge.rag.protocols import Chunker, DocumentStore, Embedder, EmbeddingCache, EmbeddingModels, RAGBackend, SyncDocumentStore
from knowledge.rag.types import (
    FilterValue,
    Fusion,
    GraphSearchResult,
    RAGChunk,
    RAGDocument,
    RAGHit,
    RAGQuery,
    Reader,
    ResolvedNamespace,
    Scalar,
    SearchMode,
    Stored,
)

__all__ = [
    "BackendContractError", "CapacityError", "Chunker", "ConfigurationError", "DocumentStore", "Embedder", "EmbedderError",
    "EmbeddingCache", "EmbeddingModels", "FilterValue", "FixedSizeChunker", "MemoryBackend", "NamespaceNotFound", "PostgresBackend",
    "RAGBackend", "RAGChunk", "RAGDocument", "RAGError", "RAGHit", "RAGQuery", "RAGService", "RAGTypeError",
    "RAGValidationError", "Reader", "ResolvedNamespace", "reader_of", "reader_for_principal", "Scalar", "SearchMode", "Stored", "memory", "postgres", "rag", "service",
    "BgeSmallEmbedder", "Fusion", "LiteLLMEmbedder", "LocalEmbedder", "default_embedder", "tenant_embedder", "tenant_service",
    "EmbeddingModelChanged", "reads", "script_of", "PreparedIngest", "SyncDocumentStore",
    "RERANK_CHOICES", "ColbertReranker", "Reranked", "RerankedHit", "parse_rerank", "rerank", "rerank_depth", "reranker",
    "GraphCandidate", "GraphLeg", "GraphNode", "GraphRelation", "GraphSearchResult", "Neighbor", "Neighborhood", "Picture", "Triplet",
]


def __getattr__(name: str) -> object:
    # The seed's public API names both built-in backends; the PostgreSQL one needs Django
    # set up, so both are imported on first use rather than with the package.
    if name == "PostgresBackend":
        from knowledge.rag.backends.postgres import PostgresBackend

        return PostgresBackend
    if name == "MemoryBackend":
        from knowledge.rag.backends.memory import MemoryBackend

        return MemoryBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def service(
    backend: RAGBackend,
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    *,
    namespace: Namespace,
    rrf_k: int = 60,
    rerank: bool = False,
    fusion: Fusion | str = Fusion.RRF,
    fusion_weight: float = DEFAULT_FUSION_WEIGHT,
    embedder_for_model: Callable[[str], Embedder | None] | None = None,
    reader: Reader | None = None,
) -> RAGService:
    """A service over any backend of the seed's ``RAGBackend`` contract (``fusion``: hybrid search's default, ``Fusion``;
    ``embedder_for_model``: follow the namespace's embedding model; ``reader``: read as that principal, see ``RAGService``)."""
    return RAGService(backend, embedder=embedder, chunker=chunker, namespace=namespace, rrf_k=rrf_k, rerank=rerank,
                      fusion=fusion, fusion_weight=fusion_weight, embedder_for_model=embedder_for_model,
                      graph_reads=graph_reads(), reader=reader)


def postgres(
    positional_embedder: Embedder | None = None,
    positional_chunker: Chunker | None = None,
    /,
    *,
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    namespace: Namespace,
    using: str = "default",
    rrf_k: int = 60,
    rerank: bool = False,
    inline_index_max_chunks: int | None = None,
    table: str | None = None,
    fusion: Fusion | str = Fusion.RRF,
    fusion_weight: float = DEFAULT_FUSION_WEIGHT,
) -> RAGService:
    """A service over the Django-model backend; the namespace is a tenant slug.

    For trusted application code, as in the seed, a namespace is any safe identity: the first
    ingest into a namespace without a tenant creates one (audited ``create_namespace``), and
    searches and fetches of one that does not exist find nothing. The product's HTTP, MCP and
    web surfaces never come through here: they resolve an existing tenant first (unknown: 404)
    and use ``tenant_service``, whose backend creates nothing.

    ``embedder`` and ``chunker`` may also be given by position (Quarry's older form). The
    seed's first argument, a DSN, and its ``table`` are refused with ``ConfigurationError``:
    storage is Django's database alias ``using``.

    Ingestions of more than ``inline_index_max_chunks`` chunks (default 500) leave their
    postings and HNSW entries to the indexer (``backends.postgres.maintenance.index_backlog``); they are searchable at once.
    """
    if isinstance(positional_embedder, str) or table is not None:
        raise ConfigurationError(
            "rag.postgres takes no DSN or table: Quarry keeps chunks in Django's database "
            "(settings.DATABASES; choose the alias with using=...) in the knowledge_chunk table of its migrations"
        )
    if positional_embedder is not None and embedder is not None:
        raise TypeError("rag.postgres() got the embedder both by position and by keyword")
    if positional_chunker is not None and chunker is not None:
        raise TypeError("rag.postgres() got the chunker both by position and by keyword")
    # Imported here: the Postgres backend needs Django set up, the memory backend does not.
    from knowledge.rag.backends.postgres import INLINE_INDEX_MAX_CHUNKS, PostgresBackend

    inline = INLINE_INDEX_MAX_CHUNKS if inline_index_max_chunks is None else inline_index_max_chunks
    backend = PostgresBackend(using, inline_index_max_chunks=inline, create_namespaces=True)
    return service(
        backend, embedder if embedder is not None else positional_embedder, chunker if chunker is not None else positional_chunker,
        namespace=namespace, rrf_k=rrf_k, rerank=rerank, fusion=fusion, fusion_weight=fusion_weight,
    )


def memory(
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    *,
    namespace: Namespace,
    max_chunks: int = 100_000,
    rrf_k: int = 60,
    rerank: bool = False,
    fusion: Fusion | str = Fusion.RRF,
    fusion_weight: float = DEFAULT_FUSION_WEIGHT,
) -> RAGService:
    """A service over a bounded, process-local backend (tests, demos)."""
    from knowledge.rag.backends.memory import MemoryBackend

    return service(MemoryBackend(max_chunks), embedder, chunker, namespace=namespace, rrf_k=rrf_k, rerank=rerank,
                   fusion=fusion, fusion_weight=fusion_weight)


# The seed's ``from harnest.extensions.rag import rag`` names an object whose ``postgres``,
# ``memory`` and ``service`` are these factories: here that object is this module itself.
rag = sys.modules[__name__]
