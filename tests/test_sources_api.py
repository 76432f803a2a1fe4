"""The sources REST API: status codes, JSON and database state; another tenant's sources are 404."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knowledge.models import Document
from knowledge.sources.models import Source, SourceSync
from knowledge.sources.tasks import remove_source, sync_source
from tests.conftest import World
from tests.test_sources import sources_under


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    share = sources_under(settings, tmp_path) / "shares" / "team"
    share.mkdir()
    (share / "guide.md").write_text("# Guide\n\nThe acme guide.\n")
    return tmp_path


def create(world: World, user: Any, media: Path, **body: Any) -> Any:
    payload = {"name": "Team share", "kind": "folder", "config": {"path": str(media / "shares" / "team")}, "schedule_minutes": 30, **body}
    return world.client(user).post("/v1/sources", payload, format="json")


def test_editor_creates_lists_reads_changes_syncs_and_removes_a_source(world: World, media: Path) -> None:
    created = create(world, world.editor, media)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "Team share" and body["kind"] == "folder" and body["key"] == "team-share"
    assert body["schedule_minutes"] == 30 and body["enabled"] is True and body["status"] == "queued" and body["last_sync"] is None
    source_id = body["id"]
    assert sync_source(source_id) == "succeeded"
    listed = world.client(world.teammate).get("/v1/sources").json()["sources"]  # readers may list
    assert [s["id"] for s in listed] == [source_id]
    last = listed[0]["last_sync"]
    assert listed[0]["status"] == "succeeded"
    assert {k: last[k] for k in ("status", "added", "updated", "unchanged", "deleted", "failed", "errors")} == {
        "status": "succeeded", "added": 1, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0, "errors": []}
    assert last["started_at"] and last["finished_at"]
    paused = world.client(world.editor).patch(f"/v1/sources/{source_id}", {"enabled": False, "name": "Share"}, format="json")
    assert paused.status_code == 200 and paused.json()["status"] == "paused" and paused.json()["name"] == "Share"
    queued = world.client(world.editor).post(f"/v1/sources/{source_id}/sync")
    assert queued.status_code == 202 and queued.json()["queued"] is True
    merged = world.client(world.editor).post(f"/v1/sources/{source_id}/sync")
    assert merged.status_code == 202 and merged.json()["queued"] is False and merged.json()["source"]["status"] == "queued"
    removed = world.client(world.editor).delete(f"/v1/sources/{source_id}")
    assert removed.status_code == 202
    assert world.client(world.editor).get(f"/v1/sources/{source_id}").status_code == 404
    assert remove_source(source_id) == 1
    assert not Document.objects.filter(tenant=world.acme).exists()


def test_bad_configuration_is_a_400_naming_the_field_and_stores_nothing(world: World, media: Path) -> None:
    cases = [
        ({"kind": "ftp"}, "kind"),
        ({"kind": "web", "config": {"url": "file:///etc/passwd"}}, "config.url"),
        ({"kind": "folder", "config": {"path": "/etc"}}, "config.path"),
        ({"kind": "folder", "config": {}}, "config.path"),
        ({"kind": "folder", "config": {"path": str(media / "shares" / "team"), "depth": 3}}, "config.depth"),
        ({"kind": "git", "config": {"url": "https://"}}, "config.url"),
        ({"schedule_minutes": 0}, "schedule_minutes"),
        ({"schedule_minutes": "5"}, "schedule_minutes"),
        ({"name": ""}, "name"),
        ({"config": "path=/tmp"}, "config"),
        ({"colour": "blue"}, "colour"),
    ]
    for body, field in cases:
        answer = create(world, world.editor, media, **body)
        assert answer.status_code == 400, (body, answer.content)
        assert field in answer.json()["fields"], (body, answer.json())
    assert not Source.objects.exists()
    assert create(world, world.editor, media).status_code == 201
    duplicate = create(world, world.editor, media)
    assert duplicate.status_code == 400 and "name" in duplicate.json()["fields"]


def test_readers_cannot_write_and_anonymous_cannot_read(world: World, media: Path) -> None:
    assert create(world, world.teammate, media).status_code == 403
    assert world.client().get("/v1/sources").status_code in (401, 403)
    assert not Source.objects.exists()


def test_outsider_gets_404_for_another_tenants_source_its_syncs_and_documents(world: World, media: Path) -> None:
    source_id = create(world, world.editor, media).json()["id"]
    sync_source(source_id)
    outsider = world.client(world.outsider)
    assert outsider.get("/v1/sources").json() == {"sources": []}
    assert outsider.get(f"/v1/sources/{source_id}").status_code == 404
    assert outsider.patch(f"/v1/sources/{source_id}", {"enabled": False}, format="json").status_code == 404
    assert outsider.post(f"/v1/sources/{source_id}/sync").status_code == 404
    assert outsider.delete(f"/v1/sources/{source_id}").status_code == 404
    assert outsider.get("/v1/documents/team-share/guide.md").status_code == 404
    assert outsider.get(f"/v1/sources/{source_id}?tenant=acme").status_code == 404
    assert Source.objects.get(pk=source_id).enabled and SourceSync.objects.filter(source_id=source_id).count() == 1
    assert world.client(world.editor).get("/v1/documents/team-share/guide.md").json()["metadata"] == {
        "source": "team-share", "path": "guide.md"}


def test_secrets_are_never_returned(world: World, media: Path) -> None:
    answer = world.client(world.editor).post("/v1/sources", {"name": "Bucket", "kind": "s3", "config": {
        "bucket": "handbook", "access_key_id": "AKIA-test", "secret_access_key": "very-secret-value",
        "endpoint_url": "http://127.0.0.1:9/"}}, format="json")
    # The bucket cannot be listed (nothing answers on port 9): refused before anything is stored.
    assert answer.status_code == 400 and "config.bucket" in answer.json()["fields"]
    assert "very-secret-value" not in answer.content.decode()
    created = world.client(world.editor).post("/v1/sources", {"name": "Site", "kind": "web", "config": {
        "url": "http://127.0.0.1:9/", "authorization": "Bearer very-secret-value"}}, format="json")
    assert created.status_code == 400 and "very-secret-value" not in created.content.decode()


def test_openapi_documents_the_sources_operations(world: World) -> None:
    schema = world.client().get("/v1/schema", HTTP_ACCEPT="application/json").json()
    assert {"/v1/sources", "/v1/sources/{source_id}", "/v1/sources/{source_id}/sync"} <= set(schema["paths"])
    assert set(schema["paths"]["/v1/sources/{source_id}"]) >= {"get", "patch", "delete"}
    assert "202" in schema["paths"]["/v1/sources/{source_id}/sync"]["post"]["responses"]
