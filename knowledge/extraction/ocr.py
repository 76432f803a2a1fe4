"""OCR: text from images (PNG, JPEG) and from scanned PDF pages, offline.

The engine is Tesseract 5 (Debian's ``tesseract-ocr`` with its English model, which
``make`` installs like Chromium), run as a program on this machine: nothing is
downloaded at run time and nothing leaves the machine. Measured here on pages printed
by Chromium and rasterized at 300 dpi, Tesseract reads them with no character errors in
about half a second a page; the ONNX PaddleOCR models that ``rapidocr-onnxruntime``
ships in its wheel took 6-9 s a page and glued words together ("undersixteenarenot"),
which breaks keyword search.

``recognize(image, where=...)`` returns the text of one PIL image: words of a line
joined by spaces, lines by newlines, paragraphs by blank lines. Lines that Tesseract
itself doubts (mean word confidence under ``MIN_LINE_CONFIDENCE``) are dropped: on
photographs and diagrams those are shapes read as letters.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import warnings
from typing import Any

from knowledge.extraction.common import Extracted, ExtractionError

# Tesseract language models to use, "+"-separated ("eng+deu"); each needs its Debian
# package (tesseract-ocr-eng comes with tesseract-ocr).
OCR_LANGUAGES = "eng"
OCR_TIMEOUT_SECONDS = 180  # one page; a dense 300 dpi page takes a few seconds on a busy core
MIN_LINE_CONFIDENCE = 40
# Bounds on images: a PNG of a few kilobytes can declare a billion pixels.
MAX_IMAGE_PIXELS = 80_000_000  # under Pillow's warning threshold (89 million); a 48 MP photo fits
# Tesseract reads best at 20-40 pixels per line of text: a screenshot is enlarged,
# a 48-megapixel photo shrunk, before reading.
_ENLARGE_BELOW = 1500
_SHRINK_ABOVE = 5000


def recognize(image: Any, *, where: str, dpi: int | None = None) -> str:
    """The text Tesseract reads in ``image`` (a PIL image), "" when it reads none.

    ``where`` names the image in error messages ("scan.png", "page 3 of scan.pdf");
    ``dpi`` is the resolution a PDF page was rendered at (photos have none that means
    anything). Raises ``ExtractionError`` when Tesseract is missing, fails or times out.
    """
    program = shutil.which("tesseract")
    if program is None:
        raise ExtractionError(
            f"{where} needs OCR, but the tesseract program is not installed on this server "
            "(on Debian: apt-get install tesseract-ocr)"
        )
    png = io.BytesIO()
    image.save(png, "PNG", compress_level=1)
    command = [program, "stdin", "stdout", "-l", OCR_LANGUAGES, "--psm", "3"]
    if dpi:
        command += ["--dpi", str(dpi)]
    # One thread: the machine's cores are shared by workers, and Tesseract's OpenMP
    # threads make a single page only slightly faster while slowing everything else.
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(
            [*command, "tsv"], input=png.getvalue(), capture_output=True, timeout=OCR_TIMEOUT_SECONDS, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise ExtractionError(f"OCR of {where} took more than {OCR_TIMEOUT_SECONDS} seconds and was stopped") from None
    except OSError as exc:
        raise ExtractionError(f"OCR of {where} could not start: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ExtractionError(f"OCR of {where} failed: {detail[-1] if detail else f'exit status {done.returncode}'}")
    return _text_from_tsv(done.stdout.decode("utf-8", "replace"))


def _text_from_tsv(tsv: str) -> str:
    """Rebuild lines and paragraphs from Tesseract's TSV (one row per word, with its
    block, paragraph and line numbers and a confidence from 0 to 100)."""
    paragraphs: dict[tuple[str, str], dict[str, list[tuple[str, float]]]] = {}
    for row in tsv.split("\n")[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue  # level 5 rows are words; the others describe the layout
        try:
            confidence = float(cells[10])
        except ValueError:
            continue
        lines = paragraphs.setdefault((cells[2], cells[3]), {})
        lines.setdefault(cells[4], []).append((cells[11].strip(), confidence))
    out = []
    for lines in paragraphs.values():
        kept = []
        for words in lines.values():
            if sum(c for _, c in words) / len(words) >= MIN_LINE_CONFIDENCE:
                kept.append(" ".join(word for word, _ in words))
        if kept:
            out.append("\n".join(kept))
    return "\n\n".join(out)


def extract_image(data: bytes, name: str) -> Extracted:
    """The text in a PNG or JPEG image; "no text was found in NAME" when OCR reads none."""
    from PIL import Image, UnidentifiedImageError  # deferred: only images and scans need Pillow

    label = "PNG" if name.lower().endswith(".png") else "JPEG"
    try:
        with warnings.catch_warnings():
            # Pillow warns of sizes near its own limit; ours below is lower and raises.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise ExtractionError(
                f"{name} is {width:,} × {height:,} pixels, over the limit of {MAX_IMAGE_PIXELS // 1_000_000} megapixels"
            )
        image.load()
    except ExtractionError:
        raise
    except Image.DecompressionBombError as exc:
        # Pillow's own guard fires in open() for sizes far beyond ours, before we see the size.
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        declared = f" ({int(pixels.group(1)) // 1_000_000:,} megapixels)" if pixels else ""
        raise ExtractionError(
            f"{name} declares an image over the limit of {MAX_IMAGE_PIXELS // 1_000_000} megapixels{declared}"
        ) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ExtractionError(f"{name} is corrupt or not a {label} image: {exc}") from exc
    text = recognize(prepare_image(image), where=name)
    if not text.strip():
        raise ExtractionError(f"no text was found in {name} (OCR read no words in the image)")
    return Extracted(text, None, None)


def prepare_image(image: Any) -> Any:
    """``image`` upright (camera EXIF orientation), on white (transparency), in grey,
    and at a size Tesseract reads well."""
    from PIL import Image, ImageOps  # deferred with the caller's

    image = ImageOps.exif_transpose(image)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        # Transparent pixels are often black underneath: dark text would vanish into them.
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, "white")
        background.alpha_composite(rgba)
        image = background
    image = image.convert("L")
    longest = max(image.size)
    if longest < _ENLARGE_BELOW:
        image = image.resize((image.width * 2, image.height * 2), Image.Resampling.LANCZOS)
    elif longest > _SHRINK_ABOVE:
        scale = _SHRINK_ABOVE / longest
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.Resampling.LANCZOS)
    return image


def tesseract_version() -> str | None:
    """The installed Tesseract's version line, for benchmarks and diagnostics."""
    program = shutil.which("tesseract")
    if program is None:
        return None
    done = subprocess.run([program, "--version"], capture_output=True, timeout=30, check=False)
    first = (done.stdout or done.stderr).decode("utf-8", "replace").strip().splitlines()
    return first[0] if first else None
