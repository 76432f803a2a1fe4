"""Word (.docx) and PowerPoint (.pptx) files.

Both are zip archives of XML: ``sniff.open_zip`` bounds what they may expand to before
python-docx or python-pptx reads a byte of XML.

- Word: paragraphs (headings included) and tables in document order, each table one
  block of rows with cells joined by `` | ``; title from the core properties, else the
  paragraph styled Title, else the first Heading 1.
- PowerPoint: one passage per slide, "Slide N: <title>" then the text of its shapes in
  reading order (top to bottom, left to right; groups and tables included), then its
  speaker notes as "Notes: ..."; title from the core properties, else the first slide's.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

from knowledge.extraction.common import Extracted, ExtractionError, clean_title, join_blocks, one_line
from knowledge.extraction.sniff import describe, open_zip

_MAIN_PARTS = {"docx": "word/document.xml", "pptx": "ppt/presentation.xml"}


def _checked(data: bytes, name: str, kind: str) -> None:
    archive = open_zip(data, name, kind)
    if _MAIN_PARTS[kind] not in archive.namelist():
        raise ExtractionError(f"{name} is a zip archive but not {describe(kind)} (it has no {_MAIN_PARTS[kind]})")


# --- Word ------------------------------------------------------------------------------


def extract_docx(data: bytes, name: str) -> Extracted:
    import docx  # deferred: only Word uploads need python-docx

    _checked(data, name, "docx")
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a .docx file: {exc}") from exc
    return Extracted(join_blocks(blocks), _docx_title(document), None)


def _docx_title(document: Any) -> str | None:
    title = clean_title(document.core_properties.title)
    if title is None:
        for style in ("Title", "Heading 1"):
            title = next((one_line(p.text) for p in document.paragraphs if p.style is not None
                          and p.style.name == style and p.text.strip()), None)
            if title:
                break
    return title


def _docx_blocks(container: Any) -> Iterator[str]:
    """Paragraphs and tables in document order; nested tables inside cells included."""
    from docx.table import Table  # deferred with docx

    for item in container.iter_inner_content():
        if isinstance(item, Table):
            yield "\n".join(_docx_table_rows(item, lambda cell: " ".join(_docx_blocks(cell))))
        else:
            yield item.text


def _docx_table_rows(table: Any, cell_text: Callable[[Any], str]) -> Iterator[str]:
    # A merged cell appears once per grid column (and per row, when merged
    # vertically); print it once. Values keep the elements alive, so ids stay unique.
    seen: dict[int, Any] = {}
    for row in table.rows:
        cells = []
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen[id(cell._tc)] = cell._tc
            text = one_line(cell_text(cell))
            if text:
                cells.append(text)
        if cells:
            yield " | ".join(cells)


# --- PowerPoint -----------------------------------------------------------------------


def extract_pptx(data: bytes, name: str) -> Extracted:
    from pptx import Presentation  # deferred: only PowerPoint uploads need python-pptx

    _checked(data, name, "pptx")
    try:
        presentation = Presentation(io.BytesIO(data))
        slides = [_slide(slide, number) for number, slide in enumerate(presentation.slides, 1)]
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a .pptx file: {exc}") from exc
    passages = tuple(text for text, _ in slides if text)
    title = clean_title(presentation.core_properties.title) or next((t for _, t in slides if t), None)
    return Extracted(join_blocks(passages), title, None, passages=passages)


def _slide(slide: Any, number: int) -> tuple[str, str | None]:
    """The slide's passage ("" when it has no text) and its title."""
    title_shape = slide.shapes.title
    title = one_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
    others = [shape for shape in slide.shapes if title_shape is None or shape.shape_id != title_shape.shape_id]
    body = [text for shape in _reading_order(others) for text in _shape_texts(shape)]
    notes = ""
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = _frame_text(slide.notes_slide.notes_text_frame)
    if not (title or body or notes):
        return "", None
    lines = [f"Slide {number}: {title}" if title else f"Slide {number}", *body]
    if notes:
        lines.append(f"Notes: {notes}")
    return "\n".join(lines), title or None


def _reading_order(shapes: list[Any]) -> list[Any]:
    # Placeholders that inherit their position from the layout have no offsets of their own.
    return sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))


def _shape_texts(shape: Any) -> Iterator[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE  # deferred with python-pptx

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in _reading_order(list(shape.shapes)):
            yield from _shape_texts(inner)
    elif getattr(shape, "has_table", False) and shape.has_table:
        for row in shape.table.rows:
            cells = [one_line(cell.text) for cell in row.cells]
            if any(cells):
                yield " | ".join(cells)
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        text = _frame_text(shape.text_frame)
        if text:
            yield text


def _frame_text(frame: Any) -> str:
    # A soft line break inside a paragraph comes back as a vertical tab.
    lines = [" ".join(p.text.replace("\v", " ").split()) for p in frame.paragraphs]
    return "\n".join(line for line in lines if line)
