"""Reads of agent runs. Every function takes the tenant (or a session already scoped to one)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from accounts.models import Tenant
from chat.models import AgentRun, ChatSession, Turn
from chat.events import Citation, Usage
from chat.prompting import MemoryTurn
from common.typed_serializers import Help

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


class ToolCallRecord(TypedDict):
    id: str
    tool: str
    arguments: Annotated[Any, Help("The arguments the model sent: an object, or its text when it was not JSON.")]
    ok: bool
    chunk_ids: Annotated[list[str], Help("The chunks the call returned (each became a numbered source); an empty "
                                         "string for one the caller may no longer read (withheld).")]
    error: NotRequired[Annotated[str, Help("Why the call failed (ok: false), as the model was told.")]]


class StepRecord(TypedDict):
    step: int
    turn: int
    calls: list[ToolCallRecord]


class RunDetail(TypedDict):
    """``GET /v1/agent/runs/{run_id}``: what the run did and how it ended."""

    run_id: str
    session_id: str
    prompt: str
    status: Annotated[str, Help("running, completed (cannot be resumed) or stopped (can be resumed).")]
    stop_reason: Annotated[str, Help("completed, max_steps, repeated_call, token_budget, timeout, provider_error, "
                                     "cancelled; empty while running.")]
    answer: str
    citations: list[Citation]
    usage: Usage
    model: str
    max_steps: int
    graph_search: bool
    turns: int
    tool_call_count: int
    steps: list[StepRecord]
    created_at: str
    updated_at: str
    finished_at: str | None


def agent_run_detail(*, run: AgentRun) -> RunDetail:
    """The run as the API shows it. Precondition: ``run`` was loaded for the caller (``agent_runs_of``)."""
    steps: list[StepRecord] = []
    for step in run.steps or []:
        calls: list[ToolCallRecord] = []
        for call in step.get("calls", []):
            record: ToolCallRecord = {"id": call["id"], "tool": call["tool"], "arguments": call.get("arguments"),
                                      "ok": bool(call.get("ok")), "chunk_ids": list(call.get("chunk_ids") or [])}
            if call.get("error"):
                record["error"] = call["error"]
            calls.append(record)
        steps.append({"step": step["step"], "turn": step.get("turn", 0), "calls": calls})
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **(run.usage or {})}
    return {
        "run_id": run.public_id, "session_id": run.session.public_id, "prompt": run.prompt, "status": run.status,
        "stop_reason": run.stop_reason, "answer": run.answer, "citations": list(run.citations or []),
        "usage": usage,  # type: ignore[typeddict-item]
        "model": run.model, "max_steps": run.max_steps, "graph_search": run.graph_search, "turns": run.turns,
        "tool_call_count": run.tool_call_count, "steps": steps, "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(), "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
