"""What a file really is (magic bytes), and opening Office files without trusting them.

An extension is a claim; the first bytes are evidence. ``sniff`` names the format the
bytes show, when they show one. ``open_zip`` opens an Office Open XML package (.docx,
.pptx, .xlsx: zip archives of XML) after checking, from the archive's directory and
before anything is decompressed, that it does not expand beyond a bound: a few
kilobytes of zip can declare gigabytes of XML (a zip bomb).
"""

from __future__ import annotations

import io
import zipfile

from knowledge.extraction.common import ExtractionError
from knowledge.rag.limits import describe_bytes

# Bounds on what an Office file may expand to. A 50 MB upload of real XML expands to a
# few hundred MB at most; text beyond 10 million characters is refused later anyway.
MAX_ZIP_MEMBERS = 10_000
MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
# Office XML compresses 5-20 times, a sheet of repeated styles up to about 100 times;
# a member expanding more than this (and beyond a few megabytes) is a bomb, not a document.
MAX_COMPRESSION_RATIO = 200
_RATIO_FLOOR_BYTES = 8 * 1024 * 1024

# What each format is called in a sentence, and its usual extension.
DESCRIPTIONS = {
    "pdf": ("a PDF", ".pdf"),
    "docx": ("a Word document", ".docx"),
    "pptx": ("a PowerPoint presentation", ".pptx"),
    "xlsx": ("an Excel workbook", ".xlsx"),
    "png": ("a PNG image", ".png"),
    "jpeg": ("a JPEG image", ".jpg"),
    "gif": ("a GIF image", ".gif"),
    "tiff": ("a TIFF image", ".tiff"),
    "webp": ("a WebP image", ".webp"),
    "bmp": ("a BMP image", ".bmp"),
    "zip": ("a zip archive", ".zip"),
    "ole": ("a legacy Office file (.doc, .xls or .ppt)", ".doc"),
    "gzip": ("a gzip archive", ".gz"),
    "rtf": ("an RTF document", ".rtf"),
    "exe": ("a program", ".exe"),
    "txt": ("a text file", ".txt"),
    "md": ("a Markdown file", ".md"),
    "html": ("an HTML page", ".html"),
    "csv": ("a CSV file", ".csv"),
}

_OFFICE_MAIN_PARTS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}


def sniff(data: bytes) -> str | None:
    """The format ``data`` shows in its first bytes (a key of ``DESCRIPTIONS``), or None
    for text and anything unrecognised. A zip archive is told apart by the Office part
    its directory lists (a damaged archive is "zip")."""
    head = data[:16]
    if data[:1024].lstrip(b"\x00\t\n\r \xef\xbb\xbf").startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "tiff"
    if head.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"BM") and len(data) > 26 and data[6:10] == b"\x00\x00\x00\x00":
        return "bmp"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "ole"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith((b"MZ", b"\x7fELF")):
        return "exe"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        try:
            names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
        except (zipfile.BadZipFile, ValueError, OSError):
            return "zip"
        for part, kind in _OFFICE_MAIN_PARTS.items():
            if part in names:
                return kind
        return "zip"
    return None


def describe(kind: str) -> str:
    return DESCRIPTIONS.get(kind, (kind, ""))[0]


def open_zip(data: bytes, name: str, kind: str) -> zipfile.ZipFile:
    """``data`` as a zip archive whose declared sizes are within the bounds above.

    Python's zipfile never inflates a member beyond the size its directory declares (a
    member that lies fails its CRC check), so bounding the declared sizes bounds what
    python-docx, python-pptx and openpyxl can be made to decompress.
    """
    label = DESCRIPTIONS[kind][1]
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ExtractionError(f"{name} is corrupt or not a {label} file: {exc}") from exc
    if len(members) > MAX_ZIP_MEMBERS:
        raise ExtractionError(
            f"{name} holds {len(members):,} files inside, over the limit of {MAX_ZIP_MEMBERS:,} for a {label} file"
        )
    total = sum(member.file_size for member in members)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise ExtractionError(
            f"{name} would expand to {describe_bytes(total)}, over the limit of {describe_bytes(MAX_UNCOMPRESSED_BYTES)} "
            f"(is it a zip bomb?)"
        )
    for member in members:
        if member.file_size > _RATIO_FLOOR_BYTES and member.file_size > MAX_COMPRESSION_RATIO * max(1, member.compress_size):
            ratio = member.file_size // max(1, member.compress_size)
            raise ExtractionError(
                f"{name} would expand {ratio:,} times ({member.filename}: {describe_bytes(member.compress_size)} "
                f"to {describe_bytes(member.file_size)}), over the limit of {MAX_COMPRESSION_RATIO} (is it a zip bomb?)"
            )
    return archive
