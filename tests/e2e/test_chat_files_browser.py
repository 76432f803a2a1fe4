"""Files attached to a conversation, in a real browser (Debian's Chromium through Playwright) against
a real uvicorn server and a real django-q2 cluster on the test database, with the offline model:
attach (paperclip and drag and drop) -> the worker's progress -> ready -> an answer citing the file;
a file that fails extraction says why in the conversation and the chat goes on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.conftest import World
from tests.e2e.test_chat_browser import Watch, ask, assert_nothing_injected, ingest, sign_in
from tests.servers import ROOT, asgi_server, child_env, qcluster

from knowledge import rag

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = ("Zanzibar protocol. The Zanzibar protocol requires three purple keys and a lighthouse keeper named Ottoline. "
          "It was written for the night shift.")
QUESTION = "What does the Zanzibar protocol require?"


@pytest.fixture(scope="module")
def base(django_db_setup: None) -> Iterator[str]:
    env = child_env(QUARRY_MODEL_CONFIG_PATH=str(ROOT / "config" / "models.yaml"))
    for name in list(env):  # the shipped default: the offline model, whatever this shell configures
        if name.startswith("QUARRY_CHAT_"):
            del env[name]
    with asgi_server(env, log_name="uvicorn-e2e-files") as url, qcluster(env, log_name="qcluster-e2e-files"):
        yield url


@pytest.fixture
def watch() -> Watch:
    return Watch()


@pytest.fixture
def corpus(world: World) -> World:
    ingest("acme", [rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                                    title="Uploading")])
    return world


def test_attach_a_file_watch_it_index_and_get_an_answer_citing_it(
    corpus: World, context: BrowserContext, watch: Watch, tmp_path: Path
) -> None:
    page = watch.attach(context.new_page())
    sign_in(page)

    # The paperclip, before any question: the conversation starts with the file.
    page.get_by_role("button", name="Attach files").click()
    page.locator("#attach-input").set_input_files([{"name": "zanzibar.txt", "mimeType": "text/plain", "buffer": SECRET.encode()}])
    expect(page).to_have_url(re.compile(r"/\?session=session-"))
    item = page.locator(".attached-file", has_text="zanzibar.txt")
    expect(item.locator(".attached-status")).to_have_text(re.compile(r"Ready · 1 passage"), timeout=60_000)
    page.screenshot(path=str(tmp_path / "attached.png"))

    session_item = page.locator(".session-item").first
    expect(session_item.locator(".session-title")).to_have_text("New conversation")
    answer = ask(page, QUESTION)
    expect(answer).to_have_attribute("data-state", "completed")
    # Its first question names the conversation at once, as the server does (not only after a reload).
    expect(page.locator("#conversation-title")).to_have_text(QUESTION)
    expect(session_item.locator(".session-title")).to_have_text(QUESTION)
    expect(answer.locator(".markdown")).to_contain_text("three purple keys")
    expect(answer.locator(".markdown")).to_contain_text("From the attached files:")
    answer.locator("a.cite").first.click()
    source = page.locator(".sources .source").first
    expect(source.locator(".source-title")).to_have_text("zanzibar.txt (attached)")
    expect(source.locator(".source-score")).to_have_text(re.compile(r"^Attached file · score \d\.\d+$"))
    expect(source.locator(".source-snippet")).to_contain_text("purple keys")
    assert source.locator(".source-title").get_attribute("href") is None  # no knowledge-base page for it
    page.screenshot(path=str(tmp_path / "answered.png"))

    # Drag and drop: a file that cannot be extracted fails with its reason, in the conversation, and the chat goes on.
    page.evaluate("""() => {
        const transfer = new DataTransfer();
        transfer.items.add(new File(["%PDF-1.4 not really a pdf"], "broken.pdf", {type: "application/pdf"}));
        const zone = document.querySelector(".conversation");
        for (const type of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(new DragEvent(type, {dataTransfer: transfer, bubbles: true, cancelable: true}));
        }
    }""")
    broken = page.locator(".attached-file", has_text="broken.pdf")
    expect(broken.locator(".attached-status")).to_have_text(re.compile(r"^Failed: .*broken\.pdf"), timeout=60_000)
    expect(page.locator(".messages .notice", has_text="broken.pdf could not be attached")).to_be_visible()
    follow_up = ask(page, "How do editors upload files?")
    expect(follow_up).to_have_attribute("data-state", "completed")
    expect(follow_up.locator(".markdown")).to_contain_text("Editors upload files in the admin.")

    # Removing a file takes its passages out of the conversation.
    broken.get_by_role("button", name="Remove broken.pdf").click()
    expect(broken).to_have_count(0)

    # Reloading the conversation brings its files back, and the citation still names the file.
    page.reload()
    expect(page.locator(".attached-file", has_text="zanzibar.txt")).to_be_visible()
    assert_nothing_injected(page, watch)
    assert watch.errors == []


def test_a_file_over_the_conversation_bound_is_refused_with_the_bound_named(
    corpus: World, context: BrowserContext, watch: Watch
) -> None:
    page = watch.attach(context.new_page())
    sign_in(page)
    big = b"x" * (21 * 1024 * 1024)  # over the default QUARRY_CHAT_FILES_MAX_BYTES (20 MB)
    page.locator("#attach-input").set_input_files([{"name": "huge.txt", "mimeType": "text/plain", "buffer": big}])
    refused = page.locator(".attached-file", has_text="huge.txt")
    expect(refused.locator(".attached-status")).to_contain_text("QUARRY_CHAT_FILES_MAX_BYTES", timeout=60_000)
    expect(page.locator(".messages .notice", has_text="huge.txt could not be attached")).to_be_visible()
    # The chat is not blocked.
    answer = ask(page, "How do editors upload files?")
    expect(answer).to_have_attribute("data-state", "completed")
    # 413 is logged by the browser as a failed resource load; nothing else may be.
    assert [e for e in watch.errors if "413" not in e] == []
