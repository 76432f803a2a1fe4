"""Files the extraction tests build: slides, workbooks, pages printed by Chromium, scans.

Everything is made from known text on this machine, so a test can say exactly what
extraction must give back. Scans are real raster images (Chromium's print of a page,
rasterized by pdfium; text drawn by Pillow), never a PDF with a hidden text layer.
"""

from __future__ import annotations

import io
import os
import subprocess
import zipfile
from pathlib import Path

CHROMIUM = Path(os.environ.get("QUARRY_CHROMIUM", "/usr/bin/chromium"))


def print_to_pdf(html: str, directory: Path) -> bytes:
    """``html`` printed to PDF by headless Chromium, with its default print header (date,
    time, title) and footer (address, page counter), as a user's "Save as PDF" does."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: install Debian's chromium (make test does)"
    page = directory / "page.html"
    page.write_text(html, encoding="utf-8")
    out = directory / "page.pdf"
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={directory / 'chromium-profile'}", f"--print-to-pdf={out}", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )
    return out.read_bytes()


def rasterize(pdf: bytes, *, dpi: int = 150) -> list[object]:
    """Each page of ``pdf`` as a greyscale PIL image, as a scanner would deliver it."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        return [document[i].render(scale=dpi / 72, grayscale=True).to_pil().convert("L") for i in range(len(document))]
    finally:
        document.close()


def image_pdf(images: list[object], *, dpi: int = 150) -> bytes:
    """A PDF whose pages are only these images: no text layer at all."""
    out = io.BytesIO()
    first, *rest = images
    first.save(out, "PDF", resolution=dpi, save_all=True, append_images=rest)  # type: ignore[attr-defined]
    return out.getvalue()


def text_image(lines: list[str], *, size: int = 36, width: int = 1600) -> object:
    """Black text on white, one line per entry, in Pillow's bundled font."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    image = Image.new("RGB", (width, 80 + len(lines) * int(size * 1.6)), "white")
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((60, 40 + n * int(size * 1.6)), line, fill="black", font=font)
    return image


def encode(image: object, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)  # type: ignore[attr-defined]
    return out.getvalue()


def cer(got: str, expected: str) -> float:
    """Character error rate: edit distance over the expected length, whitespace runs
    counted as one space (line breaks are layout, not characters)."""
    a, b = " ".join(got.split()), " ".join(expected.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(1, len(b))


def make_pptx(*, title: str | None = None) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    if title:
        deck.core_properties.title = title
    first = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
    first.shapes.title.text = "Quarry safety"
    body = first.placeholders[1].text_frame
    body.text = "Helmets at all times"
    body.add_paragraph().text = "Blasting on Tuesdays"
    first.notes_slide.notes_text_frame.text = "Remind visitors about the gate office."
    second = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    second.shapes.title.text = "Output by pit"
    table = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([("Pit", "Tonnes"), ("North", "1,204"), ("South", "980")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    note = second.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1)).text_frame
    note.text = "Figures for March 2024."
    deck.slides.add_slide(deck.slide_layouts[6])  # blank: no text at all
    third = deck.slides.add_slide(deck.slide_layouts[6])
    group = third.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Grouped caption"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_deck(slides: list[tuple[str, str]]) -> bytes:
    """A real .pptx (python-pptx) of title-and-content slides: ``(title, body)`` each."""
    from pptx import Presentation

    deck = Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


FOUR_SLIDES = [
    ("Quarry safety", "Helmets at all times on the benches."),
    ("Blasting", "Blasting happens on Tuesdays at noon, after the siren."),
    ("Output by pit", "The north pit produced 1,204 tonnes in March."),
    ("Contacts", "The gate office answers on extension 214."),
]


def make_xlsx(*, rows: int = 120, title: str | None = None) -> bytes:
    import datetime as dt

    import openpyxl

    book = openpyxl.Workbook()
    if title:
        book.properties.title = title
    sales = book.active
    sales.title = "Sales"
    sales.append(["Region", "Month", "Revenue", "Margin"])
    for n in range(rows):
        sales.append([f"Region {n}", dt.datetime(2024, 1 + n % 12, 1), 1000 + n * 12.5, 0.125])
        sales.cell(row=n + 2, column=4).number_format = "0.0%"
    book.create_sheet("Empty")
    staff = book.create_sheet("Staff")
    staff.append(["Name", "Role", "Certified"])
    staff.append(["Ann", "Blaster", True])
    staff.append([None, None, None])  # an empty row is skipped
    staff.append(["Bo", "Driver", False, None, None])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def zip_bomb(office_file: bytes, member: str, *, megabytes: int, level: int = 9) -> bytes:
    """``office_file`` with one more member: ``megabytes`` of zeros, deflated to almost nothing."""
    out = io.BytesIO(office_file)
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        with archive.open(member, "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(megabytes):
                fh.write(chunk)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG that declares ``width`` x ``height`` pixels (a decompression bomb's header)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
