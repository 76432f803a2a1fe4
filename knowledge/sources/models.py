"""Sources: places content flows in from by itself (a web site, a Git repository, a folder, a bucket).

A ``Source`` belongs to a tenant and names a connector kind (``settings.QUARRY_SOURCE_CONNECTORS``);
its ``config`` holds the kind's plain settings and ``secrets`` its credentials, Fernet-encrypted
(``sources.secrets``). ``SourceItem`` remembers, per item the source listed, the version token and
content hash that were last written to the knowledge base: a sync compares against it and fetches
only what changed. ``SourceSync`` is one sync's history entry (counts and errors).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q


class SyncStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    PARTIAL = "partial", "Partial"  # some items failed; they are retried next time


class SourceQuerySet(models.QuerySet["Source"]):
    def live(self) -> SourceQuerySet:
        """Sources not being removed (a removed source is invisible while its documents go)."""
        return self.filter(deleting=False)


def _everyone() -> list[str]:
    return ["*"]


class Source(models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="sources")
    # Fixed at creation (from the name): the first part of every document id of this source, so
    # renaming the source never renames its documents.
    key = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)  # a key of QUARRY_SOURCE_CONNECTORS (not choices: the setting may add kinds)
    config = models.JSONField(default=dict, blank=True)
    secrets = models.TextField(blank=True, default="")  # Fernet token of a JSON object; never shown
    schedule_minutes = models.PositiveIntegerField(null=True, blank=True)  # None: manual syncs only
    enabled = models.BooleanField(default=True)  # paused sources are not synced by the schedule
    deleting = models.BooleanField(default=False)  # removal requested: its documents are being deleted
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The one-at-a-time rule: a sync holds the lease (renewed while it works); a request while it is
    # held or already queued is merged (nothing more is queued).
    sync_requested_at = models.DateTimeField(null=True, blank=True)
    sync_trigger = models.CharField(max_length=16, blank=True, default="")  # who asked for the queued sync: manual | schedule | created
    lease_until = models.DateTimeField(null=True, blank=True)
    cursor = models.JSONField(default=dict, blank=True)  # the connector's own state between syncs (git: last indexed commit)
    # The access list every document it writes gets (issue 34; principals as Document.access: {*} the whole tenant).
    access = ArrayField(models.CharField(max_length=32), default=_everyone, blank=True)

    objects = SourceQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key"], name="source_unique_key_per_tenant"),
            models.UniqueConstraint(fields=["tenant", "name"], condition=Q(deleting=False), name="source_unique_live_name"),
        ]
        indexes = [
            # The dispatcher's scan: enabled, scheduled sources (few rows; the index keeps it one page).
            models.Index(fields=["enabled", "schedule_minutes"], name="source_schedule_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class SourceSync(models.Model):
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="syncs")
    status = models.CharField(max_length=16, choices=SyncStatus.choices, default=SyncStatus.RUNNING)
    trigger = models.CharField(max_length=16, default="manual")  # manual | schedule
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    listed = models.PositiveIntegerField(default=0)  # items seen so far (live progress)
    added = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)  # [{"item": path or "", "reason": sentence}], bounded

    class Meta:
        indexes = [
            # A source's latest sync (API last_sync, admin list): newest first per source.
            models.Index(fields=["source", "-started_at"], name="sourcesync_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"sync of {self.source_id} at {self.started_at:%Y-%m-%d %H:%M} ({self.status})"


class SourceItem(models.Model):
    """What was last written for one item of a source: the document it became, and its versions."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="items")
    path = models.CharField(max_length=2048)  # the connector's key: relative path, URL or object key
    document_id = models.CharField(max_length=200)
    version = models.CharField(max_length=200, blank=True, default="")  # the listing's token when written
    content_hash = models.CharField(max_length=64, blank=True, default="")  # sha256 of the bytes written
    extra = models.JSONField(default=dict, blank=True)  # the connector's per-item state (web: ETag, links)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "path"], name="sourceitem_unique_path"),
            # Two paths that read the same as an id ("a b.md", "a-b.md") get distinct ids (the second is hashed).
            models.UniqueConstraint(fields=["source", "document_id"], name="sourceitem_unique_document"),
        ]

    def __str__(self) -> str:
        return self.path
