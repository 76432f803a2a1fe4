"""Highlighting the query's words in search snippets, and a document's text around one chunk.

Everything returned as ``SafeString`` is built from pieces escaped one by one.
"""

from __future__ import annotations

import re
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


def terms_pattern(terms: list[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE | re.UNICODE)


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


def snippet(text: str, pattern: re.Pattern[str] | None, size: int = SNIPPET_CHARS) -> SafeString:
    """About ``size`` characters of ``text`` around its first match, cut at spaces, highlighted."""
    text = " ".join(text.split())
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
