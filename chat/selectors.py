"""Reads of conversations. Every function takes the tenant (or a session already scoped to one)."""

from __future__ import annotations

from accounts.models import Tenant
from chat.models import ChatSession, SessionKind, Turn
from chat.prompting import MemoryTurn


def chat_sessions_of(*, tenant: Tenant, principal: str, kind: SessionKind | str = SessionKind.CHAT) -> "QuerySet[ChatSession]":  # noqa: F821
    """The caller's sessions in ``tenant``; look one up with ``accounts.access.get_for_tenant``."""
    return ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal).of_kind(kind)


def chat_session_find(*, tenant: Tenant, principal: str, session_id: str, kind: SessionKind | str = SessionKind.CHAT) -> ChatSession | None:
    """The caller's session with this public id, or None (unknown, another tenant's, another caller's)."""
    return chat_sessions_of(tenant=tenant, principal=principal, kind=kind).filter(public_id=session_id).first()


def chat_memory(*, session: ChatSession, limit: int) -> list[MemoryTurn]:
    """The latest ``limit`` turns of ``session``, oldest first."""
    if limit <= 0:
        return []
    rows = list(
        Turn.objects.filter(tenant_id=session.tenant_id, session=session).order_by("-id").values_list("role", "content")[:limit]
    )
    return [{"role": role, "content": content} for role, content in reversed(rows)]  # type: ignore[typeddict-item]
