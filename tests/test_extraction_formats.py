"""Slides, workbooks and CSV files: one self-describing passage per slide or group of rows."""

from __future__ import annotations

import io

import openpyxl
import pytest

from knowledge.extraction import ExtractionError, extract
from knowledge.extraction.sheets import ROW_GROUP_CHARS
from tests.documents import make_pptx, make_xlsx


def refusal(data: bytes, filename: str) -> str:
    with pytest.raises(ExtractionError) as caught:
        extract(data, filename=filename)
    return str(caught.value)


# --- PowerPoint ------------------------------------------------------------------------------


def test_pptx_gives_one_passage_per_slide_with_its_title_tables_groups_and_notes() -> None:
    result = extract(make_pptx(), filename="safety.pptx")
    assert result.passages == (
        "Slide 1: Quarry safety\nHelmets at all times\nBlasting on Tuesdays\nNotes: Remind visitors about the gate office.",
        "Slide 2: Output by pit\nPit | Tonnes\nNorth | 1,204\nSouth | 980\nFigures for March 2024.",
        "Slide 4\nGrouped caption",  # slide 3 has no text at all
    )
    assert result.text == "\n\n".join(result.passages)
    assert result.title == "Quarry safety"  # no declared title: the first slide's
    assert result.pages is None


def test_pptx_declared_title_wins() -> None:
    assert extract(make_pptx(title="Induction deck"), filename="safety.pptx").title == "Induction deck"


def test_pptx_shapes_are_read_top_to_bottom() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(4), Inches(4), Inches(1)).text_frame.text = "second"
    slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "first"
    out = io.BytesIO()
    deck.save(out)
    assert extract(out.getvalue(), filename="order.pptx").text == "Slide 1\nfirst\nsecond"


def test_pptx_without_any_text_is_refused() -> None:
    from pptx import Presentation

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    out = io.BytesIO()
    deck.save(out)
    assert refusal(out.getvalue(), "blank.pptx") == "blank.pptx contains no extractable text"


# --- Excel -----------------------------------------------------------------------------------


def test_xlsx_rows_come_in_passages_that_each_repeat_the_header_row() -> None:
    result = extract(make_xlsx(rows=120, title="Sales 2024"), filename="sales.xlsx")
    assert result.title == "Sales 2024"
    sales = [p for p in result.passages if p.startswith("Sheet Sales")]
    assert len(sales) > 1
    for passage in sales:
        lines = passage.split("\n")
        assert lines[1] == "Region | Month | Revenue | Margin"
        assert len(passage) <= ROW_GROUP_CHARS
    # Every data row is in exactly one passage, in order, and each passage names its rows.
    rows = [line for p in sales for line in p.split("\n")[2:]]
    assert rows == [f"Region {n} | 2024-{1 + n % 12:02d}-01 | {1000 + n * 12.5:g} | 12.5%" for n in range(120)]
    assert sales[0].startswith("Sheet Sales, rows 2-")
    assert sales[-1].split("\n")[0].endswith("-121")
    # The empty sheet gives nothing; an empty row is skipped and trailing empty cells dropped.
    assert result.passages[-1] == "Sheet Staff, rows 2-4\nName | Role | Certified\nAnn | Blaster | TRUE\nBo | Driver | FALSE"
    assert not any(p.startswith("Sheet Empty") for p in result.passages)
    assert result.text == "\n\n".join(result.passages)


def test_xlsx_values_are_what_excel_last_computed() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Item", "Total"])
    sheet.append(["Granite", "=2*3"])  # written by openpyxl: no computed value is stored
    sheet.append(["Gravel", 7.0])
    out = io.BytesIO()
    book.save(out)
    assert extract(out.getvalue(), filename="t.xlsx").text == "Sheet Sheet, rows 2-3\nItem | Total\nGranite\nGravel | 7"


def test_xlsx_with_only_a_header_row_is_one_passage_of_it() -> None:
    book = openpyxl.Workbook()
    book.active.append(["Region", "Growth"])
    out = io.BytesIO()
    book.save(out)
    assert extract(out.getvalue(), filename="t.xlsx").passages == ("Sheet Sheet, row 1\nRegion | Growth",)


# --- CSV -------------------------------------------------------------------------------------


def test_csv_rows_come_in_passages_with_the_header_repeated() -> None:
    lines = ["pit;tonnes;note"] + [f"Pit {n};{n * 10};\"ok\nchecked\"" for n in range(200)]
    result = extract("\n".join(lines).encode("cp1252"), filename="output.csv")
    assert len(result.passages) > 1
    assert all(p.split("\n")[1] == "pit | tonnes | note" for p in result.passages)
    assert result.passages[0].startswith("output.csv, rows 2-")
    body = [line for p in result.passages for line in p.split("\n")[2:]]
    assert body == [f"Pit {n} | {n * 10} | ok checked" for n in range(200)]
    assert result.title is None


def test_csv_in_a_legacy_encoding_with_commas() -> None:
    rows = ["Name,Stadt,Straße", "Jürgen Müller,Zürich,Bahnhofstraße 12", "Zoë Größer,Köln,Hohe Straße 5", "Anna Fußer,Basel,Güterstraße 3"]
    data = "\n".join(rows).encode("cp1252")
    assert extract(data, filename="people.csv").text == "people.csv, rows 2-4\n" + "\n".join(r.replace(",", " | ") for r in rows)


def test_csv_with_an_unreadable_row_is_refused() -> None:
    data = b"a,b\n" + b'"' + b"x" * 200_000 + b'"\n'  # one field over the csv module's limit
    message = refusal(data, "big.csv")
    assert message.startswith("big.csv is not a readable CSV file: ")
