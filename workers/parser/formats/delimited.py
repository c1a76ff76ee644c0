"""CSV / TSV (stdlib csv): one line per record, the header row as every chunk's heading.

The text is decoded like a text file (:func:`.txt.decode_text`: BOM, UTF-8, else detected), the dialect
(comma, tab, semicolon or pipe; quoting) sniffed from the first 4 KiB, since a ``.csv`` from a European
spreadsheet is often semicolon-separated and the suffix is not passed to a parser. Each record becomes one
line, its fields joined by `` | `` (line breaks inside a quoted field become spaces), and blank records stay
blank lines, so line *n* of the extracted text is record *n* of the file and a hit's line range is its row
range. The first record is the header: it is the heading path of every row, so each chunk carries the
column names with it (in the keyword index's heading field and in the citation) without repeating them in
the text. Bounded like a sheet (:data:`.sheets.MAX_CELLS` fields), and the csv module's own field limit
(128 Ki characters) refuses a runaway quoted field as malformed.
"""

from __future__ import annotations

import csv
import io

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import Builder, Headings, ParsedDocument, ParseError, normalize, reason
from foldermind.workers.parser.formats.sheets import MAX_CELLS, Budget, cell_text
from foldermind.workers.parser.formats.txt import decode_text

FORMAT = "csv"
SUFFIXES = (".csv", ".tsv")
SAMPLE_CHARS = 4 * 1024
"""How much of the file the dialect is sniffed from: dozens of records, enough to tell; the Sniffer's regexes
grow faster than the sample (docs/tuning.md#parser-bounds)."""


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    text = normalize(decode_text(data))
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(text))
    builder = Builder()
    budget = Budget(MAX_CELLS)
    heading: str | None = None
    try:
        for record in reader:
            budget.take(len(record))
            line = " | ".join(cell_text(field) for field in record).strip()
            if heading is None and line:
                heading = Headings().enter(1, line)
            builder.add(line, heading=heading)
    except csv.Error as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"malformed CSV: {reason(exc)}") from exc
    return ParsedDocument(FORMAT, builder.segments())


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    sample = text[:SAMPLE_CHARS]
    if len(text) > SAMPLE_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # whole records only
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;|")
    except csv.Error:  # one column, or too irregular to tell: the first line decides
        first = sample.split("\n", 1)[0]
        return csv.excel_tab if first.count("\t") > first.count(",") else csv.excel
