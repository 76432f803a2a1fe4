"""What every extractor shares: the result type, the error, decoding and a few bounds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from knowledge.rag.boilerplate import normalize_line

# Called with (pages done, pages in total) as the scanned pages of a PDF are OCR'd. A
# 300-page scan takes minutes; a caller can keep its lease alive and show where it is.
Progress = Callable[[int, int], None]


class ExtractionError(ValueError):
    """The file cannot be turned into text; the message names the file and says why."""


@dataclass(frozen=True)
class Extracted:
    """The text of a file.

    - ``title``: when the file declares one (metadata, first heading), else None.
    - ``pages``: the page count of a PDF, else None.
    - ``passages``: for files made of self-contained units (slides, groups of spreadsheet
      rows, each with its header row), those units in order; ``text`` is them joined by
      blank lines. A chunker that keeps each passage whole keeps every chunk
      self-describing. Empty when the text is one flow (prose, pages).
    - ``warnings``: what was dropped or guessed, in sentences naming the file ("page 4 of
      scan.pdf: OCR found no text"), for the uploader to read.

    ``passages`` and ``warnings`` take no part in equality: the first is derived from
    ``text`` and the second is diagnostics.
    """

    text: str
    title: str | None
    pages: int | None
    passages: tuple[str, ...] = field(default=(), compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)


def decode(data: bytes, name: str) -> str:
    """UTF-8 (BOM stripped) when valid, else the encoding charset_normalizer detects;
    line ends normalized to ``\\n``."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes  # deferred: only non-UTF-8 files need detection

        best = from_bytes(data).best()
        if best is None:
            raise ExtractionError(f"{name} is not a text file (no text encoding fits its bytes)") from None
        text = str(best).lstrip("\ufeff")  # UTF-16/32 files carry a BOM too
    return text.replace("\r\n", "\n").replace("\r", "\n")


def one_line(text: str) -> str:
    """``text`` as a single line: ligatures expanded, all whitespace collapsed."""
    return normalize_line(text)


def join_blocks(blocks: Sequence[str]) -> str:
    """Non-blank ``blocks`` separated by blank lines."""
    return "\n\n".join(block.strip("\n") for block in blocks if block.strip())


def clean_title(title: object) -> str | None:
    """A declared title worth showing, or None: blank titles and the placeholders that
    office programs write ("Untitled", "Microsoft Word - draft.docx") are not titles."""
    if not isinstance(title, str):
        return None
    text = one_line(title.replace("\x00", ""))
    for prefix in ("Microsoft Word - ", "Microsoft PowerPoint - ", "Microsoft Excel - "):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    if not text or text.lower() in {"untitled", "untitled document", "document", "document1", "presentation", "book1"}:
        return None
    return text[:500]
