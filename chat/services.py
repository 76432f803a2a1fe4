"""Writes for conversations: sessions and completed exchanges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Tenant
from chat.files.services import session_files_drop
from chat.models import AgentRun, ChatSession, Feedback, FeedbackRating, SessionKind, Turn, TurnRole


def chat_session_create(*, tenant: Tenant, principal: str, kind: SessionKind | str = SessionKind.CHAT) -> ChatSession:
    """A new, empty session for ``principal`` in ``tenant``."""
    return ChatSession.objects.create(tenant=tenant, principal=principal, kind=kind)


@transaction.atomic
def chat_exchange_record(
    *,
    session: ChatSession,
    prompt: str,
    answer: str,
    citations: Sequence[Mapping[str, Any]],
    usage: Mapping[str, int],
    model: str,
    parent_id: int | None | object = ...,
    question_id: int | None = None,
    retrieval: Mapping[str, Any] | None = None,
) -> tuple[Turn, Turn]:
    """Store a completed exchange: the user's turn, then the assistant's answer, which becomes the head.

    ``parent_id``: the turn the question follows (None: a first question; left out: the session's
    head, read under a row lock). ``question_id``: an existing question of ``session`` this answers
    again (regenerate): no new question turn is stored, and ``parent_id`` is ignored. ``retrieval``:
    the retrieval settings the answer was made with (kept for feedback).

    Precondition: the answer finished (an interrupted or failed answer is not
    remembered, so the next prompt never builds on half a reply); ``question_id`` and ``parent_id``
    are turns of ``session`` (the caller found them through ``chat.selectors.chat_turn_find``).
    """
    locked = ChatSession.objects.select_for_update().only("pk", "head_id").get(pk=session.pk)
    if question_id is not None:
        user = Turn.objects.get(tenant_id=session.tenant_id, session=session, pk=question_id, role=TurnRole.USER)
    else:
        parent = locked.head_id if parent_id is ... else parent_id
        user = Turn.objects.create(tenant_id=session.tenant_id, session=session, role=TurnRole.USER, content=prompt,
                                   parent_id=parent)
    assistant = Turn.objects.create(
        tenant_id=session.tenant_id, session=session, role=TurnRole.ASSISTANT, content=answer, parent=user,
        citations=[dict(c) for c in citations], usage=dict(usage), model=model, retrieval=dict(retrieval or {}),
    )
    ChatSession.objects.filter(pk=session.pk).update(updated_at=timezone.now(), head=assistant)
    session.head_id = assistant.pk
    return user, assistant


_NEWEST_BELOW_SQL = """
WITH RECURSIVE below(id) AS (
    SELECT id FROM chat_turn WHERE id = %s AND session_id = %s
    UNION ALL
    SELECT t.id FROM chat_turn t JOIN below ON t.parent_id = below.id
)
SELECT max(id) FROM below
"""


@transaction.atomic
def chat_turn_select(*, session: ChatSession, turn: Turn) -> int:
    """Make the thread through ``turn`` the conversation: the head moves to the newest turn below
    ``turn`` (itself when nothing follows it), so the conversation that went on from that version
    comes back with it. Returns the new head's id. Does not count as activity (``updated_at``).

    Precondition: ``turn`` is a turn of ``session``, loaded for the caller.
    """
    with connection.cursor() as cursor:
        cursor.execute(_NEWEST_BELOW_SQL, [turn.pk, session.pk])
        (head,) = cursor.fetchone()
    ChatSession.objects.filter(pk=session.pk).update(head_id=head)
    session.head_id = head
    return head


def chat_feedback_give(
    *, session: ChatSession, answer: Turn, rating: FeedbackRating | str, comment: str, question: str,
) -> Feedback:
    """Record the session owner's ``rating`` (and ``comment``) of ``answer``, replacing any earlier one.

    Copies the answer's citations, retrieval settings and model, and ``question`` (the prompt it
    answers), so the judgement keeps its context. Preconditions: ``answer`` is an assistant turn of
    ``session``, both loaded for the caller; ``comment`` is at most ``FEEDBACK_COMMENT_MAX_CHARS``.
    """
    return _feedback_save(session=session, target={"turn": answer}, rating=rating, comment=comment, question=question,
                          answer=answer.content, citations=answer.citations, retrieval=answer.retrieval, model=answer.model)


def agent_feedback_give(*, session: ChatSession, run: AgentRun, rating: FeedbackRating | str, comment: str) -> Feedback:
    """``chat_feedback_give`` for an agent run's answer (its prompt is the question). Preconditions:
    ``run`` is a run of ``session``, both loaded for the caller, and it answered."""
    return _feedback_save(session=session, target={"run": run}, rating=rating, comment=comment, question=run.prompt,
                          answer=run.answer, citations=run.citations, retrieval={"mode": "agent", "max_steps": run.max_steps},
                          model=run.model)


def _feedback_save(
    *, session: ChatSession, target: dict[str, Any], rating: FeedbackRating | str, comment: str, question: str, answer: str,
    citations: Any, retrieval: Any, model: str,
) -> Feedback:
    feedback, _ = Feedback.objects.update_or_create(
        **target,
        defaults={
            "tenant_id": session.tenant_id, "session": session, "principal": session.principal, "rating": rating,
            "comment": comment, "question": question, "answer": answer, "citations": list(citations or []),
            "retrieval": dict(retrieval or {}), "model": model,
        },
    )
    return feedback


def chat_feedback_remove(*, session: ChatSession, answer: Turn | AgentRun) -> bool:
    """Withdraw the feedback on ``answer`` (a chat answer's turn or an agent run); False when there was none.
    Precondition as ``chat_feedback_give``."""
    target = {"run": answer} if isinstance(answer, AgentRun) else {"turn": answer}
    deleted, _ = Feedback.objects.filter(tenant_id=session.tenant_id, session=session, **target).delete()
    return deleted > 0


TITLE_MAX_CHARS = 200  # ChatSession.title's column width


def chat_session_rename(*, session: ChatSession, title: str) -> ChatSession:
    """Give ``session`` a title chosen by its owner; a blank title goes back to the derived one.

    Precondition: ``session`` was loaded for the caller (tenant and principal). Whitespace
    runs collapse to one space; longer titles are cut at ``TITLE_MAX_CHARS``. Renaming does
    not move the session in the list (``updated_at`` tracks conversation activity).
    """
    clean = " ".join(title.split())[:TITLE_MAX_CHARS]
    ChatSession.objects.filter(pk=session.pk).update(title=clean)
    session.title = clean
    return session


@transaction.atomic
def chat_session_delete(*, session: ChatSession) -> None:
    """Delete ``session`` with its turns, its attached files (passages and uploads included) and
    anything else hanging off it, by cascade.

    Precondition: ``session`` was loaded for the caller (tenant and principal). An answer
    still streaming into it elsewhere fails to store and ends with an error event.
    """
    session_files_drop(session=session, actor=session.principal)
    Turn.objects.filter(tenant_id=session.tenant_id, session=session).delete()
    session.delete()
