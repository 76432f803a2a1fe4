"""The editors' admin: uploads through the real forms (multipart, CSRF), live progress, actions,
chunks, the search playground, and tenant scoping of staff users."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ

from knowledge import rag
from knowledge.models import AuditEvent, CorpusStat, Document
from knowledge.services.documents import document_ingest, document_upload_create
from tests.conftest import World
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_user

CHANGELIST = "/admin/knowledge/document/"
ADD = "/admin/knowledge/document/add/"


@pytest.fixture(autouse=True)
def fast_settings(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def staff(world: World) -> World:
    """Every member of the trio may log in to the admin; their tenant roles decide the rest."""
    User.objects.filter(pk__in=[world.owner.pk, world.editor.pk, world.teammate.pk, world.outsider.pk]).update(is_staff=True)
    for user in (world.owner, world.editor, world.teammate, world.outsider):
        user.refresh_from_db()
    return world


def login(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def csrf_token(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.cookies["csrftoken"].value if "csrftoken" in response.cookies else client.cookies["csrftoken"].value


def indexed(world: World, external_id: str, text: str, *, tenant: str = "acme", **fields: object) -> Document:
    tenant_obj = world.acme if tenant == "acme" else world.globex
    document_ingest(tenant=tenant_obj, actor="seed", embedder=BagOfWordsEmbedder(),
                     documents=[rag.RAGDocument(external_id, text, **fields)])  # type: ignore[arg-type]
    return Document.objects.get(tenant=tenant_obj, external_id=external_id)


def messages_of(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(m) for m in response.context["messages"]] if response.context else []


# --- Uploads ----------------------------------------------------------------------------------------


def test_editor_uploads_several_files_through_the_form_with_csrf(staff: World, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    client = login(staff.editor, csrf=True)
    token = csrf_token(client, ADD)
    files = [SimpleUploadedFile("guide.md", b"# Guide\n\nUpload files here."), SimpleUploadedFile("faq.txt", b"Questions.")]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(ADD, {"csrfmiddlewaretoken": token, "tenant": staff.acme.pk, "files": files,
                                     "metadata": '{"team": "support"}'}, follow=True)
    assert response.redirect_chain[-1][0] == CHANGELIST
    assert any(m.startswith("Queued 2 documents for processing: guide.md, faq.txt.") for m in messages_of(response))
    documents = Document.objects.filter(tenant=staff.acme).order_by("external_id")
    assert [(d.external_id, d.status, d.metadata, d.requested_by) for d in documents] == [
        ("faq.txt", "queued", {"team": "support"}, "editor"), ("guide.md", "queued", {"team": "support"}, "editor"),
    ]
    assert sorted(t.args()[0] for t in OrmQ.objects.all()) == sorted(d.pk for d in documents)
    # The list shows them queued, with the live progress widget.
    assert b'data-status="queued"' in response.content and b"knowledge/admin/documents.js" in response.content


# Committed: process_document's lease heartbeat renews from a connection of its own, which cannot see rows
# of an open test transaction; a first embedding slower than one beat (a cold model on a loaded machine)
# then read as a lost lease.
@pytest.mark.django_db(transaction=True)
def test_files_named_in_other_scripts_become_separate_documents_and_neither_replaces_the_other(staff: World) -> None:
    """Issue 30: '咖啡指南.md' became id 'md', and '日本茶.md' then became its version 2."""
    from knowledge.tasks import process_document

    client = login(staff.editor)
    for name, text in (("咖啡指南.md", "Espresso wants finely ground beans."), ("日本茶.md", "Sencha is steamed green tea.")):
        response = client.post(ADD, {"tenant": staff.acme.pk, "files": [SimpleUploadedFile(name, text.encode())]}, follow=True)
        assert response.redirect_chain[-1][0] == CHANGELIST
        assert any(m.startswith(f"Queued 1 document for processing: {name}.") for m in messages_of(response)), messages_of(response)
    for pk in Document.objects.filter(tenant=staff.acme).values_list("pk", flat=True):
        process_document(pk)
    documents = Document.objects.filter(tenant=staff.acme).order_by("source_name")
    assert [(d.source_name, d.version, d.status, d.text) for d in documents] == [
        ("咖啡指南.md", 1, "ready", "Espresso wants finely ground beans."), ("日本茶.md", 1, "ready", "Sencha is steamed green tea."),
    ]
    assert len({d.external_id for d in documents}) == 2 and all(d.external_id.endswith(".md") and d.external_id != "md" for d in documents)
    # The list names each by its file, with the id beside it.
    listing = client.get(CHANGELIST).content.decode()
    assert all(f"{d.source_name} ({d.external_id})" in listing for d in documents)


def test_upload_without_the_csrf_token_is_refused(staff: World) -> None:
    client = login(staff.editor, csrf=True)
    response = client.post(ADD, {"tenant": staff.acme.pk, "files": [SimpleUploadedFile("a.txt", b"a")]})
    assert response.status_code == 403
    assert not Document.objects.exists()


def test_editor_pastes_a_text_document(staff: World) -> None:
    client = login(staff.editor, csrf=True)
    token = csrf_token(client, ADD)
    response = client.post(ADD, {"csrfmiddlewaretoken": token, "tenant": staff.acme.pk, "text": "Pasted words.",
                                 "title": "Release notes", "uri": "https://example.com/notes"})
    assert response.status_code == 302
    document = Document.objects.get(tenant=staff.acme)
    assert (document.external_id, document.source_text, document.title, document.uri, document.status) == (
        "Release-notes", "Pasted words.", "Release notes", "https://example.com/notes", "queued")


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"text": "x", "metadata": '{"a": {"b": 1}}'}, "metadata", "metadata.a: nested values are not allowed"),
        ({"text": "x", "metadata": "[1, 2]"}, "metadata", "metadata: must be an object of scalar values"),
        ({"text": "x", "metadata": "{nope"}, "metadata", "Enter a valid JSON"),
        ({"text": "x"}, "external_id", "Give pasted text a document id or a title."),
        ({"text": "x", "external_id": "has space"}, "external_id", "not a valid document id"),
        ({}, None, "Choose at least one file, or paste some text."),
    ],
)
def test_upload_form_errors_are_shown_on_the_field(staff: World, data: dict[str, str], field: str | None, message: str) -> None:
    response = login(staff.editor).post(ADD, {"tenant": staff.acme.pk, **data})
    assert response.status_code == 200
    form = response.context["form"]
    errors = " ".join(form.errors.get(field or "__all__", []))
    assert message in errors, form.errors
    assert not Document.objects.exists()


def test_several_files_with_one_title_is_an_error(staff: World) -> None:
    files = [SimpleUploadedFile("a.txt", b"a"), SimpleUploadedFile("b.txt", b"b")]
    response = login(staff.editor).post(ADD, {"tenant": staff.acme.pk, "files": files, "title": "Both"})
    assert "Applies to a single document" in " ".join(response.context["form"].errors["title"])


def test_an_upload_with_a_file_over_the_limit_is_refused_and_nothing_is_stored(staff: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_UPLOAD_MAX_BYTES = 10
    files = [SimpleUploadedFile("small.txt", b"tiny"), SimpleUploadedFile("huge.txt", b"x" * 11)]
    response = login(staff.editor).post(ADD, {"tenant": staff.acme.pk, "files": files})
    assert response.status_code == 413
    assert "huge.txt is over the upload limit of 10 bytes (QUARRY_UPLOAD_MAX_BYTES); nothing was uploaded." in response.content.decode()
    assert "Content-Security-Policy" in response
    assert not Document.objects.exists()
    assert not list(Path(settings.MEDIA_ROOT).rglob("*.txt"))


# --- Editing -------------------------------------------------------------------------------------------


def change_url(document: Document) -> str:
    return reverse("admin:knowledge_document_change", args=[document.pk])


def test_editing_metadata_queues_a_new_version(staff: World) -> None:
    document = indexed(staff, "handbook", "The handbook text.", title="Handbook")
    client = login(staff.editor, csrf=True)
    token = csrf_token(client, change_url(document))
    response = client.post(change_url(document), {
        "csrfmiddlewaretoken": token, "title": "Handbook", "uri": "", "metadata": '{"team": "hr", "year": 2025}',
        "text": "The handbook text.",
    }, follow=True)
    assert response.status_code == 200
    document.refresh_from_db()
    assert (document.metadata, document.status, document.generation) == ({"team": "hr", "year": 2025}, "queued", 1)
    assert document.source_text == ""  # the text did not change: the stored text stays the source
    assert "A new version of Handbook is queued for processing." in messages_of(response)


def test_invalid_metadata_in_the_change_form_changes_nothing(staff: World) -> None:
    document = indexed(staff, "handbook", "The handbook text.")
    response = login(staff.editor).post(change_url(document), {"title": "", "uri": "", "metadata": '{"a": [1]}', "text": "x"})
    assert response.status_code == 200
    assert "metadata.a: nested values are not allowed" in " ".join(response.context["adminform"].form.errors["metadata"])
    document.refresh_from_db()
    assert (document.metadata, document.status, document.generation) == ({}, "ready", 0)


def test_editing_the_text_makes_it_the_pasted_source(staff: World) -> None:
    document = indexed(staff, "notes", "Old words.")
    login(staff.editor).post(change_url(document), {"title": "", "uri": "", "metadata": "{}", "text": "New words."})
    document.refresh_from_db()
    assert (document.source_text, document.text, document.status) == ("New words.", "Old words.", "queued")


def test_an_uploaded_files_change_page_opens_and_edits_title_and_file(staff: World, settings) -> None:  # type: ignore[no-untyped-def]
    [document] = document_upload_create(tenant=staff.acme, files=[SimpleUploadedFile("guide.md", b"# Guide\n\nOld.")], actor="editor")
    before = document.generation
    client = login(staff.editor, csrf=True)
    page = client.get(change_url(document))
    assert page.status_code == 200  # was a KeyError: the fieldsets named the text field the form drops for files
    body = page.content.decode()
    assert 'name="replace_file"' in body and 'name="text"' not in body and "guide.md" in body
    token = csrf_token(client, change_url(document))
    response = client.post(change_url(document), {
        "csrfmiddlewaretoken": token, "title": "The guide", "uri": "", "metadata": "{}",
        "replace_file": SimpleUploadedFile("guide.md", b"# Guide\n\nNew words."),
    }, follow=True)
    assert response.status_code == 200
    document.refresh_from_db()
    assert (document.title, document.status, document.generation) == ("The guide", "queued", before + 1)
    assert document.source_file.read() == b"# Guide\n\nNew words."
    assert "The guide (guide.md)" in client.get(CHANGELIST).content.decode()  # listed by its title, then its id


# --- The list, progress and actions ---------------------------------------------------------------------


def test_changelist_is_cheap_and_shows_progress(staff: World, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    for n in range(12):
        indexed(staff, f"doc-{n}", f"Document number {n}.")
    Document.objects.filter(external_id="doc-3").update(status="processing", progress=0.42, lease_id="w", lease_expires_at="2999-01-01T00:00Z")
    client = login(staff.editor)
    with django_assert_max_num_queries(12):
        response = client.get(CHANGELIST)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="quarry-progress"') == 12
    assert "Processing 42%" in html and 'data-percent="42"' in html
    assert "Search playground" in html and "Upload documents" in html


def test_progress_endpoint_reports_only_documents_in_scope(staff: World) -> None:
    mine = indexed(staff, "mine", "Ours.")
    theirs = indexed(staff, "theirs", "Globex only.", tenant="globex")
    Document.objects.filter(pk=mine.pk).update(status="processing", progress=0.5, cancel_requested=True, title="Our notes")
    response = login(staff.editor).get(reverse("admin:knowledge_document_progress"), {"ids": f"{mine.pk},{theirs.pk}"})
    assert response.status_code == 200
    [row] = response.json()["documents"]
    assert (row["id"], row["status"], row["status_label"], row["progress"], row["cancel_requested"]) == (mine.pk, "processing", "Processing", 0.5, True)
    assert row["label"] == "Our notes (mine)"  # as the list names it: the poll keeps the name current too
    assert login(staff.editor).get(reverse("admin:knowledge_document_progress"), {"ids": "1,x"}).status_code == 400


def test_progress_endpoint_shows_phase_counts_estimate_version_and_model(staff: World) -> None:
    document = indexed(staff, "big", "A big one.")
    Document.objects.filter(pk=document.pk).update(
        status="processing", progress=0.5, phase="embedding", phase_done=1200, phase_total=3300,
        eta_at=timezone.now() + timedelta(seconds=150), lease_id="w", lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    [row] = login(staff.editor).get(reverse("admin:knowledge_document_progress"), {"ids": str(document.pk)}).json()["documents"]
    assert (row["version"], row["embedding_model"]) == (1, "test/bag-of-words")
    shown = row["display"]
    assert (shown["state"], shown["label"], shown["percent"]) == ("processing", "Embedding 1,200 / 3,300", 50)
    assert 140 <= shown["eta_seconds"] <= 150 and shown["detail"] in ("about 2 min left", "about 3 min left")
    Document.objects.filter(pk=document.pk).update(phase="indexing", eta_at=None)
    [row] = login(staff.editor).get(reverse("admin:knowledge_document_progress"), {"ids": str(document.pk)}).json()["documents"]
    assert (row["display"]["label"], row["display"]["detail"]) == ("Indexing…", "")


def test_cancelled_documents_are_cancelled_not_failed_and_another_model_than_the_tenants_asks_for_a_reindex(staff: World) -> None:
    cancelled = indexed(staff, "stopped", "Cancelled by an editor.")
    failed = indexed(staff, "broken", "A real failure.")
    stale = indexed(staff, "stale", "Embedded with an older model.")
    # "Re-index needed" compares with the tenant's model (its first vectors', here the test embedder's).
    current = CorpusStat.objects.get(tenant=staff.acme).embedding_model
    assert current == "test/bag-of-words"
    Document.objects.filter(pk=cancelled.pk).update(status="failed", cancelled=True, error="stopped was cancelled by editor.", embedding_model=current)
    Document.objects.filter(pk=failed.pk).update(status="failed", error="broken could not be indexed.", embedding_model=current)
    Document.objects.filter(pk=stale.pk).update(embedding_model="old/model")
    client = login(staff.editor)
    html = client.get(CHANGELIST).content.decode()
    assert html.count('data-state="cancelled"') == 1 and html.count('data-state="failed"') == 1
    rows = {r["id"]: r["display"] for r in client.get(
        reverse("admin:knowledge_document_progress"), {"ids": f"{cancelled.pk},{failed.pk},{stale.pk}"}).json()["documents"]}
    assert (rows[cancelled.pk]["state"], rows[cancelled.pk]["label"]) == ("cancelled", "Cancelled")
    assert (rows[failed.pk]["state"], rows[failed.pk]["label"]) == ("failed", "Failed")
    assert [pk for pk, shown in rows.items() if shown["reindex_needed"]] == [stale.pk]
    assert html.count("re-index needed") == 3 and html.count('class="quarry-reindex">') == 1  # shown once, hidden twice


def run_action(client: Client, action: str, documents: list[Document], **extra: str):  # type: ignore[no-untyped-def]
    return client.post(CHANGELIST, {"action": action, "_selected_action": [d.pk for d in documents], **extra}, follow=True)


def test_reindex_cancel_and_retry_actions_call_the_services(staff: World) -> None:
    ready = indexed(staff, "ready", "Indexed.")
    client = login(staff.editor)
    response = run_action(client, "reindex_selected", [ready])
    assert "Queued 1 document for re-indexing." in messages_of(response)
    ready.refresh_from_db()
    assert (ready.status, ready.generation) == ("queued", 1)

    response = run_action(client, "cancel_selected", [ready])
    assert "Cancelled 1." in messages_of(response)
    ready.refresh_from_db()
    assert ready.status == "failed" and ready.error == "ready was cancelled by editor before it finished. The previous version stays searchable."

    other = indexed(staff, "other", "Fine.")
    response = run_action(client, "retry_selected", [ready, other])
    assert "Queued 1 failed document again. 1 had not failed and were left alone." in messages_of(response)
    ready.refresh_from_db()
    other.refresh_from_db()
    assert (ready.status, other.status, other.generation) == ("queued", "ready", 0)


def test_delete_action_confirms_then_deletes_documents_and_chunks_audited(staff: World) -> None:
    document = indexed(staff, "old", "Obsolete. " * 400)
    client = login(staff.editor, csrf=True)
    token = csrf_token(client, CHANGELIST)
    confirm = client.post(CHANGELIST, {"csrfmiddlewaretoken": token, "action": "delete_documents", "_selected_action": [document.pk]})
    assert confirm.status_code == 200 and b"Delete 1 document and" in confirm.content
    assert Document.objects.filter(pk=document.pk).exists()
    done = client.post(CHANGELIST, {"csrfmiddlewaretoken": token, "action": "delete_documents", "_selected_action": [document.pk], "post": "yes"}, follow=True)
    assert "Deleted 1 document and their chunks." in messages_of(done)
    assert not Document.objects.filter(pk=document.pk).exists()
    assert AuditEvent.objects.filter(tenant=staff.acme, action="delete", actor="editor", document_ids=["old"]).exists()
    # Django's own delete_selected (which would list every chunk) is not offered.
    assert "delete_selected" not in client.get(CHANGELIST).context["action_form"].fields["action"].choices.__repr__()


def test_delete_from_the_change_page_lists_counts_not_chunks(staff: World) -> None:
    document = indexed(staff, "big", "Many chunks here. " * 500)
    client = login(staff.editor)
    url = reverse("admin:knowledge_document_delete", args=[document.pk])
    page = client.get(url)
    assert page.status_code == 200 and f"big ({document.chunk_count} chunks)" in page.content.decode()
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Document.objects.filter(pk=document.pk).exists()


# --- Chunks and search -------------------------------------------------------------------------------------


def test_chunk_view_lists_ordinals_offsets_full_texts_and_embedding(staff: World) -> None:
    document = indexed(staff, "long", "Quarry chunk view. " * 300, title="Long")
    response = login(staff.editor).get(reverse("admin:knowledge_document_chunks", args=[document.pk]))
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r["ordinal"] for r in rows] == list(range(document.chunk_count)) and document.chunk_count >= 3
    assert rows[0]["start_char"] == 0 and rows[0]["embedded"] is True and rows[0]["embedding_model"] == "test/bag-of-words"
    # The whole text of each chunk, and the range of the document it is.
    assert [document.text[r["start_char"]:r["end_char"]] for r in rows] == [r["text"] for r in rows]
    assert len(rows[0]["text"]) == rows[0]["length"] > 1000
    html = response.content.decode()
    assert "long:0" in html and f'0–{rows[0]["end_char"]}' in html and rows[1]["text"].strip()[-60:] in html


def test_chunk_view_shows_chunks_that_are_not_slices_without_offsets(staff: World) -> None:
    class Rephrasing:
        def split(self, document: rag.RAGDocument) -> list[str]:
            return [document.text.upper()]

    async_to_sync(rag.postgres(embedder=None, chunker=Rephrasing(), namespace="acme").ingest)([rag.RAGDocument("loud", "quiet words")])
    document = Document.objects.get(external_id="loud")
    response = login(staff.editor).get(reverse("admin:knowledge_document_chunks", args=[document.pk]))
    assert response.status_code == 200
    assert [(r["start_char"], r["end_char"], r["text"]) for r in response.context["rows"]] == [(None, None, "QUIET WORDS")]
    assert "not a slice" in response.content.decode() and "None" not in response.content.decode()


def test_search_playground_shows_ranked_hits_with_scores(staff: World) -> None:
    indexed(staff, "granite", "Granite is quarried in large blocks.", metadata={"rock": "igneous"})
    indexed(staff, "marble", "Marble is a metamorphic rock.", metadata={"rock": "metamorphic"})
    indexed(staff, "granite", "Globex granite secrets.", tenant="globex")
    client = login(staff.editor)
    url = reverse("admin:knowledge_document_search")
    response = client.get(url, {"tenant": staff.acme.pk, "query": "granite blocks rock", "mode": "keyword", "limit": 5, "filters": ""})
    hits = response.context["hits"]
    assert [h["hit"].chunk.chunk_id for h in hits] == ["granite:0", "marble:0"]
    assert hits[0]["hit"].score > hits[1]["hit"].score and hits[0]["document_pk"] is not None
    assert "Globex" not in response.content.decode()
    filtered = client.get(url, {"tenant": staff.acme.pk, "query": "rock", "mode": "keyword", "limit": 5, "filters": '{"rock": ["metamorphic"]}'})
    assert [h["hit"].chunk.chunk_id for h in filtered.context["hits"]] == ["marble:0"]
    bad = client.get(url, {"tenant": staff.acme.pk, "query": "rock", "mode": "keyword", "limit": 5, "filters": '{"rock": {"a": 1}}'})
    assert "filters.rock: nested values are not allowed" in " ".join(bad.context["form"].errors["filters"])
    foreign = client.get(url, {"tenant": staff.globex.pk, "query": "granite", "mode": "keyword", "limit": 5})
    assert "tenant" in foreign.context["form"].errors and foreign.context["hits"] == []


# --- Tenancy ---------------------------------------------------------------------------------------------------


def test_staff_editor_sees_and_changes_only_their_tenants_documents(staff: World) -> None:
    mine = indexed(staff, "mine", "Ours.")
    theirs = indexed(staff, "theirs", "Globex only.", tenant="globex")
    client = login(staff.editor)
    listed = client.get(CHANGELIST)
    assert [d.pk for d in listed.context["cl"].result_list] == [mine.pk]
    assert [label for _, label in listed.context["cl"].filter_specs[1].lookup_choices] == ["acme"]
    assert client.get(change_url(theirs)).status_code == 302  # "doesn't exist", back to the admin index
    assert client.get(reverse("admin:knowledge_document_chunks", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("admin:knowledge_document_delete", args=[theirs.pk]), {"post": "yes"}).status_code == 302
    run_action(client, "reindex_selected", [theirs])
    theirs.refresh_from_db()
    assert Document.objects.filter(pk=theirs.pk).exists() and (theirs.status, theirs.generation) == ("ready", 0)


def test_staff_editor_cannot_assign_a_document_to_another_tenant(staff: World) -> None:
    response = login(staff.editor).post(ADD, {"tenant": staff.globex.pk, "text": "Sneaky.", "title": "Sneaky"})
    assert response.status_code == 200 and "Select a valid choice" in " ".join(response.context["form"].errors["tenant"])
    assert not Document.objects.exists()
    form = login(staff.editor).get(ADD).context["form"]
    assert list(form.fields["tenant"].queryset) == [staff.acme]


def test_staff_reader_has_no_access_to_documents(staff: World) -> None:
    indexed(staff, "mine", "Ours.")
    client = login(staff.teammate)
    assert client.get(CHANGELIST).status_code == 403
    assert client.get(ADD).status_code == 403
    assert client.get(reverse("admin:knowledge_document_search")).status_code == 403
    assert client.get(reverse("admin:knowledge_document_progress"), {"ids": "1"}).status_code == 403
    index = client.get("/admin/")
    assert b"/admin/knowledge/document/" not in index.content


def test_non_staff_members_cannot_use_the_admin(world: World) -> None:
    client = login(world.editor)  # an editor, but not staff
    assert client.get(CHANGELIST).status_code == 302  # to the admin login page


def test_superuser_sees_every_tenant(staff: World) -> None:
    indexed(staff, "mine", "Ours.")
    indexed(staff, "theirs", "Globex only.", tenant="globex")
    root = make_user("root", superuser=True)
    listed = login(root).get(CHANGELIST)
    assert sorted(d.external_id for d in listed.context["cl"].result_list) == ["mine", "theirs"]
    assert re.search(r"Upload documents", listed.content.decode())


def test_the_search_playground_shows_no_null_when_the_url_has_no_filters(staff: World) -> None:
    page = login(staff.editor).get(reverse("admin:knowledge_document_search"), {"query": "uploads", "mode": "keyword"})
    box = re.search(r'<textarea name="filters"[^>]*>(.*?)</textarea>', page.content.decode(), re.S)
    assert page.status_code == 200 and box is not None and box.group(1).strip() == ""


def test_the_admin_index_names_api_tokens_as_such(staff: World) -> None:
    index = login(make_user("root", superuser=True)).get("/admin/").content.decode()
    assert ">API tokens<" in index and "Api tokens" not in index


def test_the_tenant_form_cannot_turn_a_tenant_into_a_private_store(staff: World) -> None:
    """A private store belongs to one conversation; choosing one in the form would hide the tenant from everyone."""
    client = login(make_user("root", superuser=True))
    url = f"/admin/accounts/tenant/{staff.acme.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and 'name="chunk_quota"' in page.content.decode()
    assert 'name="private_to"' not in page.content.decode()
    form = page.context["adminform"].form
    data = {**{name: form[name].value() or "" for name in form.fields}, "private_to": staff.globex.pk,
            **{f"memberships-{key}": value for key, value in (("TOTAL_FORMS", "0"), ("INITIAL_FORMS", "0"))}}
    assert client.post(url, data).status_code == 302
    staff.acme.refresh_from_db()
    assert staff.acme.private_to is None


def test_the_audit_list_gives_each_event_its_minute(staff: World) -> None:
    indexed(staff, "mine", "Ours.")
    event = AuditEvent.objects.get(tenant=staff.acme)
    page = login(staff.owner).get("/admin/knowledge/auditevent/").content.decode()
    assert f'>{timezone.localtime(event.at).strftime("%Y-%m-%d %H:%M")}</time>' in page
    # It names documents an editor may not read (issue 34): tenant admins only.
    assert login(staff.editor).get("/admin/knowledge/auditevent/").status_code == 403


# --- the entity browser --------------------------------------------------------------------------


def test_entity_browser_lists_a_tenants_entities_with_mentions_and_neighbours(staff: World) -> None:
    indexed(staff, "hello", '"Hello Love" is a 1974 single by Hank Snow.', title="Hello Love (song)")
    indexed(staff, "snow", "Hank Snow moved to Nashville, Tennessee, in 1949.", title="Hank Snow")
    indexed(staff, "snow", "Hank Snow is Globex's code name for Project Tundra.", tenant="globex", title="Hank Snow")
    from knowledge.models import Entity

    ours = Entity.objects.get(tenant=staff.acme, normalized="hank snow")
    theirs = Entity.objects.get(tenant=staff.globex, normalized="hank snow")
    # Its mention tables name restricted documents without the per-document test (issue 34): tenant admins only.
    assert login(staff.editor).get("/admin/knowledge/entity/").status_code == 403
    assert login(staff.editor).get(f"/admin/knowledge/entity/{ours.pk}/change/").status_code in (302, 403)
    editor = login(staff.owner)  # below: the tenant's admin
    listing = editor.get("/admin/knowledge/entity/?q=snow").content.decode()
    assert "Hank Snow" in listing and f"/admin/knowledge/entity/{ours.pk}/change/" in listing
    assert f"/admin/knowledge/entity/{theirs.pk}/change/" not in listing
    page = editor.get(f"/admin/knowledge/entity/{ours.pk}/change/").content.decode()
    assert "hello:0" in page and "snow:0" in page and "reference" in page and "title" in page  # its mentions
    assert "Hello Love" in page and "co-occurs with" in page  # a neighbour, and how
    assert "Project Tundra" not in page
    assert editor.get(f"/admin/knowledge/entity/{theirs.pk}/change/").status_code == 302  # not ours: the admin's "no such object"
    assert editor.get("/admin/knowledge/entity/add/").status_code == 403  # the graph follows the chunks; nobody edits it
    assert login(staff.teammate).get("/admin/knowledge/entity/").status_code == 403  # readers have no admin
    outsider = login(staff.outsider).get("/admin/knowledge/entity/?q=snow").content.decode()
    assert f"/admin/knowledge/entity/{theirs.pk}/change/" in outsider and f"/admin/knowledge/entity/{ours.pk}/change/" not in outsider


# --- the shared search indexes -------------------------------------------------------------------


def test_superuser_sees_each_search_index_with_size_live_rows_and_last_rebuild(staff: World) -> None:
    indexed(staff, "mine", "Ours.")
    page = login(make_user("root", superuser=True)).get("/admin/knowledge/indexrebuild/")
    assert page.status_code == 200
    health = {h.name: h for h in page.context["index_health"]}
    assert set(health) >= {"chunk_search_vector_gin", "posting_term_impact"}
    assert health["chunk_search_vector_gin"].live_rows == 1
    body = page.content.decode()
    assert 'id="index-health"' in body and "chunk_search_vector_gin" in body and "never" in body


def test_tenant_admins_do_not_see_the_shared_indexes(staff: World) -> None:
    assert login(staff.owner).get("/admin/knowledge/indexrebuild/").status_code == 403


def test_the_upload_form_states_the_limits(staff: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_UPLOAD_MAX_BYTES = 20 * 1024 * 1024
    html = login(staff.editor).get(CHANGELIST + "add/").content.decode()
    assert ("A document may hold up to 10,000,000 characters of text and be cut into up to 10,000 chunks; "
            "an uploaded file may be up to 20 MB.") in html
