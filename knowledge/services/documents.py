"""Requests on documents: THE write door of the knowledge base.

The API, the admin, the commands, the demo corpus and the evaluation corpora all write
through these functions, so every write gets the same guarantees:

- ``document_ingest``: text indexed now (the caller waits), superseding background work.
- ``document_upload_create`` / ``document_text_save`` / ``document_update`` / ``document_reindex``
  / ``document_retry``: a new request that a worker processes (``knowledge.services.processing``).
- ``document_cancel``, ``document_delete`` / ``document_delete_many``.

State and its transitions: ``knowledge.services.state``. Tasks are enqueued on commit.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from accounts.models import Tenant
from common import replicas
from knowledge import rag
from knowledge.models import Document, DocumentStatus
from knowledge.rag import factory, limits
from knowledge.rag.chunking import PassageChunker
from knowledge.rag.protocols import Embedder
from knowledge.rag.types import Trigger, check_characters, check_metadata, check_new_document_id
from knowledge.services import indexing, state
# The access part of the write door, for those that may import only this module (sources).
from knowledge.services.access import AccessError, access_describe, access_from_input, document_access_set  # noqa: F401
from knowledge.services.file_ids import FileNameError, document_id_candidates, document_id_from_filename, file_name, legacy_document_ids

DEFAULT: Literal["default"] = "default"
EmbedderChoice = Embedder | None | Literal["default"]


class DocumentInputError(ValueError):
    """A request the pipeline refuses; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class DocumentNotReadable(LookupError):
    """A write would replace a document its caller may not read: the interfaces answer it as they answer
    a document that does not exist (404), since for that caller it does not."""


@dataclass(frozen=True)
class CancelResult:
    cancelled: int  # queued (or abandoned) work, cancelled at once
    stopping: int  # running work, asked to stop at its next batch
    not_running: int  # nothing to cancel (ready or failed already)


def document_file_name(document: Document) -> str:
    """The file name a document answers to (NFC): a file of this name replaces it, no other does.

    Uploads record ``source_name``; ``manage.py ingest`` records ``metadata.source_path`` (the
    path below the folder it read, from which its id comes). A document made from text (sent
    through the API or pasted, which clears ``source_name``) answers to its own id: a file named
    exactly ``notes.md`` replaces the text at ``notes.md``, as it always did, while ``café.txt``
    does not replace the text at ``cafe.txt``.
    """
    recorded = document.source_name or (document.metadata or {}).get("source_path") or ""
    return unicodedata.normalize("NFC", recorded) if recorded and isinstance(recorded, str) else document.external_id


def document_id_for_file(*, tenant: Tenant, name: str, folders: bool = False, uri: str = "") -> str:
    """The id under which a file of this name is indexed into ``tenant`` (``manage.py ingest``).

    ``uri`` (where the file lives) also identifies it: documents the command indexed before it
    recorded ``metadata.source_path`` are known by their URI.

    The rule of ``_claim_for_file``, read without locks: the caller writes with ``document_ingest``
    in a transaction of its own, so a concurrent upload deriving the same id from another name
    could still land first; the command is an operator's tool run on its own, where that does not
    happen. Raises ``DocumentInputError`` (field ``files``) for a name no id can come from, or
    when every candidate id belongs to another file.
    """
    wanted, candidates = _file_candidates(name, folders=folders)
    legacy = legacy_document_ids(wanted, folders=folders)

    def owner(document: Document) -> str:
        return wanted if uri and document.uri == uri else document_file_name(document)

    owners = {d.external_id: owner(d) for d in Document.objects.filter(tenant=tenant, external_id__in=[*candidates, *legacy])}
    chosen = _choose_file_id(wanted, candidates, owners, legacy)
    if chosen is None:
        raise _taken(wanted, candidates)
    return chosen


# --- Requests: synchronous ingest, uploads, edits, re-index, retry, cancel, delete -------------------


def document_ingest(
    *, tenant: Tenant, documents: Sequence[rag.RAGDocument], actor: str, trigger: Trigger = "user",
    embedder: EmbedderChoice = DEFAULT, passages: Mapping[str, Sequence[str]] | None = None,
    access: Sequence[str] | None = None,
) -> int:
    """Index ``documents`` into ``tenant`` now (the caller waits), replacing earlier versions; returns the chunk count.

    ``passages``: a document id -> the passages its file was extracted as (``Extracted.passages``:
    slides, groups of rows), each kept a chunk of its own (``PassageChunker``).

    THE synchronous write of the product (JSON API, CLI, demo corpus, evaluation corpora).
    The given text becomes each document's source: it is embedded first, then one transaction
    supersedes queued or running background work for the same ids, swaps the chunks in and
    records the ingest, so a worker finishing later cannot overwrite this version.
    All-or-nothing: on any error (validation, embedder, the write) nothing is written.
    Raises the RAG API's errors.

    ``access``: the documents' access list as principals (``knowledge.services.access``), set in the
    transaction that writes the chunks, which copy it; None keeps each document's own (a new one: the
    whole tenant's), so a re-ingestion never widens what a restricted document was.
    """
    external_ids = sorted({d.id for d in documents})
    base = rag.tenant_service(tenant.slug, embedder=embedder)
    # By default the tenant's embedding model is followed (and a switch by manage.py reembed while
    # this embeds makes it embed again with the new model).
    follow = factory.embedder_for_model if embedder == DEFAULT else None
    chunker = PassageChunker(base.chunker, passages) if passages else base.chunker
    service = rag.service(base.backend, base.embedder, chunker, namespace=tenant.slug, embedder_for_model=follow)
    plan = async_to_sync(service.prepare_ingest)(documents, actor=actor, trigger=trigger)

    @transaction.atomic
    def write(plan: rag.PreparedIngest) -> rag.Stored:
        # Locks in external_id order, the order the backend's upsert locks them in.
        rows = list(
            Document.objects.select_for_update()
            .filter(tenant=tenant, external_id__in=external_ids)
            .order_by("external_id")
            .values_list("pk", "source_file", "access")
        )
        Document.objects.filter(pk__in=[pk for pk, _, _ in rows]).mark_superseded()
        _delete_files_on_commit([name for _, name, _ in rows if name])
        if access is not None:
            if any(list(held) != list(access) for _, _, held in rows):
                # An existing document's readers change: a lagging replica must not keep serving the old list.
                replicas.pin_tenant(tenant.slug)
            # New rows are created here, restricted, before the backend's upsert: its chunks never
            # exist, even uncommitted, with a wider list than the one asked for.
            Document.objects.bulk_create(
                [Document(tenant=tenant, external_id=i, status=DocumentStatus.QUEUED, access=list(access)) for i in external_ids],
                ignore_conflicts=True,
            )
            Document.objects.filter(tenant=tenant, external_id__in=external_ids).update(access=list(access))
        stored = service.write_ingest(plan)
        # New rows included: the write has just created them.
        Document.objects.filter(tenant=tenant, external_id__in=external_ids).mark_ingested(actor=actor)
        indexing.after_write(namespace=tenant.slug, stored=stored)
        return stored

    try:
        return write(plan).chunks
    except rag.EmbeddingModelChanged as changed:
        return write(async_to_sync(service.embed_again)(plan, changed)).chunks


def document_upload_create(
    *,
    tenant: Tenant,
    files: Sequence[UploadedFile],
    actor: str,
    document_ids: Sequence[str] | None = None,
    title: str = "",
    uri: str = "",
    metadata: Mapping[str, object] | None = None,
    access: Sequence[str] | None = None,
    readable: Sequence[str] | None = None,
) -> list[Document]:
    """Store each file and queue it for processing; return the documents in input order.

    ``access`` (principals, ``knowledge.services.access``): the documents' access list, applied at once
    (to a replaced document's current chunks too); None keeps each document's own. ``readable``: the
    uploader's principals (None: they read everything); a file that would replace a document they may not
    read raises ``DocumentNotReadable`` and nothing is stored.

    Preconditions: the caller may edit ``tenant``. ``document_ids`` (one per file) are used as
    given: an existing id gets a new version, whatever its file. Without them each file's id
    comes from its name (``knowledge.services.file_ids``) and a file replaces only the document
    of the same file name (NFC: macOS's NFD names are the same name): re-uploading
    ``café.txt`` versions it (also under the id the earlier rule gave it), and a file named
    exactly as a text document's id replaces that text (``document_file_name``). When the
    readable id (``cafe.txt``) belongs to a document of another file name (a file ``cafe.txt``,
    or text at ``cafe.txt``) the file gets the hashed id (``cafe-5996d1f7.txt``) instead: a new id rather than a refusal, because the editor asked
    for nothing wrong and the id is still derived from the name alone, so the next upload of
    the same name finds the same document. Only when both candidates belong to other files
    (a hash collision, or ids chosen by hand) is the upload refused, naming the file.
    ``title`` and ``uri`` apply to a single file only. Fields not given are kept on existing
    documents, except the title, which then comes from the new file.

    Raises ``DocumentInputError`` naming the field before anything is stored. A file over
    ``QUARRY_UPLOAD_MAX_BYTES`` does not fail the batch: it is not stored, and its document
    is failed at once with the reason. Everything else (type, corrupt or encrypted files)
    is checked by the worker and fails that document only.
    """
    if not files:
        raise DocumentInputError("files", "upload at least one file")
    if len(files) > limits.MAX_DOCUMENTS_PER_INGEST:
        raise DocumentInputError("files", f"at most {limits.MAX_DOCUMENTS_PER_INGEST} files per upload, got {len(files)}")
    if len(files) > 1 and (title or uri):
        raise DocumentInputError("title" if title else "uri", "applies to a single file; with several files each takes its title from the file")
    if document_ids is not None and len(document_ids) != len(files):
        raise DocumentInputError("ids", f"give one id per file: {len(files)} files, {len(document_ids)} ids")
    if document_ids:
        given = [_check_document_id(i, "ids") for i in document_ids]
        repeated = sorted({i for i in given if given.count(i) > 1})
        if repeated:
            raise DocumentInputError("ids", f"two files would share the document id {repeated[0]!r}; give distinct ids")
        ids: list[str | None] = list(given)
        names = [_recordable_name(f, i) for f, i in zip(files, given, strict=True)]
        lock_keys = given
    else:
        ids = [None] * len(files)  # chosen under the row locks, below
        derived = [_file_candidates(f.name or "") for f in files]
        names = [name for name, _ in derived]
        same = sorted({n for n in names if names.count(n) > 1})
        if same:
            first = next(c for n, c in derived if n == same[0])[0]
            raise DocumentInputError("files", f"two files are named {same[0]!r} (they would share the document id {first!r}); "
                                     "upload one, or give distinct ids")
        lock_keys = [candidates[0] for _, candidates in derived]
    checked_metadata = _check_metadata(metadata) if metadata is not None else None
    _check_title_uri(title, uri)

    limit = settings.QUARRY_UPLOAD_MAX_BYTES
    stored: list[str | None] = []
    try:
        for upload in files:
            stored.append(_store_upload(tenant, upload) if (upload.size or 0) <= limit else None)
        with transaction.atomic():
            by_index: dict[int, Document] = {}
            queued: list[int] = []
            # Rows are locked in id order (preferred id, for derived ones), so two uploads sharing
            # ids cannot deadlock; a file whose preferred id is taken may lock its second candidate late.
            order = sorted(range(len(files)), key=lambda n: (lock_keys[n], names[n]))
            for index in order:
                upload, name, external_id = files[index], stored[index], ids[index]
                document = _lock_or_create(tenant, external_id)[0] if external_id else _claim_for_file(tenant, names[index])
                if readable is not None and not set(document.access) & set(readable):
                    raise DocumentNotReadable(document.external_id)
                _forget_source_on_commit(document)
                document.source_file = name or ""
                document.source_name = names[index]
                document.source_content_type = (upload.content_type or "")[:255]
                document.source_size = upload.size or 0
                document.source_text = ""
                document.title = title
                if uri:
                    document.uri = uri
                if checked_metadata is not None:
                    document.metadata = checked_metadata
                document.save(update_fields=["source_file", "source_name", "source_content_type", "source_size",
                                             "source_text", "title", "uri", "metadata"])
                if access is not None:
                    document_access_set(documents=[document], principals=access, actor=actor)
                if name is None:
                    state.fail_now(document, actor=actor, error=f"{document.source_name} is {limits.describe_bytes(document.source_size)}, "
                              f"over the upload limit of {limits.describe_bytes(limit)}; it was not stored")
                else:
                    queued.append(document.pk)
                by_index[index] = document
            state.request_processing(queued, actor=actor)
    except BaseException:
        for name in stored:
            if name:
                default_storage.delete(name)
        raise
    return _reload([by_index[n] for n in range(len(files))])


def document_text_save(
    *,
    tenant: Tenant,
    external_id: str,
    text: str,
    actor: str,
    title: str = "",
    uri: str = "",
    metadata: Mapping[str, object] | None = None,
    access: Sequence[str] | None = None,
    readable: Sequence[str] | None = None,
) -> Document:
    """Create or replace a document from pasted text and queue it for processing (``access`` and
    ``readable``: as ``document_upload_create``'s).

    Raises ``DocumentInputError`` for a bad id, empty or oversized text, title, URI or metadata, and
    ``DocumentNotReadable`` when ``external_id`` is a document ``readable`` does not reach.
    """
    external_id = _check_document_id(external_id, "external_id")
    if not text.strip():
        raise DocumentInputError("text", "paste some text")
    if len(text) > limits.MAX_CHARS_PER_DOCUMENT:
        raise DocumentInputError("text", f"at most {limits.MAX_CHARS_PER_DOCUMENT:,} characters, got {len(text):,}")
    checked_metadata = _check_metadata(metadata) if metadata is not None else None
    _check_title_uri(title, uri)
    with transaction.atomic():
        document, _ = _lock_or_create(tenant, external_id)
        if readable is not None and not set(document.access) & set(readable):
            raise DocumentNotReadable(document.external_id)  # rolled back: a new row would not exist
        changed = _use_text_source(document, text)
        document.title = title
        document.uri = uri
        if checked_metadata is not None:
            document.metadata = checked_metadata
        document.save(update_fields=[*changed, "title", "uri", "metadata"])
        if access is not None:
            document_access_set(documents=[document], principals=access, actor=actor)
        state.request_processing([document.pk], actor=actor)
    return _reload([document])[0]


def document_update(
    *,
    document: Document,
    actor: str,
    title: str,
    uri: str,
    metadata: Mapping[str, object],
    text: str | None = None,
    upload: UploadedFile | None = None,
) -> bool:
    """Apply an editor's changes and queue a new version when anything changed; True if queued.

    ``upload`` replaces the source file; otherwise ``text`` (when given and different)
    becomes the pasted source. Title, URI and metadata reach the chunks with the new version.
    """
    checked_metadata = _check_metadata(metadata)
    _check_title_uri(title, uri)
    if text is not None and not upload and not text.strip():
        raise DocumentInputError("text", "must not be empty")
    oversized = upload is not None and (upload.size or 0) > settings.QUARRY_UPLOAD_MAX_BYTES
    stored = _store_upload(document.tenant, upload) if upload is not None and not oversized else None
    try:
        with transaction.atomic():
            current = Document.objects.select_for_update().get(pk=document.pk)
            changed = [f for f, v in (("title", title), ("uri", uri), ("metadata", checked_metadata)) if getattr(current, f) != v]
            current.title, current.uri, current.metadata = title, uri, checked_metadata
            if upload is not None:
                _forget_source_on_commit(current)
                current.source_file = stored or ""
                current.source_name = _recordable_name(upload, current.external_id)
                current.source_content_type = (upload.content_type or "")[:255]
                current.source_size = upload.size or 0
                current.source_text = ""
                changed += ["source_file", "source_name", "source_content_type", "source_size", "source_text"]
            elif text is not None and text != (current.source_text or current.text):
                changed += _use_text_source(current, text)
            if not changed:
                return False
            current.save(update_fields=sorted(set(changed)))
            if oversized:
                state.fail_now(current, actor=actor, error=f"{current.source_name} is {limits.describe_bytes(current.source_size)}, over the "
                          f"upload limit of {limits.describe_bytes(settings.QUARRY_UPLOAD_MAX_BYTES)}; it was not stored")
                return False
            state.request_processing([current.pk], actor=actor)
            return True
    except BaseException:
        if stored:
            default_storage.delete(stored)
        raise


def document_reindex(*, documents: Iterable[Document], actor: str) -> int:
    """Queue a new version of each document from its stored source; returns how many.

    A document being processed keeps its worker: the worker re-queues it when done.
    """
    pks = [d.pk for d in documents]
    with transaction.atomic():
        return state.request_processing(pks, actor=actor)


def document_retry(*, documents: Iterable[Document], actor: str) -> int:
    """Queue the failed ones among ``documents`` again (fresh attempts); returns how many."""
    pks = [d.pk for d in documents]
    with transaction.atomic():
        failed = list(Document.objects.select_for_update().filter(pk__in=pks, status=DocumentStatus.FAILED).values_list("pk", flat=True))
        return state.request_processing(failed, actor=actor)


def document_cancel(*, documents: Iterable[Document], actor: str) -> CancelResult:
    """Cancel queued or running work.

    Queued work (or work whose worker died) is cancelled at once: status ``failed`` with a
    reason. Running work is flagged; its worker stops at the next embedding batch or, at
    the latest, refuses to write its chunks, then records the same reason. Either way the
    previous chunks stay searchable.
    """
    cancelled = stopping = not_running = 0
    with transaction.atomic():
        for document in Document.objects.select_for_update().filter(pk__in=[d.pk for d in documents]).order_by("pk"):
            message = state.cancel_message(document, actor)
            live = Document.objects.filter(pk=document.pk).with_live_lease().exists()
            if document.status == DocumentStatus.PROCESSING and live:
                state.cancel_request(document.pk, error=message)
                stopping += 1
            elif document.status in (DocumentStatus.QUEUED, DocumentStatus.PROCESSING):
                state.fail_now(document, actor=actor, error=message, bump=False, cancelled=True)
                cancelled += 1
            else:
                not_running += 1
    return CancelResult(cancelled, stopping, not_running)


def document_delete(*, tenant: Tenant, document_ids: Sequence[str], actor: str, trigger: Trigger = "user") -> int:
    """Delete these documents of ``tenant``: rows, chunks and stored files (audited); returns how many existed.

    A worker still processing one of them loses its lease and writes nothing.
    """
    rows = list(Document.objects.filter(tenant=tenant, external_id__in=list(document_ids)).values_list("source_file", flat=True))
    files = [name for name in rows if name]
    with transaction.atomic():
        deleted = async_to_sync(rag.tenant_service(tenant.slug, embedder=None).delete)(document_ids, trigger=trigger, actor=actor)
        _delete_files_on_commit(files)
    # A backend of the seed's contract alone reports no count: the rows found before are it.
    return deleted if deleted is not None else len(rows)


def document_delete_many(*, documents: Iterable[Document], actor: str) -> int:
    """Delete documents, their chunks and stored files (audited per tenant); returns how many.

    A worker still processing one of them loses its lease and writes nothing.
    """
    by_tenant: dict[int, list[str]] = {}
    for document in documents:
        by_tenant.setdefault(document.tenant_id, []).append(document.external_id)
    tenants = Tenant.objects.in_bulk(list(by_tenant))
    deleted = 0
    with transaction.atomic():
        for tenant_id, external_ids in by_tenant.items():
            for start in range(0, len(external_ids), limits.MAX_DOCUMENTS_PER_INGEST):
                batch = external_ids[start : start + limits.MAX_DOCUMENTS_PER_INGEST]
                deleted += document_delete(tenant=tenants[tenant_id], document_ids=batch, actor=actor)
    return deleted


DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"


def demo_corpus_ingest(*, tenant: Tenant, actor: str = "demo") -> int:
    """Index the Markdown files in ``knowledge/demo`` (about Quarry itself) into ``tenant``.

    Returns how many chunks the demo documents have in the tenant. Re-running (every ``make
    run`` does) re-indexes only files that changed: a ready document with the same text, title,
    URI and metadata keeps its version, so editors do not see demo versions climb.
    """
    documents = []
    for path in sorted(DEMO_DIR.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        documents.append(rag.RAGDocument(f"demo/{path.stem}", text, title=title, uri=f"quarry:demo/{path.name}", metadata={"source": "demo"}))
    current = Document.objects.filter(tenant=tenant, external_id__in=[d.id for d in documents], status=DocumentStatus.READY)
    indexed = {d.external_id: d for d in current.only("external_id", "text", "title", "uri", "metadata", "chunk_count")}
    changed = [d for d in documents if (d.id not in indexed or (indexed[d.id].text, indexed[d.id].title, indexed[d.id].uri,
                                                                 indexed[d.id].metadata) != (d.text, d.title, d.uri, d.metadata))]
    kept = sum(indexed[d.id].chunk_count for d in documents if d not in changed)
    return kept + (document_ingest(tenant=tenant, documents=changed, actor=actor) if changed else 0)


# --- Internals ---------------------------------------------------------------------------------------


def _lock_or_create(tenant: Tenant, external_id: str) -> tuple[Document, bool]:
    document, created = Document.objects.select_for_update().get_or_create(
        tenant=tenant, external_id=external_id, defaults={"status": DocumentStatus.QUEUED}
    )
    document.tenant = tenant
    return document, created


def _file_candidates(name: str, *, folders: bool = False) -> tuple[str, tuple[str, ...]]:
    """A file's identifying name and its candidate ids; ``DocumentInputError`` for a name with none."""
    try:
        return file_name(name, folders=folders), document_id_candidates(name, folders=folders)
    except FileNameError as exc:
        raise DocumentInputError("files", f"{exc}: a file needs a name with a letter, digit or symbol other than '.', '/' and '\\'") from None


def _recordable_name(upload: UploadedFile, fallback: str) -> str:
    """What ``source_name`` records for a file given an explicit id: its name, or the id when it has none."""
    try:
        return file_name(upload.name or fallback)
    except FileNameError:
        return fallback


def _choose_file_id(name: str, candidates: Sequence[str], owners: Mapping[str, str], legacy: Sequence[str] = ()) -> str | None:
    """The id a file called ``name`` gets, given ``owners`` (existing id -> its recorded file name).

    The document of the same name first, wherever it is: under a candidate (its readable id may
    have been taken by another file since) or under the id the earlier rule gave it (``legacy``);
    else the first free candidate; else None: every candidate belongs to another file, and
    replacing it would lose that file.
    """
    same = [c for c in (*candidates, *legacy) if owners.get(c, None) == name]
    free = [c for c in candidates if c not in owners]
    return (same or free or [None])[0]


def _claim_for_file(tenant: Tenant, name: str) -> Document:
    """Lock (or create) the document a file called ``name`` goes to, in the caller's transaction.

    ``_choose_file_id`` decides; the decision is checked on the locked row, because a concurrent
    upload may create the chosen id between our read and our insert (then ``get_or_create``
    returns its row, of another name, and we choose again instead of replacing it).
    """
    candidates, legacy = document_id_candidates(name), legacy_document_ids(name)
    for _attempt in range(len(candidates) + 1):
        rows = Document.objects.select_for_update().filter(tenant=tenant, external_id__in=[*candidates, *legacy]).order_by("external_id")
        chosen = _choose_file_id(name, candidates, {d.external_id: document_file_name(d) for d in rows}, legacy)
        if chosen is None:
            break
        document, created = _lock_or_create(tenant, chosen)
        if created or document_file_name(document) == name:
            return document
    raise _taken(name, candidates)


def _taken(name: str, candidates: Sequence[str]) -> DocumentInputError:
    ids = " and ".join(repr(c) for c in candidates)
    return DocumentInputError("files", f"{name!r} cannot get a document id: {ids} belong to documents of other files; "
                              "rename the file, or give its id to replace one of them")


def _reload(documents: Sequence[Document]) -> list[Document]:
    by_pk = Document.objects.select_related("tenant").in_bulk([d.pk for d in documents])
    return [by_pk[d.pk] for d in documents]


def _store_upload(tenant: Tenant, upload: UploadedFile) -> str:
    """Save the file under uploads/<tenant>/<yyyy>/<mm>/ with an unguessable prefix; returns its name."""
    name = document_id_from_filename(upload.name or "upload")[:120]
    folder = timezone.now().strftime(f"uploads/{tenant.slug}/%Y/%m")
    upload.seek(0)
    return default_storage.save(f"{folder}/{uuid.uuid4().hex[:12]}-{name}", upload)


def _use_text_source(document: Document, text: str) -> list[str]:
    """Make pasted ``text`` the document's source, dropping any stored file once the transaction
    commits; returns the fields set (the caller saves them)."""
    _forget_source_on_commit(document)
    document.source_text = text.replace("\x00", "")
    document.source_file = ""
    document.source_name = ""
    document.source_content_type = ""
    document.source_size = 0
    return ["source_text", "source_file", "source_name", "source_content_type", "source_size"]


def _forget_source_on_commit(document: Document) -> None:
    if document.pk and document.source_file:
        _delete_files_on_commit([document.source_file.name])


def _delete_files_on_commit(names: Sequence[str]) -> None:
    names = [n for n in names if n]
    if names:
        transaction.on_commit(lambda: [default_storage.delete(n) for n in names], robust=True)


def _check_document_id(value: object, field: str) -> str:
    try:
        return check_new_document_id(field, value)
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise DocumentInputError(field, exc.message) from None


def _check_metadata(metadata: Mapping[str, object] | None) -> dict[str, object]:
    try:
        return dict(check_metadata(metadata))
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise DocumentInputError(exc.field, exc.message) from None


def _check_title_uri(title: str, uri: str) -> None:
    if len(title) > limits.MAX_TITLE_CHARS:
        raise DocumentInputError("title", f"at most {limits.MAX_TITLE_CHARS} characters, got {len(title)}")
    if len(uri) > limits.MAX_URI_CHARS:
        raise DocumentInputError("uri", f"at most {limits.MAX_URI_CHARS} characters, got {len(uri)}")
    for field, value in (("title", title), ("uri", uri)):
        try:
            check_characters(field, value, limits.LINE_CONTROL_RE)
        except rag.RAGValidationError as exc:
            raise DocumentInputError(field, exc.message) from None
