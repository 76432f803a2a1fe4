"""PDF: the text layer of each page (pypdf), OCR for pages without one, furniture removed.

- A page is read by OCR (rendered with pdfium at ``OCR_DPI``, unless the rendering is
  blank) when, once its furniture is gone, its text layer is empty (a scan; or text drawn
  as outlines), or holds fewer than ``MIN_TEXT_CHARS`` characters and the page shows an
  image (a scan with a page number on top). A short text layer on a page without images
  ("Appendix B") is simply short. OCR text replaces the layer only when it is longer.
- Running headers and footers (the same line at the top or bottom of many pages), page
  numbers and browser print furniture ("12/1/26, 7:09 AM  Title", "file:///... 1/3")
  are removed from every page, OCR'd or not (``knowledge.rag.boilerplate``).
- Title: the document information's title, else the first line of the first page when
  it reads like a heading (short, no final punctuation).
- Encrypted files open when their user password is empty (permissions only); a real
  password fails with a sentence saying so.
"""

from __future__ import annotations

import io
import math
import threading
from typing import Any

from knowledge.extraction.common import Extracted, ExtractionError, Progress, clean_title, join_blocks
from knowledge.extraction.ocr import recognize
from knowledge.rag.boilerplate import normalize_line, strip_page_furniture

MIN_TEXT_CHARS = 16
OCR_DPI = 300
# A scan of 500 pages is about ten minutes of OCR (1.2-1.4 CPU seconds a page, bench/ocr.py);
# beyond that, split the file.
MAX_OCR_PAGES = 500
# A page rendered for OCR stays under this many pixels (a poster-sized page at 300 dpi
# would take gigabytes); large pages are rendered at a lower resolution instead.
MAX_RENDER_PIXELS = 40_000_000
_BLANK_CONTRAST = 40  # grey levels between the darkest and lightest pixel of an empty page
# PDFium is not thread-safe, not even across documents, and pypdfium2 leaves locking to its
# callers: every call into it holds this lock (OCR itself runs outside it).
_PDFIUM = threading.Lock()


def extract_pdf(data: bytes, name: str, *, progress: Progress | None = None) -> Extracted:
    reader = _open(data, name)
    count = len(reader.pages)
    layers = []
    for number in range(1, count + 1):
        try:
            raw = reader.pages[number - 1].extract_text() or ""
        except Exception as exc:
            raise ExtractionError(f"page {number} of {name} could not be read: {exc}") from exc
        layers.append("\n".join(normalize_line(line) for line in raw.strip().split("\n")))
    # Judge each page by its text without furniture: a page number alone is no text layer.
    judged = strip_page_furniture(layers)
    scans = [i for i, text in enumerate(judged) if _needs_ocr(text, reader.pages[i])]
    if len(scans) > MAX_OCR_PAGES:
        raise ExtractionError(
            f"{name} has {len(scans):,} pages without a text layer, over the limit of {MAX_OCR_PAGES} pages "
            "of OCR per file; split it into smaller files"
        )
    warnings: list[str] = []
    if scans:
        read = _ocr_pages(data, name, scans, progress, warnings)
        for index, text in read.items():
            if len(text) > len(judged[index]):
                layers[index] = text
    pages = strip_page_furniture(layers)
    text = join_blocks(pages)
    if not text.strip() and scans:
        # Every page with a text layer keeps text after the furniture is gone, so here all are scans.
        pages_phrase = "its page has" if count == 1 else f"its {count} pages have"
        raise ExtractionError(f"no text was found in {name}: {pages_phrase} no text layer and OCR found no text")
    title = clean_title(_metadata_title(reader)) or _heading(pages)
    return Extracted(text, title, count, warnings=tuple(warnings))


def _needs_ocr(text: str, page: Any) -> bool:
    visible = sum(not c.isspace() for c in text)
    if visible == 0:
        return True
    if visible >= MIN_TEXT_CHARS:
        return False
    try:
        return len(page.images) > 0
    except Exception:  # an image pypdf cannot parse is still an image worth reading
        return True


def _open(data: bytes, name: str) -> Any:
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
    return reader


def _ocr_pages(data: bytes, name: str, indexes: list[int], progress: Progress | None, warnings: list[str]) -> dict[int, str]:
    """OCR text of the pages at ``indexes`` (0-based); blank pages are skipped unread."""
    import pypdfium2 as pdfium  # deferred: only scanned pages need the renderer

    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(data)
        except Exception as exc:  # pdfium reads what pypdf read; a failure here is still the file's
            raise ExtractionError(f"{name} could not be rendered for OCR: {exc}") from exc
    read: dict[int, str] = {}
    try:
        for done, index in enumerate(indexes, 1):
            where = f"page {index + 1} of {name}"
            with _PDFIUM:
                try:
                    page = document[index]
                    width, height = page.get_size()  # points: 1/72 inch
                    scale = min(OCR_DPI / 72, math.sqrt(MAX_RENDER_PIXELS / max(1.0, width * height)))
                    image = page.render(scale=scale, grayscale=True).to_pil().convert("L")
                    page.close()
                except Exception as exc:
                    raise ExtractionError(f"{where} could not be rendered for OCR: {exc}") from exc
            low, high = image.getextrema()
            if high - low >= _BLANK_CONTRAST:
                text = recognize(image, where=where, dpi=round(scale * 72))
                if text.strip():
                    read[index] = text
                else:
                    warnings.append(f"{where} has no text layer and OCR found no text on it")
            if progress is not None:
                progress(done, len(indexes))
    finally:
        with _PDFIUM:
            document.close()
    return read


def _metadata_title(reader: Any) -> str | None:
    # Broken Info dictionaries are common and the title is optional: never fail on it.
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:
        return None
    return str(title) if title else None


def _heading(pages: list[str]) -> str | None:
    """The first line of the first page with text, when it reads like a title."""
    for page in pages:
        for line in page.split("\n"):
            line = line.strip()
            if not line:
                continue
            if 3 <= len(line) <= 120 and any(c.isalpha() for c in line) and line[-1] not in ".,;:!?":
                return line
            return None
    return None
