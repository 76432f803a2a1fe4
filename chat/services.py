"""Writes for conversations: sessions and completed exchanges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Tenant
from chat.files.services import session_files_drop
from chat.models import ChatSession, SessionKind, Turn, TurnRole


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
) -> tuple[Turn, Turn]:
    """Store a completed exchange: the user's turn, then the assistant's answer.

    Precondition: the answer finished (an interrupted or failed answer is not
    remembered, so the next prompt never builds on half a reply).
    """
    user = Turn.objects.create(tenant_id=session.tenant_id, session=session, role=TurnRole.USER, content=prompt)
    assistant = Turn.objects.create(
        tenant_id=session.tenant_id, session=session, role=TurnRole.ASSISTANT, content=answer,
        citations=[dict(c) for c in citations], usage=dict(usage), model=model,
    )
    ChatSession.objects.filter(pk=session.pk).update(updated_at=timezone.now())
    return user, assistant


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
