"""Private stores: a tenant's documents that belong to one owner (a conversation's attached files).

The one door through which another app writes to the knowledge base. A store is a ``Tenant``
row with ``private_to`` set: search treats it like any tenant, so its files take the editors'
pipeline (stored, queued on commit, extracted, chunked and embedded by the workers, with the
same phases, progress and failure reasons) instead of a second copy of it. The caller keeps
the link between its owner and the store (``chat.models.SessionFiles``) and decides who may
read it; this module never checks permissions.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from accounts.models import Tenant
from knowledge.models import Document, SearchLanguage
from knowledge.services.documents import document_delete, document_upload_create


@dataclass(frozen=True)
class StoreFile:
    """One file to add: its document id (unique in the store), the upload, and metadata for its passages."""

    document_id: str
    upload: UploadedFile
    metadata: Mapping[str, object] = field(default_factory=dict)


def store_create(*, owner: Tenant | int, name: str, chunk_quota: int, chunk_quota_name: str) -> Tenant:
    """Create a private store of ``owner`` (a tenant or its id); returns it.

    ``chunk_quota`` bounds its passages (the worker enforces it before embedding) and
    ``chunk_quota_name`` is the setting an error names. The store searches as its owner does:
    same stemming and stop words (the owner's search language is copied).
    """
    owner_id = owner.pk if isinstance(owner, Tenant) else owner
    store = Tenant.objects.create(slug=f"files-{secrets.token_hex(12)}", name=name, private_to_id=owner_id,
                                  chunk_quota=chunk_quota, chunk_quota_name=chunk_quota_name)
    language = SearchLanguage.objects.filter(tenant_id=owner_id).values_list("language", flat=True).first()
    if language:
        SearchLanguage.objects.create(tenant=store, language=language)
    return store


def store_files_add(*, store: Tenant, files: Sequence[StoreFile], actor: str) -> list[Document]:
    """Store each file under its ``document_id`` and queue it for processing; returns the documents in input order.

    One upload request per file, so each carries its own metadata into its passages. Raises
    ``knowledge.services.documents.DocumentInputError`` for bad input; inside the caller's
    transaction nothing of a refused batch is kept.
    """
    documents: list[Document] = []
    with transaction.atomic():
        for item in files:
            documents += document_upload_create(tenant=store, files=[item.upload], actor=actor,
                                                document_ids=[item.document_id], metadata=item.metadata)
    return documents


def store_file_delete(*, store: Tenant, document_id: str, actor: str) -> bool:
    """Delete one document of ``store`` with its passages and stored upload; False when there is none."""
    return document_delete(tenant=store, document_ids=[document_id], actor=actor) > 0


def store_drop(*, store: Tenant, actor: str) -> int:
    """Delete every document of ``store``, their passages and uploads, then the store; returns the documents deleted.

    A worker still processing one of them loses its lease and writes nothing. The store's
    statistics, graph and the caller's link to it go with it (cascades).
    """
    ids = list(Document.objects.filter(tenant=store).values_list("external_id", flat=True))
    with transaction.atomic():
        deleted = document_delete(tenant=store, document_ids=ids, actor=actor) if ids else 0
        store.delete()
    return deleted
