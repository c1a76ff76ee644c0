"""XLSX / XLSM (openpyxl, read-only): each sheet's values row by row, one line per row.

Cells hold their values, not their formulas (``data_only``: the value the spreadsheet application last
computed and saved); a row is its non-empty-trailing cells joined by `` | ``, empty rows are left out. The
sheet name and its first (header) row are the heading path of the rows after it, so a hit cites the sheet,
its column names and its lines (rows); the workbook's title and author (document properties) open the
text. XLSM macros are never run (openpyxl does not run them) and not read.

Bounded: read-only mode streams each sheet's XML instead of building it in memory, the declared
dimensions are dropped (``reset_dimensions``: a sheet declaring A1:XFD1048576 would otherwise have every
row padded to 16,384 columns and a million rows made up), and reading stops with ``file_too_large`` once
:data:`.sheets.MAX_CELLS` cells (padding included) have been read.
The zip is checked (:func:`.container.read_container`) before openpyxl opens it; openpyxl also reads
through defusedxml when that is installed, which it is (a dependency).
"""

from __future__ import annotations

import io
from typing import Any

from foldermind.workers.parser.formats.container import read_container
from foldermind.workers.parser.formats.document import Builder, ParsedDocument, add_fields, one_line
from foldermind.workers.parser.formats.sheets import MAX_CELLS, Budget, add_rows

FORMAT = "xlsx"
SUFFIXES = (".xlsx", ".xlsm")
KIND = "XLSX"


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return read_container(data, max_bytes, KIND, _read)


def _read(stream: io.BytesIO) -> ParsedDocument:
    import openpyxl

    workbook = openpyxl.load_workbook(stream, read_only=True, data_only=True, keep_links=False)
    try:
        return _workbook(workbook)
    finally:
        workbook.close()  # read-only mode keeps the zip open until closed


def _workbook(workbook: Any) -> ParsedDocument:
    builder = Builder()
    props = workbook.properties
    title = one_line(props.title) or None
    add_fields(builder, [("Title", title), ("Author", one_line(props.creator))])
    budget = Budget(MAX_CELLS)
    for sheet in workbook.worksheets:
        if not hasattr(sheet, "iter_rows"):  # a chartsheet: no cells
            continue
        sheet.reset_dimensions()
        add_rows(builder, one_line(sheet.title), sheet.iter_rows(values_only=True), budget)
    return ParsedDocument(FORMAT, builder.segments(), title=title)
