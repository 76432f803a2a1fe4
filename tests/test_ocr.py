"""OCR, offline: scanned PDFs and photographed or screenshotted pages come back as their text.

The scans are made here from known text (Chromium prints a page, pdfium rasterizes it,
Pillow makes an image-only PDF; or Pillow draws the text), so the character error rate
against that text is exact. Tesseract runs for real (``make`` installs Debian's).
"""

from __future__ import annotations

import io

import pypdf
import pytest
from PIL import Image

from knowledge.extraction import ExtractionError, extract
from tests.documents import cer, encode, image_pdf, png_header_only, print_to_pdf, rasterize, text_image
from tests.test_extraction import make_pdf

PARAGRAPHS = [
    "The north pit produced 1,204 tonnes of granite in March 2024, up from 980 tonnes in February. "
    "Blasting happens on Tuesdays and Thursdays between ten and noon.",
    "Every visitor signs in at the gate office and wears a helmet, boots and a high-visibility vest. "
    "Children under sixteen are not allowed past the viewing platform.",
    "The primary crusher is inspected every morning before the first load; worn jaw plates are replaced "
    "after about 300 operating hours.",
]
LINES = ["Photographed notice: the quarry gate closes at 6 pm.", "Deliveries use the east entrance on weekdays.",
         "Ask for Ann Baker at extension 2044."]


def refusal(data: bytes, filename: str) -> str:
    with pytest.raises(ExtractionError) as caught:
        extract(data, filename=filename)
    return str(caught.value)


def scanned_guide(tmp_path) -> tuple[bytes, str]:  # type: ignore[no-untyped-def]
    """A two-page "scan" of a printed web page, and the text on it (print furniture aside)."""
    html = f"""<!doctype html><html><head><title>Quarry field guide</title></head>
    <body style="font-family: sans-serif; font-size: 15px"><h1>Granite quarry operations</h1>
    <p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p><h2 style="page-break-before: always">Crusher maintenance</h2>
    <p>{PARAGRAPHS[2]}</p></body></html>"""
    scan = image_pdf(rasterize(print_to_pdf(html, tmp_path), dpi=150), dpi=150)
    expected = " ".join(["Granite quarry operations", PARAGRAPHS[0], PARAGRAPHS[1], "Crusher maintenance", PARAGRAPHS[2]])
    return scan, expected


def test_scanned_pdf_comes_back_as_its_text_without_print_furniture(tmp_path) -> None:  # type: ignore[no-untyped-def]
    scan, expected = scanned_guide(tmp_path)
    seen: list[tuple[int, int]] = []
    result = extract(scan, filename="scan.pdf", progress=lambda done, total: seen.append((done, total)))
    assert cer(result.text, expected) < 0.05, result.text
    # Chromium's header ("12/1/26, 7:09 AM  Quarry field guide") and footer ("file:///... 1/2")
    # are on the scan too; they go as on any PDF.
    assert "file:" not in result.text and "Quarry field guide" not in result.text
    assert result.pages == 2
    assert result.title == "Granite quarry operations"  # no metadata title: the first heading line
    assert seen == [(1, 2), (2, 2)]
    assert result.warnings == ()


def test_pdf_with_a_text_page_and_a_scanned_page_keeps_both_in_order() -> None:
    text_page = make_pdf(["Page one has a real text layer about granite."])
    scanned = image_pdf([text_image(LINES).convert("L")], dpi=150)
    writer = pypdf.PdfWriter()
    for part in (text_page, scanned):
        writer.append(pypdf.PdfReader(io.BytesIO(part)))
    out = io.BytesIO()
    writer.write(out)
    result = extract(out.getvalue(), filename="mixed.pdf")
    first, second = result.text.split("\n\n", 1)
    assert first == "Page one has a real text layer about granite."
    assert cer(second, " ".join(LINES)) < 0.05, second


def test_scanned_pdf_with_nothing_to_read_is_refused_and_blank_pages_are_not_warned_about() -> None:
    drawing = Image.new("L", (1275, 1650), 255)
    for x in range(300, 900):
        for y in (400, 401, 402):
            drawing.putpixel((x, y), 0)  # a rule, no letters
    assert refusal(image_pdf([drawing]), "drawing.pdf") == (
        "no text was found in drawing.pdf: its page has no text layer and OCR found no text"
    )
    result = extract(image_pdf([text_image(LINES).convert("L"), Image.new("L", (1275, 1650), 255), drawing]), filename="three.pdf")
    assert cer(result.text, " ".join(LINES)) < 0.05
    assert result.warnings == ("page 3 of three.pdf has no text layer and OCR found no text on it",)


@pytest.mark.parametrize(("fmt", "filename"), [("PNG", "notice.png"), ("JPEG", "notice.jpg"), ("JPEG", "notice.jpeg")])
def test_image_of_text_comes_back_as_its_text(fmt: str, filename: str) -> None:
    data = encode(text_image(LINES), fmt, **({"quality": 80} if fmt == "JPEG" else {}))
    result = extract(data, filename=filename)
    assert cer(result.text, " ".join(LINES)) < 0.05, result.text
    assert result.title is None and result.pages is None


def test_phone_photo_is_read_upright_from_its_exif_orientation() -> None:
    upright = text_image(LINES)
    # Cameras store the sensor's pixels and an orientation tag; 6 means "rotate 90° clockwise to view".
    stored = upright.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    result = extract(encode(stored, "JPEG", exif=exif.tobytes(), quality=85), filename="photo.jpg")
    assert cer(result.text, " ".join(LINES)) < 0.05, result.text


def test_transparent_screenshot_is_read_on_white() -> None:
    mask = text_image(LINES).convert("L").point(lambda v: 255 - v)  # text opaque, background transparent
    rgba = Image.new("RGBA", mask.size, (0, 0, 0, 0))
    rgba.putalpha(mask)
    assert cer(extract(encode(rgba, "PNG"), filename="shot.png").text, " ".join(LINES)) < 0.05


def test_image_without_text_is_refused() -> None:
    assert refusal(encode(Image.new("RGB", (800, 600), "white"), "PNG"), "image.png") == (
        "no text was found in image.png (OCR read no words in the image)"
    )


def test_image_declaring_too_many_pixels_is_refused_before_it_is_decoded() -> None:
    assert refusal(png_header_only(12_000, 10_000), "big.png") == (
        "big.png is 12,000 × 10,000 pixels, over the limit of 80 megapixels"
    )
    # Far beyond: Pillow's own guard stops it even earlier.
    assert refusal(png_header_only(40_000, 40_000), "huge.png") == (
        "huge.png declares an image over the limit of 80 megapixels (1,600 megapixels)"
    )


def test_corrupt_images_are_refused() -> None:
    png = encode(text_image(["Hello"]), "PNG")
    assert refusal(png[: len(png) // 2], "cut.png").startswith("cut.png is corrupt or not a PNG image: ")
    assert refusal(b"\xff\xd8\xff\xe0 not a jpeg", "bad.jpg").startswith("bad.jpg is corrupt or not a JPEG image: ")


def test_a_png_named_jpg_is_still_an_image_and_is_read() -> None:
    assert cer(extract(encode(text_image(LINES), "PNG"), filename="notice.jpg").text, " ".join(LINES)) < 0.05
