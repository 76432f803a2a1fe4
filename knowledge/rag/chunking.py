"""Splitting documents into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

from knowledge.rag.errors import RAGTypeError, RAGValidationError
from knowledge.rag.types import RAGDocument


class FixedSizeChunker:
    """Chunks of at most ``size`` characters overlapping by about ``overlap``.

    Boundaries move back to the nearest whitespace (within a fifth of ``size``)
    so words are not cut; a text without whitespace is cut hard. Leading and
    trailing whitespace is trimmed from each chunk, so every chunk is an exact
    substring ``document.text[start:end]`` (``spans`` reports them) and
    whitespace-only pieces vanish.
    The same text always gives the same chunks, which keeps chunk ids stable.
    """

    def __init__(self, size: int = 2000, overlap: int = 200) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or not 50 <= size <= 1_000_000:
            raise RAGValidationError("size", "chunk size must be an integer between 50 and 1000000")
        if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap <= size // 2:
            raise RAGValidationError("overlap", f"overlap must be an integer between 0 and size/2 ({size // 2})")
        self.size = size
        self.overlap = overlap

    def split(self, document: RAGDocument) -> list[str]:
        text = document.text
        return [text[start:end] for start, end in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each chunk in ``text``, in order."""
        n = len(text)
        slack = max(1, self.size // 5)
        spans: list[tuple[int, int]] = []
        start = _skip_space(text, 0)
        while start < n:
            end = min(start + self.size, n)
            if end < n:
                cut = _last_space(text, end, max(start + 1, end - slack))
                if cut is not None:
                    end = cut
            trimmed_end = end
            while trimmed_end > start and text[trimmed_end - 1].isspace():
                trimmed_end -= 1
            if trimmed_end > start:
                spans.append((start, trimmed_end))
            if end >= n:
                break
            next_start = max(end - self.overlap, start + 1)
            if self.overlap and next_start < end:
                # Begin the overlap at a word boundary, not mid-word.
                space = _first_space(text, next_start, end)
                if space is not None:
                    next_start = space
            start = _skip_space(text, next_start)
        return spans


class PassageChunker:
    """A file's own units kept whole: each passage of a document its own chunk, split only when too long.

    Extraction finds self-contained units in some files (a slide, a group of spreadsheet rows under
    their header row: ``knowledge.extraction.Extracted.passages``) and joins them with blank lines
    into the document's text; chunking that text by size would merge four short slides into one
    chunk, or cut a group of rows away from its header. ``passages`` maps a document id to its
    passages in order, each a verbatim part of the text; ``inner`` cuts a passage longer than
    one of its chunks, and chunks every other document. A document whose passages are not found
    in its text in that order is chunked by ``inner`` as a whole, so a mismatch never loses text.
    """

    def __init__(self, inner: Any, passages: Mapping[str, Sequence[str]]) -> None:
        self.inner = inner
        self.passages = passages

    def split(self, document: RAGDocument) -> Sequence[object] | Iterable[object]:
        passages = [p for p in self.passages.get(document.id, ()) if p.strip()]
        if not passages or not _in_order(document.text, passages):
            return _inner_split(self.inner, document)
        return [piece for passage in passages for piece in _inner_split(self.inner, document, passage)]


def _in_order(text: str, parts: Sequence[str]) -> bool:
    cursor = 0
    for part in parts:
        at = text.find(part, cursor)
        if at < 0:
            return False
        cursor = at + len(part)
    return True


def _inner_split(chunker: Any, document: RAGDocument, text: str | None = None) -> Sequence[object] | Iterable[object]:
    """What ``chunker`` makes of ``document`` (or of ``text``, a part of it, with the document's title and metadata)."""
    text = document.text if text is None else text
    spans = getattr(chunker, "spans", None)
    if callable(spans):
        return [text[start:end] for start, end in spans(text)]
    if text is document.text:
        return chunker.split(document)
    return list(chunker.split(RAGDocument(document.id, text, title=document.title, uri=document.uri, metadata=document.metadata)))


def _skip_space(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    return i


def _last_space(text: str, end: int, lower: int) -> int | None:
    """Index just after the last whitespace in ``text[lower:end+1]`` (cut point), or None."""
    for i in range(min(end, len(text) - 1), lower - 1, -1):
        if text[i].isspace():
            return i
    return None


def _first_space(text: str, lower: int, upper: int) -> int | None:
    for i in range(lower, upper):
        if text[i].isspace():
            return i
    return None


def chunker_output(chunker: object, document: RAGDocument, at_most: int) -> tuple[list[object], list[tuple[int, int]] | None, bool]:
    """What ``chunker`` makes of ``document``: ``(pieces, spans, complete)``, nothing checked but the shape.

    ``spans`` are the pieces' offsets when the chunker reports them (``spans()``, as
    ``FixedSizeChunker`` does), else None. A sequence is read whole; an iterator (a
    generator ``split``) is read to at most ``at_most`` pieces, and ``complete`` is False
    when it had more, so a runaway chunker cannot exhaust memory.
    """
    spans_fn = getattr(chunker, "spans", None)
    if callable(spans_fn):
        spans = list(spans_fn(document.text))
        n = len(document.text)
        for index, span in enumerate(spans):
            if (
                not isinstance(span, tuple) or len(span) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in span)
                or not 0 <= span[0] < span[1] <= n
            ):
                raise RAGValidationError(f"documents[{document.id}].chunks[{index}]", f"a chunker returned the span {span!r}, not (start, end) within the document")
        return [document.text[start:end] for start, end in spans], spans, True
    output = chunker.split(document)  # type: ignore[attr-defined]
    if isinstance(output, str | bytes | Mapping) or not isinstance(output, Iterable):
        raise RAGTypeError(f"documents[{document.id}].chunks", f"a chunker must return a sequence of strings, got {type(output).__name__}")
    if isinstance(output, Sequence):
        return list(output), None, True
    pieces = list(islice(output, at_most + 1))
    return pieces[:at_most], None, len(pieces) <= at_most


def locate(text: str, pieces: Sequence[str]) -> list[tuple[int | None, int | None]]:
    """Offsets of each piece in ``text``, searched in order (a repeated passage is found at its
    next occurrence); ``(None, None)`` for a piece that is not a verbatim part of ``text``."""
    offsets: list[tuple[int | None, int | None]] = []
    cursor = 0
    for piece in pieces:
        at = text.find(piece, cursor)
        if at < 0:
            at = text.find(piece)
        if at < 0:
            offsets.append((None, None))
            continue
        offsets.append((at, at + len(piece)))
        cursor = at + 1
    return offsets
