"""Quarry's typed, async RAG API (DESIGN section 4).

    from knowledge import rag
    async with rag.postgres(embedder=rag.default_embedder(), namespace="acme") as service:
        await service.ingest([rag.RAGDocument("faq", "Quarry is a knowledge base.")])
        hits = await service.search("what is quarry?")
"""

from __future__ import annotations

from knowledge.rag.chunking import FixedSizeChunker
from knowledge.rag.embedding import LiteLLMEmbedder, LocalEmbedder
from knowledge.rag.errors import (
    BackendContractError,
    CapacityError,
    ConfigurationError,
    EmbedderError,
    NamespaceNotFound,
    RAGError,
    RAGTypeError,
    RAGValidationError,
)
from knowledge.graph.types import GraphCandidate, GraphLeg, GraphNode, GraphRelation, Neighbor, Neighborhood, Picture, Triplet
from knowledge.rag.factory import default_embedder, tenant_service
from knowledge.rag.service import Namespace, RAGService
from knowledge.rag.types import (
    Chunker,
    Embedder,
    GraphSearchResult,
    RAGBackend,
    RAGChunk,
    RAGDocument,
    RAGHit,
    RAGQuery,
    SearchMode,
)

__all__ = [
    "BackendContractError", "CapacityError", "Chunker", "ConfigurationError", "Embedder", "EmbedderError",
    "FixedSizeChunker", "NamespaceNotFound", "RAGBackend", "RAGChunk", "RAGDocument", "RAGError", "RAGHit",
    "RAGQuery", "RAGService", "RAGTypeError", "RAGValidationError", "SearchMode", "memory", "postgres", "service",
    "LiteLLMEmbedder", "LocalEmbedder", "default_embedder", "tenant_service",
    "GraphCandidate", "GraphLeg", "GraphNode", "GraphRelation", "GraphSearchResult", "Neighbor", "Neighborhood", "Picture", "Triplet",
]


def service(
    backend: RAGBackend,
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    *,
    namespace: Namespace,
    rrf_k: int = 60,
    rerank: bool = False,
) -> RAGService:
    """A service over any backend."""
    return RAGService(backend, embedder=embedder, chunker=chunker, namespace=namespace, rrf_k=rrf_k, rerank=rerank)


def postgres(
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    *,
    namespace: Namespace,
    using: str = "default",
    rrf_k: int = 60,
    rerank: bool = False,
    inline_index_max_chunks: int | None = None,
) -> RAGService:
    """A service over the Django-model backend; the namespace is a tenant slug.

    Ingestions of more than ``inline_index_max_chunks`` chunks (default 500) leave their
    postings and HNSW entries to ``PostgresBackend.index_backlog``; they are searchable at once.
    """
    # Imported here: the Postgres backend needs Django set up, the memory backend does not.
    from knowledge.rag.backends.postgres import INLINE_INDEX_MAX_CHUNKS, PostgresBackend

    inline = INLINE_INDEX_MAX_CHUNKS if inline_index_max_chunks is None else inline_index_max_chunks
    backend = PostgresBackend(using, inline_index_max_chunks=inline)
    return service(backend, embedder, chunker, namespace=namespace, rrf_k=rrf_k, rerank=rerank)


def memory(
    embedder: Embedder | None = None,
    chunker: Chunker | None = None,
    *,
    namespace: Namespace,
    max_chunks: int = 100_000,
    rrf_k: int = 60,
    rerank: bool = False,
) -> RAGService:
    """A service over a bounded, process-local backend (tests, demos)."""
    from knowledge.rag.backends.memory import MemoryBackend

    return service(MemoryBackend(max_chunks), embedder, chunker, namespace=namespace, rrf_k=rrf_k, rerank=rerank)
