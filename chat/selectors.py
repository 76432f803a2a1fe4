"""Reads of conversations. Every function takes the tenant (or a session already scoped to one).

Synchronous: the WebSocket consumer calls them through ``database_sync_to_async``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, NotRequired, TypedDict

from django.db import connection
from django.db.models import CharField, Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models import Value
from django.db.models.functions import Cast, Coalesce, Concat, Greatest, Lower, StrIndex, Substr

from accounts.models import Tenant
from chat.models import AgentRun, ChatSession, Feedback, SessionKind, Turn, TurnRole
from chat.prompting import MemoryTurn
from common.typed_serializers import Help


def chat_sessions_of(*, tenant: Tenant, principal: str, kind: SessionKind | str = SessionKind.CHAT) -> "QuerySet[ChatSession]":  # noqa: F821
    """The caller's sessions in ``tenant``; look one up with ``accounts.access.get_for_tenant``."""
    return ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal).of_kind(kind)


def _session_id_shaped(session_id: Any) -> bool:
    return isinstance(session_id, str) and session_id.startswith("session-") and len(session_id) <= 40


def chat_session_find(
    *, tenant: Tenant, principal: str, session_id: Any, kind: SessionKind | str | None = None
) -> ChatSession | None:
    """The caller's session with this public id (of ``kind`` when given), its tenant loaded; None for
    anything else (malformed, unknown, another tenant's, another caller's)."""
    if not _session_id_shaped(session_id):
        return None
    sessions = ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal)
    if kind is not None:
        sessions = sessions.of_kind(kind)
    return sessions.select_related("tenant").filter(public_id=session_id).first()


def chat_session_tenant_slug(*, session_id: Any) -> str | None:
    """The slug of the tenant that holds the session with this public id (None: malformed or unknown).

    For the shell, which may name a session without its tenant: session ids are unique across
    tenants. Nothing is granted by it; the caller still resolves the tenant and finds the session
    as its principal (``chat_session_find``).
    """
    if not _session_id_shaped(session_id):
        return None
    return ChatSession.objects.filter(public_id=session_id).values_list("tenant__slug", flat=True).first()


def chat_memory(*, session: ChatSession, limit: int, until: int | None | object = ...) -> list[MemoryTurn]:
    """The latest ``limit`` turns of ``session``'s thread ending at turn ``until``, oldest first.

    ``until``: the turn a new question follows (None: a first question, so no memory); left
    out, the session's current head. Versions outside the thread (a regenerated answer's
    predecessors, the branch of an edited question) are never remembered.
    """
    if limit <= 0 or until is None:
        return []
    turns = thread(session=session, head=None if until is ... else until, limit=limit)  # type: ignore[arg-type]
    return [{"role": t["role"], "content": t["content"]} for t in reversed(turns)]  # type: ignore[typeddict-item]


def session_head(*, session: ChatSession) -> int | None:
    """The id of the last turn of ``session``'s current thread, read fresh (None: no turn yet)."""
    return ChatSession.objects.filter(pk=session.pk).values_list("head_id", flat=True).first()


# The thread: from its last turn up through the parents, newest first, in one query (the recursion
# stops at the depth asked for; each step is a primary-key lookup). ``{start}`` is the first turn:
# a given one of the session, or the session's head read in the same statement. Each turn comes
# with its versions (the turns of its role with its parent, through the parent's index) and the
# feedback on it, if any.
_THREAD_SQL = """
WITH RECURSIVE thread(id, parent_id, depth) AS (
    {start}
    UNION ALL
    SELECT t.id, t.parent_id, thread.depth + 1 FROM chat_turn t JOIN thread ON t.id = thread.parent_id
    WHERE thread.depth + 1 < %s
)
SELECT t.id, t.parent_id, t.role, t.content, t.citations::text, t.model, t.usage::text, t.created_at,
       f.rating, f.comment,
       CASE WHEN t.parent_id IS NULL
            THEN (SELECT array_agg(v.id ORDER BY v.id) FROM chat_turn v
                  WHERE v.session_id = t.session_id AND v.parent_id IS NULL AND v.role = t.role)
            ELSE (SELECT array_agg(v.id ORDER BY v.id) FROM chat_turn v WHERE v.parent_id = t.parent_id AND v.role = t.role)
       END
FROM thread JOIN chat_turn t ON t.id = thread.id LEFT JOIN chat_feedback f ON f.turn_id = t.id
ORDER BY thread.depth
"""
_GIVEN_START = "SELECT id, parent_id, 0 FROM chat_turn WHERE id = %s AND session_id = %s"
_HEAD_START = "SELECT t.id, t.parent_id, 0 FROM chat_chatsession s JOIN chat_turn t ON t.id = s.head_id WHERE s.id = %s"


class ThreadTurn(TypedDict):
    id: int
    parent_id: int | None
    role: str
    content: str
    citations: list[dict[str, Any]]
    model: str
    usage: dict[str, int]
    created_at: datetime
    feedback: TurnFeedback | None
    versions: list[int]  # this turn's versions, oldest first, itself included


def thread(*, session: ChatSession, head: int | None, limit: int) -> list[ThreadTurn]:
    """Turn ``head`` (None: the session's current head, read fresh) and its ancestors, newest first,
    at most ``limit``, each with its versions and the feedback on it."""
    if head is None:
        sql, params = _THREAD_SQL.format(start=_HEAD_START), [session.pk, limit]
    else:
        sql, params = _THREAD_SQL.format(start=_GIVEN_START), [head, session.pk, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        {"id": pk, "parent_id": parent, "role": role, "content": content, "citations": json.loads(citations or "[]"),
         "model": model, "usage": json.loads(usage or "{}"), "created_at": created,
         "feedback": {"rating": rating, "comment": comment} if rating else None, "versions": list(versions or [pk])}
        for pk, parent, role, content, citations, model, usage, created, rating, comment, versions in rows
    ]


# The session list shows at most this many conversations (newest first); older ones stay
# reachable by their link. A bound, so a long-time user's page does not grow without end.
SESSION_LIST_LIMIT = 100
# A reloaded conversation brings back at most this many turns (the latest ones).
TRANSCRIPT_LIMIT = 200
TITLE_PREVIEW_CHARS = 80
UNTITLED = "New conversation"
# What the database hands over of a first question to title it: enough past the cut for Markdown
# markers and to know that there was more.
TITLE_SOURCE_CHARS = 4 * TITLE_PREVIEW_CHARS
# Leading Markdown that says nothing about the question ("# ", "> ", "- ", "1. ", fences).
_TITLE_NOISE = re.compile(r"^(?:[#>*+\-`]+|\d+[.)])\s*")


def title_from_prompt(prompt: str) -> str:
    """A conversation's generated title: its first question on one line, without leading Markdown
    markers, cut at a word boundary to at most ``TITLE_PREVIEW_CHARS`` characters (an ellipsis
    marks the cut); "" for a question with no words. static/chat/chatux.js mirrors this rule for
    the title shown before the list reloads."""
    flat = " ".join(prompt.split())
    while (m := _TITLE_NOISE.match(flat)) and m.end() > 0:
        flat = flat[m.end():]
    if len(flat) <= TITLE_PREVIEW_CHARS:
        return flat
    cut = flat[: TITLE_PREVIEW_CHARS - 1]
    if " " in cut[TITLE_PREVIEW_CHARS // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


class SessionSummary(TypedDict):
    session_id: str
    kind: str
    title: str
    titled: bool  # False: ``title`` is derived (first question or UNTITLED), not chosen by the user
    updated_at: datetime
    match: NotRequired[str]  # a search's hit: the words in their message, with some text around them


def _with_first_prompt(sessions: QuerySet[ChatSession]) -> QuerySet[ChatSession]:
    """Untitled sessions are named after their first question, cut in the database."""
    first_turn = (
        Turn.objects.filter(session=OuterRef("pk"), role=TurnRole.USER).order_by("id")
        .annotate(preview=Substr("content", 1, TITLE_SOURCE_CHARS)).values("preview")[:1]
    )
    first_run = (  # agent sessions keep their questions in runs
        AgentRun.objects.filter(session=OuterRef("pk")).order_by("id")
        .annotate(preview=Substr("prompt", 1, TITLE_SOURCE_CHARS)).values("preview")[:1]
    )
    return sessions.annotate(first_prompt=Coalesce(Subquery(first_turn), Subquery(first_run))).order_by("-updated_at", "-id")


MATCH_BEFORE_CHARS, MATCH_CHARS = 40, 140
# The database cuts a wider window; ``match_snippet`` then trims it to whole words around the match.
_WINDOW_MARGIN = 30


def match_snippet(window: str, needle: str, *, starts_text: bool, ends_text: bool) -> str:
    """The text around ``needle`` in ``window`` (a cut of a message: ``starts_text`` / ``ends_text`` say
    whether it reaches the message's start / end), at most about ``MATCH_CHARS``, with at most about
    ``MATCH_BEFORE_CHARS`` before the match. It starts and ends at word boundaries (a cut end says
    "…") and holds every word the match touches whole, so a search for "uplo" shows "uploads"."""
    flat = " ".join(window.split())
    at = flat.lower().find(needle.lower())
    if at < 0:  # the window lost the match (case folding changed its length): the window's words
        at = 0
    end = at + len(needle)
    while at > 0 and not flat[at - 1].isspace():  # the first matched word, whole
        at -= 1
    while end < len(flat) and not flat[end].isspace():  # the last matched word, whole
        end += 1
    start = max(0, at - MATCH_BEFORE_CHARS)
    cut_before = start > 0 or not starts_text
    if cut_before:  # begin after a space: never mid-word
        space = flat.find(" ", start, at)
        start = space + 1 if space >= 0 else at
    stop = min(len(flat), max(end, start + MATCH_CHARS))
    cut_after = stop < len(flat) or not ends_text
    if cut_after:  # end before a space: never mid-word
        space = flat.rfind(" ", end, stop + 1)
        stop = space if space >= 0 else end
    return ("… " if cut_before else "") + flat[start:stop].strip() + (" …" if cut_after else "")

SEARCH_MAX_CHARS = 200  # a sidebar search is a few words; a bound keeps the ILIKE pattern small


def matching(sessions: QuerySet[ChatSession], query: str) -> QuerySet[ChatSession]:
    """The sessions whose title or any message (every version, questions and answers, agent runs too)
    contains ``query``, case-insensitively. A blank query matches everything."""
    words = query.split()
    if not words:
        return sessions
    needle = " ".join(words)
    in_turns = Turn.objects.filter(session=OuterRef("pk"), content__icontains=needle)
    in_runs = AgentRun.objects.filter(session=OuterRef("pk")).filter(Q(prompt__icontains=needle) | Q(answer__icontains=needle))
    return sessions.filter(Q(title__icontains=needle) | Exists(in_turns) | Exists(in_runs))


def chat_session_list(
    *, tenant: Tenant, principal: str, limit: int = SESSION_LIST_LIMIT, query: str = ""
) -> list[SessionSummary]:
    """The caller's conversations in the tenant (chat and agent), most recently active first; with
    ``query``, only those whose title or messages contain it (``matching``)."""
    rows = _with_first_prompt(matching(ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal), query))
    needle = " ".join(query.split())
    if not needle:
        return [session_summary(row) for row in rows.values("public_id", "kind", "title", "first_prompt", "updated_at")[:limit]]
    # Where the words occur in the newest matching message: a window of text around them, cut in the
    # database ("<window start>:<window>", so the trim knows whether the window starts the message).
    at = StrIndex(Lower("content"), Value(needle.lower()))
    start = Greatest(at - MATCH_BEFORE_CHARS - _WINDOW_MARGIN, 1)
    size = MATCH_CHARS + 2 * _WINDOW_MARGIN + len(needle)
    excerpt = (
        Turn.objects.filter(session=OuterRef("pk"), content__icontains=needle).order_by("-id")
        .annotate(excerpt=Concat(Cast(start, CharField()), Value(":"), Substr("content", start, size), output_field=CharField()))
        .values("excerpt")[:1]
    )
    found = []
    for row in rows.annotate(match=Subquery(excerpt)).values("public_id", "kind", "title", "first_prompt", "updated_at", "match")[:limit]:
        summary = session_summary(row)
        if row["match"]:
            offset, window = row["match"].split(":", 1)
            summary["match"] = match_snippet(window, needle, starts_text=offset == "1", ends_text=len(window) < size)
        found.append(summary)
    return found


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
    *, tenant: Tenant, principal: str, kind: SessionKind | str, limit: int, offset: int, query: str = ""
) -> tuple[int, list[SessionListItem]]:
    """``(count, page)`` of the caller's sessions of ``kind`` in ``tenant``, newest activity first
    (with ``query``: only the matching ones, see ``matching``)."""
    sessions = matching(ChatSession.objects.owned_by(tenant_id=tenant.pk, principal=principal).of_kind(kind), query)
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
    derived = title_from_prompt(row.get("first_prompt") or "")
    return {
        "session_id": row["public_id"], "kind": row["kind"], "title": title or derived or UNTITLED,
        "titled": bool(title), "updated_at": row["updated_at"],
    }


class TurnFeedback(TypedDict):
    rating: Annotated[str, Help("up or down.")]
    comment: str


class TranscriptTurn(TypedDict):
    role: str
    content: str
    citations: list[dict[str, Any]]
    model: str
    usage: dict[str, int]
    created_at: str
    # Chat sessions (not agent runs): what answer actions and feedback address.
    turn_id: NotRequired[Annotated[int, Help("This turn's id: regenerate (answers), edit (questions), select, feedback.")]]
    versions: NotRequired[Annotated[list[int], Help(
        "The ids of this turn's versions, oldest first, this one included: regenerated answers to one question, "
        "or the edited versions of one question. Select one to make its thread the conversation.")]]
    feedback: NotRequired[Annotated[TurnFeedback | None, Help("Answers: your feedback on it, if any.")]]
    run_id: NotRequired[Annotated[str, Help("Agent sessions' answers: the run (feedback: /v1/agent/runs/{run_id}/feedback).")]]
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
    rows = thread(session=session, head=None, limit=limit + 1)
    truncated = len(rows) > limit
    rows = rows[:limit]
    if truncated and rows and rows[-1]["role"] == TurnRole.ASSISTANT:
        rows = rows[:-1]  # never start a transcript with an answer whose question was cut off
    turns: list[TranscriptTurn] = []
    for r in reversed(rows):
        turn: TranscriptTurn = {
            "role": r["role"], "content": r["content"], "citations": list(r["citations"] or []), "model": r["model"],
            "usage": dict(r["usage"] or {}), "created_at": r["created_at"].isoformat(),
            "turn_id": r["id"], "versions": r["versions"],
        }
        if r["role"] == TurnRole.ASSISTANT:
            turn["feedback"] = r["feedback"]
        turns.append(turn)
    title = chat_session_summary(session=session)["title"]
    return {"session_id": session.public_id, "kind": session.kind, "title": title, "truncated": truncated, "turns": turns}


def chat_turn_find(*, session: ChatSession, turn_id: Any, role: TurnRole | str | None = None) -> Turn | None:
    """Turn ``turn_id`` of ``session`` (of ``role`` when given); None for anything else (another session's
    turn, malformed). Precondition: ``session`` was loaded for the caller."""
    if isinstance(turn_id, bool) or not isinstance(turn_id, int) or not 0 < turn_id < 2**63:
        return None
    turns = Turn.objects.filter(tenant_id=session.tenant_id, session=session, pk=turn_id)
    if role is not None:
        turns = turns.filter(role=role)
    return turns.first()


def _agent_transcript(*, session: ChatSession, limit: int) -> Transcript:
    runs = list(  # without their (large) saved messages
        AgentRun.objects.filter(tenant_id=session.tenant_id, session=session).defer("messages", "steps")
        .select_related("feedback").order_by("id")
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
        else:
            rated = getattr(run, "feedback", None)
            answer["run_id"] = run.public_id
            answer["feedback"] = {"rating": rated.rating, "comment": rated.comment} if rated is not None else None
        turns.append(answer)
    title = chat_session_summary(session=session)["title"]
    return {"session_id": session.public_id, "kind": session.kind, "title": title, "truncated": len(shown) < len(runs), "turns": turns}


def chat_session_summary(*, session: ChatSession) -> SessionSummary:
    """One session as the list shows it (its own title, else its first question)."""
    first_prompt = None
    if not session.title:
        first_prompt = (
            Turn.objects.filter(tenant_id=session.tenant_id, session=session, role=TurnRole.USER).order_by("id")
            .annotate(preview=Substr("content", 1, TITLE_SOURCE_CHARS)).values_list("preview", flat=True).first()
        ) or (
            AgentRun.objects.filter(tenant_id=session.tenant_id, session=session).order_by("id")
            .annotate(preview=Substr("prompt", 1, TITLE_SOURCE_CHARS)).values_list("preview", flat=True).first()
        )
    return session_summary({"public_id": session.public_id, "kind": session.kind, "title": session.title,
                            "first_prompt": first_prompt, "updated_at": session.updated_at})


# --- feedback ---------------------------------------------------------------------------------


class JudgedAnswer(TypedDict):
    feedback_id: int
    rating: str
    comment: str
    question: str
    citations: list[dict[str, Any]]
    retrieval: dict[str, Any]
    updated_at: datetime


def chat_feedback_judged(*, tenant: Tenant) -> list[JudgedAnswer]:
    """Every answer rated in ``tenant`` (all its principals), oldest first: what ``export_feedback`` writes."""
    rows = Feedback.objects.filter(tenant=tenant).order_by("id").values(
        "id", "rating", "comment", "question", "citations", "retrieval", "updated_at")
    return [{"feedback_id": r.pop("id"), **r} for r in rows]  # type: ignore[typeddict-item]
