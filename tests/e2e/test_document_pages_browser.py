"""The editors' document pages in a real browser: the change page of an uploaded, a pasted and a
failed document opens and shows what each can edit, and the live list follows a worker through
its phases (extracting, embedding with counts and an estimate, indexing, ready with its new
version and model) without the bar ever moving back, under the Content-Security-Policy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, expect

from knowledge.models import Document
from knowledge.services import documents as doc_services
from knowledge.services import state
from tests.conftest import World
from tests.e2e.test_admin_browser import Violations, signed_in
from tests.servers import asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def base(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("document-pages-e2e")
    with asgi_server(child_env(QUARRY_DATA_DIR=str(data)), log_name="uvicorn-e2e-document-pages") as url:
        yield url


def test_change_pages_of_uploaded_pasted_and_failed_documents_open(world: World, context: BrowserContext, tmp_path: Path) -> None:
    page = signed_in(world, context)
    seen = Violations(page)
    # Uploaded through the form, as an editor does (the server stores the file).
    page.goto("/admin/knowledge/document/add/")
    expect(page.get_by_text("A document may hold up to 10,000,000 characters of text")).to_be_visible()
    notes = tmp_path / "harbor-notes.md"
    notes.write_text("# Harbor notes\n\nThe beacon is checked every morning.\n", encoding="utf-8")
    page.locator("input[type=file][name=files]").set_input_files(str(notes))
    page.get_by_role("button", name="Upload and queue").click()
    expect(page.locator(".messagelist")).to_contain_text("Queued 1 document")
    uploaded = Document.objects.get(tenant=world.acme, external_id="harbor-notes.md")
    pasted = doc_services.document_text_save(tenant=world.acme, external_id="pasted-note", text="Pasted by an editor.", actor="editor")
    failed = doc_services.document_text_save(tenant=world.acme, external_id="broken-note", text="Will fail.", actor="editor")
    state.fail_now(failed, actor="editor", error="broken-note could not be indexed: the embedding model failed.", bump=False)

    page.goto(f"/admin/knowledge/document/{uploaded.pk}/change/")
    expect(page.get_by_label("Title")).to_be_visible()
    expect(page.locator("input[type=file][name=replace_file]")).to_be_visible()
    expect(page.locator("textarea[name=text]")).to_have_count(0)  # a file's text changes by replacing the file
    expect(page.locator(".quarry-progress")).to_have_attribute("data-state", "queued")
    page.get_by_label("Title").fill("Harbor notes, checked")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")
    assert Document.objects.get(pk=uploaded.pk).title == "Harbor notes, checked"

    page.goto(f"/admin/knowledge/document/{pasted.pk}/change/")
    expect(page.locator("textarea[name=text]")).to_have_value("Pasted by an editor.")

    page.goto(f"/admin/knowledge/document/{failed.pk}/change/")
    bar = page.locator(".quarry-progress")
    expect(bar).to_have_attribute("data-state", "failed")
    expect(bar.locator(".quarry-progress-label")).to_have_text("Failed")
    expect(bar.locator(".quarry-progress-error")).to_contain_text("the embedding model failed")
    assert seen.messages == []


def test_the_live_list_follows_the_phases_and_never_moves_back(world: World, context: BrowserContext) -> None:
    page = signed_in(world, context)
    seen = Violations(page)
    document = doc_services.document_text_save(tenant=world.acme, external_id="long-report", text="A long report.", actor="editor")
    cancelled = doc_services.document_text_save(tenant=world.acme, external_id="dropped", text="Never mind.", actor="editor")
    doc_services.document_cancel(documents=[cancelled], actor="editor")
    row = Document.objects.filter(pk=document.pk)

    def worker(**fields: object) -> None:
        """What the worker's heartbeat writes (the pipeline tests check that it does)."""
        row.update(status="processing", lease_id="w", lease_expires_at=timezone.now() + timedelta(minutes=1), **fields)

    worker(progress=0.0, phase="extracting")
    page.goto("/admin/knowledge/document/")
    bar = page.locator(f'.quarry-progress[data-quarry-doc="{document.pk}"]')
    label, fill = bar.locator(".quarry-progress-label"), bar.locator(".quarry-progress-fill")
    expect(page.locator(f'.quarry-progress[data-quarry-doc="{cancelled.pk}"] .quarry-progress-label')).to_have_text("Cancelled")
    expect(label).to_have_text("Extracting…")

    worker(progress=0.42, phase="embedding", phase_done=1200, phase_total=3300, eta_at=timezone.now() + timedelta(minutes=2))
    expect(label).to_have_text("Embedding 1,200 / 3,300")
    expect(bar.locator(".quarry-progress-detail")).to_have_text(re.compile(r"^about (1|2) min left$"))
    expect(fill).to_have_attribute("style", re.compile(r"width: 42%"))

    # A report below what was shown (a resumed run) does not move the bar back.
    worker(progress=0.3, phase="embedding", phase_done=1300, phase_total=3300, eta_at=None)
    expect(label).to_have_text("Embedding 1,300 / 3,300")
    expect(fill).to_have_attribute("style", re.compile(r"width: 42%"))

    worker(progress=0.95, phase="indexing", eta_at=None)
    expect(label).to_have_text("Indexing…")

    row.update(status="ready", progress=1.0, phase="", lease_id="", lease_expires_at=None, version=3, embedding_model="test/new-model",
               chunk_count=7)
    expect(label).to_have_text("Ready")
    expect(page.locator(f'[data-quarry-version="{document.pk}"]')).to_have_text("3")
    expect(page.locator(f'[data-quarry-model="{document.pk}"]')).to_have_text("test/new-model")
    expect(page.locator(f'[data-quarry-chunks="{document.pk}"]')).to_have_text("7")
    # Embedded with a model other than the configured one: the list asks for a re-index.
    expect(bar.locator(".quarry-reindex")).to_be_visible()
    assert seen.messages == []
