"""Reads of agent runs. Every function takes the tenant (or a session already scoped to one)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from accounts.models import Tenant
from chat.models import AgentRun, ChatSession, Turn
from chat.prompting import MemoryTurn

if TYPE_CHECKING:
    from django.db.models import QuerySet

# Citation markers of an earlier run point at *that* run's sources; a new run numbers its own from 1.
_MARKERS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def agent_runs_of(*, tenant: Tenant, principal: str) -> QuerySet[AgentRun]:
    """The caller's runs in ``tenant``; look one up with ``accounts.access.get_for_tenant``."""
    return AgentRun.objects.owned_by(tenant_id=tenant.pk, principal=principal)


def agent_memory(*, session: ChatSession, limit: int, before: AgentRun | None = None) -> list[MemoryTurn]:
    """The latest ``limit`` messages of the session before this run, oldest first.

    They are the questions and answers of its earlier answered runs and, for a
    session that also chats (the web chat's agent mode), its chat turns. Answers
    lose their citation markers: they referred to sources this run does not have.
    """
    if limit <= 0:
        return []
    runs = AgentRun.objects.filter(tenant_id=session.tenant_id, session=session).exclude(answer="")
    turns = Turn.objects.filter(tenant_id=session.tenant_id, session=session)
    if before is not None:
        runs = runs.filter(created_at__lt=before.created_at)
        turns = turns.filter(created_at__lt=before.created_at)
    timeline: list[tuple[Any, int, str, str]] = []
    for created, pk, prompt, answer in runs.order_by("-id").values_list("created_at", "id", "prompt", "answer")[: (limit + 1) // 2]:
        timeline += [(created, 2 * pk, "user", prompt), (created, 2 * pk + 1, "assistant", answer)]
    for created, pk, role, content in turns.order_by("-id").values_list("created_at", "id", "role", "content")[:limit]:
        timeline.append((created, pk, role, content))
    timeline.sort(key=lambda item: (item[0], item[1]))
    return [
        {"role": role, "content": _MARKERS.sub("", content).strip() if role == "assistant" else content}  # type: ignore[typeddict-item]
        for _, _, role, content in timeline[-limit:]
    ]
