"""Highlighting the query's words in search snippets, and a document's text around one chunk.

Everything returned as ``SafeString`` is built from pieces escaped one by one.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

SNIPPET_CHARS = 320
# A document page shows at most this many characters around the highlighted chunk, so a
# ten-million-character document does not become a ten-megabyte page.
DOCUMENT_WINDOW_CHARS = 100_000


@dataclass(frozen=True)
class DocumentExcerpt:
    before: str
    chunk: str
    after: str
    start: int  # offsets of the shown text within the document
    end: int
    total: int


def document_excerpt(text: str, start: int | None, end: int | None, window: int = DOCUMENT_WINDOW_CHARS) -> DocumentExcerpt:
    """The document's text split around the chunk ``[start, end)``, cut to ``window`` characters each side."""
    total = len(text)
    if start is None or end is None:
        shown_end = min(total, 2 * window)
        return DocumentExcerpt(text[:shown_end], "", "", 0, shown_end, total)
    start, end = max(0, min(start, total)), max(0, min(end, total))
    lo, hi = max(0, start - window), min(total, end + window)
    return DocumentExcerpt(text[lo:start], text[start:end], text[end:hi], lo, hi, total)


_TERM = re.compile(r"\w+", re.UNICODE)


_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its of on or that the this to was what when "
    "where which who why will with you your".split()
)


def query_terms(query: str) -> list[str]:
    """Words of ``query`` worth highlighting, lightly stemmed (``uploads`` -> ``upload``), longest first.

    Words excluded with websearch syntax (``-draft``) are not highlighted: they never match.
    """
    kept = " ".join(w for w in query.split() if not w.startswith("-"))
    stems: set[str] = set()
    for word in (w.lower() for w in _TERM.findall(kept)):
        if word in _STOPWORDS or len(word) < 2:
            continue
        # (suffix, characters to cut): "watching" -> "watch", "boxes" -> "box", "files" -> "file".
        for suffix, cut in (("ing", 3), ("ed", 2), ("ches", 2), ("shes", 2), ("sses", 2), ("xes", 2), ("s", 1)):
            if word.endswith(suffix) and len(word) - cut >= 3:
                word = word[:-cut]
                break
        stems.add(word)
    return sorted(stems, key=lambda s: (-len(s), s))


def _fold(word: str) -> str:
    """``word`` without its accents ("Crème" -> "Creme"), as ``unaccent`` folds it for the index."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", word) if not unicodedata.combining(ch))


def _variants() -> dict[str, str]:
    """Each ASCII letter's regular-expression class of itself and its accented Latin forms
    (U+00C0 to U+024F), so a folded query term marks the accented word it matched."""
    forms: dict[str, set[str]] = {}
    for code in range(0xC0, 0x250):
        ch = chr(code)
        base = _fold(ch)
        if len(base) == 1 and base.isascii() and base.isalpha() and base != ch:
            forms.setdefault(base.lower(), set()).add(ch.lower())
    return {base: "[" + base + "".join(sorted(chars)) + "]" for base, chars in forms.items()}


_VARIANTS = _variants()
# Scripts written without spaces: a term there is marked as it is, not to the end of its "word".
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


def _term_regex(term: str) -> str:
    body = "".join(_VARIANTS.get(ch, re.escape(ch)) for ch in _fold(term).lower())
    return body if _CJK.search(term) else r"\b" + body + r"\w*"


def terms_pattern(terms: list[str]) -> re.Pattern[str] | None:
    """Matches of any of ``terms``: accent-insensitive as keyword search is, whole words in
    alphabetic scripts, the bare term in Chinese, Japanese and Korean text."""
    if not terms:
        return None
    return re.compile("(?:" + "|".join(_term_regex(t) for t in terms) + ")", re.IGNORECASE | re.UNICODE)


def highlight(text: str, pattern: re.Pattern[str] | None) -> SafeString:
    """``text`` escaped, with the matches of ``pattern`` in ``<mark>``: every piece is escaped on its own."""
    if pattern is None:
        return escape(text)
    parts: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        parts.append(escape(text[position:match.start()]))
        parts.append(f"<mark>{escape(match.group(0))}</mark>")
        position = match.end()
    parts.append(escape(text[position:]))
    return mark_safe("".join(parts))  # noqa: S308 - built from escaped pieces only


_HEADING_MARKS = re.compile(r"(^|\n)#{1,6}[ \t]+")


def snippet(text: str, pattern: re.Pattern[str] | None, size: int = SNIPPET_CHARS) -> SafeString:
    """About ``size`` characters of ``text`` around its first match, cut at spaces, highlighted.

    Markdown headings' ``#`` marks are markup, not words of the passage: they are left out.
    """
    text = " ".join(_HEADING_MARKS.sub(r"\1", text).split())
    match = pattern.search(text) if pattern is not None else None
    start = 0 if match is None else max(0, match.start() - size // 3)
    if start:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(text), start + size)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + size // 2 else end
    body = highlight(text[start:end], pattern)
    return mark_safe(("… " if start else "") + body + (" …" if end < len(text) else ""))  # noqa: S308
