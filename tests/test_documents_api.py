"""The documents REST API: synchronous ingest, background uploads, status, list, delete; roles, tenancy, bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django_q.models import OrmQ
from rest_framework.test import APIClient

from knowledge.models import AuditEvent, Chunk, Document
from tests.conftest import World

DOCUMENT_FIELDS = {"id", "title", "uri", "status", "progress", "error", "cancelled", "chunk_count", "metadata", "updated_at"}


@pytest.fixture(autouse=True)
def fast_settings(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def ingest(client: APIClient, *documents: dict[str, object], **extra: object):  # type: ignore[no-untyped-def]
    return client.post("/v1/documents", {"documents": list(documents), **extra}, format="json")


@pytest.fixture
def seeded(world: World) -> World:
    """acme holds two documents (one with a '/' in its id); globex holds one that shares an id."""
    editor = world.client(world.editor)
    response = ingest(
        editor,
        {"id": "guide", "text": "Editors upload files in the admin.", "title": "Guide", "uri": "https://kb/guide", "metadata": {"team": "support"}},
        {"id": "demo/faq", "text": "Frequently asked questions about Quarry."},
    )
    assert response.status_code == 200, response.content
    assert ingest(world.client(world.outsider), {"id": "guide", "text": "Globex confidential guide."}).status_code == 200
    return world


# --- POST /v1/documents -------------------------------------------------------------------------------


def test_editor_ingests_documents_and_reads_them_back(seeded: World) -> None:
    response = ingest(seeded.client(seeded.editor), {"id": "policy", "text": "Holiday policy. " * 300, "metadata": {"year": 2025}})
    assert response.status_code == 200
    assert response.json() == {"chunks": Document.objects.get(tenant=seeded.acme, external_id="policy").chunk_count, "document_ids": ["policy"]}
    detail = seeded.client(seeded.teammate).get("/v1/documents/policy")
    assert detail.status_code == 200
    body = detail.json()
    assert set(body) == DOCUMENT_FIELDS
    assert (body["id"], body["status"], body["progress"], body["error"], body["metadata"]) == ("policy", "ready", 1.0, "", {"year": 2025})
    assert body["chunk_count"] >= 2
    assert AuditEvent.objects.filter(tenant=seeded.acme, action="ingest", document_ids=["policy"], actor__startswith="editor (token qry_").exists()


def test_ingest_replaces_the_previous_version(seeded: World) -> None:
    response = ingest(seeded.client(seeded.editor), {"id": "guide", "text": "A shorter guide."})
    assert response.status_code == 200 and response.json()["chunks"] == 1
    document = Document.objects.get(tenant=seeded.acme, external_id="guide")
    assert (document.text, document.version, document.title) == ("A shorter guide.", 2, "")
    assert Document.objects.get(tenant=seeded.globex, external_id="guide").text == "Globex confidential guide."


@pytest.mark.parametrize(
    ("body", "field", "phrase"),
    [
        ({}, "documents", "required"),
        ({"documents": []}, "documents", "may not be empty"),
        ({"documents": "guide"}, "documents", "Expected a list"),
        ({"documents": [{"id": "x", "text": "t"}] * 1001}, "documents", "no more than 1000"),
        ({"documents": [{"text": "no id"}]}, "documents[0].id", "required"),
        ({"documents": [{"id": "bad id", "text": "t"}]}, "documents[0].id", "is not a valid document id"),
        ({"documents": [{"id": "ok", "text": "t"}, {"id": "x", "text": "   "}]}, "documents[1].text", "must not be empty"),
        ({"documents": [{"id": "x", "text": "t", "title": "T" * 1001}]}, "documents[0].title", "at most 1000 characters"),
        ({"documents": [{"id": "x", "text": "t", "metadata": {"a": {"b": 1}}}]}, "documents[0].metadata.a", "nested values are not allowed"),
        ({"documents": [{"id": "x", "text": "t", "metadata": {f"f{i}": 1 for i in range(65)}}]}, "documents[0].metadata", "at most 64 fields"),
        ({"documents": [{"id": "x", "text": "t", "metadata": "team"}]}, "documents[0].metadata", "Expected a dictionary"),
        ({"documents": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}, "documents", "repeated: x"),
        ({"documents": ["just text"]}, "documents[0]", "Invalid data"),
    ],
)
def test_every_ingest_bound_is_a_400_naming_the_field(world: World, body: dict[str, object], field: str, phrase: str) -> None:
    response = world.client(world.editor).post("/v1/documents", body, format="json")
    assert response.status_code == 400, response.content
    payload = response.json()
    assert payload["error"] == "invalid" and field in payload["fields"], payload
    assert phrase in " ".join(payload["fields"][field])
    assert not Document.objects.exists()


def test_reader_cannot_ingest(world: World) -> None:
    response = ingest(world.client(world.teammate), {"id": "x", "text": "t"})
    assert response.status_code == 403 and response.json()["error"] == "permission_denied"
    assert "editor role" in response.json()["detail"]


def test_outsider_cannot_ingest_into_our_tenant(world: World) -> None:
    response = ingest(world.client(world.outsider), {"id": "x", "text": "t"}, tenant="acme")
    assert response.status_code == 404
    assert not Document.objects.exists()


def test_anonymous_ingest_is_401(world: World) -> None:
    assert ingest(APIClient(), {"id": "x", "text": "t"}).status_code == 401


# --- POST /v1/documents/upload ------------------------------------------------------------------------------


def files(*pairs: tuple[str, bytes]) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(name, data) for name, data in pairs]


def test_upload_accepts_many_files_and_queues_them(world: World, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):
        response = world.client(world.editor).post(
            "/v1/documents/upload",
            {"files": files(("Q3 report.md", b"# Q3"), ("notes.txt", b"Notes.")), "metadata": json.dumps({"team": "finance"})},
            format="multipart",
        )
    assert response.status_code == 202, response.content
    assert response.json() == {"document_ids": ["Q3-report.md", "notes.txt"]}
    documents = Document.objects.filter(tenant=world.acme)
    assert {(d.external_id, d.status, d.metadata["team"]) for d in documents} == {("Q3-report.md", "queued", "finance"), ("notes.txt", "queued", "finance")}
    assert sorted(t.args()[0] for t in OrmQ.objects.all()) == sorted(d.pk for d in documents)
    detail = world.client(world.teammate).get("/v1/documents/notes.txt").json()
    assert (detail["status"], detail["progress"], detail["chunk_count"]) == ("queued", 0.0, 0)


def test_upload_with_ids_title_and_uri(world: World) -> None:
    response = world.client(world.editor).post(
        "/v1/documents/upload",
        {"files": files(("x.txt", b"Text.")), "ids": ["kb/intro"], "title": "Intro", "uri": "https://kb/intro"},
        format="multipart",
    )
    assert response.status_code == 202 and response.json() == {"document_ids": ["kb/intro"]}
    document = Document.objects.get(tenant=world.acme, external_id="kb/intro")
    assert (document.title, document.uri, document.source_name) == ("Intro", "https://kb/intro", "x.txt")


def test_upload_with_a_file_over_the_limit_is_413_and_stores_nothing(world: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_UPLOAD_MAX_BYTES = 5
    response = world.client(world.editor).post("/v1/documents/upload", {"files": files(("ok.txt", b"tiny"), ("big.txt", b"123456"))}, format="multipart")
    assert response.status_code == 413
    message = "big.txt is over the upload limit of 5 bytes (QUARRY_UPLOAD_MAX_BYTES); nothing was uploaded."
    assert response.json() == {"error": "request_too_large", "detail": message, "fields": {"files": [message]}}
    assert not Document.objects.exists()
    assert not list((Path(settings.MEDIA_ROOT)).rglob("*.txt"))


@pytest.mark.parametrize(
    ("data", "field", "phrase"),
    [
        ({}, "files", "required"),
        ({"files": files(("a.txt", b"a")), "metadata": '{"a": {"b": 1}}'}, "metadata.a", "nested values are not allowed"),
        ({"files": files(("a.txt", b"a")), "metadata": "[1]"}, "metadata", "must be an object of scalar values"),
        ({"files": files(("a.txt", b"a")), "metadata": "{nope"}, "metadata", "Value must be valid JSON"),
        ({"files": files(("a.txt", b"a")), "ids": ["a", "b"]}, "ids", "one id per file"),
        ({"files": files(("a.txt", b"a")), "ids": ["bad id"]}, "ids", "not a valid document id"),
        ({"files": files(("a.txt", b"a"), ("a.txt", b"b"))}, "files", "share the document id 'a.txt'"),
        ({"files": files(("a.txt", b"a"), ("b.txt", b"b")), "title": "Both"}, "title", "applies to a single file"),
    ],
)
def test_upload_input_errors_are_400_naming_the_field(world: World, data: dict[str, object], field: str, phrase: str) -> None:
    response = world.client(world.editor).post("/v1/documents/upload", data, format="multipart")
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert field in fields and phrase in " ".join(fields[field]), fields
    assert not Document.objects.exists()


# File names that are not plain ASCII (issue 30): ids distinct and recognisable, nothing replaced silently.

COFFEE = "Espresso wants finely ground beans and about nine bars of pressure."
TEA = "Sencha is steamed green tea; brew it at seventy degrees for one minute."
NOTES = "Meeting notes: the lighthouse budget was approved."
CAFE = "The corner cafe opens at seven and closes at noon."


def upload_files(world: World, *pairs: tuple[str, bytes]):  # type: ignore[no-untyped-def]
    return world.client(world.editor).post("/v1/documents/upload", {"files": files(*pairs)}, format="multipart")


def process_queued() -> None:
    """Run the document task on every queued document, as a django-q2 worker would."""
    from knowledge.tasks import process_document

    for pk in Document.objects.filter(status="queued").order_by("pk").values_list("pk", flat=True):
        process_document(pk)


def keyword_documents(world: World, query: str) -> list[str]:
    response = world.client(world.teammate).post("/v1/search", {"query": query, "mode": "keyword"}, format="json")
    assert response.status_code == 200, response.content
    return [hit["document_id"] for hit in response.json()["hits"]]


def test_non_ascii_file_names_become_distinct_documents_and_every_text_stays(world: World) -> None:
    first = upload_files(world, ("咖啡指南.md", COFFEE.encode()))
    second = upload_files(world, ("日本茶.md", TEA.encode()))
    both = upload_files(world, ("笔记.txt", NOTES.encode()), ("café.txt", CAFE.encode()))
    assert (first.status_code, second.status_code, both.status_code) == (202, 202, 202), both.content
    [coffee], [tea], [notes, cafe] = first.json()["document_ids"], second.json()["document_ids"], both.json()["document_ids"]
    assert cafe == "cafe.txt"  # accents transliterated, not '-'
    assert len({coffee, tea, notes, cafe}) == 4 and coffee.endswith(".md") and tea.endswith(".md") and notes.endswith(".txt")
    assert not {coffee, tea, notes} & {"md", "txt", "document"}  # the name's hash stands in for letters an id cannot hold
    process_queued()
    documents = {d.external_id: d for d in Document.objects.filter(tenant=world.acme)}
    assert {i: (d.source_name, d.status, d.version, d.text) for i, d in documents.items()} == {
        coffee: ("咖啡指南.md", "ready", 1, COFFEE), tea: ("日本茶.md", "ready", 1, TEA),
        notes: ("笔记.txt", "ready", 1, NOTES), cafe: ("café.txt", "ready", 1, CAFE),
    }
    assert keyword_documents(world, "espresso") == [coffee] and keyword_documents(world, "sencha") == [tea]
    listed = world.client(world.teammate).get("/v1/documents").json()
    assert {d["id"] for d in listed["documents"]} == {coffee, tea, notes, cafe}


def test_uploading_the_same_name_again_versions_its_document_whatever_the_unicode_form(world: World) -> None:
    nfc, nfd = "café.txt", "cafe\u0301.txt"  # macOS sends the decomposed form
    first = upload_files(world, ("咖啡指南.md", b"First coffee."), (nfc, b"First cafe.")).json()["document_ids"]
    process_queued()
    again = upload_files(world, ("咖啡指南.md", COFFEE.encode()), (nfd, CAFE.encode()))
    assert again.status_code == 202 and again.json()["document_ids"] == first
    process_queued()
    versions = {(d.external_id, d.version, d.text) for d in Document.objects.filter(tenant=world.acme)}
    assert versions == {(first[0], 2, COFFEE), ("cafe.txt", 2, CAFE)}


def test_a_file_uploaded_under_the_earlier_rule_is_versioned_under_its_old_id(world: World) -> None:
    # What the earlier rule left: café.txt uploaded as 'caf-.txt', 咖啡指南.md as 'md'.
    for old_id, name in (("caf-.txt", "café.txt"), ("md", "咖啡指南.md")):
        assert ingest(world.client(world.editor), {"id": old_id, "text": "Old version."}).status_code == 200
        Document.objects.filter(tenant=world.acme, external_id=old_id).update(source_name=name)
    response = upload_files(world, ("café.txt", CAFE.encode()), ("咖啡指南.md", COFFEE.encode()))
    assert response.status_code == 202 and response.json()["document_ids"] == ["caf-.txt", "md"]
    process_queued()
    assert {(d.external_id, d.version, d.text) for d in Document.objects.filter(tenant=world.acme)} == {("caf-.txt", 2, CAFE), ("md", 2, COFFEE)}


def test_a_file_whose_id_belongs_to_another_file_gets_a_new_id_and_replaces_nothing(world: World) -> None:
    assert upload_files(world, ("cafe.txt", b"Plain ASCII cafe.")).json()["document_ids"] == ["cafe.txt"]
    # Text at 'a-b.txt' answers to that id, so a file 'a b.txt' must not replace it; one named 'notes.txt' replaces the text at 'notes.txt'.
    assert ingest(world.client(world.editor), {"id": "a-b.txt", "text": "Sent as JSON."}, {"id": "notes.txt", "text": "Old notes."}).status_code == 200
    response = upload_files(world, ("café.txt", CAFE.encode()), ("a b.txt", b"Spaces."), ("notes.txt", NOTES.encode()))
    assert response.status_code == 202, response.content
    accented, spaced, notes = response.json()["document_ids"]
    assert accented.startswith("cafe-") and spaced.startswith("a-b-") and notes == "notes.txt"
    # The next upload of the same name finds its own document, not the one holding the readable id.
    assert upload_files(world, ("café.txt", CAFE.encode())).json()["document_ids"] == [accented]
    kept = {d.external_id: (d.source_name, d.source_text or d.text) for d in Document.objects.filter(tenant=world.acme, external_id__in=["cafe.txt", "a-b.txt"])}
    assert kept == {"cafe.txt": ("cafe.txt", ""), "a-b.txt": ("", "Sent as JSON.")}
    assert Document.objects.filter(tenant=world.acme).count() == 5
    # An id given on purpose still replaces whatever holds it: that is how a file replaces another.
    assert world.client(world.editor).post("/v1/documents/upload", {"files": files(("other.txt", b"x")), "ids": ["cafe.txt"]},
                                           format="multipart").json() == {"document_ids": ["cafe.txt"]}
    assert Document.objects.get(tenant=world.acme, external_id="cafe.txt").source_name == "other.txt"


def test_a_file_whose_every_candidate_id_belongs_to_other_documents_is_refused_naming_it(world: World) -> None:
    editor = world.client(world.editor)
    assert ingest(editor, {"id": "cafe.txt", "text": "One."}, {"id": "cafe-5996d1f7.txt", "text": "Two."}).status_code == 200
    response = upload_files(world, ("café.txt", CAFE.encode()))
    assert response.status_code == 400
    assert response.json()["fields"]["files"] == ["'café.txt' cannot get a document id: 'cafe.txt' and 'cafe-5996d1f7.txt' belong to "
                                                  "documents of other files; rename the file, or give its id to replace one of them"]
    assert sorted(Document.objects.values_list("external_id", "text")) == [("cafe-5996d1f7.txt", "Two."), ("cafe.txt", "One.")]


def test_names_differing_in_case_punctuation_or_accents_get_distinct_ids_in_one_upload(world: World) -> None:
    names = ["Notes.txt", "notes.txt", "a b.txt", "a-b.txt", "cafe.txt", "café.txt", "!!!.md", "../../etc/passwd", "x" * 300 + ".txt"]
    response = upload_files(world, *[(name, b"text") for name in names])
    assert response.status_code == 202, response.content
    ids = response.json()["document_ids"]
    assert len(set(ids)) == len(names) and all(len(i) <= 200 for i in ids)
    assert ids[:3] == ["Notes.txt", "notes.txt", "a-b.txt"] and ids[4] == "cafe.txt" and ids[7] == "passwd"
    assert ids[-1].endswith(".txt") and Document.objects.filter(tenant=world.acme).count() == len(names)


@pytest.mark.parametrize(
    ("names", "phrase"),
    [
        (["café.txt", "cafe\u0301.txt"], "two files are named 'café.txt'"),  # NFC and NFD: one name
        (["a.txt", "a.txt"], "share the document id 'a.txt'"),
        (["..."], "'...' is not a file name"),
    ],
)
def test_an_upload_naming_one_file_twice_or_a_file_without_a_name_is_400(world: World, names: list[str], phrase: str) -> None:
    response = upload_files(world, *[(name, b"text") for name in names])
    assert response.status_code == 400, response.content
    assert phrase in " ".join(response.json()["fields"]["files"])
    assert not Document.objects.exists()


def test_reader_cannot_upload_and_outsider_gets_404(world: World) -> None:
    reader = world.client(world.teammate).post("/v1/documents/upload", {"files": files(("a.txt", b"a"))}, format="multipart")
    assert reader.status_code == 403
    outsider = world.client(world.outsider).post("/v1/documents/upload?tenant=acme", {"files": files(("a.txt", b"a"))}, format="multipart")
    assert outsider.status_code == 404
    assert not Document.objects.exists()


# --- GET /v1/documents and /v1/documents/{id} --------------------------------------------------------------------


def test_list_is_paginated_newest_first_and_filters_by_status(seeded: World) -> None:
    for n in range(3):
        ingest(seeded.client(seeded.editor), {"id": f"page-{n}", "text": f"Page {n}."})
    Document.objects.filter(tenant=seeded.acme, external_id="page-0").update(status="failed", error="page-0 is empty")
    client = seeded.client(seeded.teammate)
    first = client.get("/v1/documents", {"limit": 2}).json()
    assert first["count"] == 5 and first["previous"] is None and "offset=2" in first["next"]
    assert [d["id"] for d in first["documents"]] == ["page-2", "page-1"]
    assert all(set(d) == DOCUMENT_FIELDS for d in first["documents"])
    second = client.get(first["next"]).json()
    assert [d["id"] for d in second["documents"]] == ["page-0", "guide"] and "offset=0" in second["previous"]
    failed = client.get("/v1/documents", {"status": "failed"}).json()
    assert [(d["id"], d["error"]) for d in failed["documents"]] == [("page-0", "page-0 is empty")] and failed["next"] is None
    assert all(d["id"] != "Globex" for d in first["documents"])


@pytest.mark.parametrize(
    ("query", "field"), [({"status": "done"}, "status"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"offset": -1}, "offset")]
)
def test_list_query_bounds_are_400(seeded: World, query: dict[str, object], field: str) -> None:
    response = seeded.client(seeded.teammate).get("/v1/documents", query)
    assert response.status_code == 400 and field in response.json()["fields"]


def test_detail_finds_ids_with_slashes(seeded: World) -> None:
    response = seeded.client(seeded.teammate).get("/v1/documents/demo/faq")
    assert response.status_code == 200 and response.json()["id"] == "demo/faq"


def test_outsider_gets_404_for_our_documents(seeded: World) -> None:
    outsider = seeded.client(seeded.outsider)
    assert outsider.get("/v1/documents/demo/faq").status_code == 404  # in its own tenant: no such id
    assert outsider.get("/v1/documents/guide?tenant=acme").status_code == 404
    assert outsider.get("/v1/documents?tenant=acme").status_code == 404
    assert outsider.delete("/v1/documents/demo/faq").status_code == 404
    own = outsider.get("/v1/documents/guide").json()
    assert own["id"] == "guide" and own["title"] == ""  # its own document of the same id
    assert Document.objects.filter(tenant=seeded.acme, external_id="demo/faq").exists()


def test_unknown_document_is_404_in_the_project_error_shape(seeded: World) -> None:
    response = seeded.client(seeded.teammate).get("/v1/documents/nope")
    assert response.status_code == 404 and response.json() == {"error": "not_found", "detail": "Not found."}


def test_anonymous_reads_are_401(seeded: World) -> None:
    assert APIClient().get("/v1/documents").status_code == 401
    assert APIClient().get("/v1/documents/guide").status_code == 401


# --- DELETE /v1/documents/{id} -----------------------------------------------------------------------------------


def test_editor_deletes_a_document_and_its_chunks_audited(seeded: World) -> None:
    document = Document.objects.get(tenant=seeded.acme, external_id="guide")
    response = seeded.client(seeded.editor).delete("/v1/documents/guide")
    assert response.status_code == 204 and response.content == b""
    assert not Document.objects.filter(pk=document.pk).exists() and not Chunk.objects.filter(document_id=document.pk).exists()
    assert AuditEvent.objects.filter(tenant=seeded.acme, action="delete", document_ids=["guide"]).exists()
    assert Document.objects.filter(tenant=seeded.globex, external_id="guide").exists()
    assert seeded.client(seeded.editor).delete("/v1/documents/guide").status_code == 404


def test_reader_cannot_delete(seeded: World) -> None:
    assert seeded.client(seeded.teammate).delete("/v1/documents/guide").status_code == 403
    assert Document.objects.filter(tenant=seeded.acme, external_id="guide").exists()


def test_openapi_schema_describes_the_document_endpoints(world: World) -> None:
    schema = APIClient().get("/v1/schema", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    assert {"post", "get"} <= set(paths["/v1/documents"])
    assert "multipart/form-data" in paths["/v1/documents/upload"]["post"]["requestBody"]["content"]
    assert "202" in paths["/v1/documents/upload"]["post"]["responses"]
    assert {"get", "delete"} <= set(paths["/v1/documents/{document_id}"])
