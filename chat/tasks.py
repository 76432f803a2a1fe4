"""django-q2 tasks of the chat. Thin: they call one service; safe to run twice."""

from __future__ import annotations

from chat.files.services import session_files_expire


def expire_chat_files() -> int:
    """Every hour (a ``Schedule``): drop the attached files of conversations idle beyond
    ``QUARRY_CHAT_FILES_TTL_DAYS``; returns how many files went."""
    return session_files_expire()
