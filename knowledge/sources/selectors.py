"""Reads of sources: every function takes the tenant (or a source already scoped to one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from accounts.models import Tenant
from knowledge.models import Document
from knowledge.rag import reader_of
from knowledge.sources.models import Source, SourceItem, SourceSync


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
    errors_withheld: int


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


def sync_errors_for(*, source: Source, errors: Sequence[Mapping[str, str]], context: Any) -> tuple[list[dict[str, str]], int]:
    """The sync ``errors`` the caller may see, and how many are withheld (issue 34: an error names its item,
    the path of a document the caller may not be allowed to read).

    ``context``: the caller's ``accounts.access.TenantContext`` in the source's tenant (taken by its shape;
    None: an unknown caller, who sees none).
    Those who read everything (tenant admins) see every error. Anyone else sees none unless the source's
    own access list reaches them (its items' documents get that list), and then every error but those
    naming an item whose document they may not read (an admin narrowed it since); an item never written
    would get the source's list. Two indexed queries at most, only when an error names an item.
    """
    if context is None:
        return [], len(errors)  # nobody known: nothing shown
    reader = reader_of(context)
    if reader is None or not errors:
        return [dict(e) for e in errors], 0
    readable = reader.principals
    if not set(source.access) & set(readable):
        return [], len(errors)
    paths = [e["item"] for e in errors if e.get("item")]
    written = dict(SourceItem.objects.filter(source=source, path__in=paths).values_list("path", "document_id")) if paths else {}
    hidden_ids = set(
        Document.objects.filter(tenant_id=source.tenant_id, external_id__in=list(written.values()))
        .exclude(access__overlap=readable).values_list("external_id", flat=True)
    ) if written else set()
    shown = [dict(e) for e in errors if written.get(e.get("item", "")) not in hidden_ids]
    return shown, len(errors) - len(shown)


def sync_json(sync: SourceSync | None, *, source: Source, context: Any) -> SyncJson | None:
    """A sync as the API shows it to ``context`` (its errors as ``sync_errors_for`` lets it see them)."""
    if sync is None:
        return None
    errors, withheld = sync_errors_for(source=source, errors=sync.errors, context=context)
    return {
        "id": sync.pk, "status": sync.status, "trigger": sync.trigger, "started_at": sync.started_at, "finished_at": sync.finished_at,
        "listed": sync.listed, "added": sync.added, "updated": sync.updated, "unchanged": sync.unchanged, "deleted": sync.deleted,
        "failed": sync.failed, "errors": errors, "errors_withheld": withheld,
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
