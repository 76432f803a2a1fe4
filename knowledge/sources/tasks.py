"""django-q2 tasks of sources. Thin: they take ids and call one service; safe to run twice."""

from __future__ import annotations

from knowledge.sources.services import syncing


def sync_source(source_pk: int) -> str:
    """Run the requested sync of one source (nothing if another holds it); returns its status."""
    sync = syncing.source_sync_run(source_pk=source_pk)
    return sync.status if sync is not None else "not run"


def remove_source(source_pk: int) -> int | None:
    """Delete a removed source's documents and then the source; returns documents deleted."""
    return syncing.source_remove_run(source_pk=source_pk)


def dispatch_syncs() -> dict[str, int]:
    """Every minute (a ``Schedule``): start due scheduled syncs, re-send lost requests and removals."""
    return syncing.syncs_dispatch()
