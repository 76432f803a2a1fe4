"""Plain text from uploaded files: .txt, .md, .html, .pdf, .docx.

``extract(data, filename=..., content_type=...)`` returns an ``Extracted``
(text, title, pages) or raises ``ExtractionError`` whose message names the file
and the reason, ready to show to the person who uploaded it. The type comes
from the file name's extension, falling back to ``content_type``.

Nothing here touches the database or the network; callers decide what to do
with the text (chunking and embedding happen in ``knowledge.rag``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

DEFAULT_MAX_BYTES = 50 * 1024 * 1024

_EXTENSIONS = {".txt": "txt", ".text": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
               ".pdf": "pdf", ".docx": "docx"}
_CONTENT_TYPES = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
_SUPPORTED = ".txt, .md, .html, .pdf, .docx"


class ExtractionError(ValueError):
    """The file cannot be turned into text; the message names the file and says why."""


@dataclass(frozen=True)
class Extracted:
    """The text of a file. ``pages`` is set for PDFs only; ``title`` when the file declares one."""

    text: str
    title: str | None
    pages: int | None


def extract(
    data: bytes,
    *,
    filename: str,
    content_type: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Extracted:
    """Extract the text of ``data``, a whole file named ``filename``.

    Raises ``ExtractionError`` for an unsupported type, an empty file, a file over
    ``max_bytes``, a corrupt or password-protected file, and a file with no text.
    The returned text is non-blank and contains no NUL characters.
    """
    name = PurePath(filename.replace("\\", "/")).name or filename  # never echo a client's directory path
    kind = _detect(name, content_type)
    if not data:
        raise ExtractionError(f"{name} is empty")
    if len(data) > max_bytes:
        raise ExtractionError(f"{name} is {_size(len(data))}, over the limit of {_size(max_bytes)}")
    result = _EXTRACTORS[kind](data, name)
    # PostgreSQL text columns reject NUL; some PDFs and mis-encoded files contain it.
    text = result.text.replace("\x00", "")
    if not text.strip():
        hint = " (is it a scanned image?)" if kind == "pdf" else ""
        raise ExtractionError(f"{name} contains no extractable text{hint}")
    title = result.title.replace("\x00", "").strip() if result.title else None
    return Extracted(text=text, title=title or None, pages=result.pages)


def _detect(name: str, content_type: str | None) -> str:
    suffix = PurePath(name).suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _CONTENT_TYPES:
        return _CONTENT_TYPES[mime]
    described = f"'{suffix}'" if suffix else (f"'{mime}'" if mime else "(no extension)")
    raise ExtractionError(f"{name}: unsupported file type {described}; supported: {_SUPPORTED}")


def _size(n: int) -> str:
    mb = 1024 * 1024
    if n >= mb:
        return f"{n / mb:.0f} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    return f"{n:,} bytes"


# --- Text and Markdown ---------------------------------------------------------------


def _decode(data: bytes, name: str) -> str:
    """UTF-8 (BOM stripped) when valid, else the encoding charset_normalizer detects."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes  # deferred: only non-UTF-8 files need detection

        best = from_bytes(data).best()
        if best is None:
            raise ExtractionError(f"{name} is not a text file (no text encoding fits its bytes)") from None
        text = str(best).lstrip("\ufeff")  # UTF-16/32 files carry a BOM too
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _extract_txt(data: bytes, name: str) -> Extracted:
    return Extracted(_decode(data, name), None, None)


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_H1 = re.compile(r"^\s{0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")


def _extract_md(data: bytes, name: str) -> Extracted:
    text = _decode(data, name)
    title = None
    in_fence = False
    for line in text.split("\n"):
        # A "# comment" inside a fenced code block is code, not the document's title.
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _H1.match(line)):
            title = match.group(1).strip()
            break
    return Extracted(text, title, None)


# --- HTML ------------------------------------------------------------------------------

_INVISIBLE = ("script", "style", "noscript", "template", "head")
_BLOCKS = tuple(
    "address article aside blockquote caption dd details dialog div dl dt fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary table tbody thead tfoot tr ul".split()
)
# Private-use sentinels survive whitespace collapsing and cannot occur in real text we keep.
_PARA, _LINE = "\ue000", "\ue001"


def _extract_html(data: bytes, name: str) -> Extracted:
    from bs4 import BeautifulSoup  # deferred: only HTML uploads need the parser

    try:
        soup = BeautifulSoup(data, "lxml")
    except Exception as exc:  # lxml is optional for bs4; the stdlib parser is the fallback
        if type(exc).__name__ != "FeatureNotFound":
            raise ExtractionError(f"{name} could not be parsed as HTML: {exc}") from exc
        soup = BeautifulSoup(data, "html.parser")
    title_tag = soup.head.find("title") if soup.head else soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag else None
    for tag in soup.find_all(_INVISIBLE):
        tag.decompose()
    for tag in soup.find_all("pre"):
        # Line breaks inside <pre> are content, unlike anywhere else in HTML.
        for string in tag.find_all(string=True):
            string.replace_with(string.replace("\n", _LINE))
    for tag in soup.find_all("br"):
        tag.replace_with(_LINE)
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before(_PARA)
        tag.insert_after(_PARA)
    for tag in soup.find_all(["td", "th"]):
        tag.insert_after(" ")  # adjacent cells must not run together
    raw = soup.get_text()
    # Source newlines and indentation are not content: collapse all whitespace, then
    # turn the sentinels into the paragraph and line breaks the markup meant.
    flat = re.sub(r"\s+", " ", raw)
    paragraphs = []
    for block in flat.split(_PARA):
        lines = [line.strip() for line in block.split(_LINE)]
        text = "\n".join(lines).strip()
        if text:
            paragraphs.append(text)
    return Extracted("\n\n".join(paragraphs), title or None, None)


# --- PDF -------------------------------------------------------------------------------


def _extract_pdf(data: bytes, name: str) -> Extracted:
    import pypdf  # deferred: only PDF uploads need it
    from pypdf.errors import DependencyError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty user password only to carry
            # permission flags; those open fine. A real password is a user error.
            try:
                opened = reader.decrypt("")
            except DependencyError as exc:
                raise ExtractionError(f"{name} is encrypted with AES, which needs the 'cryptography' package to open") from exc
            if not opened:
                raise ExtractionError(f"{name} is encrypted with a password; upload an unprotected copy")
        count = len(reader.pages)
    except ExtractionError:
        raise
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a PDF: {exc}") from exc
    if count == 0:
        raise ExtractionError(f"{name} is corrupt or not a PDF: it has no pages")
    texts = []
    for number in range(1, count + 1):
        try:
            texts.append((reader.pages[number - 1].extract_text() or "").strip())
        except Exception as exc:
            raise ExtractionError(f"page {number} of {name} could not be read: {exc}") from exc
    return Extracted("\n\n".join(t for t in texts if t), _pdf_title(reader), count)


def _pdf_title(reader: Any) -> str | None:
    # Broken Info dictionaries are common and the title is optional: never fail on it.
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:
        return None
    return str(title) if title else None


# --- DOCX ------------------------------------------------------------------------------


def _extract_docx(data: bytes, name: str) -> Extracted:
    import docx  # deferred: only Word uploads need python-docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a .docx file: {exc}") from exc
    blocks = list(_docx_blocks(document))
    title = (document.core_properties.title or "").strip() or None
    if title is None:
        title = next((p.text.strip() for p in document.paragraphs if p.style is not None
                      and p.style.name == "Title" and p.text.strip()), None)
    return Extracted("\n\n".join(b for b in blocks if b.strip()), title, None)


def _docx_blocks(container: Any) -> Iterator[str]:
    """Paragraphs and table rows in document order; nested tables inside cells included."""
    from docx.table import Table  # deferred with docx

    for item in container.iter_inner_content():
        if isinstance(item, Table):
            yield from _docx_table_rows(item, lambda cell: " ".join(_docx_blocks(cell)))
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
            text = " ".join(cell_text(cell).split())
            if text:
                cells.append(text)
        if cells:
            yield " | ".join(cells)


_EXTRACTORS: dict[str, Callable[[bytes, str], Extracted]] = {
    "txt": _extract_txt,
    "md": _extract_md,
    "html": _extract_html,
    "pdf": _extract_pdf,
    "docx": _extract_docx,
}
