"""Text extraction from uploads: every supported type built from scratch, and every refusal's wording."""

from __future__ import annotations

import io

import docx
import pypdf
import pytest

from knowledge.extraction import Extracted, ExtractionError, extract


def make_pdf(pages: list[str | None], *, title: str | None = None, raw_page: dict[int, bytes] | None = None) -> bytes:
    """A minimal valid PDF with one Helvetica text line per ``\\n`` on each page.

    ``None`` makes a page with no text (like a scan); ``raw_page={n: stream}``
    puts a raw content stream on page ``n`` (1-based).
    """
    objects: list[bytes] = [b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    content_ids = []
    for number, text in enumerate(pages, 1):
        if raw_page and number in raw_page:
            stream = raw_page[number]
        elif text is None:
            stream = b""
        else:
            lines = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in text.split("\n")]
            stream = b"BT /F1 12 Tf 72 720 Td 14 TL\n" + b"".join(b"(%s) Tj T*\n" % ln.encode("latin-1") for ln in lines) + b"ET"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content_ids.append(len(objects))
    pages_id = len(objects) + len(pages) + 1
    page_ids = []
    for content_id in content_ids:
        objects.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 1 0 R >> >> "
            b"/Contents %d 0 R >>" % (pages_id, content_id)
        )
        page_ids.append(len(objects))
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % i for i in page_ids), len(page_ids)))
    objects.append(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    trailer = b"/Root %d 0 R" % len(objects)
    if title is not None:
        objects.append(b"<< /Title (%s) >>" % title.encode("latin-1"))
        trailer += b" /Info %d 0 R" % len(objects)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer, xref))
    return out.getvalue()


def encrypt_pdf(data: bytes, *, user_password: str) -> bytes:
    # RC4 is built into pypdf; AES would need the 'cryptography' package.
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(*, title: str | None = None) -> bytes:
    document = docx.Document()
    if title:
        document.core_properties.title = title
    document.add_heading("Quarterly Report", level=0)
    document.add_paragraph("Revenue grew in every region.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Region"
    table.cell(0, 1).text = "Growth"
    table.cell(1, 0).text = "North"
    table.cell(1, 1).text = "12%"
    document.add_paragraph("Outlook is stable.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def refusal(data: bytes, filename: str, **options: object) -> str:
    with pytest.raises(ExtractionError) as caught:
        extract(data, filename=filename, **options)  # type: ignore[arg-type]
    return str(caught.value)


# --- Plain text and Markdown -------------------------------------------------------------


def test_text_file_is_decoded_as_utf8_without_bom() -> None:
    result = extract("\ufeffCafé notes\r\nline two\n".encode(), filename="notes.txt")
    assert result == Extracted(text="Café notes\nline two\n", title=None, pages=None)


def test_text_file_in_another_encoding_is_detected() -> None:
    text = "Überprüfung der Straßenbahn: Größe, Maß und Fußgänger sind wichtig für die Stadtplanung.\n" * 3
    assert extract(text.encode("cp1252"), filename="notes.txt").text == text


def test_utf16_text_with_bom_is_detected() -> None:
    assert extract("Hello from UTF-16".encode("utf-16"), filename="notes.txt").text == "Hello from UTF-16"


def test_markdown_keeps_text_and_takes_first_h1_as_title() -> None:
    source = "```bash\n# not a title\n```\n\nIntro text.\n\n# Upload Guide #\n\n## Steps\n\n# Second H1\n"
    result = extract(source.encode(), filename="guide.md")
    assert result.text == source
    assert result.title == "Upload Guide"


def test_markdown_without_heading_has_no_title() -> None:
    assert extract(b"just text", filename="x.markdown").title is None


# --- HTML ----------------------------------------------------------------------------------


def test_html_keeps_visible_text_with_paragraph_breaks() -> None:
    page = b"""<!doctype html><html><head><title>  Quarry
      Help </title><style>p { color: red }</style><script>var secret = "token";</script></head>
    <body><noscript>Enable JavaScript</noscript><template><p>hidden template</p></template>
    <h1>Uploading</h1>
    <p>Drag a file
       onto the page.</p><p>Then <b>wait</b>.<br>It is indexed.</p>
    <ul><li>PDF</li><li>DOCX</li></ul><!-- a comment -->
    <script>alert(1)</script></body></html>"""
    result = extract(page, filename="help.html")
    assert result.title == "Quarry Help"
    assert result.text == "Uploading\n\nDrag a file onto the page.\n\nThen wait.\nIt is indexed.\n\nPDF\n\nDOCX"
    assert result.pages is None


def test_html_detected_from_content_type_without_extension() -> None:
    result = extract(b"<p>Hello</p>", filename="download", content_type="text/html; charset=utf-8")
    assert result.text == "Hello"


# --- PDF ------------------------------------------------------------------------------------


def test_pdf_pages_are_joined_with_blank_lines() -> None:
    data = make_pdf(["Hello PDF world\nsecond line", None, "Page three (last)"], title="Annual Report")
    result = extract(data, filename="report.pdf")
    assert result == Extracted(text="Hello PDF world\nsecond line\n\nPage three (last)", title="Annual Report", pages=3)


def test_pdf_detected_from_content_type() -> None:
    assert extract(make_pdf(["Some text"]), filename="upload", content_type="application/pdf").pages == 1


def test_pdf_without_text_layer_or_anything_to_read_is_refused() -> None:
    message = refusal(make_pdf([None, None]), "scan.pdf")
    assert message == "no text was found in scan.pdf: its 2 pages have no text layer and OCR found no text"


def test_pdf_with_user_password_is_refused() -> None:
    data = encrypt_pdf(make_pdf(["Top secret"]), user_password="secret")
    assert refusal(data, "locked.pdf") == "locked.pdf is encrypted with a password; upload an unprotected copy"


def test_pdf_with_only_an_owner_password_opens() -> None:
    data = encrypt_pdf(make_pdf(["Printable but protected"]), user_password="")
    assert extract(data, filename="perms.pdf").text == "Printable but protected"


def test_truncated_pdf_is_refused_as_corrupt() -> None:
    data = make_pdf(["Hello"])
    message = refusal(data[: len(data) // 2], "broken.pdf")
    assert message.startswith("broken.pdf is corrupt or not a PDF: ")


def test_unreadable_pdf_page_is_named() -> None:
    data = make_pdf(["fine", "fine too", "x"], raw_page={3: b"BT /F1 12 Tf [ (x) Tj ET"})
    message = refusal(data, "report.pdf")
    assert message.startswith("page 3 of report.pdf could not be read: ")


# --- DOCX -----------------------------------------------------------------------------------


def test_docx_paragraphs_and_table_cells_in_document_order() -> None:
    result = extract(make_docx(), filename="q3.docx")
    # A table is one block, a row a line: it stays whole when the answer model quotes it.
    assert result.text == "Quarterly Report\n\nRevenue grew in every region.\n\nRegion | Growth\nNorth | 12%\n\nOutlook is stable."
    assert result.title == "Quarterly Report"  # the paragraph styled Title
    assert result.pages is None


def test_docx_core_title_wins() -> None:
    assert extract(make_docx(title="Q3 Board Pack"), filename="q3.docx").title == "Q3 Board Pack"


def test_corrupt_docx_is_refused() -> None:
    assert refusal(b"PK\x03\x04 not really a zip", "memo.docx").startswith("memo.docx is corrupt or not a .docx file: ")


# --- Refusals common to all types ----------------------------------------------------------


def test_unsupported_extension_lists_supported_types() -> None:
    assert refusal(b"data", "report.xyz") == "report.xyz: unsupported file type '.xyz'; supported: .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .png, .jpg"


def test_unsupported_content_type_without_extension_is_named() -> None:
    message = refusal(b"data", "blob", content_type="application/zip")
    assert message == "blob: unsupported file type 'application/zip'; supported: .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .png, .jpg"


def test_empty_file_is_refused() -> None:
    assert refusal(b"", "notes.txt") == "notes.txt is empty"


def test_whitespace_only_file_has_no_text() -> None:
    assert refusal(b" \n\t\n", "blank.txt") == "blank.txt contains no extractable text"


def test_oversized_file_names_the_limit() -> None:
    assert refusal(b"x" * 101, "big.txt", max_bytes=100) == "big.txt is 101 bytes, over the limit of 100 bytes"


def test_default_limit_is_50_mb() -> None:
    message = refusal(b"x" * (50 * 1024 * 1024 + 1), "huge.txt")
    assert message == "huge.txt is 50.0 MB, over the limit of 50 MB"


def test_messages_name_the_file_not_the_client_path() -> None:
    assert refusal(b"", "C:\\Users\\ann\\notes.txt") == "notes.txt is empty"


def test_nul_characters_are_removed() -> None:
    assert extract(b"a\x00b", filename="nul.txt").text == "ab"
