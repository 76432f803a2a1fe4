"""Reads of conversations. Every function takes the tenant (or a session already scoped to one).

Synchronous: the WebSocket consumer calls them through ``database_sync_to_async``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, NotRequired, TypedDict

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce, Substr

from accounts.models import Tenant
from chat.models import AgentRun, ChatSession, SessionKind, Turn, TurnRole
from chat.prompting import MemoryTurn
from config.typed_serializers import Help


def chat_sessions_of(*, tenant: Tenant, principal: str, kind: SessionKind | str = SessionKind.CHAT) -> "QuerySet[ChatSession]":  # noqa: F821
    """The caller's sessions in ``tenant``; look one up with ``accounts.access.get_for_tenant``."""
    return ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal).of_kind(kind)


def chat_session_find(
    *, tenant: Tenant, principal: str, session_id: Any, kind: SessionKind | str | None = None
) -> ChatSession | None:
    """The caller's session with this public id (of ``kind`` when given), its tenant loaded; None for
    anything else (malformed, unknown, another tenant's, another caller's)."""
    if not isinstance(session_id, str) or not session_id.startswith("session-") or len(session_id) > 40:
        return None
    sessions = ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal)
    if kind is not None:
        sessions = sessions.of_kind(kind)
    return sessions.select_related("tenant").filter(public_id=session_id).first()


def chat_memory(*, session: ChatSession, limit: int) -> list[MemoryTurn]:
    """The latest ``limit`` turns of ``session``, oldest first."""
    if limit <= 0:
        return []
    rows = list(
        Turn.objects.filter(tenant_id=session.tenant_id, session=session).order_by("-id").values_list("role", "content")[:limit]
    )
    return [{"role": role, "content": content} for role, content in reversed(rows)]  # type: ignore[typeddict-item]


# The session list shows at most this many conversations (newest first); older ones stay
# reachable by their link. A bound, so a long-time user's page does not grow without end.
SESSION_LIST_LIMIT = 100
# A reloaded conversation brings back at most this many turns (the latest ones).
TRANSCRIPT_LIMIT = 200
TITLE_PREVIEW_CHARS = 80
UNTITLED = "New conversation"


class SessionSummary(TypedDict):
    session_id: str
    kind: str
    title: str
    titled: bool  # False: ``title`` is derived (first question or UNTITLED), not chosen by the user
    updated_at: datetime


def _with_first_prompt(sessions: QuerySet[ChatSession]) -> QuerySet[ChatSession]:
    """Untitled sessions are named after their first question, cut in the database."""
    first_turn = (
        Turn.objects.filter(session=OuterRef("pk"), role=TurnRole.USER).order_by("id")
        .annotate(preview=Substr("content", 1, TITLE_PREVIEW_CHARS)).values("preview")[:1]
    )
    first_run = (  # agent sessions keep their questions in runs
        AgentRun.objects.filter(session=OuterRef("pk")).order_by("id")
        .annotate(preview=Substr("prompt", 1, TITLE_PREVIEW_CHARS)).values("preview")[:1]
    )
    return sessions.annotate(first_prompt=Coalesce(Subquery(first_turn), Subquery(first_run))).order_by("-updated_at", "-id")


def chat_session_list(*, tenant: Tenant, principal: str, limit: int = SESSION_LIST_LIMIT) -> list[SessionSummary]:
    """The caller's conversations in the tenant (chat and agent), most recently active first."""
    rows = _with_first_prompt(ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal))
    return [session_summary(row) for row in rows.values("public_id", "kind", "title", "first_prompt", "updated_at")[:limit]]


class SessionListItem(TypedDict):
    """A conversation in ``GET /v1/chat/sessions`` (and ``/v1/agent/sessions``)."""

    session_id: str
    kind: str
    title: Annotated[str, Help("The title the owner chose, else the first question, else 'New conversation'.")]
    titled: Annotated[bool, Help("false: the title is derived, not chosen.")]
    turn_count: Annotated[int, Help("Messages of the conversation (a question and its answer are two).")]
    created_at: str
    updated_at: Annotated[str, Help("The last exchange (renaming does not count).")]


def chat_session_page(
    *, tenant: Tenant, principal: str, kind: SessionKind | str, limit: int, offset: int
) -> tuple[int, list[SessionListItem]]:
    """``(count, page)`` of the caller's sessions of ``kind`` in ``tenant``, newest activity first."""
    sessions = ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal).of_kind(kind)
    return sessions.count(), _list_items(sessions, kind, offset, offset + limit)


def chat_session_item(*, session: ChatSession) -> SessionListItem:
    """One session as the list shows it. Precondition: ``session`` was loaded for the caller."""
    return _list_items(ChatSession.objects.filter(pk=session.pk), session.kind, 0, 1)[0]


def _list_items(sessions: QuerySet[ChatSession], kind: str, start: int, stop: int) -> list[SessionListItem]:
    # An agent session's messages are its runs (a question and, once finished, an answer).
    counted = Count("agent_runs", distinct=True) * 2 if kind == SessionKind.AGENT else Count("turns", distinct=True)
    rows = _with_first_prompt(sessions).annotate(turn_count=counted).values(
        "public_id", "kind", "title", "first_prompt", "created_at", "updated_at", "turn_count"
    )[start:stop]
    items: list[SessionListItem] = []
    for row in rows:
        summary = session_summary(row)
        items.append({
            "session_id": summary["session_id"], "kind": summary["kind"], "title": summary["title"],
            "titled": summary["titled"], "turn_count": row["turn_count"],
            "created_at": row["created_at"].isoformat(), "updated_at": row["updated_at"].isoformat(),
        })
    return items


def session_summary(row: dict[str, Any]) -> SessionSummary:
    title = row["title"]
    derived = " ".join((row.get("first_prompt") or "").split())
    return {
        "session_id": row["public_id"], "kind": row["kind"], "title": title or derived or UNTITLED,
        "titled": bool(title), "updated_at": row["updated_at"],
    }


class TranscriptTurn(TypedDict):
    role: str
    content: str
    citations: list[dict[str, Any]]
    model: str
    usage: dict[str, int]
    created_at: str
    sources: NotRequired[list[dict[str, Any]]]  # agent answers: [{source, chunk_id}], what their [n] markers mean
    stop_reason: NotRequired[str]  # an agent run that did not answer: why (or "running")


class Transcript(TypedDict):
    session_id: str
    kind: str
    title: str
    truncated: bool
    turns: list[TranscriptTurn]


def chat_transcript(*, session: ChatSession, limit: int = TRANSCRIPT_LIMIT) -> Transcript:
    """The finished turns of ``session`` (only completed exchanges are ever stored), oldest first.

    An agent session's turns are its runs: the question, then the answer (or why there is none).
    """
    if session.kind == SessionKind.AGENT:
        return _agent_transcript(session=session, limit=limit)
    rows = list(
        Turn.objects.filter(tenant_id=session.tenant_id, session=session).order_by("-id")
        .values("role", "content", "citations", "model", "usage", "created_at")[: limit + 1]
    )
    truncated = len(rows) > limit
    rows = rows[:limit]
    if truncated and rows and rows[-1]["role"] == TurnRole.ASSISTANT:
        rows = rows[:-1]  # never start a transcript with an answer whose question was cut off
    turns: list[TranscriptTurn] = [
        {
            "role": r["role"], "content": r["content"], "citations": list(r["citations"] or []), "model": r["model"],
            "usage": dict(r["usage"] or {}), "created_at": r["created_at"].isoformat(),
        }
        for r in reversed(rows)
    ]
    title = chat_session_summary(session=session)["title"]
    return {"session_id": session.public_id, "kind": session.kind, "title": title, "truncated": truncated, "turns": turns}


def _agent_transcript(*, session: ChatSession, limit: int) -> Transcript:
    runs = list(  # without their (large) saved messages
        AgentRun.objects.filter(tenant_id=session.tenant_id, session=session).defer("messages", "steps").order_by("id")
    )
    shown = runs[-(limit // 2):] if limit >= 2 else []
    turns: list[TranscriptTurn] = []
    for run in shown:
        created = run.created_at.isoformat()
        turns.append({"role": TurnRole.USER, "content": run.prompt, "citations": [], "model": "", "usage": {}, "created_at": created})
        answer: TranscriptTurn = {
            "role": TurnRole.ASSISTANT, "content": run.answer, "citations": list(run.citations or []), "model": run.model,
            "usage": dict(run.usage or {}), "created_at": (run.finished_at or run.updated_at).isoformat(),
            "sources": [{"source": s["source"], "chunk_id": s["chunk_id"]} for s in run.sources or []],
        }
        if not run.answer:
            answer["stop_reason"] = run.stop_reason or run.status
        turns.append(answer)
    title = chat_session_summary(session=session)["title"]
    return {"session_id": session.public_id, "kind": session.kind, "title": title, "truncated": len(shown) < len(runs), "turns": turns}


def chat_session_summary(*, session: ChatSession) -> SessionSummary:
    """One session as the list shows it (its own title, else its first question)."""
    first_prompt = None
    if not session.title:
        first_prompt = (
            Turn.objects.filter(tenant_id=session.tenant_id, session=session, role=TurnRole.USER).order_by("id")
            .annotate(preview=Substr("content", 1, TITLE_PREVIEW_CHARS)).values_list("preview", flat=True).first()
        ) or (
            AgentRun.objects.filter(tenant_id=session.tenant_id, session=session).order_by("id")
            .annotate(preview=Substr("prompt", 1, TITLE_PREVIEW_CHARS)).values_list("preview", flat=True).first()
        )
    return session_summary({"public_id": session.public_id, "kind": session.kind, "title": session.title,
                            "first_prompt": first_prompt, "updated_at": session.updated_at})
