"""Text extraction from uploads: every supported type built from scratch, and every refusal's wording."""

from __future__ import annotations

import io
import re
import zipfile

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


# --- HTML: main content, code, tables, titles -------------------------------------------

ARTICLE = [
    "Pour-over coffee needs a steady hand and freshly ground beans; one gram of coffee to sixteen grams of water gives a balanced cup.",
    "Heat the water to about 94 degrees, rinse the paper filter, and discard the rinse water before adding the grounds to the cone.",
    "Let the coffee bloom for thirty seconds with a little water, then pour the rest in slow circles so the bed stays level.",
]


def test_web_page_keeps_its_main_content_without_navigation_header_footer_or_cookie_banner() -> None:
    page = f"""<!doctype html><html><head><title>Pour-over | Coffee Co</title></head><body>
    <header><a href="/">Coffee Co</a><nav><a href="/">Home</a> | <a href="/docs">Docs</a> | <a href="/blog">Blog</a></nav></header>
    <main><article><h1>Brewing pour-over coffee</h1>{''.join(f'<p>{p}</p>' for p in ARTICLE)}</article></main>
    <aside><h3>Popular</h3><a href="/x">Ten grinders compared</a></aside>
    <div id="cookie-consent">We use cookies to improve your experience. <button>Accept all cookies</button></div>
    <footer><p>© 2024 Coffee Co. All rights reserved.</p><a href="/privacy">Privacy policy</a></footer>
    </body></html>"""
    result = extract(page.encode(), filename="guide.html")
    assert result.text == "Brewing pour-over coffee\n\n" + "\n\n".join(ARTICLE)
    assert result.title == "Pour-over | Coffee Co"


def test_web_page_built_from_divs_loses_its_menus_and_related_links() -> None:
    # Nothing in this markup says "navigation": trafilatura finds the main content.
    page = f"""<html><head><title>Guide</title></head><body>
    <div class="top-links"><a href="/">Home</a> | <a href="/docs">Docs</a> | <a href="/blog">Blog</a></div>
    <div class="wrap"><div class="content"><h1>Brewing pour-over coffee</h1>{''.join(f'<p>{p}</p>' for p in ARTICLE)}</div>
    <div class="related"><h3>Related posts</h3><ul><li><a href="/a">Ten grinders compared</a></li>
    <li><a href="/b">Why water matters</a></li><li><a href="/c">Cold brew in a jar</a></li></ul></div></div>
    <div class="bottom">© 2024 Coffee Co. All rights reserved.</div></body></html>"""
    result = extract(page.encode(), filename="guide.html")
    assert result.text == "Brewing pour-over coffee\n\n" + "\n\n".join(ARTICLE)


def test_html_code_block_stays_a_fenced_block_with_its_line_breaks_and_language() -> None:
    page = b"""<html><body><h1>Brew script</h1><p>Run this:</p>
    <pre><code class="language-python">def brew(grams):
    water = grams * 16
    return water</code></pre><p>Then enjoy.</p></body></html>"""
    result = extract(page, filename="script.html")
    assert result.text == (
        "Brew script\n\nRun this:\n\n```python\ndef brew(grams):\n    water = grams * 16\n    return water\n```\n\nThen enjoy."
    )


def test_code_block_keeps_its_language_on_a_web_page_read_by_trafilatura_too() -> None:
    page = f"""<html><body><nav><a href="/">Home</a> <a href="/blog">Blog</a></nav><article><h1>Brew script</h1>
    {''.join(f'<p>{p}</p>' for p in ARTICLE)}
    <pre class="highlight"><code class="lang-python">def brew(grams):\n    return grams * 16</code></pre></article></body></html>"""
    result = extract(page.encode(), filename="script.html")
    assert "```python\ndef brew(grams):\n    return grams * 16\n```" in result.text
    assert "Home" not in result.text


def test_html_table_is_one_block_of_rows_with_cells_joined() -> None:
    page = b"""<html><body><p>Grind sizes:</p><table><caption>Grinds</caption>
    <thead><tr><th>Method</th><th>Grind</th></tr></thead>
    <tbody><tr><td>Pour-over</td><td>Medium <b>fine</b></td></tr><tr><td>French press</td><td>Coarse</td></tr>
    <tr><td>Espresso</td><td><table><tr><td>Fine</td><td>very</td></tr></table></td></tr></tbody></table></body></html>"""
    result = extract(page, filename="grinds.html")
    assert result.text == (
        "Grind sizes:\n\nGrinds\nMethod | Grind\nPour-over | Medium fine\nFrench press | Coarse\nEspresso | Fine | very"
    )


@pytest.mark.parametrize(
    ("head", "body", "title"),
    [
        ('<meta property="og:title" content="Pour-over guide"><title>Pour-over guide | Coffee Co</title>', "<h1>Brew</h1>", "Pour-over guide"),
        ("<title>Pour-over guide | Coffee Co</title>", "<h1>Brew</h1>", "Pour-over guide | Coffee Co"),
        ("", "<h1>Brewing  <em>pour-over</em></h1><p>text</p>", "Brewing pour-over"),
        ("", "<p>no heading here</p>", None),
    ],
)
def test_html_title_from_og_title_else_title_else_h1(head: str, body: str, title: str | None) -> None:
    assert extract(f"<html><head>{head}</head><body>{body}</body></html>".encode(), filename="p.html").title == title


# --- PDF: furniture and titles --------------------------------------------------------------


def test_pdf_running_headers_footers_and_page_numbers_are_removed() -> None:
    pages = [
        f"ACME Quarries - Annual report 2024\n{body}\nPage {n} of 3"
        for n, body in enumerate(["Revenue rose in the north pit.", "Costs fell in the south pit.", "The outlook is stable."], 1)
    ]
    result = extract(make_pdf(pages), filename="annual.pdf")
    assert result.text == "Revenue rose in the north pit.\n\nCosts fell in the south pit.\n\nThe outlook is stable."


def test_pdf_printed_by_chromium_loses_its_print_header_and_footer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.documents import print_to_pdf

    html = f"""<!doctype html><html><head><title>Quarry field guide</title></head><body>
    <h1>Granite quarry operations</h1><p>{ARTICLE[0]}</p>
    <p style="page-break-before: always">{ARTICLE[1]}</p></body></html>"""
    result = extract(print_to_pdf(html, tmp_path), filename="guide.pdf")
    assert result.pages == 2
    assert result.title == "Quarry field guide"  # Chromium writes <title> into the PDF's metadata
    # Also: Chromium's text layer spells "filter" with the U+FB01 ligature; it reads as letters.
    assert " ".join(result.text.split()) == " ".join(["Granite quarry operations", ARTICLE[0], ARTICLE[1]])


def test_pdf_title_falls_back_to_its_first_heading_line() -> None:
    assert extract(make_pdf(["Quarry Safety Rules\nWear a helmet at all times."]), filename="rules.pdf").title == "Quarry Safety Rules"
    assert extract(make_pdf(["Wear a helmet at all times.\nAlways."]), filename="rules.pdf").title is None


def test_pdf_encrypted_with_aes_and_a_password_is_refused() -> None:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf(["Top secret"]))))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    assert refusal(out.getvalue(), "locked.pdf") == "locked.pdf is encrypted with a password; upload an unprotected copy"


def test_pdf_encrypted_with_aes_and_no_user_password_opens() -> None:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf(["Readable by anyone"]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    assert extract(out.getvalue(), filename="perms.pdf").text == "Readable by anyone"


# --- Word and Markdown titles -------------------------------------------------------------


def test_docx_title_falls_back_to_the_first_heading_1() -> None:
    document = docx.Document()
    document.add_paragraph("Draft, do not circulate.")
    document.add_heading("Blasting schedule", level=1)
    document.add_paragraph("Tuesdays and Thursdays.")
    out = io.BytesIO()
    document.save(out)
    result = extract(out.getvalue(), filename="schedule.docx")
    assert result.title == "Blasting schedule"
    assert result.text == "Draft, do not circulate.\n\nBlasting schedule\n\nTuesdays and Thursdays."


def test_markdown_front_matter_gives_the_title_and_is_not_text() -> None:
    source = "---\ntitle: \"Upload guide\"\nlayout: post\n---\n\n# Uploading\n\nDrag a file.\n"
    result = extract(source.encode(), filename="guide.md")
    assert result.title == "Upload guide"
    assert result.text == "# Uploading\n\nDrag a file.\n"


@pytest.mark.parametrize(
    ("source", "title"),
    [
        ("Intro\n\nUpload Guide\n============\n\ntext", "Upload Guide"),
        ("## Steps\n\ntext\n\n### More", "Steps"),
        ("Sub\n---\n\n# Main\n", "Main"),
        ("text\n\n---\n\nmore", None),  # a rule after a blank line is no heading
    ],
)
def test_markdown_title_is_the_first_h1_else_the_first_heading(source: str, title: str | None) -> None:
    assert extract(source.encode(), filename="x.md").title == title


# --- Bad input: lying names, bombs, empty and corrupt files ----------------------------------


@pytest.mark.parametrize(
    ("data_of", "filename", "message"),
    [
        ("png", "scan.pdf", "scan.pdf is really a PNG image, not a PDF: rename it to scan.png and upload it again"),
        ("pdf", "report.docx", "report.docx is really a PDF, not a Word document: rename it to report.pdf and upload it again"),
        ("docx", "budget.xlsx", "budget.xlsx is really a Word document, not an Excel workbook: rename it to budget.docx and upload it again"),
        ("pdf", "notes.txt", "notes.txt is really a PDF, not a text file: rename it to notes.pdf and upload it again"),
        ("ole", "memo.docx", "memo.docx is really a legacy Office file (.doc, .xls or .ppt), not a Word document: save it as .docx, .pptx or .xlsx and upload it again"),
        ("gzip", "data.csv", "data.csv is really a gzip archive, not a CSV file; supported: .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .png, .jpg"),
    ],
)
def test_a_file_whose_name_lies_about_its_content_is_refused_with_what_it_really_is(data_of: str, filename: str, message: str) -> None:
    from tests.documents import encode, text_image

    data = {
        "png": lambda: encode(text_image(["Hello"]), "PNG"),
        "pdf": lambda: make_pdf(["Hello"]),
        "docx": make_docx,
        "ole": lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 504,
        "gzip": lambda: __import__("gzip").compress(b"a,b\n1,2\n"),
    }[data_of]()
    assert refusal(data, filename) == message


def test_a_zip_that_is_no_office_file_is_named_so() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "hello")
    assert refusal(out.getvalue(), "memo.docx") == "memo.docx is a zip archive but not a Word document (it has no word/document.xml)"


def test_a_file_without_a_name_extension_is_read_by_what_its_bytes_are() -> None:
    assert extract(make_pdf(["Sniffed PDF"]), filename="download").text == "Sniffed PDF"
    assert extract(make_docx(), filename="download").title == "Quarterly Report"
    assert extract(make_docx(), filename="upload", content_type="application/octet-stream").title == "Quarterly Report"


@pytest.mark.parametrize(
    ("kind", "member"),
    [("docx", "word/media/image1.png"), ("pptx", "ppt/media/image1.png"), ("xlsx", "xl/media/image1.png")],
)
def test_zip_bomb_disguised_as_an_office_file_is_refused_before_it_is_inflated(kind: str, member: str) -> None:
    from tests.documents import make_pptx, make_xlsx, zip_bomb

    office = {"docx": make_docx, "pptx": make_pptx, "xlsx": make_xlsx}[kind]()
    bomb = zip_bomb(office, member, megabytes=64)  # 64 MB of zeros in about 64 KB
    assert len(bomb) < len(office) + 200_000
    message = refusal(bomb, f"report.{kind}")
    assert re.fullmatch(
        rf"report\.{kind} would expand [\d,]+ times \({re.escape(member)}: [\d,]+ bytes to 64 MB\), "
        r"over the limit of 200 \(is it a zip bomb\?\)",
        message,
    ), message


def test_zip_bomb_expanding_beyond_the_total_bound_is_refused() -> None:
    from tests.documents import make_xlsx, zip_bomb

    # Deflated fast, so each member's ratio stays near the per-member bound: the total decides.
    bomb = zip_bomb(make_xlsx(rows=3), "xl/worksheets/sheet9.xml", megabytes=520, level=1)
    assert refusal(bomb, "budget.xlsx") == "budget.xlsx would expand to 520.0 MB, over the limit of 512 MB (is it a zip bomb?)"


@pytest.mark.parametrize("filename", ["empty.pdf", "empty.docx", "empty.pptx", "empty.xlsx", "empty.csv", "empty.png", "empty.jpg", "empty.html"])
def test_a_zero_byte_file_of_any_type_is_refused(filename: str) -> None:
    assert refusal(b"", filename) == f"{filename} is empty"


@pytest.mark.parametrize(
    ("filename", "prefix"),
    [
        ("slides.pptx", "slides.pptx is corrupt or not a .pptx file: "),
        ("budget.xlsx", "budget.xlsx is corrupt or not a .xlsx file: "),
    ],
)
def test_corrupt_office_files_are_refused(filename: str, prefix: str) -> None:
    assert refusal(b"PK\x03\x04 truncated", filename).startswith(prefix)
