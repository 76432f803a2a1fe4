"""The web chat in a real browser (Debian's Chromium through Playwright) against a real
uvicorn server on the test database, with the shipped model catalog (the built-in offline
model) and a small corpus indexed with the local embedder.

Screenshots go to each test's pytest temp folder (chat.png, document.png, phone.png, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from playwright.sync_api import BrowserContext, Page, WebSocketRoute, expect

from knowledge import rag
from tests.conftest import World
from tests.servers import ROOT, asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-tests-only"
UPLOAD_QUESTION = "How do editors upload files?"
XSS_TITLE = """<img src=x onerror="window.__xss='title'">Beacon notes"""
XSS_TEXT = (
    "Harbor operations manual. "
    "The harbor beacon shows <script>window.__xss='script';alert('script')</script> when the beacon is armed. "
    """The harbor beacon icon is <img src=x onerror="window.__xss='img';alert('img')"> in the beacon log. """
    "Harbor beacon help lives at [beacon help](javascript:window.__xss='link') for beacon operators."
)
# A JSON data block (the graph picture's, Django's json_script: escaped, never executed) is not markup from a document.
INJECTED = "script:not([src]):not([type='application/json']), img, iframe, object, embed, svg:not(.graph-svg), [onerror], [onload], [onclick], [onmouseover], a[href^='javascript']"


@pytest.fixture(scope="module")
def base(django_db_setup: None) -> Iterator[str]:
    env = child_env(QUARRY_MODEL_CONFIG_PATH=str(ROOT / "config" / "models.yaml"))
    for name in list(env):  # the shipped default: the offline model, whatever this shell configures
        if name.startswith("QUARRY_CHAT_"):
            del env[name]
    with asgi_server(env, log_name="uvicorn-e2e") as url:
        yield url


def ingest(namespace: str, documents: list[rag.RAGDocument]) -> None:
    """Index ``documents`` from a thread of its own: Playwright's loop is running in this one."""

    def work() -> None:
        try:
            async_to_sync(rag.postgres(rag.default_embedder(), namespace=namespace).ingest)(documents)
        finally:
            connections.close_all()  # this thread's connection would block dropping the test database

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(work).result()


@pytest.fixture
def corpus(world: World) -> World:
    ingest("acme", [
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                        title="Uploading", metadata={"team": "support"}),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings.", title="Search modes"),
        rag.RAGDocument("notes/beacon", XSS_TEXT, title=XSS_TITLE),
    ])
    ingest("globex", [rag.RAGDocument("guide", "Globex confidential: quarterly upload numbers for the board.")])
    return world


class Watch:
    """What a page did that it should not: dialogs, script errors, console errors (CSP violations among them)."""

    def __init__(self) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []

    def attach(self, page: Page) -> Page:
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("console", lambda message: message.type == "error" and self.errors.append(f"console: {message.text}"))
        return page


@pytest.fixture
def watch() -> Watch:
    return Watch()


def sign_in(page: Page, username: str = "teammate") -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="New conversation")).to_be_visible()
    expect(page.locator("#connection")).to_have_text("Connected")


def ask(page: Page, question: str) -> Any:
    box = page.get_by_label("Your question")
    box.fill(question)
    box.press("Enter")
    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-state", re.compile("completed|error"), timeout=30_000)
    return answer


def assert_nothing_injected(page: Page, watch: Watch) -> None:
    assert page.locator(INJECTED).count() == 0, page.locator(INJECTED).evaluate_all("nodes => nodes.map(n => n.outerHTML)")
    assert page.evaluate("window.__xss") is None
    assert watch.dialogs == []


def test_sign_in_ask_open_a_cited_source_and_survive_a_dropped_connection(
    corpus: World, context: BrowserContext, watch: Watch, tmp_path: Path
) -> None:
    page = watch.attach(context.new_page())
    sockets: list[WebSocketRoute] = []

    def through_the_test(ws: WebSocketRoute) -> None:  # a proxy the test can cut
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/ws/chat/$"), through_the_test)
    sign_in(page)

    box = page.get_by_label("Your question")
    box.press_sequentially("first line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    assert box.input_value() == "first line\nsecond line" and page.locator(".message").count() == 0

    answer = ask(page, UPLOAD_QUESTION)
    expect(answer).to_have_attribute("data-state", "completed")
    expect(answer.locator(".markdown")).to_contain_text("Editors upload files in the admin.")
    # One sentence answers it (editors, upload and files are all in it): the offline model stops there.
    expect(answer.locator(".markdown li")).to_have_count(1)
    expect(answer.locator(".message-footer")).to_contain_text("offline-extractive (built-in offline model)")
    expect(page.locator(".message-user")).to_have_text(re.compile(re.escape(UPLOAD_QUESTION)))
    expect(page.get_by_role("status").filter(has_text="Answer complete.")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"/\?session=session-"))
    session_id = page.url.split("session=")[1]
    current = page.locator(f'.session-item[data-session-id="{session_id}"] .session-link')
    expect(current).to_have_attribute("aria-current", "page")
    expect(current).to_contain_text(UPLOAD_QUESTION)

    # Sources: titles and snippets from /v1/chunks/fetch; a citation marker focuses its source.
    source = page.locator("#source-1")
    expect(source.locator(".source-title")).to_have_text("Uploading")
    expect(source.locator(".source-snippet")).to_contain_text("Editors upload files in the admin.")
    answer.locator("a.cite").first.click()
    expect(source).to_be_focused()
    page.screenshot(path=tmp_path / "chat.png", full_page=True)

    with context.expect_page() as opened:
        source.locator(".source-title").click()
    document = watch.attach(opened.value)
    document.wait_for_load_state()
    assert re.search(r"/documents/guide\?tenant=acme&chunk=guide%3A0#passage$", document.url)
    expect(document.get_by_role("heading", level=1)).to_have_text("Uploading")
    expect(document.locator("mark#passage")).to_contain_text("Editors upload files in the admin.")
    expect(document.locator("mark#passage")).to_be_in_viewport()
    document.screenshot(path=tmp_path / "document.png", full_page=True)
    document.close()

    # The connection drops: the page reconnects by itself and reloads the finished turns.
    sockets[-1].close(code=4000, reason="the test cut the connection")
    expect(page.locator("#connection")).to_have_text(re.compile("Offline|Connecting"))
    expect(page.locator("#connection")).to_have_text("Connected", timeout=20_000)
    expect(page.get_by_role("status").filter(has_text="Reconnected.")).to_have_count(1)
    assert len(sockets) == 2
    expect(page.locator(".message-assistant")).to_have_count(1)
    expect(page.locator(".message-assistant .markdown")).to_contain_text("Editors upload files in the admin.")
    follow_up = ask(page, "Who processes uploads in the background?")
    expect(follow_up).to_have_attribute("data-state", "completed")
    expect(follow_up.locator(".markdown")).to_contain_text("workers")

    # A phone-width screen: one column, the conversation list behind a button.
    phone = browser_context_like(context, width=390, height=844)
    small = watch.attach(phone.new_page())
    small.goto(f"/?session={session_id}")
    expect(small.locator(".message-assistant")).to_have_count(2)
    expect(small.locator("#sessions-panel")).to_be_hidden()
    small.get_by_role("button", name="Conversations").click()
    expect(small.locator("#sessions-panel")).to_be_visible()
    small.get_by_role("button", name="Conversations").click()
    small.screenshot(path=tmp_path / "phone.png", full_page=True)
    phone.close()

    # Agent mode: the same socket, the retrieval agent (driven by the offline model), a new conversation.
    page.get_by_label("Agent (multi-step)").check()
    expect(page.locator("#mode-hint")).to_be_visible()
    agent_answer = ask(page, UPLOAD_QUESTION)
    expect(agent_answer).to_have_attribute("data-state", "completed")
    expect(page.locator(".message-assistant")).to_have_count(1)  # switching mode started a new conversation
    expect(agent_answer.locator(".steps summary")).to_have_text("Research steps (1)")
    expect(agent_answer.locator(".steps li")).to_have_text(["Searched “How do editors upload files?”"])
    expect(agent_answer.locator(".markdown")).to_contain_text("Editors upload files in the admin.")
    agent_answer.locator("a.cite").first.click()
    expect(page.locator("#source-1")).to_be_focused()
    expect(page.locator("#source-1 .source-title")).to_have_text("Uploading")
    agent_item = page.locator(".session-item").first
    expect(agent_item.locator(".session-badge")).to_be_visible()
    expect(agent_item.locator(".session-link")).to_have_attribute("aria-current", "page")
    # The agent's answers take the same actions as the chat's: rate it, regenerate it (a new run).
    agent_answer.get_by_role("button", name="Good answer").click()
    expect(agent_answer.locator(".feedback-note")).to_have_text("Thanks: feedback saved.")
    page.reload()  # an agent conversation comes back from its runs
    expect(page.locator(".message-assistant .markdown")).to_contain_text("Editors upload files in the admin.")
    expect(page.get_by_label("Agent (multi-step)")).to_be_checked()
    expect(page.locator(".message-assistant").get_by_role("button", name="Good answer")).to_have_attribute("aria-pressed", "true")
    page.locator(".message-assistant").get_by_role("button", name="Answer this question again").click()
    expect(page.locator(".message-assistant")).to_have_count(2)
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", "completed", timeout=30_000)
    expect(page.locator(".message-assistant").last.get_by_role("button", name="Bad answer")).to_be_visible()
    page.screenshot(path=tmp_path / "agent.png", full_page=True)
    assert watch.errors == [] and watch.dialogs == []


def browser_context_like(context: BrowserContext, *, width: int, height: int) -> BrowserContext:
    """A new context signed in as the same user (same cookies), with another screen size."""
    browser = context.browser
    assert browser is not None
    base_url = context.pages[0].url.split("/?")[0] if context.pages else None
    phone = browser.new_context(base_url=base_url, viewport={"width": width, "height": height},
                                storage_state=context.storage_state(), is_mobile=True, has_touch=True)
    phone.set_default_timeout(15_000)
    return phone


UNCITED_TITLE = """<img src=x onerror="window.__xss='also'">Upload limits"""


def test_the_sources_panel_lists_retrieved_but_uncited_passages_apart(
    corpus: World, context: BrowserContext, watch: Watch, tmp_path: Path
) -> None:
    # Found by keyword (upload, files) but not quoted: the first sentence of "Uploading" answers alone.
    ingest("acme", [rag.RAGDocument("limits", "Files above the upload limit are refused with a message.", title=UNCITED_TITLE)])
    page = watch.attach(context.new_page())
    sign_in(page)
    also = page.locator("#also-retrieved")
    expect(also).to_be_hidden()
    answer = ask(page, UPLOAD_QUESTION)
    expect(answer).to_have_attribute("data-state", "completed")
    expect(answer.locator(".message-footer")).to_contain_text("Sources (1)")
    expect(page.locator("#source-list .source")).to_have_count(1)
    expect(page.locator("#source-1 .source-title")).to_have_text("Uploading")

    expect(also).to_be_visible()
    expect(also.get_by_role("heading", name="Also retrieved")).to_be_visible()
    uncited = also.locator(".source").filter(has_text="Upload limits")
    expect(uncited).to_have_count(1)
    expect(uncited.locator(".source-title")).to_have_text(UNCITED_TITLE)  # the title as text, markup and all
    expect(uncited.locator(".source-snippet")).to_contain_text("Files above the upload limit are refused")
    expect(uncited.locator(".source-number")).to_have_count(0)  # not a citation: no number an [n] could name
    expect(also.locator(".source-title").filter(has_text="Uploading")).to_have_count(0)  # a cited passage is not repeated
    assert_nothing_injected(page, watch)
    page.screenshot(path=tmp_path / "also-retrieved.png", full_page=True)

    page.locator("#new-chat").click()
    expect(page.get_by_role("heading", name="New conversation")).to_be_visible()
    expect(also).to_be_hidden()
    assert watch.errors == [] and watch.dialogs == []


def test_markup_in_documents_and_answers_renders_as_text(corpus: World, context: BrowserContext, watch: Watch, tmp_path: Path) -> None:
    page = watch.attach(context.new_page())
    sign_in(page)
    # Three sentences, so that both sentences with markup are quoted (the offline model stops at one otherwise).
    answer = ask(page, "What does the harbor beacon show, and what is its icon in the beacon log? Answer in three sentences.")
    expect(answer).to_have_attribute("data-state", "completed")
    text = answer.locator(".markdown").inner_text()
    assert "<script>window.__xss='script';alert('script')</script>" in text
    assert """<img src=x onerror="window.__xss='img';alert('img')">""" in text
    expect(page.locator("#source-1 .source-title")).to_have_text(XSS_TITLE)
    assert_nothing_injected(page, watch)
    page.screenshot(path=tmp_path / "xss-chat.png", full_page=True)

    with context.expect_page() as opened:
        page.locator("#source-1 .source-title").click()
    document = watch.attach(opened.value)
    document.wait_for_load_state()
    expect(document.get_by_role("heading", level=1)).to_have_text(XSS_TITLE)
    expect(document.locator("mark#passage")).to_contain_text("<script>window.__xss='script'")
    assert_nothing_injected(document, watch)
    document.goto("/search/?q=harbor+beacon&mode=keyword")
    expect(document.locator(".hit")).to_have_count(1)
    expect(document.locator(".hit-title")).to_have_text(XSS_TITLE)
    expect(document.locator(".snippet mark").first).to_have_text(re.compile("harbor", re.IGNORECASE))
    expect(document.locator(".snippet")).to_contain_text("<script>")
    assert_nothing_injected(document, watch)
    document.screenshot(path=tmp_path / "xss-search.png", full_page=True)

    # The renderer itself, on what a model might write.
    probes = [
        "<script>window.__xss='probe'</script>",
        "<img src=x onerror=\"window.__xss='probe'\">",
        '"><svg onload="window.__xss=1">',
        "[click](javascript:window.__xss=1) and [data](data:text/html,<script>alert(1)</script>)",
        '[quote](https://example.com/"onmouseover="window.__xss=1)',
        "`<b>code</b>` and **<i>strong</i>** and _<u>em</u>_",
        "```\n<script>alert(1)</script>\n```",
        "> <iframe src=x></iframe>\n- <object data=x>\n1. <embed src=x>",
        "Cited [1] and [2] and [1, 3]",
    ]
    rendered = page.evaluate(
        """([probes, injected]) => probes.map((text) => {
            const t = document.createElement("template");
            t.innerHTML = QuarryMarkdown.render(text, {cite: (n) => n === 1});
            return {html: t.innerHTML, injected: t.content.querySelectorAll(injected).length,
                    links: [...t.content.querySelectorAll("a")].map((a) => a.getAttribute("href"))};
        })""",
        [probes, INJECTED],
    )
    for probe, result in zip(probes, rendered, strict=True):
        assert result["injected"] == 0, (probe, result["html"])
        assert all(href.startswith(("https://", "#source-")) for href in result["links"]), (probe, result["links"])
    assert rendered[4]["links"] == ['https://example.com/"onmouseover="window.__xss=1']  # one attribute, quotes inside it
    assert "<code>&lt;b&gt;code&lt;/b&gt;</code>" in rendered[5]["html"] and "<strong>&lt;i&gt;strong&lt;/i&gt;</strong>" in rendered[5]["html"]
    assert rendered[8]["links"] == ["#source-1"]  # [2] and [1, 3] name no such source: left as text
    assert page.evaluate("window.__xss") is None
    assert watch.errors == [] and watch.dialogs == []


def test_a_citation_the_reader_can_no_longer_read_is_shown_withheld(
    world: World, context: BrowserContext, watch: Watch, tmp_path: Path
) -> None:
    """Issue 34: after the reader leaves the group, their earlier answer keeps a numbered source that
    says it is withheld, with no link, no text of the passage and no failed fetch."""
    from accounts.services import group_create, group_member_add, group_member_remove
    from knowledge.services.access import access_principals
    from knowledge.services.documents import document_ingest

    group = group_create(tenant=world.acme, name="payroll")
    group_member_add(group=group, username="teammate")

    def restricted() -> None:
        try:
            document_ingest(tenant=world.acme, actor="test", access=access_principals(tenant=world.acme, groups=["payroll"]),
                            documents=[rag.RAGDocument("payroll", "Payroll: Zebediah Quill earns 91,500 euros a year as harbour master.",
                                                       title="Payroll 2026")])
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(restricted).result()

    page = watch.attach(context.new_page())
    sign_in(page)
    answer = ask(page, "What does Zebediah Quill earn?")
    expect(answer.locator(".markdown")).to_contain_text("91,500")
    expect(page.locator("#source-1 .source-title")).to_have_text("Payroll 2026")

    group_member_remove(group=group, user=world.teammate)
    page.reload()
    expect(page.locator(".message-assistant")).to_have_count(1)
    source = page.locator("#source-1")
    expect(source).to_have_class(re.compile(r"\bsource-withheld\b"))
    expect(source.locator(".source-title")).to_have_text("Source withheld")
    expect(source).not_to_contain_text("91,500")
    expect(source.locator("a")).to_have_count(0)
    answer = page.locator(".message-assistant").last
    answer.locator("a.cite").first.hover()
    expect(page.locator(".cite-preview-text").first).to_contain_text("Source withheld")
    page.screenshot(path=tmp_path / "withheld.png", full_page=True)
    assert watch.errors == []  # no fetch of an empty id (a 400) and no script error
