"""Create, change and remove sources. Every check happens before anything is stored."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from django.db import IntegrityError, transaction
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge.models import Document
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.crypto import secrets_open, secrets_seal
from knowledge.sources.models import Source
from knowledge.sources.services.registry import config_check
from knowledge.sources.services.syncing import source_sync_request
from knowledge.services.documents import AccessError, access_describe, access_from_input, document_access_set

REMOVE_TASK = "knowledge.sources.tasks.remove_source"
MAX_SCHEDULE_MINUTES = 525_600  # a year
UNSET: Any = object()


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("name", "must be a non-empty string")
    name = name.strip()
    if len(name) > 200 or any(unicodedata.category(c) == "Cc" for c in name):
        raise ConfigError("name", "at most 200 characters, on one line")
    return name


def check_name_free(*, tenant_id: int, name: str, source: Source | None = None) -> None:
    """``ConfigError`` (field ``name``) when another live source of the tenant has this name."""
    taken = Source.objects.live().filter(tenant_id=tenant_id, name=name)
    if source is not None:
        taken = taken.exclude(pk=source.pk)
    if taken.exists():
        raise ConfigError("name", f"the tenant already has a source named {name!r}")


def check_schedule(minutes: object) -> int | None:
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_SCHEDULE_MINUTES:
        raise ConfigError("schedule_minutes", f"a whole number of minutes from 1 to {MAX_SCHEDULE_MINUTES}, or null for manual syncs")
    return minutes


def _key_for(tenant: Tenant, name: str) -> str:
    """A document-id-safe key from the name, unique in the tenant (``Docs site`` -> ``docs-site``, then ``docs-site-2``)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    base = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:48] or "source"
    taken = set(Source.objects.filter(tenant=tenant, key__startswith=base).values_list("key", flat=True))
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)


def source_access_check(tenant: Tenant, value: object) -> list[str] | None:
    """A source's access list (``{"groups": [...], "users": [...]}``) as principals; ``ConfigError`` naming unknown names."""
    try:
        return access_from_input(tenant=tenant, value=value)
    except AccessError as exc:
        raise ConfigError("access", exc.message) from None


def source_access_names(source: Source) -> dict[str, list[str]]:
    """The source's access list by names (groups, users), as the API and the admin show it."""
    return dict(access_describe(tenant=source.tenant, principals=source.access))


def source_create(*, tenant: Tenant, name: object, kind: object, config: object, schedule_minutes: object = None,
                  enabled: bool = True, actor: str, probe: bool = True, access: object = None) -> Source:
    """Create a source after checking every field and reaching it once (``probe``); returns it.

    Raises ``ConfigError`` naming the field (``name``, ``kind``, ``config.<setting>``,
    ``schedule_minutes``) with nothing stored. The first sync is queued on commit.
    """
    checked_name = check_name(name)
    minutes = check_schedule(schedule_minutes)
    check_name_free(tenant_id=tenant.pk, name=checked_name)
    principals = source_access_check(tenant, access) or ["*"]
    plain, secrets = config_check(kind=kind, config=config, probe=probe)  # type: ignore[arg-type]
    try:
        with transaction.atomic():
            source = Source.objects.create(
                tenant=tenant, key=_key_for(tenant, checked_name), name=checked_name, kind=kind, config=plain,
                secrets=secrets_seal(secrets), schedule_minutes=minutes, enabled=enabled, created_by=actor[:200],
                access=principals,
            )
            if enabled:
                source_sync_request(source=source, trigger="created")
    except IntegrityError:
        raise ConfigError("name", f"the tenant already has a source named {checked_name!r}") from None
    source.refresh_from_db()
    return source


def source_update(*, source: Source, name: object = UNSET, config: object = UNSET, schedule_minutes: object = UNSET,
                  enabled: object = UNSET, actor: str, probe: bool = True, access: object = UNSET) -> Source:
    """Change the given fields; a new ``config`` replaces the old one, keeping stored secrets it leaves out.
    A new ``access`` list applies at once to every document the source wrote (and to what it writes next).

    Raises ``ConfigError`` naming the field, with nothing changed. The kind cannot change (its
    documents and versions mean nothing to another kind): create a new source instead.
    """
    changes: dict[str, Any] = {}
    if name is not UNSET:
        changes["name"] = check_name(name)
        check_name_free(tenant_id=source.tenant_id, name=changes["name"], source=source)
    if schedule_minutes is not UNSET:
        changes["schedule_minutes"] = check_schedule(schedule_minutes)
    if enabled is not UNSET:
        if not isinstance(enabled, bool):
            raise ConfigError("enabled", "must be true or false")
        changes["enabled"] = enabled
    if config is not UNSET:
        plain, secrets = config_check(kind=source.kind, config=config, kept_secrets=secrets_open(source.secrets), probe=probe)
        changes["config"], changes["secrets"] = plain, secrets_seal(secrets)
    if access is not UNSET:
        changes["access"] = source_access_check(source.tenant, access) or ["*"]
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        for field, value in changes.items():
            setattr(locked, field, value)
        if changes:
            locked.save(update_fields=[*changes, "updated_at"])
        if "access" in changes:
            written = Document.objects.filter(tenant_id=locked.tenant_id, metadata__source=locked.key)
            document_access_set(documents=written, principals=changes["access"], actor=actor)
    return locked


def source_config_check(*, source: Source | None, kind: str, config: object) -> None:
    """Check (and probe) a configuration for a new source or a change of ``source``, storing nothing
    (the admin's form); its secrets left out count as kept. Raises ``ConfigError`` naming the field."""
    config_check(kind=kind, config=config, kept_secrets=secrets_open(source.secrets) if source is not None else None)


def source_secret_names(source: Source) -> list[str]:
    """Which secrets are stored (their names, never their values)."""
    try:
        return sorted(secrets_open(source.secrets))
    except Exception:  # noqa: BLE001  (an unreadable store shows as none: the sync reports the reason)
        return []


def source_delete(*, source: Source, actor: str) -> None:
    """Remove a source: it disappears at once, its documents are deleted in the background, then its row.

    A sync running now stops at its next checkpoint; the removal waits for it (``remove_source``).
    """
    with transaction.atomic():
        Source.objects.filter(pk=source.pk).update(deleting=True, enabled=False, sync_requested_at=None)
        pk = source.pk
        transaction.on_commit(lambda: async_task(REMOVE_TASK, pk, group="sources"), robust=True)
