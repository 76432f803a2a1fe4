"""Who may read a document inside its tenant (issue 34): access lists in, access lists out.

An access list names groups of the tenant and members of it; empty means the whole tenant. It is
stored as principals (``knowledge.rag.types``: ``*``, ``u:<user id>``, ``g:<group id>``) on the document
and copied to its chunks in the same transaction, which is what every search filters on in SQL.
Changing it rewrites that one column of the chunks: nothing is extracted or embedded again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Group, Membership, Tenant
from common import replicas
from knowledge.models import AuditEvent, Chunk, Document
from knowledge.models.documents import EVERYONE_ACCESS
from knowledge.rag.types import EVERYONE, group_principal, user_principal


class AccessList(TypedDict):
    """An access list as the API and the admin write and show it (names, not ids)."""

    groups: list[str]
    users: list[str]


class AccessError(ValueError):
    """An access list the tenant cannot honour; ``message`` names what is wrong (unknown groups or users)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


MAX_ENTRIES = 100  # groups plus users in one list


def access_principals(*, tenant: Tenant, groups: Sequence[object] = (), users: Sequence[object] = ()) -> list[str]:
    """The principals of an access list naming ``groups`` and ``users`` (usernames) of ``tenant``.

    Empty names the whole tenant (``[*]``). Raises ``AccessError`` naming every unknown group and every
    user who does not exist or is no member of the tenant: a typo must not silently lock a document
    away from the people it was meant for, nor open it.
    """
    if not isinstance(groups, (list, tuple)) or not isinstance(users, (list, tuple)):
        raise AccessError("groups and users must be lists of names")
    if any(not isinstance(n, str) or not n for n in [*groups, *users]):
        raise AccessError("groups and users must be lists of non-empty strings")
    if any(len(n) > 150 or any(ord(ch) < 32 for ch in n) for n in [*groups, *users]):
        raise AccessError("group and user names are at most 150 characters, without control characters")
    if len(groups) + len(users) > MAX_ENTRIES:
        raise AccessError(f"at most {MAX_ENTRIES} groups and users in one access list, got {len(groups) + len(users)}")
    if not groups and not users:
        return list(EVERYONE_ACCESS)
    group_ids = dict(Group.objects.filter(tenant=tenant, name__in=list(groups)).values_list("name", "pk"))
    members = dict(
        Membership.objects.filter(tenant=tenant, user__username__in=list(users)).values_list("user__username", "user_id")
    )
    problems = []
    unknown_groups = sorted({str(n) for n in groups} - set(group_ids))
    unknown_users = sorted({str(n) for n in users} - set(members))
    if unknown_groups:
        problems.append(f"unknown groups in tenant {tenant.slug}: {', '.join(unknown_groups)}")
    if unknown_users:
        problems.append(f"unknown users (not members of tenant {tenant.slug}): {', '.join(unknown_users)}")
    if problems:
        raise AccessError("; ".join(problems))
    principals = [group_principal(group_ids[n]) for n in dict.fromkeys(groups)]
    principals += [user_principal(members[n]) for n in dict.fromkeys(users)]
    return principals


def access_from_input(*, tenant: Tenant, value: object) -> list[str] | None:
    """``{"groups": [...], "users": [...]}`` (either key optional) as principals; None when ``value`` is None
    (the caller keeps what the document has). Raises ``AccessError`` for anything else."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise AccessError('must be an object {"groups": [...], "users": [...]}')
    extra = sorted(set(value) - {"groups", "users"})
    if extra:
        raise AccessError(f"unknown keys {', '.join(extra)}; it takes groups and users")
    return access_principals(tenant=tenant, groups=value.get("groups") or [], users=value.get("users") or [])


def access_describe(*, tenant: Tenant, principals: Sequence[str]) -> AccessList:
    """An access list's names (a deleted group shows as ``#<id>``: it still restricts, naming nobody)."""
    group_ids = [int(p[2:]) for p in principals if p.startswith("g:")]
    user_ids = [int(p[2:]) for p in principals if p.startswith("u:")]
    names = dict(Group.objects.filter(tenant=tenant, pk__in=group_ids).values_list("pk", "name")) if group_ids else {}
    usernames = dict(get_user_model().objects.filter(pk__in=user_ids).values_list("pk", "username")) if user_ids else {}
    return AccessList(
        groups=[names.get(g, f"#{g}") for g in group_ids],
        users=[usernames.get(u, f"#{u}") for u in user_ids],
    )


def is_restricted(principals: Sequence[str]) -> bool:
    return EVERYONE not in principals


def document_access_set(*, documents: Iterable[Document], principals: Sequence[str], actor: str) -> int:
    """Give ``documents`` (one tenant's or several) the access list ``principals``; returns how many changed.

    The documents' rows are locked (in id order, as the backend's writes lock them) and their chunks
    rewritten in the same transaction, so a search sees the old list or the new one, never a document
    with chunks of both; the next request after the commit reads with the new one, read replicas
    included (a changed document's tenant is pinned to the primary: ``common.replicas.pin_tenant``).
    Audited per tenant.
    """
    wanted = list(dict.fromkeys(principals)) or list(EVERYONE_ACCESS)
    pks = sorted({d.pk for d in documents})
    changed = 0
    with transaction.atomic():
        rows = list(Document.objects.select_for_update(of=("self",)).filter(pk__in=pks).order_by("external_id", "tenant_id")
                    .values_list("pk", "tenant_id", "tenant__slug", "external_id", "access"))
        moved = [(pk, tenant_id, external_id) for pk, tenant_id, _, external_id, access in rows if list(access) != wanted]
        if not moved:
            return 0
        for slug in sorted({slug for _, _, slug, _, access in rows if list(access) != wanted}):
            replicas.pin_tenant(slug)
        moved_pks = [pk for pk, _, _ in moved]
        changed = Document.objects.filter(pk__in=moved_pks).update(access=wanted)
        chunks = Chunk.objects.filter(document_id__in=moved_pks).update(access=wanted)
        by_tenant: dict[int, list[str]] = {}
        for _, tenant_id, external_id in moved:
            by_tenant.setdefault(tenant_id, []).append(external_id)
        AuditEvent.objects.bulk_create([
            AuditEvent(tenant_id=tenant_id, actor=actor, trigger="user", action="access", document_ids=ids, chunk_count=chunks)
            for tenant_id, ids in by_tenant.items()
        ])
    return changed


def documents_restricted_to_group(group: Group) -> int:
    """How many documents name ``group`` in their access list (what deleting it would leave to admins alone)."""
    return Document.objects.filter(tenant_id=group.tenant_id, access__contains=[group_principal(group.pk)]).count()
