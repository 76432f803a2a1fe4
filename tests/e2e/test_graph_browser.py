"""The graph picture in a real browser: on a document's page (drawn from the page's own JSON)
and in the web chat's sources panel (from POST /v1/graph/picture), under the pages' strict CSP."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.conftest import World
from tests.e2e.test_chat_browser import Watch, ask, base, ingest, sign_in, watch  # noqa: F401 - fixtures
from tests.test_graph import ARTICLES, doc

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def linked(world: World) -> World:
    ingest("acme", [doc(key) for key in ARTICLES])
    ingest("globex", [doc("snow", text="Hank Snow is Globex's code name for Project Tundra.")])
    return world


def test_document_page_draws_how_its_passage_connects_and_links_onward(linked: World, context: BrowserContext, watch: Watch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A long title of wide letters: its label is cut to 18 characters, still wider than a fixed column.
    ingest("acme", [doc("hello", title="WWWWWWWWWWWWWWWWWWWW: Hello Love (song)")])
    page = watch.attach(context.new_page())
    sign_in(page)
    page.goto("/documents/hello?chunk=hello:0&tenant=acme")
    figure = page.locator("figure.graph-figure")
    expect(figure.locator("svg.graph-svg")).to_be_visible()
    expect(figure.locator("svg .graph-entity text", has_text="Hank Snow")).to_be_visible()
    expect(figure.locator("svg .graph-passage.graph-focus")).to_have_count(1)
    expect(figure.locator(".graph-fallback li > strong").filter(has_text=re.compile(r"^Hank Snow$"))).to_be_visible()  # the text version
    lines = figure.locator("svg .graph-links line")
    assert lines.count() >= 2
    # Every label shows whole: none reaches past the picture's edges (the left one was clipped).
    svg_box = figure.locator("svg.graph-svg").bounding_box()
    assert svg_box is not None
    for text in figure.locator("svg text").all():
        box = text.bounding_box()
        assert box is not None and box["x"] >= svg_box["x"] - 0.5, text.text_content()
        assert box["x"] + box["width"] <= svg_box["x"] + svg_box["width"] + 0.5, text.text_content()
    # The cited passage is highlighted by its background only: a frame on an inline mark is drawn
    # around every line, blank ones included.
    passage = page.locator("mark#passage")
    passage.focus()
    assert passage.evaluate("m => [getComputedStyle(m).boxShadow, getComputedStyle(m).outlineStyle]") == ["none", "none"]
    page.screenshot(path=str(tmp_path / "document-graph.png"), full_page=True)
    assert "Project Tundra" not in page.content()  # globex's graph is not ours
    figure.locator("svg .graph-passage a", has_text="Hank Snow").first.click()
    expect(page).to_have_url(re.compile(r"/documents/snow\?chunk=snow%3A0"))
    expect(page.get_by_role("heading", name="Hank Snow", exact=True)).to_be_visible()
    assert watch.errors == [] and watch.dialogs == []  # no CSP violation, no script error


def test_chat_sources_panel_pictures_the_cited_passages(linked: World, context: BrowserContext, watch: Watch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page = watch.attach(context.new_page())
    sign_in(page)
    # Three sentences: the picture needs two cited passages, and one sentence would answer it.
    answer = ask(page, "Where did Hank Snow, who sang Hello Love, live in Tennessee? Answer in three sentences.")
    expect(answer).to_have_attribute("data-state", "completed")
    answer.get_by_role("button", name=re.compile(r"Sources \(\d+\)")).click()
    section = page.locator("#sources-graph")
    expect(section).to_be_visible()
    expect(section.locator("svg.graph-svg .graph-entity text", has_text="Hank Snow")).to_be_visible()
    expect(section.locator(".graph-text li", has_text=re.compile(r"Hank Snow \(document\): \[\d\]"))).to_be_visible()
    page.screenshot(path=str(tmp_path / "chat-graph.png"), full_page=True)
    assert watch.errors == [] and watch.dialogs == []
