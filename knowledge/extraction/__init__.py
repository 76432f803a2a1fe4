"""Plain text from uploaded files.

``extract(data, filename=..., content_type=...)`` returns an ``Extracted`` (text, title,
pages, passages, warnings) or raises ``ExtractionError`` whose message names the file and
the reason, ready to show to the person who uploaded it.

Formats (one module each): text and Markdown (``text``), HTML (``html``: main content
without navigation, headers and footers), PDF (``pdf``: running headers/footers removed,
OCR for pages without a text layer), Word and PowerPoint (``office``), Excel and CSV
(``sheets``: passages of rows, each with the header row), PNG and JPEG images (``ocr``).

The type comes from the file name's extension, else from ``content_type``, else from
the file's first bytes. Then the bytes must agree: a PDF named ``report.docx`` or a PNG
named ``scan.pdf`` fails with a sentence saying what the file really is and how to
rename it, rather than being read as what it claims or as what it is. Uploaders learn
that the name is wrong, and a file is never indexed under a type it does not have.

Nothing here touches the database or the network; callers decide what to do with the
text (chunking and embedding happen in ``knowledge.rag``). OCR runs the ``tesseract``
program (Debian's ``tesseract-ocr``, installed by ``make``) on this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from knowledge.extraction.common import Extracted, ExtractionError, Progress
from knowledge.extraction.sniff import DESCRIPTIONS, describe, sniff
from knowledge.rag.limits import describe_bytes

__all__ = [
    "DEFAULT_MAX_BYTES", "SUPPORTED", "SUPPORTED_SUFFIXES", "Extracted", "ExtractionError", "Progress", "extract",
]

DEFAULT_MAX_BYTES = 50 * 1024 * 1024

# Every accepted extension and the format it names.
_EXTENSIONS = {
    ".txt": "txt", ".text": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".csv": "csv",
    ".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg",
}
_CONTENT_TYPES = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/csv": "csv",
    "application/csv": "csv",
    "image/png": "png",
    "image/jpeg": "jpeg",
}
SUPPORTED_SUFFIXES: tuple[str, ...] = tuple(_EXTENSIONS)
# For sentences and help texts: one extension per format.
SUPPORTED = ".txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .png, .jpg"

_IMAGE_KINDS = {"png", "jpeg"}


def extract(
    data: bytes,
    *,
    filename: str,
    content_type: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: Progress | None = None,
) -> Extracted:
    """Extract the text of ``data``, a whole file named ``filename``.

    Raises ``ExtractionError`` for an unsupported type, an empty file, a file over
    ``max_bytes``, a file whose content is not what its name says, a corrupt,
    password-protected or oversized-when-unpacked file, and a file with no text.
    ``progress(done, total)`` is called after each scanned PDF page is read by OCR
    (about a second of CPU a page); what it raises propagates, so a caller that lost
    its lease can stop the work there. The returned text is non-blank and contains no
    NUL characters.
    """
    name = PurePath(filename.replace("\\", "/")).name or filename  # never echo a client's directory path
    kind = _declared_kind(name, content_type)
    if not data:
        raise ExtractionError(f"{name} is empty")
    if len(data) > max_bytes:
        raise ExtractionError(f"{name} is {describe_bytes(len(data))}, over the limit of {describe_bytes(max_bytes)}")
    actual = sniff(data)
    if kind is None:
        kind = _undeclared_kind(name, content_type, actual)
    _check_content(name, kind, actual)
    result = _extractor(kind, progress)(data, name)
    # PostgreSQL text columns reject NUL; some PDFs and mis-encoded files contain it.
    text = result.text.replace("\x00", "")
    if not text.strip():
        raise ExtractionError(f"{name} contains no extractable text")
    title = result.title.replace("\x00", "").strip() if result.title else None
    return Extracted(
        text=text,
        title=title or None,
        pages=result.pages,
        passages=tuple(p.replace("\x00", "") for p in result.passages),
        warnings=result.warnings,
    )


def _declared_kind(name: str, content_type: str | None) -> str | None:
    """The format the name (else the content type) claims; None when the name has no
    extension and the content type names nothing we read ("application/octet-stream"),
    so the bytes decide."""
    suffix = PurePath(name).suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _CONTENT_TYPES:
        return _CONTENT_TYPES[mime]
    if not suffix:
        return None
    _refuse_type(name, suffix, mime)
    raise AssertionError("unreachable")  # pragma: no cover - _refuse_type raised


def _undeclared_kind(name: str, content_type: str | None, actual: str | None) -> str:
    """No extension and no known content type: the bytes decide, when they show a format we read."""
    if actual in _EXTENSIONS.values():
        return actual  # type: ignore[return-value]
    _refuse_type(name, "", (content_type or "").split(";", 1)[0].strip().lower())
    raise AssertionError("unreachable")  # pragma: no cover - _refuse_type raised


def _refuse_type(name: str, suffix: str, mime: str) -> None:
    described = f"'{suffix}'" if suffix else (f"'{mime}'" if mime else "(no extension)")
    raise ExtractionError(f"{name}: unsupported file type {described}; supported: {SUPPORTED}")


def _check_content(name: str, kind: str, actual: str | None) -> None:
    """Fail when the bytes show a format other than ``kind``. Unrecognised bytes pass:
    text has no signature, and a damaged file is reported by its own reader."""
    if actual is None or actual == kind or (kind in _IMAGE_KINDS and actual in _IMAGE_KINDS):
        return
    if actual == "zip" and kind in ("docx", "pptx", "xlsx"):
        return  # a damaged or foreign zip: the Office reader says which
    claimed = describe(kind)
    really = f"{name} is really {describe(actual)}, not {claimed}"
    if actual in _EXTENSIONS.values():
        stem = PurePath(name).stem or name
        raise ExtractionError(f"{really}: rename it to {stem}{DESCRIPTIONS[actual][1]} and upload it again")
    if actual == "ole":
        raise ExtractionError(f"{really}: save it as .docx, .pptx or .xlsx and upload it again")
    raise ExtractionError(f"{really}; supported: {SUPPORTED}")


def _extractor(kind: str, progress: Progress | None) -> Callable[[bytes, str], Extracted]:
    # Deferred imports: each format's libraries load only when a file of that format comes.
    if kind == "txt":
        from knowledge.extraction.text import extract_txt

        return extract_txt
    if kind == "md":
        from knowledge.extraction.text import extract_md

        return extract_md
    if kind == "html":
        from knowledge.extraction.html import extract_html

        return extract_html
    if kind == "pdf":
        from knowledge.extraction.pdf import extract_pdf

        return lambda data, name: extract_pdf(data, name, progress=progress)
    if kind in ("docx", "pptx"):
        from knowledge.extraction import office

        return office.extract_docx if kind == "docx" else office.extract_pptx
    if kind in ("xlsx", "csv"):
        from knowledge.extraction import sheets

        return sheets.extract_xlsx if kind == "xlsx" else sheets.extract_csv
    from knowledge.extraction.ocr import extract_image

    return extract_image
