"""What the spreadsheet formats share (XLSX, ODS, CSV): rows as lines under their sheet's name, cell values
as text, and the cell budget that bounds a parse.

:data:`MAX_CELLS` bounds the work and the extracted text of one file: reading stops with ``file_too_large``
once that many cells (the empty cells a row is padded with included) have been read: a million cells stay well
inside the 60 s parse timeout, and a 50,000-row sheet of ten columns is still read whole
(docs/tuning.md#parser-bounds).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import Builder, Headings, ParseError, one_line

MAX_CELLS = 1_000_000
"""Cells read per file (empty cells a row is padded with included) before it is refused as too large."""


def too_many_cells(limit: int = MAX_CELLS) -> str:
    """The reason a spreadsheet with too many cells is refused with."""
    return f"spreadsheet too large: more than {limit} cells (the limit)"


class Budget:
    """Cells left to read; ``take`` refuses the file once they run out."""

    def __init__(self, cells: int) -> None:
        self.limit = cells
        self.left = cells

    def take(self, cells: int) -> None:
        self.left -= cells
        if self.left < 0:
            raise ParseError(ErrorCode.FILE_TOO_LARGE, too_many_cells(self.limit))


def add_rows(builder: Builder, sheet: str, rows: Iterable[Iterable[Any]], budget: Budget) -> None:
    """A sheet: its name as a line (so a sheet that only names itself is still found) and each non-empty
    row as a line. The first row is the header, as a CSV's: it sits under the sheet's name, and the rows
    after it under ``sheet > header``, so each chunk carries its column names (in the keyword index's
    heading field and in the citation) without repeating them in the text."""
    headings = Headings()
    heading = headings.enter(1, sheet)
    builder.blank()
    builder.add(sheet, heading=heading)
    for row in rows:
        cells = [cell_text(value) for value in row]
        budget.take(len(cells))
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            line = " | ".join(cells).strip()
            builder.add(line, heading=heading)
            if len(headings.stack) < 2:
                heading = headings.enter(2, line)


def cell_text(value: Any) -> str:
    """A cell's value as text: whole floats without ``.0``, dates in ISO form, text on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return one_line(str(value))
