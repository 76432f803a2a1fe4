"""Writes for agent runs: start, claim for a resume, checkpoint after each step, stop.

A run is written by one invocation at a time: ``agent_run_start`` creates it
``running``; ``agent_run_claim`` moves a stopped run back to ``running`` with a
conditional UPDATE, so of two concurrent resumes exactly one wins. Every
completed step is checkpointed (messages, steps, sources, usage), so whatever
stops an invocation, the run continues from its last completed step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from chat.agent.tools import Source, signature
from chat.events import Citation
from chat.models import AgentRun, ChatSession, RunStatus, StopReason
from chat.prompting import MemoryTurn

# A run still "running" this long after the invocation's own deadline lost its process: it may be resumed.
STALE_GRACE_SECONDS = 60
# Stop reasons that leave the run finished; the others leave it resumable.
FINISHING_REASONS: frozenset[str] = frozenset({StopReason.COMPLETED, StopReason.REPEATED_CALL, StopReason.TOKEN_BUDGET})


class RunNotResumable(Exception):
    """The run is finished, or another invocation is running it. ``code`` and ``detail`` are for the caller."""

    def __init__(self, run: AgentRun) -> None:
        if run.status == RunStatus.RUNNING:
            self.code = "run_in_progress"
            self.detail = "This run is still running; resume it once it has stopped."
        else:
            self.code = "run_finished"
            self.detail = (
                f"This run has finished (stop reason: {run.stop_reason or 'completed'}) and cannot be resumed. "
                "Ask again with POST /v1/agent/completions."
            )
        super().__init__(self.code)
        self.run = run


@dataclass
class RunProgress:
    """What an invocation accumulates; saved with every checkpoint."""

    messages: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    sources: list[Source]
    usage: dict[str, int]
    turns: int
    tool_call_count: int
    model: str = ""
    seen: set[str] = field(default_factory=set)  # signatures of the calls made so far (the repeated-call rule)

    @classmethod
    def of(cls, run: AgentRun) -> RunProgress:
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **(run.usage or {})}
        seen = {signature(call["tool"], call["arguments"]) for step in run.steps for call in step.get("calls", [])}
        return cls(messages=list(run.messages), steps=list(run.steps), sources=list(run.sources), usage=usage,
                    turns=run.turns, tool_call_count=run.tool_call_count, model=run.model, seen=seen)

    def fields(self) -> dict[str, Any]:
        return {"messages": self.messages, "steps": self.steps, "sources": self.sources, "usage": self.usage,
                "turns": self.turns, "tool_call_count": self.tool_call_count, "model": self.model}


def agent_run_start(
    *, session: ChatSession, prompt: str, memory: Sequence[MemoryTurn], max_steps: int, graph_search: bool
) -> AgentRun:
    """A new ``running`` run of ``prompt`` in ``session``; its messages start with the memory, then the prompt.

    Precondition: ``session`` was loaded for the caller (tenant and principal) and is an agent session.
    """
    messages: list[dict[str, Any]] = [{"role": m["role"], "content": m["content"]} for m in memory]
    messages.append({"role": "user", "content": prompt})
    run = AgentRun.objects.create(
        tenant_id=session.tenant_id, session=session, prompt=prompt, status=RunStatus.RUNNING,
        max_steps=max_steps, graph_search=graph_search, messages=messages,
        usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    )
    ChatSession.objects.filter(pk=session.pk).update(updated_at=timezone.now())
    return run


def agent_run_claim(*, run: AgentRun, max_steps: int, graph_search: bool) -> AgentRun:
    """Take a stopped run (or one whose process died) for a resume; raises ``RunNotResumable`` otherwise.

    Precondition: ``run`` was loaded through the access helper for the caller.
    """
    stale = timezone.now() - timedelta(seconds=settings.QUARRY_AGENT_TIMEOUT_SECONDS + STALE_GRACE_SECONDS)
    claimed = (
        AgentRun.objects.filter(pk=run.pk)
        .filter(Q(status=RunStatus.STOPPED) | Q(status=RunStatus.RUNNING, updated_at__lt=stale))
        .update(status=RunStatus.RUNNING, stop_reason="", error="", max_steps=max_steps, graph_search=graph_search,
                updated_at=timezone.now(), finished_at=None)
    )
    run.refresh_from_db()
    if not claimed:
        raise RunNotResumable(run)
    return run


def agent_run_checkpoint(*, run: AgentRun, progress: RunProgress) -> None:
    """Save a completed step (the run stays ``running``)."""
    AgentRun.objects.filter(pk=run.pk).update(**progress.fields(), updated_at=timezone.now())


def agent_run_answer(
    *, run: AgentRun, progress: RunProgress, stop_reason: StopReason | str, answer: str, citations: Sequence[Citation]
) -> None:
    """Record the answer the run ended with. ``max_steps`` leaves it resumable; the other reasons finish it."""
    status = RunStatus.COMPLETED if stop_reason in FINISHING_REASONS else RunStatus.STOPPED
    now = timezone.now()
    AgentRun.objects.filter(pk=run.pk).update(
        **progress.fields(), status=status, stop_reason=stop_reason, error="", answer=answer,
        citations=[dict(c) for c in citations], updated_at=now, finished_at=now,
    )
    ChatSession.objects.filter(pk=run.session_id).update(updated_at=now)


def agent_run_stop(*, run: AgentRun, progress: RunProgress, stop_reason: StopReason | str, error: str) -> None:
    """Record that the invocation stopped without an answer (timeout, provider failure, ...): resumable.

    ``progress`` holds the completed steps only, so a resume continues from the last of them.
    """
    AgentRun.objects.filter(pk=run.pk).update(
        **progress.fields(), status=RunStatus.STOPPED, stop_reason=stop_reason, error=error, updated_at=timezone.now(),
    )
