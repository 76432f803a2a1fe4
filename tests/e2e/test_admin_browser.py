"""The admin and the API docs under their Content-Security-Policy, in a real browser: they still work
(sign-in, the upload form, the live progress list, Swagger UI from static files) and the browser
reports no violation of the policy (Chromium logs each one as a console error)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from django_q.models import Schedule
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, expect

from accounts.models import Membership
from knowledge.models import Document
from tests.conftest import World
from tests.factories import make_user
from tests.servers import asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-tests-only"


@pytest.fixture(scope="module")
def server_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's data directory (its uploads are under media/)."""
    return tmp_path_factory.mktemp("admin-e2e")


@pytest.fixture(scope="module")
def base(django_db_setup: None, server_data: Path) -> Iterator[str]:
    with asgi_server(child_env(QUARRY_DATA_DIR=str(server_data)), log_name="uvicorn-e2e-admin") as url:
        yield url


class Violations:
    """Console errors and page errors (a blocked script, style, image or connection shows up here), and
    failed responses (the browser's own request for an icon included)."""

    def __init__(self, page: Page) -> None:
        self.messages: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.messages.append(f"pageerror: {error}"))
        page.on("response", lambda response: response.status >= 400 and self.messages.append(f"{response.status} {response.url}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            # Chromium's "Failed to load resource" line names no URL; its location does.
            where = message.location.get("url", "")
            self.messages.append(f"{message.text} {where}".rstrip())


def sign_in(context: BrowserContext, username: str) -> Page:
    """A page of the admin, signed in as ``username``."""
    page = context.new_page()
    page.goto("/admin/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    return page


def signed_in(world: World, context: BrowserContext) -> Page:
    """A page of the admin, signed in as the editor (made staff)."""
    world.editor.is_staff = True
    world.editor.save(update_fields=["is_staff"])
    return sign_in(context, "editor")


def signed_in_as_root(context: BrowserContext) -> Page:
    """A page of the admin, signed in as a superuser (who sees every tenant: the widest lists)."""
    make_user("root", superuser=True)
    return sign_in(context, "root")


def test_the_admin_upload_and_progress_list_work_under_the_policy(world: World, context: BrowserContext, tmp_path: Path) -> None:
    world.editor.is_staff = True
    world.editor.save(update_fields=["is_staff"])
    page = context.new_page()
    seen = Violations(page)

    login = page.goto("/admin/login/")
    assert login is not None and "script-src 'self'" in login.headers["content-security-policy"]
    page.get_by_label("Username").fill("editor")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()

    page.goto("/admin/knowledge/document/add/")
    expect(page.get_by_role("heading", name="Upload documents")).to_be_visible()
    notes = tmp_path / "harbor-notes.md"
    notes.write_text("# Harbor notes\n\nThe beacon is checked every morning.\n", encoding="utf-8")
    page.locator("input[type=file][name=files]").set_input_files(str(notes))
    page.get_by_role("button", name="Upload and queue").click()

    expect(page).to_have_url(re.compile(r"/admin/knowledge/document/$"))
    expect(page.locator(".messagelist")).to_contain_text("Queued 1 document for processing")
    bar = page.locator(".quarry-progress").first
    expect(bar).to_have_attribute("data-status", "queued")
    # The bar's width is set by documents.js from data-percent (no inline style attribute is allowed).
    expect(bar.locator(".quarry-progress-fill")).to_have_attribute("style", re.compile(r"width: 0%"))
    assert Document.objects.filter(tenant=world.acme, external_id="harbor-notes.md", status="queued").exists()

    # The list keeps polling the progress endpoint (a fetch the policy allows) while the work is queued.
    with page.expect_response(re.compile(r"/admin/knowledge/document/progress/\?ids=")) as polled:
        pass
    assert polled.value.status == 200 and polled.value.json()["documents"][0]["status"] == "queued"
    page.get_by_role("link", name="Search playground").click()
    expect(page.get_by_role("heading", name="Search playground")).to_be_visible()
    assert seen.messages == []


def test_files_named_in_other_scripts_uploaded_one_after_the_other_stay_two_documents(world: World, context: BrowserContext, tmp_path: Path) -> None:
    """Issue 30: 日本茶.md uploaded after 咖啡指南.md became version 2 of the same document ('md')."""
    page = signed_in(world, context)
    for name, text in (("咖啡指南.md", "Espresso wants finely ground beans."), ("日本茶.md", "Sencha is steamed green tea.")):
        page.goto("/admin/knowledge/document/add/")
        (tmp_path / name).write_text(text, encoding="utf-8")
        page.locator("input[type=file][name=files]").set_input_files(str(tmp_path / name))
        page.get_by_role("button", name="Upload and queue").click()
        expect(page.locator(".messagelist")).to_contain_text(f"Queued 1 document for processing: {name}.")
    documents = list(Document.objects.filter(tenant=world.acme).order_by("pk"))
    assert [d.source_name for d in documents] == ["咖啡指南.md", "日本茶.md"]
    assert documents[0].external_id != documents[1].external_id
    for document in documents:  # each listed under its own file name, with its id
        expect(page.locator("#result_list")).to_contain_text(f"{document.source_name} ({document.external_id})")


def test_the_api_docs_render_from_static_files_under_the_policy(context: BrowserContext, base: str) -> None:
    page = context.new_page()
    seen = Violations(page)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    docs = page.goto("/v1/docs")
    assert docs is not None and "script-src 'self'" in docs.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Quarry API")
    expect(page.locator(".opblock-summary-path", has_text="/v1/search")).to_be_visible()
    assert all(url.startswith(base) for url in requested), [url for url in requested if not url.startswith(base)]
    assert any("/static/drf_spectacular_sidecar/" in url for url in requested)
    assert seen.messages == []


def test_redoc_renders_from_static_files_under_the_policy(context: BrowserContext, base: str) -> None:
    page = context.new_page()
    seen = Violations(page)
    answered: list[str] = []  # responses: requests that went over the network (blob: is Redoc's own search worker)
    blocked: list[str] = []
    page.on("response", lambda response: response.url.startswith("blob:") or answered.append(response.url))
    page.on("requestfailed", lambda request: blocked.append(request.url))
    docs = page.goto("/v1/redoc")
    assert docs is not None
    policy = docs.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "img-src 'self' data:" in policy
    expect(page.locator("h1", has_text="Quarry API")).to_be_visible()
    expect(page.get_by_text("/v1/search").first).to_be_attached()
    assert all(url.startswith(base) for url in answered), [url for url in answered if not url.startswith(base)]
    assert any(url.endswith("/v1/redoc.js") for url in answered)
    # Redoc's footer draws its logo; it comes from this site, so the policy has nothing to refuse.
    logo = page.get_by_alt_text("redocly logo")
    expect(logo).to_have_attribute("src", "/static/docs/redoc-logo.svg")
    page.wait_for_load_state("networkidle")
    assert logo.evaluate("img => img.complete && img.naturalWidth > 0")
    assert blocked == []
    assert seen.messages == []


@pytest.mark.parametrize("path", ["/admin/", "/admin/knowledge/document/", "/v1/redoc", "/v1/docs", "/admin/login/"])
def test_every_admin_and_api_docs_page_has_an_icon(world: World, context: BrowserContext, path: str) -> None:
    page = signed_in(world, context) if path.startswith("/admin/") and path != "/admin/login/" else context.new_page()
    seen = Violations(page)
    page.goto(path)
    page.wait_for_load_state("networkidle")
    icon = page.locator("link[rel=icon]")
    expect(icon).to_have_count(1)
    assert page.request.get(icon.get_attribute("href") or "").status == 200
    assert seen.messages == []


def test_favicon_ico_answers_with_the_site_icon(context: BrowserContext) -> None:
    """What a browser asks for when a page names no icon (the API's JSON in a tab)."""
    response = context.new_page().goto("/favicon.ico")
    assert response is not None and response.status == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert context.request.head("/favicon.ico", max_redirects=0).status == 301


def test_a_membership_is_added_by_typing_the_users_name(world: World, context: BrowserContext) -> None:
    """No numeric user id to look up: the user field searches by name (select2 under the page policy)."""
    page = signed_in_as_root(context)
    seen = Violations(page)
    page.goto("/admin/accounts/membership/add/")
    page.locator(".field-user .select2-selection").click()
    page.locator(".select2-search__field").fill("edi")
    page.locator(".select2-results__option", has_text="editor").click()
    page.get_by_label("Tenant").select_option(label=str(world.globex))
    page.get_by_label("Role").select_option("reader")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    assert Membership.objects.filter(user=world.editor, tenant=world.globex, role="reader").exists()
    assert seen.messages == []


def test_the_live_list_shows_the_title_processing_found(world: World, context: BrowserContext, tmp_path: Path,
                                                         server_data: Path, settings: Any) -> None:
    """The list refreshes each row's name with its status: a file's own title appears without a reload."""
    from knowledge.tasks import process_document  # here: the worker's entry point, run by the test as the worker would

    settings.MEDIA_ROOT = server_data / "media"  # this process works as the server's worker: on its uploads
    page = signed_in(world, context)
    seen = Violations(page)
    page.goto("/admin/knowledge/document/add/")
    notes = tmp_path / "beacon-log.md"
    notes.write_text("# Beacon log\n\nThe beacon is checked every morning.\n", encoding="utf-8")
    page.locator("input[type=file][name=files]").set_input_files(str(notes))
    page.get_by_role("button", name="Upload and queue").click()
    document = Document.objects.get(tenant=world.acme, source_name="beacon-log.md")
    label = page.locator(f'[data-quarry-label="{document.pk}"]')
    expect(label).to_have_text("beacon-log.md")
    # In a thread of its own, as in the worker: this one runs Playwright's event loop, where async_to_sync refuses.
    with ThreadPoolExecutor(1) as worker:
        worker.submit(lambda: (process_document(document.pk), connections.close_all())).result()
    document.refresh_from_db()
    assert (document.status, document.title) == ("ready", "Beacon log"), document.error
    expect(page.locator(f'.quarry-progress[data-quarry-doc="{document.pk}"]')).to_have_attribute("data-status", "ready")
    expect(label).to_have_text("Beacon log (beacon-log.md)")
    # The "Updated" cell follows too (its datetime attribute is exact to the microsecond).
    expect(page.locator(f'[data-quarry-time="{document.pk}"]')).to_have_attribute(
        "datetime", timezone.localtime(document.updated_at).isoformat())
    assert seen.messages == []


def test_the_document_feedback_and_schedule_lists_fit_1280_px(world: World, context: BrowserContext) -> None:
    """No column is clipped: the results table is no wider than its box, with two tenants' rows, long
    names, a failure and the longest model id (and the task runner's schedules, two dates a row)."""
    from chat.models import ChatSession, Feedback, Turn  # here: only this test writes chat rows

    long_title = "Quarterly maintenance schedule for the northern harbour beacons and their backup generators"
    for tenant in (world.acme, world.globex):
        Document.objects.create(tenant=tenant, external_id="reports/2026/harbour-maintenance-schedule-final.pdf",
                                title=long_title, status="ready", progress=1, chunk_count=1234, version=12,
                                embedding_model="local/bge-small-en-v1.5-int8")
        Document.objects.create(tenant=tenant, external_id="scan-0001.png", status="failed",
                                error="scan-0001.png could not be read: the image has no text that OCR could find")
        session = ChatSession.objects.create(tenant=tenant, principal="user:1")
        turn = Turn.objects.create(tenant=tenant, session=session, role="assistant", content="An answer.")
        Feedback.objects.create(tenant=tenant, session=session, turn=turn, principal="user:1", rating="down",
                                question="How do I upload documents and which formats does the extraction support for editors? " * 3,
                                comment="The answer misses PowerPoint and Excel, which the README says are supported. " * 3,
                                model="quarry/offline-extractive-with-a-long-deployment-name", citations=[{"chunk_id": "a:0"}] * 12)
    for name, func in (("knowledge: reclaim stalled documents", "knowledge.tasks.reclaim_documents"),
                       ("knowledge: repair bloated search indexes", "knowledge.tasks.repair_indexes")):
        Schedule.objects.create(name=name, func=func, schedule_type=Schedule.MINUTES, minutes=1, repeats=-1,
                                next_run=timezone.now())
    page = signed_in_as_root(context)
    seen = Violations(page)
    for path, rows in (("/admin/knowledge/document/", 4), ("/admin/chat/feedback/", 2), ("/admin/django_q/schedule/", None)):
        page.goto(path)
        if rows is None:  # the app keeps schedules of its own beside these two
            expect(page.locator("#result_list tbody tr", has_text="knowledge.tasks.repair_indexes").first).to_be_visible()
        else:
            expect(page.locator("#result_list tbody tr")).to_have_count(rows)
        widths = page.locator(".results").evaluate("box => [box.scrollWidth, box.clientWidth]")
        assert widths[0] <= widths[1], (path, widths)
    # The model id is cut to its column, whole in the tooltip.
    page.goto("/admin/knowledge/document/")
    expect(page.locator(".quarry-model", has_text="local/").first).to_have_attribute("title", "local/bge-small-en-v1.5-int8")
    assert seen.messages == []


def test_the_chunk_and_search_pages_fit_a_phone(world: World, browser: Any, base: str) -> None:
    """At 390 px their tables scroll inside their box: the page does not widen, and the text column keeps a
    readable width instead of a few letters a line."""
    from knowledge import rag
    from knowledge.services.documents import document_ingest
    from tests.embedders import BagOfWordsEmbedder

    text = " ".join(f"The beacon on pier {n} is checked every morning by the harbour crew." for n in range(40))
    with ThreadPoolExecutor(1) as worker:  # not in this thread: Playwright's event loop runs here
        worker.submit(lambda: (document_ingest(tenant=world.acme, actor="seed", embedder=BagOfWordsEmbedder(),
                                               documents=[rag.RAGDocument("beacons", text, title="Beacons")]),
                               connections.close_all())).result()
    document = Document.objects.get(tenant=world.acme, external_id="beacons")
    phone = browser.new_context(base_url=base, viewport={"width": 390, "height": 800})
    try:
        page = signed_in(world, phone)
        seen = Violations(page)
        for path, cell in ((f"/admin/knowledge/document/{document.pk}/chunks/", ".quarry-chunk-text"),
                           (f"/admin/knowledge/document/search/?tenant={world.acme.pk}&query=beacon&mode=keyword&limit=5&filters=",
                            ".quarry-preview")):
            page.goto(path)
            expect(page.locator(cell).first).to_be_visible()
            assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"), path
            assert page.locator(cell).first.evaluate("td => td.getBoundingClientRect().width") >= 200, path
        assert seen.messages == []
    finally:
        phone.close()
