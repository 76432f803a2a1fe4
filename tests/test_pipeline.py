"""The document pipeline's services, in process: requests, claims, failures, cancel, leases, races.

Processing tests use ``transaction=True``: the worker's lease heartbeat runs on its own
thread and connection, so it must see committed rows. The embedding provider is a real
HTTP server standing in for OpenAI (tests/fake_openai.py), the network boundary; one
test uses the real local model end to end.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from knowledge import rag
from knowledge.services import documents as doc_services
from knowledge.services import processing, reclaim, state
from knowledge.models import AuditEvent, Chunk, CorpusStat, Document, DocumentStatus, EmbeddingCache
from knowledge.services.documents import DocumentInputError
from knowledge.services.processing import Outcome
from knowledge.rag.embedding import LiteLLMEmbedder
from knowledge.selectors import chunk_search
from tests.conftest import World
from tests.factories import chunk_vectors
from tests.fake_openai import FakeOpenAI, ReceivedRequest, Reply, embeddings_route, fake_openai_server
from tests.documents import FOUR_SLIDES, make_deck
from tests.test_extraction import encrypt_pdf, make_docx, make_pdf

LONG_TEXT = "\n\n".join(
    f"Section {n}. Quarry stores every uploaded document as chunks of about two thousand characters; "
    f"this paragraph number {n} exists so that the document needs many embedding batches. " * 6
    for n in range(40)
)


def upload(name: str, data: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.QUARRY_DOCUMENT_LEASE_SECONDS = 3  # heartbeat every second
    settings.QUARRY_EMBEDDING_RETRY_DELAY_MS = 1
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # the world's users, quickly
    return settings.MEDIA_ROOT


@pytest.fixture
def provider() -> Iterator[FakeOpenAI]:
    with fake_openai_server(dimension=8) as server:
        yield server


def db_route(route: Callable[[FakeOpenAI, ReceivedRequest], Reply]) -> Callable[[FakeOpenAI, ReceivedRequest], Reply]:
    """A fake-provider route that uses the ORM: it runs on a server thread, which must close its connection."""

    def handler(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        try:
            return route(server, request)
        finally:
            connection.close()

    return handler


def embedder(server: FakeOpenAI, batch_size: int = 64) -> LiteLLMEmbedder:
    return LiteLLMEmbedder("openai/test-embed", 8, batch_size=batch_size, api_base=server.base_url, api_key="sk-test")


def process(document: Document, server: FakeOpenAI, **options: object) -> Outcome:
    return processing.document_process(document_pk=document.pk, embedder=embedder(server, **options))  # type: ignore[arg-type]


def reload(document: Document) -> Document:
    return Document.objects.get(pk=document.pk)


def paste(world: World, external_id: str, text: str, **fields: object) -> Document:
    return doc_services.document_text_save(tenant=world.acme, external_id=external_id, text=text, actor="editor", **fields)  # type: ignore[arg-type]


def ready_document(world: World, server: FakeOpenAI, external_id: str = "handbook", text: str = "Quarry keeps the old chunks searchable.") -> Document:
    document = paste(world, external_id, text)
    assert process(document, server) is Outcome.READY
    return reload(document)


def keyword_hits(world: World, query: str) -> list[str]:
    return [h.chunk.chunk_id for h in chunk_search(tenant=world.acme, reader=None, query=query, mode="keyword", limit=20)]


# --- Requests -----------------------------------------------------------------------------------


def test_upload_queues_each_file_and_enqueues_its_task_on_commit(world: World, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    Schedule.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        documents = doc_services.document_upload_create(
            tenant=world.acme, actor="editor", metadata={"team": "support"},
            files=[upload("Q3 report.md", b"# Q3\n\nRevenue grew."), upload("notes.txt", b"Remember the milk.")],
        )
    assert [d.external_id for d in documents] == ["Q3-report.md", "notes.txt"]
    for document in documents:
        assert (document.status, document.generation, document.attempts, document.requested_by) == ("queued", 1, 0, "editor")
        assert document.metadata == {"team": "support"} and document.source_file.name.startswith("uploads/acme/")
        assert document.lease_expires_at is not None and document.queued_at is not None  # the re-send deadline
    assert len(callbacks) == 1  # one batch: enqueued after the commit, never before
    queued = sorted(task.func() for task in OrmQ.objects.all())
    assert queued == ["knowledge.tasks.process_document"] * 2
    assert sorted(task.args()[0] for task in OrmQ.objects.all()) == sorted(d.pk for d in documents)
    # No wall-clock kill for the document task (-1: none in django-q2): its lease says whether its worker lives.
    assert [task.task["timeout"] for task in OrmQ.objects.all()] == [-1, -1]
    # The reclaim schedule is put back whenever work is queued.
    schedule = Schedule.objects.get(name=state.RECLAIM_SCHEDULE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.minutes, schedule.repeats) == ("knowledge.tasks.reclaim_documents", "I", 1, -1)


def test_nothing_is_enqueued_when_the_transaction_rolls_back(world: World, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(DocumentInputError):
            doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("a.txt", b"x"), upload("a.txt", b"y")])
    assert callbacks == [] and not Document.objects.exists()


@pytest.mark.parametrize(
    ("options", "field", "phrase"),
    [
        ({"files": []}, "files", "at least one file"),
        ({"document_ids": ["has space"]}, "ids", "not a valid document id"),
        ({"document_ids": ["a", "b"]}, "ids", "one id per file"),
        ({"metadata": {"nested": {"a": 1}}}, "metadata.nested", "nested values are not allowed"),
        ({"metadata": {"bad key": 1}}, "metadata field", "not a valid field name"),
        ({"title": "x" * 1001}, "title", "at most 1000 characters"),
    ],
)
def test_upload_input_errors_name_the_field(world: World, options: dict[str, object], field: str, phrase: str) -> None:
    arguments: dict[str, object] = {"tenant": world.acme, "actor": "editor", "files": [upload("a.txt", b"text")], **options}
    with pytest.raises(DocumentInputError) as caught:
        doc_services.document_upload_create(**arguments)  # type: ignore[arg-type]
    assert caught.value.field == field and phrase in caught.value.message
    assert not Document.objects.exists()


def test_title_applies_to_one_file_only(world: World) -> None:
    with pytest.raises(DocumentInputError, match="title: applies to a single file"):
        doc_services.document_upload_create(tenant=world.acme, actor="e", title="Both", files=[upload("a.txt", b"a"), upload("b.txt", b"b")])


# --- Processing ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_upload_is_extracted_chunked_embedded_and_searchable_with_the_default_model(world: World) -> None:
    [document] = doc_services.document_upload_create(
        tenant=world.acme, actor="editor", files=[upload("guide.md", b"# Uploading guide\n\nEditors upload files in the admin.")],
        metadata={"team": "support"},
    )
    assert processing.document_process(document_pk=document.pk) is Outcome.READY
    document = reload(document)
    assert (document.status, document.progress, document.error, document.chunk_count, document.version) == ("ready", 1.0, "", 1, 1)
    assert document.title == "Uploading guide" and document.embedding_model == "local/bge-small-en-v1.5-int8"
    assert (document.lease_id, document.lease_expires_at, document.attempts) == ("", None, 1)
    assert document.started_at <= document.finished_at
    chunk = Chunk.objects.get(document=document)
    assert chunk_vectors(Chunk.objects.filter(pk=chunk.pk)) != [None] and chunk.metadata == {"team": "support"}
    hits = chunk_search(tenant=world.acme, reader=None, query="how do editors upload files?", mode="semantic")
    assert hits[0].chunk.chunk_id == "guide.md:0"
    assert AuditEvent.objects.filter(tenant=world.acme, action="ingest", actor="editor", document_ids=["guide.md"]).exists()
    # A duplicate or late task does nothing.
    assert processing.document_process(document_pk=document.pk) is Outcome.SKIPPED
    assert reload(document).version == 1


@pytest.mark.django_db(transaction=True)
def test_each_bad_file_fails_with_a_clear_reason_and_the_rest_of_the_batch_is_indexed(world: World, provider: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_UPLOAD_MAX_BYTES = 50_000
    batch = [
        upload("good.txt", b"Plain text about quarry uploads."),
        upload("corrupt.pdf", b"%PDF-1.4\nthis is not really a pdf"),
        upload("locked.pdf", encrypt_pdf(make_pdf(["Top secret"]), user_password="secret")),
        upload("empty.txt", b""),
        upload("big.txt", b"x" * 50_001),
        upload("slides.pptx", b"PK\x03\x04 not supported"),
        upload("good.pdf", make_pdf(["Page one about quarries.", "Page two about search."])),
        upload("good.docx", make_docx(title="Word title")),
    ]
    documents = {d.external_id: d for d in doc_services.document_upload_create(tenant=world.acme, actor="editor", files=batch)}
    # Over the bound: refused at once, never stored, never queued.
    big = documents["big.txt"]
    assert big.status == "failed" and big.error == "big.txt is 50,001 bytes, over the upload limit of 50,000 bytes; it was not stored"
    assert not big.source_file
    for document in documents.values():
        process(document, provider)
    outcome = {d.external_id: (d.status, d.error) for d in Document.objects.filter(tenant=world.acme)}
    assert outcome == {
        "good.txt": ("ready", ""),
        "good.pdf": ("ready", ""),
        "good.docx": ("ready", ""),
        "corrupt.pdf": ("failed", outcome["corrupt.pdf"][1]),
        "locked.pdf": ("failed", "locked.pdf is encrypted with a password; upload an unprotected copy"),
        "empty.txt": ("failed", "empty.txt is empty"),
        "big.txt": ("failed", big.error),
        "slides.pptx": ("failed", "slides.pptx is corrupt or not a .pptx file: File is not a zip file"),
    }
    assert outcome["corrupt.pdf"][1].startswith("corrupt.pdf is corrupt or not a PDF")
    assert Document.objects.get(tenant=world.acme, external_id="good.docx").title == "Word title"
    assert Document.objects.get(tenant=world.acme, external_id="good.pdf").chunk_count == 1
    assert not Chunk.objects.filter(document__status="failed").exists()


@pytest.mark.django_db(transaction=True)
def test_an_uploaded_deck_becomes_a_passage_per_slide(world: World, provider: FakeOpenAI) -> None:
    """The README's promise for .pptx: four short slides are four chunks, not one chunk of them all."""
    [document] = doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("induction.pptx", make_deck(FOUR_SLIDES))])
    assert process(document, provider) is Outcome.READY
    chunks = list(Chunk.objects.filter(document=document).order_by("ordinal").values_list("chunk_id", "text", "start_char", "end_char"))
    assert [(chunk_id, text) for chunk_id, text, _, _ in chunks] == [
        (f"induction.pptx:{n}", f"Slide {n + 1}: {title}\n{body}") for n, (title, body) in enumerate(FOUR_SLIDES)
    ]
    text = reload(document).text
    assert all(text[start:end] == chunk for _, chunk, start, end in chunks)  # offsets into the document's text
    assert keyword_hits(world, "blasting siren") == ["induction.pptx:1"]


@pytest.mark.django_db(transaction=True)
def test_a_failed_new_version_keeps_the_previous_chunks_searchable(world: World, provider: FakeOpenAI) -> None:
    [document] = doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("report.pdf", make_pdf(["Granite quarry output rose."]))])
    assert process(document, provider) is Outcome.READY
    doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("report.pdf", make_pdf(["fine", "fine too", "x"], raw_page={3: b"BT /F1 12 Tf [ (x) Tj ET"}))])
    assert process(document, provider) is Outcome.FAILED
    document = reload(document)
    assert document.status == "failed" and document.error.startswith("page 3 of report.pdf could not be read: ")
    assert (document.version, document.chunk_count) == (1, 1) and "Granite" in document.text
    assert keyword_hits(world, "granite") == ["report.pdf:0"]
    # Retrying the same broken file fails the same way; a good upload lands.
    assert doc_services.document_retry(documents=[document], actor="editor") == 1
    assert process(document, provider) is Outcome.FAILED
    doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("report.pdf", make_pdf(["Marble quarry output fell."]))])
    assert process(document, provider) is Outcome.READY
    assert keyword_hits(world, "granite") == [] and keyword_hits(world, "marble") == ["report.pdf:0"]
    assert reload(document).version == 2


@pytest.mark.django_db(transaction=True)
def test_progress_moves_while_batches_are_embedded(world: World, provider: FakeOpenAI) -> None:
    document = paste(world, "long", LONG_TEXT)
    seen: list[float] = []

    def slow(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        time.sleep(0.25)
        seen.append(Document.objects.get(pk=document.pk).progress)
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(slow)
    assert process(document, provider, batch_size=2) is Outcome.READY
    assert len(seen) >= 8
    assert any(0.1 <= p < 0.95 for p in seen), seen
    assert seen == sorted(seen)
    assert reload(document).progress == 1.0


@pytest.mark.django_db(transaction=True)
def test_provider_errors_are_retried_with_backoff_then_fail_with_the_provider_message(world: World, provider: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_EMBEDDING_RETRIES = 2
    previous = ready_document(world, provider)

    def down(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        return Reply(500, {"error": {"message": "upstream exploded", "type": "server_error"}})

    provider.routes["/v1/embeddings"] = down
    document = paste(world, "handbook", "A new version that cannot be embedded.")
    before = len(provider.received("/v1/embeddings"))
    assert process(document, provider) is Outcome.FAILED
    document = reload(document)
    assert document.error.startswith("handbook could not be indexed because the embedding model failed: embedding model openai/test-embed failed:")
    assert "upstream exploded" in document.error and document.error.endswith("(tried 3 times)")
    assert "sk-test" not in document.error
    assert len(provider.received("/v1/embeddings")) - before >= 3
    assert document.version == previous.version and keyword_hits(world, "searchable") == ["handbook:0"]


@pytest.mark.django_db(transaction=True)
def test_a_transient_provider_error_is_retried_and_the_document_lands(world: World, provider: FakeOpenAI) -> None:
    failures = iter([Reply(429, {"error": {"message": "slow down", "type": "rate_limit"}})])

    def flaky(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        return next(failures, None) or embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = flaky
    document = paste(world, "flaky", "Embedded on the second try.")
    assert process(document, provider) is Outcome.READY
    assert reload(document).status == "ready"


# --- Cancel ------------------------------------------------------------------------------------


def test_cancelling_queued_work_fails_it_at_once_with_the_reason(world: World) -> None:
    document = paste(world, "draft", "Never mind.")
    result = doc_services.document_cancel(documents=[document], actor="alice")
    assert result == doc_services.CancelResult(cancelled=1, stopping=0, not_running=0)
    document = reload(document)
    assert (document.status, document.cancelled) == ("failed", True)  # the list says Cancelled, not Failed
    assert document.error == "draft was cancelled by alice before it finished. Nothing was indexed."
    # The REST API says so too, with where the work was (the admin shows Cancelled).
    body = world.client(world.teammate).get("/v1/documents/draft").json()
    assert (body["status"], body["cancelled"], body["error"]) == ("cancelled", {"phase": "queued"}, document.error)
    # Filtering by status: cancelled is its own, failed no longer lists it.
    client = world.client(world.teammate)
    assert [d["id"] for d in client.get("/v1/documents", {"status": "cancelled"}).json()["documents"]] == ["draft"]
    assert client.get("/v1/documents", {"status": "failed"}).json()["documents"] == []
    assert processing.document_process(document_pk=document.pk) is Outcome.SKIPPED
    assert doc_services.document_cancel(documents=[document], actor="alice").not_running == 1


@pytest.mark.django_db(transaction=True)
def test_cancelling_running_work_stops_it_without_writing(world: World, provider: FakeOpenAI) -> None:
    ready_document(world, provider)
    document = paste(world, "handbook", LONG_TEXT)
    results: list[doc_services.CancelResult] = []

    def cancel_mid_way(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        if not results:
            results.append(doc_services.document_cancel(documents=[document], actor="alice"))
        time.sleep(0.2)
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(cancel_mid_way)
    assert process(document, provider, batch_size=2) is Outcome.CANCELLED
    assert results == [doc_services.CancelResult(cancelled=0, stopping=1, not_running=0)]
    document = reload(document)
    assert document.status == "failed" and document.error == "handbook was cancelled by alice before it finished. The previous version stays searchable."
    assert (document.version, document.lease_id, document.cancel_requested, document.cancelled) == (1, "", False, True)
    listed = world.client(world.teammate).get("/v1/documents").json()["documents"]
    assert [(d["id"], d["status"], d["cancelled"]) for d in listed] == [("handbook", "cancelled", {"phase": "embedding"})]
    # It stopped between batches, long before embedding everything, and wrote nothing.
    assert len(provider.received("/v1/embeddings")) < 10
    assert keyword_hits(world, "searchable") == ["handbook:0"]
    # Retry picks the cancelled request up again.
    provider.routes["/v1/embeddings"] = embeddings_route
    before, kept = embedded_texts(provider), EmbeddingCache.objects.filter(tenant=world.acme).count()
    assert kept > 0
    assert doc_services.document_retry(documents=[document], actor="alice") == 1
    assert not reload(document).cancelled
    assert world.client(world.teammate).get("/v1/documents/handbook").json()["cancelled"] is None
    assert process(document, provider) is Outcome.READY
    assert reload(document).chunk_count > 1
    # The cancelled run's vectors were kept: the retry embedded only the rest.
    assert embedded_texts(provider) - before == reload(document).chunk_count - kept


# --- Leases and reclaim ---------------------------------------------------------------------------


def expire(document: Document, *, status: str = DocumentStatus.PROCESSING, attempts: int = 1) -> None:
    Document.objects.filter(pk=document.pk).update(
        status=status, lease_id="dead-worker" if status == DocumentStatus.PROCESSING else "",
        lease_expires_at=timezone.now() - timedelta(seconds=1), attempts=attempts,
    )


def test_reclaim_requeues_an_expired_lease_and_fails_it_when_out_of_attempts(world: World, settings, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_DOCUMENT_MAX_ATTEMPTS = 2
    document = paste(world, "stuck", "A worker died on this one.")
    expire(document, attempts=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert reclaim.documents_reclaim() == reclaim.ReclaimResult(requeued=1, failed=0, resent=0)
    document = reload(document)
    assert (document.status, document.lease_id) == ("queued", "")
    assert document.error == "Attempt 1 of 2 on stuck was interrupted (the worker stopped); it is queued again and resumes where it stopped."
    assert document.lease_expires_at > timezone.now()
    assert [t.args()[0] for t in OrmQ.objects.all() if t.func() == state.PROCESS_TASK].count(document.pk) >= 1

    expire(document, attempts=2)
    assert reclaim.documents_reclaim() == reclaim.ReclaimResult(requeued=0, failed=1, resent=0)
    document = reload(document)
    assert document.status == "failed" and document.lease_expires_at is None
    assert document.error == (
        "stuck could not be processed: the worker stopped before finishing 2 times (killed, or out of memory). Nothing was indexed."
    )
    assert reclaim.documents_reclaim() == reclaim.ReclaimResult(0, 0, 0)


def test_reclaim_resends_queued_work_whose_queue_entry_was_lost(world: World, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    document = paste(world, "lost", "The broker lost my message.")
    expire(document, status=DocumentStatus.QUEUED, attempts=0)
    OrmQ.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        assert reclaim.documents_reclaim() == reclaim.ReclaimResult(requeued=0, failed=0, resent=1)
    assert [t.args()[0] for t in OrmQ.objects.all()] == [document.pk]
    assert reload(document).status == "queued"


def test_a_live_lease_is_not_claimed_twice(world: World) -> None:
    document = paste(world, "busy", "Someone is on it.")
    Document.objects.filter(pk=document.pk).update(status="processing", lease_id="other", lease_expires_at=timezone.now() + timedelta(minutes=1))
    assert processing.document_process(document_pk=document.pk) is Outcome.SKIPPED
    assert reload(document).lease_id == "other"
    assert reclaim.documents_reclaim() == reclaim.ReclaimResult(0, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_lost_its_lease_writes_nothing(world: World, provider: FakeOpenAI) -> None:
    ready_document(world, provider)
    document = paste(world, "handbook", "A version from a worker that will be presumed dead.")

    def steal(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        # The reclaim task decided this worker was dead and another one claimed the document.
        Document.objects.filter(pk=document.pk).update(lease_id="someone-else")
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(steal)
    assert process(document, provider) is Outcome.LOST
    document = reload(document)
    assert (document.status, document.lease_id, document.version) == ("processing", "someone-else", 1)
    assert keyword_hits(world, "presumed") == [] and keyword_hits(world, "searchable") == ["handbook:0"]


@pytest.mark.django_db(transaction=True)
def test_deleting_a_document_while_it_is_processed_does_not_bring_it_back(world: World, provider: FakeOpenAI) -> None:
    document = paste(world, "doomed", "Deleted while the worker embeds it.")

    def delete_now(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        doc_services.document_delete_many(documents=[Document.objects.get(pk=document.pk)], actor="alice")
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(delete_now)
    assert process(document, provider) is Outcome.LOST
    assert not Document.objects.filter(pk=document.pk).exists() and not Chunk.objects.exists()
    assert AuditEvent.objects.filter(action="delete", document_ids=["doomed"], actor="alice").exists()


@pytest.mark.django_db(transaction=True)
def test_a_lease_reclaimed_while_the_worker_embeds_leaves_no_chunks_and_the_next_run_lands_without_embedding(
    world: World, provider: FakeOpenAI,
) -> None:
    ready_document(world, provider)
    document = paste(world, "handbook", "A version embedded by a worker the reclaim task presumed dead.")
    reclaimed: list[reclaim.ReclaimResult] = []

    def reclaim_now(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        # Another connection (this server thread's) expires the lease and runs the real reclaim, in one
        # transaction so that the worker's heartbeat cannot renew the lease in between.
        with transaction.atomic():
            Document.objects.filter(pk=document.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
            reclaimed.append(reclaim.documents_reclaim())
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(reclaim_now)
    assert process(document, provider) is Outcome.LOST
    assert reclaimed == [reclaim.ReclaimResult(requeued=1, failed=0, resent=0)]
    row = reload(document)
    # The vectors were embedded and kept, but nothing landed: no chunks of the new text, no status of it.
    assert (row.status, row.lease_id, row.version, row.finished_at) == ("queued", "", 1, None)
    assert keyword_hits(world, "presumed") == [] and keyword_hits(world, "searchable") == ["handbook:0"]
    assert EmbeddingCache.objects.filter(tenant=world.acme).count() == 1
    # The next run lands the request with the kept vector: it embeds nothing.
    provider.routes["/v1/embeddings"] = embeddings_route
    provider.requests.clear()
    assert process(document, provider) is Outcome.READY
    assert embedded_texts(provider) == 0
    row = reload(document)
    assert (row.status, row.lease_id, row.version) == ("ready", "", 2)
    assert keyword_hits(world, "presumed") == ["handbook:0"]


class LandingRefusal:
    """A database that refuses to record that a write landed (``finished_at`` set on a ready row: the
    worker's ``state.land``, the synchronous ingest's ``mark_ingested``), as a full disk or a broken
    constraint would, after the chunk swap's statements have run. A trigger: nothing of Quarry's is patched."""

    def __init__(self) -> None:
        self.installed = False

    def on(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION test_refuse_landing() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'landing refused by the test'; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER test_refuse_landing BEFORE UPDATE ON knowledge_document FOR EACH ROW "
                "WHEN (NEW.status = 'ready' AND NEW.finished_at IS DISTINCT FROM OLD.finished_at) "
                "EXECUTE FUNCTION test_refuse_landing()"
            )
        self.installed = True

    def off(self) -> None:
        if self.installed:
            with connection.cursor() as cursor:
                cursor.execute("DROP TRIGGER test_refuse_landing ON knowledge_document")
                cursor.execute("DROP FUNCTION test_refuse_landing()")
            self.installed = False


@pytest.fixture
def refusal() -> Iterator[LandingRefusal]:
    refusal = LandingRefusal()
    try:
        yield refusal
    finally:
        refusal.off()  # the trigger is schema, not data: the test database's flush would keep it


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_landing_fails_writes_no_chunks_keeps_its_lease_and_is_reclaimed(
    world: World, provider: FakeOpenAI, refusal: LandingRefusal,
) -> None:
    """The chunk swap and the lifecycle's transition are one transaction: when one fails, neither happened."""
    ready_document(world, provider)
    document = paste(world, "handbook", "A new version whose landing the database refuses at first.")
    refusal.on()
    with pytest.raises(DatabaseError, match="landing refused"):
        process(document, provider)  # a database error propagates: the lease lapses and the reclaim retries
    row = reload(document)
    assert (row.status, row.version, row.chunk_count, row.text) == ("processing", 1, 1, "Quarry keeps the old chunks searchable.")
    assert row.lease_id != "" and row.finished_at is None
    assert keyword_hits(world, "refuses") == [] and keyword_hits(world, "searchable") == ["handbook:0"]
    assert AuditEvent.objects.filter(action="ingest").count() == 1  # the first version's only
    refusal.off()
    expire(document, attempts=1)
    assert reclaim.documents_reclaim() == reclaim.ReclaimResult(requeued=1, failed=0, resent=0)
    provider.requests.clear()
    assert process(document, provider) is Outcome.READY
    assert embedded_texts(provider) == 0  # the failed run's vector was kept for this one
    row = reload(document)
    assert (row.status, row.version, row.lease_id) == ("ready", 2, "") and keyword_hits(world, "refuses") == ["handbook:0"]


@pytest.mark.django_db(transaction=True)
def test_a_synchronous_ingest_whose_landing_fails_supersedes_nothing_and_writes_nothing(
    world: World, provider: FakeOpenAI, refusal: LandingRefusal,
) -> None:
    ready_document(world, provider)
    [queued] = doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("faq.txt", b"A queued upload.")])
    refusal.on()
    with pytest.raises(DatabaseError, match="landing refused"):
        doc_services.document_ingest(
            tenant=world.acme, actor="api", embedder=embedder(provider),
            documents=[rag.RAGDocument("handbook", "Text from the API about basalt."), rag.RAGDocument("faq.txt", "An answer about basalt.")],
        )
    handbook, faq = Document.objects.get(tenant=world.acme, external_id="handbook"), reload(queued)
    assert (handbook.status, handbook.version, handbook.requested_by) == ("ready", 1, "editor")
    # Not superseded: the queued upload keeps its file, its generation and its place in the queue.
    assert (faq.status, faq.generation, faq.source_file.name) == ("queued", queued.generation, queued.source_file.name)
    assert keyword_hits(world, "basalt") == [] and keyword_hits(world, "searchable") == ["handbook:0"]
    assert not AuditEvent.objects.filter(actor="api").exists()


def switch_mid_embedding(world: World, provider: FakeOpenAI, settings) -> list[int]:  # type: ignore[no-untyped-def]
    """The provider's model is the configured one and the tenant's (its first document's vectors); while the
    provider embeds, another connection moves the tenant to a second model, as reembed's switch leaves it
    (the chunks it staged aside). Returns the rows each switch changed."""
    settings.QUARRY_EMBEDDING_MODEL = "openai/test-embed"
    settings.QUARRY_EMBEDDER = {"CLASS": "knowledge.rag.embedding.LiteLLMEmbedder", "OPTIONS": {
        "model": "openai/test-embed", "dimension": 8, "api_base": provider.base_url, "api_key": "sk-test"}}
    settings.LOCAL_EMBEDDERS = {**settings.LOCAL_EMBEDDERS, "words": ("tests.embedders.BagOfWordsEmbedder", 64)}
    ready_document(world, provider)
    assert CorpusStat.objects.get(tenant=world.acme).embedding_model == "openai/test-embed"
    switched: list[int] = []

    def switch(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        switched.append(CorpusStat.objects.filter(tenant=world.acme).update(embedding_model="test/bag-of-words"))
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(switch)
    return switched


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("door", ["worker", "document_ingest"])
def test_a_model_switch_while_embedding_makes_the_write_embed_again_with_the_new_model(
    world: World, provider: FakeOpenAI, settings, door: str,  # type: ignore[no-untyped-def]
) -> None:
    """The write refuses vectors of the tenant's old model: the caller embeds again with the new one and lands
    those, never a mix."""
    switched = switch_mid_embedding(world, provider, settings)
    text = "Embedded while the tenant moves to another model."
    if door == "worker":
        assert processing.document_process(document_pk=paste(world, "switched", text).pk) is Outcome.READY
    else:
        assert doc_services.document_ingest(tenant=world.acme, actor="api", documents=[rag.RAGDocument("switched", text)]) == 1
    assert switched == [1]  # the provider was asked once: the second embedding was the new model's
    row = Document.objects.get(tenant=world.acme, external_id="switched")
    assert (row.status, row.embedding_model, row.text) == ("ready", "test/bag-of-words", text)
    assert set(Chunk.objects.filter(document=row).values_list("embedding_model", flat=True)) == {"test/bag-of-words"}


# --- Concurrent requests ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_request_during_processing_is_processed_after_the_running_one(world: World, provider: FakeOpenAI) -> None:
    document = paste(world, "moving", "First version about granite.")
    requested: list[Document] = []

    def edit_mid_way(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        if not requested:
            requested.append(paste(world, "moving", "Second version about marble."))
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(edit_mid_way)
    assert process(document, provider) is Outcome.REQUEUED
    assert requested[0].status == "processing"  # the running worker kept it
    document = reload(document)
    assert (document.status, document.version, document.lease_id) == ("queued", 1, "")
    assert process(document, provider) is Outcome.READY
    document = reload(document)
    assert (document.status, document.version, document.text) == ("ready", 2, "Second version about marble.")
    assert keyword_hits(world, "granite") == [] and keyword_hits(world, "marble") == ["moving:0"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_reindex_requests_end_in_one_consistent_version(world: World, provider: FakeOpenAI) -> None:
    ready_document(world, provider, "shared", "Version zero.")
    versions = [f"Version {n}: " + ("quarry " * 50 + "\n\n") * (3 + n) for n in range(1, 5)]
    start = threading.Barrier(len(versions))
    errors: list[BaseException] = []

    def editor(text: str) -> None:
        try:
            start.wait()
            document = paste(world, "shared", text)
            for _ in range(3):  # workers racing on the same document
                process(document, provider, batch_size=1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=editor, args=(text,)) for text in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    document = Document.objects.get(tenant=world.acme, external_id="shared")
    # Whatever is still queued runs once more; then the latest request has landed, whole.
    while document.status != "ready":
        process(document, provider)
        document = reload(document)
    assert document.text == document.source_text and document.text in versions
    chunks = list(Chunk.objects.filter(document=document).order_by("ordinal"))
    assert len(chunks) == document.chunk_count and [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(document.text[c.start_char : c.end_char] == c.text for c in chunks)
    assert (document.lease_id, document.lease_expires_at) == ("", None)


@pytest.mark.django_db(transaction=True)
def test_a_cli_ingest_while_a_worker_holds_the_document_wins(world: World, provider: FakeOpenAI, tmp_path: Path) -> None:
    """The CLI writes through the same superseding door as the API: the worker that held the
    older version loses its lease and never lands it over the newer one."""
    document = paste(world, "notes.md", "The worker's older version mentions granite.")
    newer = tmp_path / "notes.md"
    newer.write_text("# Notes\n\nThe newer version from the shell mentions basalt.\n", encoding="utf-8")
    ingested: list[str] = []

    def ingest_mid_way(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        if not ingested:  # the worker holds its lease and is embedding now
            assert reload(document).status == "processing"
            out = io.StringIO()
            call_command("ingest", str(newer), "--tenant", "acme", stdout=out, stderr=io.StringIO())
            ingested.append(out.getvalue())
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(ingest_mid_way)
    assert process(document, provider) is Outcome.LOST
    assert "1 documents" in ingested[0]
    document = reload(document)
    assert (document.status, document.version, document.lease_id) == ("ready", 1, "")
    assert "basalt" in document.text and document.source_text == ""
    assert keyword_hits(world, "granite") == [] and keyword_hits(world, "basalt") == ["notes.md:0"]
    assert process(document, provider) is Outcome.SKIPPED  # nothing left to do: the newest version stands


# --- Synchronous ingest (REST JSON) -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_synchronous_ingest_supersedes_queued_background_work(world: World, provider: FakeOpenAI) -> None:
    [queued] = doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("faq.txt", b"Old queued upload.")])
    stored = queued.source_file.name
    chunks = doc_services.document_ingest(
        tenant=world.acme, actor="api", embedder=embedder(provider),
        documents=[rag.RAGDocument("faq.txt", "Fresh text from the API.", title="FAQ")],
    )
    assert chunks == 1
    document = reload(queued)
    assert (document.status, document.text, document.source_file.name, document.lease_expires_at) == ("ready", "Fresh text from the API.", "", None)
    assert document.generation == queued.generation + 1
    assert process(document, provider) is Outcome.SKIPPED
    from django.core.files.storage import default_storage

    assert not default_storage.exists(stored)


# --- Work that survives its own length: vectors stored as computed, resumed after a kill ----------


def embedded_texts(server: FakeOpenAI) -> int:
    return sum(len(r.json["input"]) for r in server.received("/v1/embeddings"))


@pytest.mark.django_db(transaction=True)
def test_a_run_that_stops_half_way_leaves_its_vectors_and_the_next_run_resumes_there(world: World, provider: FakeOpenAI) -> None:
    document = paste(world, "long", LONG_TEXT)
    batches = 0

    def dies_after_three_batches(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        nonlocal batches
        batches += 1
        time.sleep(0.6)  # long enough for the heartbeat to record progress between batches
        if batches == 3:
            # As if the worker were killed: the reclaim task gave its lease to another run.
            Document.objects.filter(pk=document.pk).update(lease_id="dead-worker", lease_expires_at=timezone.now() - timedelta(seconds=1))
            time.sleep(1.5)  # the heartbeat notices; the next cancellation point stops the run
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(dies_after_three_batches)
    assert process(document, provider, batch_size=2) is Outcome.LOST
    first_run = embedded_texts(provider)
    cached = EmbeddingCache.objects.filter(tenant=world.acme, model_id="openai/test-embed").count()
    assert cached == first_run >= 6  # every computed batch was stored, the last one included
    stopped_at = reload(document).progress
    assert 0.1 < stopped_at < 0.95

    seen: list[float] = []

    def watched(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        seen.append(Document.objects.get(pk=document.pk).progress)
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(watched)
    provider.requests.clear()
    assert process(document, provider, batch_size=2) is Outcome.READY
    document = reload(document)
    assert (document.status, document.attempts, document.phase) == ("ready", 2, "")
    # Only what the first run had not embedded is embedded again.
    assert embedded_texts(provider) == document.chunk_count - cached
    assert min(seen) >= stopped_at and seen == sorted(seen)  # progress never went back
    # The chunks hold the vectors now: the cache entries are gone, and every chunk is embedded.
    assert not EmbeddingCache.objects.filter(tenant=world.acme).exists()
    assert None not in chunk_vectors(Chunk.objects.filter(document=document))


@pytest.mark.django_db(transaction=True)
def test_cached_vectors_are_per_tenant_and_per_model(world: World, provider: FakeOpenAI) -> None:
    EmbeddingCache.objects.create(tenant=world.globex, model_id="openai/test-embed", content_hash="x" * 64, embedding=[1.0] * 8)
    document = paste(world, "short", "One chunk about granite.")
    assert process(document, provider) is Outcome.READY
    assert embedded_texts(provider) == 1
    assert EmbeddingCache.objects.filter(tenant=world.globex).count() == 1  # another tenant's entries are not touched


@pytest.mark.django_db(transaction=True)
def test_the_worker_reports_phase_counts_and_an_estimate(world: World, provider: FakeOpenAI) -> None:
    document = paste(world, "long", LONG_TEXT)
    seen: list[tuple[str, int, int, bool]] = []

    def slow(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
        time.sleep(0.4)
        row = Document.objects.filter(pk=document.pk).values_list("phase", "phase_done", "phase_total", "eta_at").get()
        seen.append((row[0], row[1], row[2], row[3] is not None))
        return embeddings_route(server, request)

    provider.routes["/v1/embeddings"] = db_route(slow)
    assert process(document, provider, batch_size=2) is Outcome.READY
    total = reload(document).chunk_count
    # (the first batch may come before the first heartbeat)
    assert {phase for phase, *_ in seen[3:]} == {"embedding"}
    assert all(t == total for _, _, t, _ in seen[3:])
    assert [d for _, d, _, _ in seen] == sorted(d for _, d, _, _ in seen) and seen[-1][1] > 0
    assert any(has_eta for *_, has_eta in seen)
    assert (reload(document).phase, reload(document).eta_at) == ("", None)


def test_an_operator_may_still_bound_the_document_task(world: World, settings, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_DOCUMENT_TASK_TIMEOUT = 7200
    with django_capture_on_commit_callbacks(execute=True):
        paste(world, "bounded", "An operator's backstop.")
    assert [task.task["timeout"] for task in OrmQ.objects.all()] == [7200]


# --- Limits, stated where editors meet them -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_file_whose_text_is_over_the_bound_fails_before_any_embedding_with_the_stated_limits(world: World, provider: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_UPLOAD_MAX_BYTES = 12 * 1024 * 1024
    text = ("Word " * 2_000_001).encode()  # 10,000,005 characters
    [document] = doc_services.document_upload_create(tenant=world.acme, actor="editor", files=[upload("huge.txt", text, "text/plain")])
    assert process(document, provider) is Outcome.FAILED
    document = reload(document)
    assert document.error == (
        "huge.txt has 10,000,005 characters of text, over the limit of 10,000,000 per document. "
        "A document may hold up to 10,000,000 characters of text and be cut into up to 10,000 chunks; "
        "an uploaded file may be up to 12 MB."
    )
    assert provider.received("/v1/embeddings") == [] and not EmbeddingCache.objects.exists()
