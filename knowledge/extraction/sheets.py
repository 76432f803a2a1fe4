"""Spreadsheets: Excel workbooks (.xlsx) and CSV files, as passages of rows.

A row means little without its column names, and a chunk of rows 200-240 is found by
search only if it says what its columns are. So the rows of each sheet are grouped into
passages of at most ``ROW_GROUP_CHARS`` characters, and every passage repeats the header
row (the sheet's first non-empty row) after a line naming where it comes from::

    Sheet Sales, rows 41-80
    Region | Quarter | Revenue
    North | Q3 | 1200

Cells are joined by `` | ``; empty rows are skipped and trailing empty cells dropped.
Excel values are the ones last computed (formulas are not evaluated here), whole numbers
without ".0", percentages as percentages and dates as ISO dates.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable, Iterator
from typing import Any

from knowledge.extraction.common import Extracted, ExtractionError, clean_title, decode, join_blocks, one_line
from knowledge.extraction.sniff import open_zip

# Under the default chunk size (2,000 characters), so one passage fits in one chunk.
ROW_GROUP_CHARS = 1500


def row_passages(rows: Iterable[tuple[int, list[str]]], *, where: str) -> Iterator[str]:
    """Passages of the numbered ``rows`` (1-based row number, cell texts), each within
    ``ROW_GROUP_CHARS`` when a row allows it and each starting with ``where`` and the
    header row. A sheet with only a header row is one passage of it."""
    header: str | None = None
    header_number = 0
    group: list[str] = []
    first = last = 0

    def passage() -> str:
        span = f"row {first}" if first == last else f"rows {first}-{last}"
        return "\n".join([f"{where}, {span}", header or "", *group])

    for number, cells in rows:
        while cells and not cells[-1]:
            cells = cells[:-1]
        if not cells:
            continue
        line = " | ".join(cells)
        if header is None:
            header, header_number = line, number
            continue
        size = len(where) + len(header) + 20 + sum(len(row) + 1 for row in group)
        if group and size + len(line) > ROW_GROUP_CHARS:
            yield passage()
            group = []
        if not group:
            first = number
        group.append(line)
        last = number
    if group:
        yield passage()
    elif header is not None:
        yield f"{where}, row {header_number}\n{header}"


# --- Excel -------------------------------------------------------------------------------


def extract_xlsx(data: bytes, name: str) -> Extracted:
    import openpyxl  # deferred: only Excel uploads need it

    archive = open_zip(data, name, "xlsx")
    if "xl/workbook.xml" not in archive.namelist():
        raise ExtractionError(f"{name} is a zip archive but not an Excel workbook (it has no xl/workbook.xml)")
    try:
        # read_only streams each sheet's XML instead of building every cell object;
        # data_only gives the values Excel last computed rather than formula text.
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a .xlsx file: {exc}") from exc
    passages: list[str] = []
    try:
        for sheet in workbook.worksheets:
            rows = ((number, [_cell(cell) for cell in row]) for number, row in enumerate(sheet.iter_rows(), 1))
            passages += row_passages(rows, where=f"Sheet {sheet.title}")
        title = clean_title(workbook.properties.title)
    except ExtractionError:
        raise
    except Exception as exc:
        raise ExtractionError(f"{name} is corrupt or not a .xlsx file: {exc}") from exc
    finally:
        workbook.close()
    return Extracted(join_blocks(passages), title, None, passages=tuple(passages))


def _cell(cell: Any) -> str:
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (int, float)):
        number_format = str(getattr(cell, "number_format", "") or "")
        if "%" in number_format:
            return f"{_number(value * 100)}%"
        return _number(value)
    return one_line(str(value))


def _number(value: float) -> str:
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return format(value, ".15g")  # what Excel shows for a General cell, without float noise


# --- CSV ---------------------------------------------------------------------------------


def extract_csv(data: bytes, name: str) -> Extracted:
    text = decode(data, name)
    dialect = _dialect(text)
    try:
        rows = list(_csv_rows(text, dialect))
    except csv.Error as exc:
        raise ExtractionError(f"{name} is not a readable CSV file: {exc}") from exc
    passages = tuple(row_passages(rows, where=name))
    return Extracted(join_blocks(passages), None, None, passages=passages)


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    try:
        return csv.Sniffer().sniff(text[:65536], delimiters=",;\t|")
    except csv.Error:
        return csv.excel  # one column, or too irregular to tell: commas


def _csv_rows(text: str, dialect: type[csv.Dialect] | csv.Dialect) -> Iterator[tuple[int, list[str]]]:
    # Records, not physical lines: a quoted cell may span several lines.
    for number, row in enumerate(csv.reader(io.StringIO(text), dialect), 1):
        yield number, [one_line(cell) for cell in row]
