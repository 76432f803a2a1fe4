"""Reads of a conversation's attached files. Callers pass a session already loaded for its owner.

Synchronous: async callers go through ``common.db.db_step``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, TypedDict

from asgiref.sync import async_to_sync

from accounts.models import Tenant
from chat.models import ChatSession, SessionFiles
from common.typed_serializers import Help
from knowledge import rag
from knowledge.models import Document

FILE_ID_PREFIX = "file-"


def is_file_id(value: Any) -> bool:
    """``file-`` and 16 hex digits (``chat.files.services.new_file_id``): anything else names no file."""
    return (isinstance(value, str) and len(value) == len(FILE_ID_PREFIX) + 16 and value.startswith(FILE_ID_PREFIX)
            and all(c in "0123456789abcdef" for c in value[len(FILE_ID_PREFIX):]))


def session_store(*, session: ChatSession) -> Tenant | None:
    """The private store of ``session``'s files, or None while nothing was ever attached."""
    link = SessionFiles.objects.select_related("store").filter(session_id=session.pk).first()
    return link.store if link is not None else None


def session_store_slug(*, session: ChatSession) -> str | None:
    """The namespace of ``session``'s files (for ``knowledge.rag.tenant_service``), or None."""
    return SessionFiles.objects.filter(session_id=session.pk).values_list("store__slug", flat=True).first()


class FileItem(TypedDict):
    """A file attached to a conversation, as ``GET /v1/chat/sessions/{id}/files`` lists it."""

    file_id: Annotated[str, Help("The file's id in this conversation (`file-` and 16 hex digits); its passages cite it as document_id.")]
    name: Annotated[str, Help("The uploaded file's name.")]
    title: str
    content_type: str
    size: Annotated[int, Help("Bytes uploaded.")]
    status: Annotated[str, Help("queued, processing, ready or failed.")]
    phase: Annotated[str, Help("While processing: extracting, embedding or indexing.")]
    progress: Annotated[float, Help("0..1.")]
    phase_done: Annotated[int, Help("Embedding: texts done (re-used ones included).")]
    phase_total: Annotated[int, Help("Embedding: texts to embed.")]
    error: Annotated[str, Help("Why the file failed (empty otherwise). A failed file never blocks the conversation.")]
    chunk_count: Annotated[int, Help("Passages indexed.")]
    created_at: str
    updated_at: str


def file_item(document: Document) -> FileItem:
    return {
        "file_id": document.external_id, "name": document.source_name, "title": document.title,
        "content_type": document.source_content_type, "size": document.source_size, "status": document.status,
        "phase": document.phase, "progress": round(document.progress, 4), "phase_done": document.phase_done,
        "phase_total": document.phase_total, "error": document.error, "chunk_count": document.chunk_count,
        "created_at": _iso(document.created_at), "updated_at": _iso(document.updated_at),
    }


def _iso(value: datetime) -> str:
    return value.isoformat()


def _documents(store: Tenant) -> Any:
    return Document.objects.filter(tenant=store).defer("text", "source_text")


def session_file_list(*, session: ChatSession) -> list[FileItem]:
    """``session``'s files, oldest first (at most ``QUARRY_CHAT_FILES_MAX_FILES``, which uploads enforce)."""
    store = session_store(session=session)
    if store is None:
        return []
    return [file_item(d) for d in _documents(store).order_by("created_at", "id")]


def session_file_get(*, session: ChatSession, file_id: str) -> FileItem | None:
    """One of ``session``'s files, or None (malformed, unknown, or another conversation's)."""
    store = session_store(session=session) if is_file_id(file_id) else None
    if store is None:
        return None
    document = _documents(store).filter(external_id=file_id).first()
    return file_item(document) if document is not None else None


class StoreUsage(TypedDict):
    files: int
    bytes: int


def session_files_usage(*, store: Tenant) -> StoreUsage:
    """Files and bytes already in ``store`` (what the bounds count)."""
    sizes = list(Document.objects.filter(tenant=store).values_list("source_size", flat=True))
    return {"files": len(sizes), "bytes": sum(sizes)}


class FilePassage(TypedDict):
    chunk_id: str
    file_id: str
    title: str
    text: str


def session_file_passages(*, session: ChatSession, chunk_ids: list[str]) -> list[FilePassage]:
    """The passages of ``session``'s files with these ids, in the order asked for (unknown ids left out).

    What the web chat shows for a citation of an attached file: only the conversation's owner
    reaches it (``/v1/chunks/fetch`` searches the tenant's knowledge base, never a private store).
    """
    slug = session_store_slug(session=session)
    if slug is None or not chunk_ids:
        return []
    chunks = async_to_sync(rag.tenant_service(slug, embedder=None).fetch)(chunk_ids)
    return [{"chunk_id": c.chunk_id, "file_id": c.document_id, "title": c.title or "", "text": c.text} for c in chunks]
