"""Reads of sources: every function takes the tenant (or a source already scoped to one)."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from accounts.models import Tenant
from knowledge.sources.models import Source, SourceSync


class SyncJson(TypedDict):
    id: int
    status: str
    trigger: str
    started_at: Any
    finished_at: Any
    listed: int
    added: int
    updated: int
    unchanged: int
    deleted: int
    failed: int
    errors: list[dict[str, str]]


def source_list(*, tenant: Tenant) -> QuerySet[Source]:
    """The tenant's sources (not those being removed), by name."""
    return Source.objects.live().filter(tenant=tenant).order_by("name")


def source_get(*, tenant: Tenant, source_id: int) -> Source | None:
    return Source.objects.live().filter(tenant=tenant, pk=source_id).first()


def source_syncs(*, source: Source, limit: int = 20) -> list[SourceSync]:
    """The source's latest syncs, newest first."""
    return list(source.syncs.order_by("-started_at", "-pk")[:limit])


def latest_syncs(sources: list[Source]) -> dict[int, SourceSync]:
    """Each source's latest sync, in one query (the list pages)."""
    latest = SourceSync.objects.filter(source=OuterRef("source")).order_by("-started_at", "-pk").values("pk")[:1]
    rows = SourceSync.objects.filter(source__in=sources, pk=Subquery(latest))
    return {s.source_id: s for s in rows}


def sync_json(sync: SourceSync | None) -> SyncJson | None:
    if sync is None:
        return None
    return {
        "id": sync.pk, "status": sync.status, "trigger": sync.trigger, "started_at": sync.started_at, "finished_at": sync.finished_at,
        "listed": sync.listed, "added": sync.added, "updated": sync.updated, "unchanged": sync.unchanged, "deleted": sync.deleted,
        "failed": sync.failed, "errors": list(sync.errors),
    }


def source_status(source: Source, last: SourceSync | None) -> str:
    """One word for the source: deleting | running | queued | paused | idle (never synced) | the last sync's status."""
    if source.deleting:
        return "deleting"
    if source.lease_until is not None and source.lease_until > timezone.now():
        return "running"
    if source.sync_requested_at is not None:
        return "queued"
    if not source.enabled:
        return "paused"
    return last.status if last is not None else "idle"
