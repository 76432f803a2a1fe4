"""Recognising page furniture: text that is on the page but is not what the page says.

Navigation bars ("Home | Docs | Blog"), cookie banners, browser print headers and
footers ("12/1/26, 7:09 AM", "file:///.../page.html 1/3"), page numbers and copyright
lines are indexed as content unless someone removes them, and then quoted in answers.
Extraction removes them from files; the offline answer model skips them when it picks
sentences. Both use this module, so they agree on what furniture is.

Pure Python, no Django, no I/O: ``chat`` may import it (it only imports ``knowledge.rag``).

- ``is_boilerplate_line(line)``: one line on its own is furniture.
- ``strip_boilerplate_lines(text)``: ``text`` without such lines (fenced code is left alone).
- ``remove_repeated_lines(pages)``: running headers and footers, i.e. lines repeated at the
  top or bottom of many pages.
- ``strip_page_furniture(pages)``: both, for paged text (PDF pages, OCR'd scans).

The rules are deliberately conservative: a line is furniture only when its form says so
(a page counter, a print time stamp, a list of navigation words, a cookie notice), never
because it is short. A table row such as "Region | Growth | 12%" is content.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence

__all__ = [
    "boilerplate_kind",
    "find_boilerplate_lines",
    "is_boilerplate_line",
    "normalize_line",
    "remove_repeated_lines",
    "strip_boilerplate_lines",
    "strip_page_furniture",
]

# Typographic ligatures (U+FB00-FB06) are what PDF text layers often contain: "ﬁle:///"
# must read as "file:///", and "oﬃce" as "office" for search as much as for these rules.
_LIGATURES = {chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)}
_LIGATURE_RE = re.compile("[\ufb00-\ufb06]")


def normalize_line(line: str) -> str:
    """``line`` with ligatures expanded, non-breaking spaces made plain, whitespace collapsed."""
    line = _LIGATURE_RE.sub(lambda m: _LIGATURES[m.group()], line)
    return " ".join(line.replace("\u00a0", " ").split())


# --- The rules --------------------------------------------------------------------------

# Words that make up site navigation; a line made only of them is a menu.
_NAV_WORDS = frozenset(
    """
    home homepage docs documentation blog news about contact pricing plans products product services
    support help faq faqs login logout signin signup register account profile search menu careers jobs
    privacy terms legal imprint impressum sitemap accessibility cookies features resources community
    downloads download company team partners press events shop store cart checkout subscribe newsletter
    rss twitter facebook linkedin github youtube instagram mastodon discord slack next previous prev back
    top guides tutorials api changelog status security developers solutions customers enterprise
    """.split()
)
_NAV_PHRASES = frozenset(
    {
        "about us", "contact us", "log in", "log out", "sign in", "sign up", "sign out", "my account",
        "privacy policy", "terms of service", "terms of use", "terms and conditions", "cookie policy",
        "cookie settings", "back to top", "get started", "release notes", "site map",
    }
)
# Lines that are furniture in any context: skip links, menu toggles, share buttons.
_FURNITURE_LINE = re.compile(
    r"^(?:skip to (?:the )?(?:main )?(?:content|navigation|search)|jump to (?:navigation|search|content)"
    r"|back to top|toggle (?:navigation|menu)|(?:open|close) (?:the )?(?:main )?menu|main menu"
    r"|share (?:this|on)\b.*|print this (?:page|article)|previous (?:post|article)|next (?:post|article)"
    r"|follow us(?: on\b.*)?|(?:subscribe to|sign up for) our newsletter\b.*|powered by wordpress"
    r"|accept all|reject all|accept all cookies|reject all cookies|manage (?:cookie )?preferences"
    r"|this page was printed\b.*|printed (?:from|on) \S+.*)$",
    re.IGNORECASE,
)
_SEPARATORS = re.compile(r"\s+[|•·›»>/]\s+|\s*\|\s*|\s+[–—-]\s+")
_BREADCRUMB = re.compile(r"^home\s*[›»>/]\s*", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")

_COOKIE = re.compile(
    r"\b(?:we|this (?:web)?site|our (?:web)?site|the site)\s+uses?\s+cookies\b|\baccept (?:all )?cookies\b"
    r"|\bcookie (?:policy|settings|preferences|consent|notice|banner)\b|\bby continuing to (?:use|browse)\b"
    r"|\bmanage (?:your )?(?:cookie|consent) (?:settings|preferences)\b",
    re.IGNORECASE,
)
# "© 2024 Coffee Co.", "Copyright 2024 ...", "... All rights reserved." (not prose about copyright).
_COPYRIGHT = re.compile(
    r"^(?:©|\(c\)\s*(?:19|20)\d\d|copyright\s*(?:©|\(c\))?\s*(?:19|20)\d\d)|\ball rights reserved\b", re.IGNORECASE
)

# A page counter on its own: "7", "- 7 -", "Page 7", "Page 7 of 12", "7 / 12", "p. 7".
_PAGE_NUMBER = re.compile(
    r"^(?:[-–—]\s*\d{1,4}\s*[-–—]|(?:(?:page|p\.|pg\.?|seite|página|pagina)\s*)?\d{1,4}"
    r"(?:\s*(?:/|of|von|de|sur|di)\s*\d{1,4})?)$",
    re.IGNORECASE,
)
# Chromium's and Firefox's print header: the local date and time, then usually the page title.
_PRINT_STAMP = re.compile(r"^\d{1,2}/\d{1,2}/\d{2,4},?\s+\d{1,2}:\d{2}(?::\d{2})?\s*(?:[AaPp]\.?[Mm]\.?)?(?:\s|$)")
# Their footer: the address of what was printed, then the page counter; a local file's
# address is never content.
_PRINT_URL = re.compile(r"^(?:file:/{2,}\S*.*|(?:https?|file)://\S+\s+\d{1,4}\s*/\s*\d{1,4})$", re.IGNORECASE)

_MAX_FURNITURE_CHARS = 300  # a long paragraph that mentions cookies or copyright is prose


def boilerplate_kind(line: str) -> str | None:
    """Which kind of furniture ``line`` is ("navigation", "cookie", "print", "page-number",
    "copyright"), or None when it is content. Used by ``is_boilerplate_line``; the kind
    is for tests and diagnostics."""
    text = normalize_line(line)
    if not text:
        return None
    if _PAGE_NUMBER.match(text):
        return "page-number"
    if _PRINT_URL.match(text):
        return "print"
    if _PRINT_STAMP.match(text) and len(text) <= 200:
        return "print"
    if len(text) > _MAX_FURNITURE_CHARS:
        return None
    if _FURNITURE_LINE.match(text):
        return "navigation"
    if _COOKIE.search(text):
        return "cookie"
    if _COPYRIGHT.search(text) and len(text) <= 200:
        return "copyright"
    if _is_navigation(text):
        return "navigation"
    return None


def is_boilerplate_line(line: str) -> bool:
    """True when ``line`` alone is page furniture (navigation, cookie notice, print header
    or footer, page number, copyright line), false for anything that may be content."""
    return boilerplate_kind(line) is not None


def _is_navigation(text: str) -> bool:
    lowered = text.lower().strip(" |•·›»>/")
    if _BREADCRUMB.match(lowered) and len(lowered) <= 120 and not re.search(r"[.!?:;]$", lowered):
        return True
    items = [item.strip() for item in _SEPARATORS.split(lowered) if item.strip()]
    if len(items) >= 3 or (len(items) == 2 and "|" in text):
        if all(len(item) <= 30 and len(item.split()) <= 4 for item in items):
            navigational = sum(1 for item in items if _nav_item(item))
            if navigational >= 2 and navigational * 3 >= len(items) * 2:
                return True
    words = lowered.split()
    # "Home Docs Blog Pricing": links rendered without separators.
    return len(words) >= 3 and all(word in _NAV_WORDS for word in words)


def _nav_item(item: str) -> bool:
    if item in _NAV_PHRASES:
        return True
    words = _WORD.findall(item)
    return bool(words) and len(words) <= 2 and all(word in _NAV_WORDS for word in words)


# --- Texts and pages ----------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def strip_boilerplate_lines(text: str) -> str:
    """``text`` without its furniture lines. Lines inside fenced code blocks are kept
    (``3`` or ``| a | b |`` is code there), and so are the line breaks between the rest;
    a run of blank lines left behind outside code collapses to one."""
    out: list[str] = []
    for line, fenced in _fenced(text):
        if not fenced:
            if is_boilerplate_line(line):
                continue
            if not line.strip() and out and not out[-1].strip():
                continue
        out.append(line)
    return "\n".join(out).strip("\n")


def find_boilerplate_lines(text: str) -> list[str]:
    """The furniture lines of ``text`` (outside fenced code), in order."""
    return [line for line, fenced in _fenced(text) if not fenced and is_boilerplate_line(line)]


def _fenced(text: str) -> Iterator[tuple[str, bool]]:
    """Each line of ``text`` and whether it belongs to a fenced code block (fences included)."""
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            yield line, True
        elif fence is not None:
            closing = match.group(1) if match else ""
            if closing[:1] == fence[0] and len(closing) >= len(fence) and line.strip() == closing:
                fence = None
            yield line, True
        else:
            yield line, False


def _line_key(line: str) -> str:
    # Running headers differ only by their page number ("Annual report - 3"): compare digit-blind.
    return re.sub(r"\d+", "#", normalize_line(line).lower())


def _edge_indexes(lines: Sequence[str], edge_lines: int) -> list[int]:
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return sorted(set(filled[:edge_lines] + filled[-edge_lines:])) if edge_lines else []


def remove_repeated_lines(
    pages: Sequence[str], *, edge_lines: int = 3, min_share: float = 0.5
) -> list[str]:
    """``pages`` without running headers and footers.

    A line counts as running furniture when it is among the first or last ``edge_lines``
    non-blank lines of a page and the same line (digits aside, so "Page 3" and "Page 4"
    are the same) sits in that position on at least ``min_share`` of the pages that have
    text, and on two pages at least. Such lines are removed from those positions only;
    the same words in the middle of a page are content. Returns one string per page.
    """
    split = [page.split("\n") for page in pages]
    filled = sum(1 for lines in split if any(line.strip() for line in lines))
    if filled < 2:
        return list(pages)
    seen: Counter[str] = Counter()
    for lines in split:
        seen.update({_line_key(lines[i]) for i in _edge_indexes(lines, edge_lines)})
    needed = max(2, math.ceil(min_share * filled))
    repeated = {key for key, count in seen.items() if count >= needed}
    out = []
    for lines in split:
        drop = {i for i in _edge_indexes(lines, edge_lines) if _line_key(lines[i]) in repeated}
        out.append("\n".join(line for i, line in enumerate(lines) if i not in drop).strip("\n"))
    return out


def strip_page_furniture(pages: Sequence[str], *, edge_lines: int = 3) -> list[str]:
    """``pages`` without running headers/footers (``remove_repeated_lines``) and without the
    furniture lines (``is_boilerplate_line``) at their top and bottom: page numbers, print
    time stamps and addresses. Lines are peeled from each end while they are furniture, at
    most ``edge_lines`` from each end, so a page number inside a table stays."""
    out = []
    for page in remove_repeated_lines(pages, edge_lines=edge_lines):
        lines = page.split("\n")
        top = 0
        peeled = 0
        while top < len(lines) and peeled < edge_lines and (not lines[top].strip() or is_boilerplate_line(lines[top])):
            peeled += bool(lines[top].strip())
            top += 1
        bottom = len(lines)
        peeled = 0
        while bottom > top and peeled < edge_lines and (
            not lines[bottom - 1].strip() or is_boilerplate_line(lines[bottom - 1])
        ):
            peeled += bool(lines[bottom - 1].strip())
            bottom -= 1
        out.append("\n".join(lines[top:bottom]).strip("\n"))
    return out
