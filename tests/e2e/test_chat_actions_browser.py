"""Answer actions in a real browser: copy, regenerate and flip, edit and resend, feedback, conversation
search, highlighted code, tables and the citation preview.

The server answers with the fake OpenAI-compatible model of tests/fake_openai.py (a thread of this
process, on 127.0.0.1), so answers are known in advance: "Answer N about ... [1]." numbered in order,
and for a question about code, a Markdown answer with a fenced Python block and a table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from chat.models import Feedback, Turn
from knowledge import rag
from tests.chat_support import write_catalog
from tests.conftest import World
from tests.e2e.test_chat_browser import INJECTED, Watch, ingest, sign_in
from tests.fake_openai import FakeOpenAI, fake_openai_server
from tests.servers import asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)

CODE_QUESTION = "Show the upload code"
CODE_ANSWER = """Uploads go through the admin [1].

```python
def upload(path: str) -> int:
    # <img src=x onerror="window.__xss='code'">
    return len(path)
```

| Step | Who |
| --- | :-: |
| Upload | Editors [1] |
| Index | Workers |
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeOpenAI]:
    with fake_openai_server() as server:
        yield server


@pytest.fixture(scope="module")
def base(django_db_setup: None, model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    catalog = write_catalog(tmp_path_factory.mktemp("catalog") / "models.yaml", model.base_url)
    with asgi_server(child_env(QUARRY_MODEL_CONFIG_PATH=str(catalog)), log_name="uvicorn-e2e-actions") as url:
        yield url


@pytest.fixture
def replies(model: FakeOpenAI) -> FakeOpenAI:
    """Numbered answers, and the code answer for a question about code."""
    counter = itertools.count(1)

    def reply(messages: list[dict[str, Any]]) -> str:
        question = str(messages[-1].get("content") or "")
        n = next(counter)
        return CODE_ANSWER if "code" in question.lower() else f"Answer {n}: editors upload files [1]."

    model.chat_reply = reply
    model.chat_chunk_delay = 0.0
    return model


@pytest.fixture
def corpus(world: World, replies: FakeOpenAI) -> World:
    ingest("acme", [
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                        title="Uploading"),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings.", title="Search modes"),
    ])
    return world


def ask(page: Page, question: str) -> Any:
    box = page.get_by_label("Your question")
    box.fill(question)
    box.press("Enter")
    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-state", "completed", timeout=30_000)
    return answer


def answers(page: Page) -> Any:
    return page.locator(".message-assistant .markdown")


def test_copy_regenerate_flip_between_versions_and_rate_an_answer(
    corpus: World, context: BrowserContext, base: str, tmp_path: Path
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    watch = Watch()
    page = watch.attach(context.new_page())
    sign_in(page)
    first = ask(page, "How do editors upload files?")
    expect(first.locator(".markdown")).to_have_text("Answer 1: editors upload files [1].")

    first.get_by_role("button", name="Copy this answer as Markdown").click()
    expect(first.get_by_role("button", name="Copy this answer as Markdown")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Answer 1: editors upload files [1].\n\n[1]: " + base + "/documents/guide?tenant=acme&chunk=guide%3A0")

    first.get_by_role("button", name="Answer this question again").click()
    expect(answers(page)).to_have_text(["Answer 2: editors upload files [1]."])
    answer = page.locator(".message-assistant")
    expect(answer.locator(".version-label")).to_have_text("2/2")
    expect(page.locator(".message-user")).to_have_count(1)
    answer.get_by_role("button", name="Previous answer version").click()
    expect(answers(page)).to_have_text(["Answer 1: editors upload files [1]."])
    expect(page.locator(".message-assistant .version-label")).to_have_text("1/2")
    page.reload()  # the chosen version is the conversation now
    expect(answers(page)).to_have_text(["Answer 1: editors upload files [1]."])
    expect(page.locator(".message-assistant .version-label")).to_have_text("1/2")
    page.locator(".message-assistant").get_by_role("button", name="Next answer version").click()
    expect(answers(page)).to_have_text(["Answer 2: editors upload files [1]."])

    # Thumbs down with a comment, on the version shown.
    shown = page.locator(".message-assistant")
    shown.get_by_role("button", name="Bad answer").click()
    expect(shown.get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")
    shown.get_by_label("Comment on this answer (optional)").fill("It should mention the workers.")
    shown.get_by_role("button", name="Send feedback").click()
    expect(shown.locator(".feedback-note")).to_have_text("Thanks: comment saved.")
    feedback = Feedback.objects.get()
    assert (feedback.rating, feedback.comment, feedback.answer) == ("down", "It should mention the workers.",
                                                                     "Answer 2: editors upload files [1].")
    assert feedback.citations and feedback.citations[0]["chunk_id"] == "guide:0" and feedback.retrieval["mode"]
    page.reload()
    expect(page.locator(".message-assistant").get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")
    page.screenshot(path=tmp_path / "versions.png", full_page=True)
    assert watch.errors == [] and watch.dialogs == []


def test_edit_and_resend_continues_from_the_edited_question(
    corpus: World, replies: FakeOpenAI, context: BrowserContext, tmp_path: Path
) -> None:
    watch = Watch()
    page = watch.attach(context.new_page())
    sign_in(page)
    ask(page, "What are uploads?")
    ask(page, "Who processes them?")
    ask(page, "How long does it take?")
    second = page.locator(".message-user").nth(1)
    second.get_by_role("button", name="Edit this question and send it again").click()
    box = second.get_by_label("Edited question")
    expect(box).to_have_value("Who processes them?")
    box.fill("Who indexes them?")
    second.get_by_role("button", name="Send").click()
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", "completed")
    expect(page.locator(".message-user .message-text")).to_have_text(["What are uploads?", "Who indexes them?"])
    expect(answers(page)).to_have_text(["Answer 1: editors upload files [1].", "Answer 4: editors upload files [1]."])
    edited = page.locator(".message-user").nth(1)
    expect(edited.locator(".version-label")).to_have_text("2/2")
    # The old branch is kept: flip the question back and the conversation that followed returns.
    edited.get_by_role("button", name="Previous question version").click()
    expect(page.locator(".message-user .message-text")).to_have_text(
        ["What are uploads?", "Who processes them?", "How long does it take?"])
    assert Turn.objects.count() == 8
    page.screenshot(path=tmp_path / "edited.png", full_page=True)

    # A regenerate stopped halfway stores nothing, and the answer it was replacing comes back.
    replies.chat_chunk_delay = 0.5
    last = page.locator(".message-assistant").last
    last.get_by_role("button", name="Answer this question again").click()
    expect(page.get_by_role("button", name="Stop")).to_be_enabled()
    page.get_by_role("button", name="Stop").click()
    expect(answers(page)).to_have_text(["Answer 1: editors upload files [1].", "Answer 2: editors upload files [1].",
                                        "Answer 3: editors upload files [1]."])
    expect(page.locator(".message-assistant .version-label")).to_have_count(0)
    assert Turn.objects.count() == 8
    assert watch.errors == [] and watch.dialogs == []


def test_conversation_search_finds_the_callers_conversations(corpus: World, context: BrowserContext, tmp_path: Path) -> None:
    watch = Watch()
    page = watch.attach(context.new_page())
    sign_in(page)
    ask(page, "Where do the walrus reports live?")
    page.get_by_role("link", name="New chat").click()
    ask(page, "How are uploads indexed?")
    page.get_by_role("link", name="New chat").click()
    ask(page, "Is there a Walrus budget?")
    search = page.get_by_label("Search conversations")
    search.fill("walrus")
    results = page.locator("#session-results .search-result")
    expect(results.locator(".session-title")).to_have_text(["Is there a Walrus budget?", "Where do the walrus reports live?"])
    expect(page.locator("#session-list")).to_be_hidden()
    search.fill("Answer 2")  # an answer's words find their conversation too
    expect(results.locator(".session-title")).to_have_text(["How are uploads indexed?"])
    expect(results.locator(".session-match")).to_contain_text(["Answer 2: editors upload files"])
    results.first.locator(".session-link").click()
    expect(page.locator(".message-user .message-text")).to_have_text(["How are uploads indexed?"])
    expect(page).to_have_url(re.compile(r"/\?session=session-"))
    search.fill("no such words")
    expect(page.locator("#session-results .empty")).to_contain_text("No conversation contains")
    search.press("Escape")
    expect(page.locator("#session-list")).to_be_visible()
    expect(page.locator("#session-list .session-item")).to_have_count(3)
    page.screenshot(path=tmp_path / "search.png", full_page=True)
    assert watch.errors == [] and watch.dialogs == []


def test_code_is_highlighted_tables_render_and_citations_preview_their_passage(
    corpus: World, context: BrowserContext, tmp_path: Path
) -> None:
    watch = Watch()
    page = watch.attach(context.new_page())
    sign_in(page)
    answer = ask(page, CODE_QUESTION)
    code = answer.locator("pre code.language-python")
    expect(code).to_contain_text("def upload(path: str) -> int:")
    expect(code.locator("span.hljs-keyword").first).to_have_text("def")
    expect(code.locator("span.hljs-comment")).to_contain_text("<img src=x onerror=")  # text, never markup
    expect(answer.locator("table th")).to_have_text(["Step", "Who"])
    expect(answer.locator("table tbody tr")).to_have_count(2)
    expect(answer.locator("table td.align-center").first).to_have_text("Editors [1]")
    assert page.locator(INJECTED).count() == 0 and page.evaluate("window.__xss") is None

    marker = answer.locator("a.cite").first
    marker.hover()
    preview = page.locator("#cite-preview")
    expect(preview).to_be_visible()
    expect(preview.locator(".cite-preview-title")).to_have_text("[1] Uploading")
    expect(preview.locator(".cite-preview-text")).to_contain_text("Editors upload files in the admin.")
    page.mouse.move(5, 5)
    expect(preview).to_be_hidden()
    marker.focus()  # the keyboard gets the same preview
    expect(preview).to_be_visible()
    expect(marker).to_have_attribute("aria-describedby", "cite-preview")
    page.keyboard.press("Escape")
    expect(preview).to_be_hidden()
    page.screenshot(path=tmp_path / "code.png", full_page=True)
    assert watch.errors == [] and watch.dialogs == []


def test_a_stopped_answer_offers_regenerate_which_asks_again_in_its_place(
    corpus: World, replies: FakeOpenAI, context: BrowserContext, tmp_path: Path
) -> None:
    watch = Watch()
    page = watch.attach(context.new_page())
    sign_in(page)
    slow = " ".join(f"word{i}" for i in range(300))
    replies.chat_reply = lambda messages: slow
    replies.chat_chunk_delay = 0.05  # fifteen seconds for the whole answer
    box = page.get_by_label("Your question")
    box.fill("How do editors upload files?")
    box.press("Enter")
    answer = page.locator(".message-assistant").last
    expect(answer.locator(".markdown")).to_contain_text("word3", timeout=30_000)  # the first search loads the embedder
    page.get_by_role("button", name="Stop").click()
    expect(answer).to_have_attribute("data-state", "stopped")
    expect(answer).to_contain_text("Stopped. This answer was not saved.")
    page.screenshot(path=str(tmp_path / "stopped.png"))

    replies.chat_reply = lambda messages: "Editors upload files in the admin [1]."
    replies.chat_chunk_delay = 0.0
    answer.get_by_role("button", name="Regenerate").click()
    again = page.locator(".message-assistant").last
    expect(again).to_have_attribute("data-state", "completed")
    expect(again.locator(".markdown")).to_contain_text("Editors upload files in the admin")
    # In place of the stopped one: one question, one answer, as the server stored them.
    expect(page.locator(".message-user")).to_have_count(1)
    expect(page.locator(".message-assistant")).to_have_count(1)
    assert list(Turn.objects.order_by("id").values_list("role", flat=True)) == ["user", "assistant"]
    assert watch.errors == []
