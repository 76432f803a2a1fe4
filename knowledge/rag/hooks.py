"""The two doors through which the knowledge graph, above the RAG layer, works with it.

The knowledge graph (``knowledge.graph``) stands above ``knowledge.rag``: the RAG layer never imports
it. Yet its mentions must change exactly when their chunks do, in the same transaction. So the
backend calls a ``ChunkIndexHook`` that the composition hands it (``knowledge.rag.factory`` builds it
from ``QUARRY_CHUNK_INDEX_HOOK`` by dotted path, as it builds the embedder). Likewise graph search,
triplets, neighbours and pictures are ``GraphReads`` (``QUARRY_GRAPH_READS``) that ``RAGService``
delegates to after validating and embedding, so its callers (chat included) need no graph import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from knowledge.rag.graph_types import Neighborhood, Picture, Triplet
from knowledge.rag.types import GraphSearchResult, RAGQuery, Reader


@runtime_checkable
class ChunkIndexHook(Protocol):
    """An index derived from chunks, kept in step with them in the backend's own transactions.

    Every method runs inside the caller's transaction, on its ``cursor``, for chunks of ``tenant_id``
    that the transaction holds (chunk primary keys). Lock order: the backend calls ``apply`` and
    ``rebuild`` after every row lock of its own, so a hook may take a lock of its own there last.
    """

    def prepare(self, cursor: Any, tenant_id: int, chunk_pks: Sequence[int]) -> object:
        """Read these freshly written chunks and start their (slow) processing; called before the
        transaction's other statements, so that work overlaps them. Returns a handle for ``apply``."""
        ...

    def apply(self, cursor: Any, tenant_id: int, *, removed: Sequence[int] = (), prepared: object | None = None) -> int:
        """Forget the chunks ``removed`` (deleted or replaced), then add the chunks ``prepare`` read;
        returns how many chunks it added."""
        ...

    def rebuild(self, cursor: Any, tenant_id: int, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute the tenant's index from its indexed chunks; returns the chunks read.
        ``on_progress(done, total)`` after every batch."""
        ...


@runtime_checkable
class GraphReads(Protocol):
    """The knowledge graph's reads over a backend: what ``RAGService``'s graph methods hand their
    validated, embedded query to (``knowledge.graph.service`` implements it; ``QUARRY_GRAPH_READS``
    names it). Chat and the API reach the graph through ``RAGService`` and these value types alone."""

    def serves(self, backend: object) -> bool:
        """Whether ``backend`` keeps a graph these reads can use (``RAGService.has_graph``)."""
        ...

    async def search(self, backend: Any, query: RAGQuery) -> GraphSearchResult:
        """Hybrid search (``query.fusion``) with the graph leg's best candidates placed in it."""
        ...

    async def triplets(self, backend: Any, query: RAGQuery) -> list[Triplet]:
        """Relations relevant to ``query.text`` (at most ``query.limit``), each with the chunk that states it."""
        ...

    async def neighbors(self, backend: Any, namespace: str, entity: str, *, limit: int, reader: Reader | None = None) -> Neighborhood:
        """The entity called ``entity`` (or whose name starts so), the chunks about it, and its neighbours."""
        ...

    async def picture(self, backend: Any, namespace: str, chunk_ids: Sequence[str], *, expand: bool = False,
                      reader: Reader | None = None) -> Picture:
        """How these chunks connect through entities (``expand``: and to other documents' chunks)."""
        ...
