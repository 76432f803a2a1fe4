"""The knowledge graph as the RAG backend's chunk index hook (``knowledge.rag.hooks.ChunkIndexHook``).

The PostgreSQL backend calls it inside its write transactions, so mentions change exactly when their
chunks do; ``QUARRY_CHUNK_INDEX_HOOK`` names this class, and ``knowledge.rag.factory`` builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from knowledge.graph.llm import LlmSpec
from knowledge.graph.store import GraphWriter, PreparedExtraction, prepare_extraction


class GraphIndexHook:
    """Extraction of entities and relations from chunks into the tenant's graph.

    ``using``: the transaction's database alias (the gazetteer cache's key). ``llm_model``: the LLM
    extractor's model id, whose cached triples every extraction merges in (None: offline only).
    """

    def __init__(self, *, using: str = "default", llm_model: str | None = None) -> None:
        self.using = using
        self.llm = LlmSpec(llm_model) if llm_model else None

    def prepare(self, cursor: Any, tenant_id: int, chunk_pks: Sequence[int]) -> PreparedExtraction:
        """Read the chunks and start their extraction in a thread (see ``prepare_extraction``)."""
        return prepare_extraction(cursor, tenant_id, chunk_pks, using=self.using)

    def apply(self, cursor: Any, tenant_id: int, *, removed: Sequence[int] = (), prepared: object | None = None) -> int:
        """Take ``removed``'s mentions out, write the prepared chunks' graph; returns the chunks extracted.
        Takes the tenant's graph lock, so the backend calls it after its own row locks."""
        if prepared is not None and not isinstance(prepared, PreparedExtraction):
            raise TypeError(f"prepared must come from GraphIndexHook.prepare, got {type(prepared).__name__}")
        writer = GraphWriter(cursor, tenant_id, using=self.using, llm=self.llm)
        writer.remove(removed)
        added = [row[0] for row in prepared.rows] if prepared is not None else []
        if added:
            writer.index(added, prepared=prepared)
        writer.finish()
        return len(added)

    def rebuild(self, cursor: Any, tenant_id: int, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute the tenant's graph from its indexed chunks; returns the chunks read."""
        return GraphWriter(cursor, tenant_id, using=self.using, llm=self.llm).rebuild(on_progress=on_progress)
