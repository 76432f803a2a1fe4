"""The shared page-furniture detector: what is furniture, what is content, and paged text."""

from __future__ import annotations

import pytest

from knowledge.rag.boilerplate import (
    boilerplate_kind,
    find_boilerplate_lines,
    is_boilerplate_line,
    normalize_line,
    remove_repeated_lines,
    strip_boilerplate_lines,
    strip_page_furniture,
)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("Home | Docs | Blog", "navigation"),
        ("Home · About us · Contact us · Privacy policy", "navigation"),
        ("Home > Guides > Brewing pour-over coffee", "navigation"),
        ("Home Docs Blog Pricing", "navigation"),
        ("Skip to main content", "navigation"),
        ("Back to top", "navigation"),
        ("We use cookies to improve your experience. Accept all cookies", "cookie"),
        ("This website uses cookies. By continuing to browse you agree.", "cookie"),
        ("Cookie settings", "cookie"),
        ("12/1/26, 7:09 AM", "print"),
        ("12/1/26, 7:09 AM Quarry field guide", "print"),
        ("file:///tmp/quarry/page.html 1/3", "print"),
        ("ﬁle:///home/ann/notes.html", "print"),  # a PDF text layer's ligature
        ("https://docs.example.com/guide/brewing 2/7", "print"),
        ("7", "page-number"),
        ("- 7 -", "page-number"),
        ("Page 7", "page-number"),
        ("Page 7 of 12", "page-number"),
        ("7 / 12", "page-number"),
        ("© 2024 Coffee Co. All rights reserved.", "copyright"),
        ("Copyright 2019-2024 Quarry Ltd", "copyright"),
    ],
)
def test_furniture_lines_are_recognised_with_their_kind(line: str, kind: str) -> None:
    assert boilerplate_kind(line) == kind
    assert is_boilerplate_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "Region | Growth | Revenue",  # a table row
        "North | 12% | 1,200",
        "Method | Grind | Time",
        "Search",  # a section heading may be one navigation word
        "Contact support",
        "Bake the cookies at 180 C for twelve minutes.",
        "Copyright protects the expression of ideas, not the ideas themselves.",
        "The gate opens at 7:09 AM on weekdays.",
        "https://docs.example.com/guide/brewing",  # a reference, not a print footer
        "Pour-over coffee needs a steady hand and freshly ground beans.",
        "Input / Output",
        "",
        "We use cookies " + "and other words " * 30,  # a long paragraph about cookies is prose
    ],
)
def test_content_lines_are_not_furniture(line: str) -> None:
    assert boilerplate_kind(line) is None
    assert not is_boilerplate_line(line)


def test_normalize_line_expands_ligatures_and_collapses_spaces() -> None:
    assert normalize_line("  the ﬁrst\u00a0oﬃce\t visit ") == "the first office visit"


def test_strip_boilerplate_lines_keeps_fenced_code_and_collapses_the_gaps() -> None:
    text = (
        "Home | Docs | Blog\n\nBrewing guide\n\nPage 2\n\nUse this script:\n\n"
        "```\n3\nHome | Docs | Blog\n\n\n```\n\n© 2024 Coffee Co.\nEnjoy."
    )
    assert strip_boilerplate_lines(text) == (
        "Brewing guide\n\nUse this script:\n\n```\n3\nHome | Docs | Blog\n\n\n```\n\nEnjoy."
    )
    assert find_boilerplate_lines(text) == ["Home | Docs | Blog", "Page 2", "© 2024 Coffee Co."]


def test_a_fence_closes_only_with_a_fence_of_its_own_kind() -> None:
    text = "````md\n```\nPage 2\n````\nPage 3"
    assert strip_boilerplate_lines(text) == "````md\n```\nPage 2\n````"


def test_running_headers_and_footers_are_removed_digit_blind() -> None:
    pages = [
        "Annual report 2024 - Acme\nRevenue rose in the north.\nFooter text: Acme confidential, page 1",
        "Annual report 2024 - Acme\nCosts fell in the south.\nFooter text: Acme confidential, page 2",
        "Annual report 2024 - Acme\nOutlook is stable.\nFooter text: Acme confidential, page 3",
    ]
    assert remove_repeated_lines(pages) == ["Revenue rose in the north.", "Costs fell in the south.", "Outlook is stable."]


def test_repeated_lines_in_the_middle_of_pages_are_content() -> None:
    def page(n: str) -> str:
        start = "\n".join(f"opening {i} of page {n}" for i in range(3))
        end = "\n".join(f"closing {i} of page {n}" for i in range(3))
        return f"{start}\nSafety first: wear a helmet.\n{end}"

    pages = [page(n) for n in "abc"]
    assert remove_repeated_lines(pages) == pages


def test_a_line_on_fewer_than_half_of_the_pages_is_kept() -> None:
    pages = ["Draft\nOne", "Two", "Three", "Four\nDraft", "Five"]
    assert remove_repeated_lines(pages) == pages
    assert remove_repeated_lines(["Draft\nOne", "Draft\nTwo", "Three", "Four"]) == ["One", "Two", "Three", "Four"]


def test_a_single_page_has_nothing_repeated() -> None:
    assert remove_repeated_lines(["Title\nBody"]) == ["Title\nBody"]


def test_page_furniture_is_peeled_from_both_ends_of_each_page() -> None:
    # Chromium draws its header and footer last, so they end the text layer.
    pages = [
        "Granite quarry operations\nThe north pit produced 1,204 tonnes.\n7\n12/1/26, 10:21 AM Quarry field guide\nfile:///tmp/page.html 1/2",
        "Page 2\nPump three was rebuilt in January.\n12/1/26, 10:21 AM Quarry field guide\nfile:///tmp/page.html 2/2",
    ]
    assert strip_page_furniture(pages) == [
        "Granite quarry operations\nThe north pit produced 1,204 tonnes.",
        "Pump three was rebuilt in January.",
    ]


def test_page_numbers_inside_a_page_stay() -> None:
    page = "Results\nRegion\n7\nNorth\n12\nSouth\nConclusion follows."
    assert strip_page_furniture([page]) == [page]
