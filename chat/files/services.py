"""Writes for a conversation's attached files: attach, delete one, drop them all, expire idle ones.

The files are documents of the session's private store (``accounts.Tenant.private_to``), written
through the knowledge base's door for other apps (``knowledge.services.stores``), so they get the
editors' pipeline: stored, queued on commit, then extracted, chunked and embedded by the workers,
with the same phases, progress and failure reasons. Bounds per conversation (settings):
``QUARRY_CHAT_FILES_MAX_FILES`` files, ``QUARRY_CHAT_FILES_MAX_BYTES`` bytes (checked here, before
anything is stored) and ``QUARRY_CHAT_FILES_MAX_CHUNKS`` passages (the store's chunk quota, which
the worker enforces before embedding).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from accounts.models import Tenant
from chat.files.selectors import FILE_ID_PREFIX, is_file_id, session_files_usage, session_store
from chat.models import ChatSession, SessionFiles
from common.schedules import schedule_ensure
from knowledge.models import Document
from knowledge.rag.limits import describe_bytes
from knowledge.services.stores import StoreFile, store_create, store_drop, store_file_delete, store_files_add

logger = logging.getLogger(__name__)

EXPIRE_SCHEDULE_NAME = "quarry-expire-chat-files"
EXPIRE_TASK = "chat.tasks.expire_chat_files"


class FileLimitExceeded(Exception):
    """An attachment over a per-conversation bound. ``setting`` names the bound; ``message`` says it."""

    def __init__(self, setting: str, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.setting = setting
        self.message = message
        self.too_large = too_large  # a byte bound (HTTP 413) rather than a count (400)


def new_file_id() -> str:
    """``file-`` + 16 hex digits (64 random bits; the id is only ever looked up inside one store)."""
    return FILE_ID_PREFIX + secrets.token_hex(8)


def _store_create(session: ChatSession) -> Tenant:
    """The session's private store, created on first use. Precondition: the session row is locked."""
    existing = session_store(session=session)
    if existing is not None:
        return existing
    store = store_create(owner=session.tenant_id, name=f"files of {session.public_id}",
                         chunk_quota=settings.QUARRY_CHAT_FILES_MAX_CHUNKS, chunk_quota_name="QUARRY_CHAT_FILES_MAX_CHUNKS")
    SessionFiles.objects.create(session=session, store=store)
    return store


def check_file_bounds(*, session: ChatSession, files: Sequence[UploadedFile]) -> None:
    """Raise ``FileLimitExceeded`` when ``files`` would pass a bound of ``session`` (nothing is stored)."""
    store = session_store(session=session)
    used = session_files_usage(store=store) if store is not None else {"files": 0, "bytes": 0}
    max_files, max_bytes = settings.QUARRY_CHAT_FILES_MAX_FILES, settings.QUARRY_CHAT_FILES_MAX_BYTES
    if used["files"] + len(files) > max_files:
        raise FileLimitExceeded("QUARRY_CHAT_FILES_MAX_FILES", (
            f"A conversation holds at most {max_files} files (QUARRY_CHAT_FILES_MAX_FILES); this one has {used['files']}, "
            f"and {len(files)} more would pass it. Delete a file first."))
    incoming = sum(f.size or 0 for f in files)
    if used["bytes"] + incoming > max_bytes:
        raise FileLimitExceeded("QUARRY_CHAT_FILES_MAX_BYTES", (
            f"A conversation's files hold at most {describe_bytes(max_bytes)} (QUARRY_CHAT_FILES_MAX_BYTES); this one has "
            f"{describe_bytes(used['bytes'])}, and {describe_bytes(incoming)} more would pass it. Nothing was stored."), too_large=True)


def session_files_attach(*, session: ChatSession, files: Sequence[UploadedFile], actor: str) -> list[Document]:
    """Attach ``files`` to ``session`` and queue each for processing; returns their documents in input order.

    Preconditions: ``session`` was loaded for its owner. Raises ``FileLimitExceeded`` (nothing stored)
    for a bound, ``knowledge.services.documents.DocumentInputError`` for bad input. Attaching counts as
    activity: the conversation's idle time (``QUARRY_CHAT_FILES_TTL_DAYS``) starts again.
    """
    with transaction.atomic():
        # One attach at a time per session: the bounds below count what is already there.
        ChatSession.objects.select_for_update().filter(pk=session.pk).first()
        check_file_bounds(session=session, files=files)
        store = _store_create(session)
        # Each file carries its own id in its passages' metadata: that is how a question narrows to one file
        # (``identifier``).
        ids = [new_file_id() for _ in files]
        documents = store_files_add(store=store, actor=actor, files=[
            StoreFile(document_id=file_id, upload=upload, metadata={"file_id": file_id}) for file_id, upload in zip(ids, files)])
        ChatSession.objects.filter(pk=session.pk).update(updated_at=timezone.now())
    expire_schedule_ensure()
    return documents


def session_file_delete(*, session: ChatSession, file_id: str, actor: str) -> bool:
    """Delete one attached file with its passages and stored upload; False when ``session`` has no such file."""
    store = session_store(session=session) if is_file_id(file_id) else None
    if store is None:
        return False
    return store_file_delete(store=store, document_id=file_id, actor=actor)


def session_files_drop(*, session: ChatSession, actor: str) -> int:
    """Delete every file of ``session``, their passages, uploads and the store itself; returns the files deleted.

    Called when the conversation is deleted and when it has been idle too long. A worker still
    processing one of them loses its lease and writes nothing.
    """
    store = session_store(session=session)
    if store is None:
        return 0
    return store_drop(store=store, actor=actor)


def session_files_expire(*, now: datetime | None = None) -> int:
    """Drop the files of every conversation idle for more than ``QUARRY_CHAT_FILES_TTL_DAYS``; returns how many files.

    Idle: no exchange (and no attachment) since then (``ChatSession.updated_at``). The conversation
    itself stays; only its files go.
    """
    cutoff = (now or timezone.now()) - timedelta(days=settings.QUARRY_CHAT_FILES_TTL_DAYS)
    dropped = 0
    for session in ChatSession.objects.filter(file_store__isnull=False, updated_at__lt=cutoff).order_by("pk").iterator():
        dropped += session_files_drop(session=session, actor="expiry")
        logger.info("dropped the attached files of an idle conversation (tenant %s)", session.tenant_id)
    return dropped


def expire_schedule_ensure() -> None:
    """Create the hourly expiry ``Schedule`` unless it exists (migration chat 0004 creates it first)."""
    schedule_ensure(EXPIRE_SCHEDULE_NAME, EXPIRE_TASK, schedule_type=Schedule.HOURLY, repeats=-1)
