"""What the RAG layer lets an index built over its chunks do inside its write transactions.

The knowledge graph (``knowledge.graph``) stands above ``knowledge.rag``: the RAG layer never imports
it. Yet its mentions must change exactly when their chunks do, in the same transaction. So the
backend calls a ``ChunkIndexHook`` that the composition hands it (``knowledge.rag.factory`` builds it
from ``QUARRY_CHUNK_INDEX_HOOK`` by dotted path, as it builds the embedder).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


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
