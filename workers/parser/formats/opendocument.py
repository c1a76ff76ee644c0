"""OpenDocument text, spreadsheet and presentation (``.odt``, ``.ods``, ``.odp``): the zip's XML read with
defusedxml, streamed.

Why not odfpy (which the tests use to write these files): its ``load`` builds the whole document as a
Python DOM, several hundred bytes per element, so a 50,000-row spreadsheet costs hundreds of MiB before a
cell is read; streaming ``content.xml`` with ``iterparse`` (each paragraph and row cleared once read) keeps
memory to one row, and the parts are few and simple. What each kind gives:

- **text**: paragraphs and list items as blocks, ``text:h`` (outline level N) as heading paths, tables row
  by row; deleted text kept for tracked changes is left out;
- **spreadsheet**: each sheet's rows as lines (cells joined by `` | ``) under the sheet's name and its header
  row, bounded by :data:`.sheets.MAX_CELLS`; repeated rows and cells (``number-rows-repeated``, how ODS stores a run of
  equal or empty rows, up to a million at once) count as the cells they stand for, and empty runs are
  never expanded;
- **presentation**: each ``draw:page`` is a page (slide number), headed by its title frame (else "Slide N",
  so untitled slides never share a chunk), speaker notes under "<title> > Notes".

The title and author (``meta.xml``) open the text. The zip is checked (:func:`.container.read_container`)
first, and defusedxml refuses entity declarations anyway.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any
from xml.etree.ElementTree import Element

from foldermind.workers.parser.formats.container import corrupt, read_container
from foldermind.workers.parser.formats.document import (
    Builder,
    Headings,
    ParsedDocument,
    add_fields,
    clean,
    one_line,
)
from foldermind.workers.parser.formats.sheets import MAX_CELLS, Budget

FORMAT = "odf"
SUFFIXES = (".odt", ".ods", ".odp")
KIND = "OpenDocument"

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


P, H, SPACE, TAB, BREAK = _q("text:p"), _q("text:h"), _q("text:s"), _q("text:tab"), _q("text:line-break")
TRACKED = _q("text:tracked-changes")
TABLE, ROW = _q("table:table"), _q("table:table-row")
CELL, COVERED = _q("table:table-cell"), _q("table:covered-table-cell")
PAGE, FRAME, NOTES = _q("draw:page"), _q("draw:frame"), _q("presentation:notes")
SPREADSHEET = _q("office:spreadsheet")
MAX_SPACES = 64
"""A ``text:s`` run longer than this is read as this many spaces (a hostile one asks for billions)."""
MAX_EMPTY_RUN = 64
"""A run of repeated empty cells inside a row keeps at most this many column separators."""


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return read_container(data, max_bytes, KIND, _read)


def _read(stream: io.BytesIO) -> ParsedDocument:
    from defusedxml.ElementTree import iterparse

    with zipfile.ZipFile(stream) as zf:
        names = set(zf.namelist())
        builder = Builder()
        title, author = _meta(zf) if "meta.xml" in names else ("", "")
        add_fields(builder, [("Title", title), ("Author", author)])
        if "content.xml" not in names:
            raise corrupt(KIND, ValueError("no content.xml"))
        reader = _Reader(builder)
        with zf.open("content.xml") as content:
            for event, elem in iterparse(content, events=("start", "end")):
                reader.event(event, elem)
    return ParsedDocument(FORMAT, builder.segments(), title=title or None, pages=reader.slides or None)


def _meta(zf: zipfile.ZipFile) -> tuple[str, str]:
    from defusedxml.ElementTree import fromstring

    root = fromstring(zf.read("meta.xml"))
    title = root.find(".//dc:title", _NS)
    author = root.find(".//dc:creator", _NS)
    if author is None:
        author = root.find(".//meta:initial-creator", _NS)
    return one_line(title.text if title is not None else ""), one_line(author.text if author is not None else "")


def text_of(elem: Element) -> str:
    """A paragraph's text: spans opened, ``text:s`` / ``text:tab`` / ``text:line-break`` as the spaces,
    tab and line break they stand for (walked without recursion: spans can be nested deeply)."""
    out: list[str] = [elem.text or ""]
    stack: list[tuple[Element, bool]] = [(child, False) for child in reversed(elem)]
    while stack:
        node, closing = stack.pop()
        if not closing:
            if node.tag == SPACE:
                out.append(" " * min(_int(node.get(_q("text:c"))), MAX_SPACES))
            elif node.tag == TAB:
                out.append("\t")
            elif node.tag == BREAK:
                out.append("\n")
            else:
                out.append(node.text or "")
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(node))
                continue
        out.append(node.tail or "")
    return "".join(out)


def _int(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def _clear(elem: Element) -> None:
    """Free a read element, keeping the text that follows it (its tail belongs to its parent)."""
    tail = elem.tail
    elem.clear()
    elem.tail = tail


class _Reader:
    """Turns ``content.xml``'s start and end events into segments."""

    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.headings = Headings()
        self.budget = Budget(MAX_CELLS)
        self.spreadsheet = False
        self.skip = 0  # inside tracked changes (deleted text)
        self.cell_depth = 0
        self.cell: list[str] = []  # paragraphs of the open cell
        self.row: list[str] = []
        self.sheet = ""
        self.sheet_path = Headings()  # the sheet's name, then its header row (as a CSV's)
        self.slides = 0
        self.slide: dict[str, Any] | None = None  # the open slide: its title, texts, notes
        self.frame_class: list[str] = []
        self.notes = 0

    def event(self, event: str, elem: Element) -> None:
        tag = elem.tag
        if event == "start":
            self.start(tag, elem)
            return
        if tag == TRACKED:
            self.skip -= 1
        elif self.skip:
            return
        elif tag in (P, H):
            self.paragraph(tag, elem)
            _clear(elem)
        elif tag in (CELL, COVERED):
            self.end_cell(elem)
        elif tag == ROW:
            self.end_row(elem)
            _clear(elem)
        elif tag == FRAME:
            self.frame_class.pop()
        elif tag == NOTES:
            self.notes -= 1
        elif tag == PAGE:
            self.end_slide()
            _clear(elem)

    def start(self, tag: str, elem: Element) -> None:
        if tag == TRACKED:
            self.skip += 1
        elif tag == SPREADSHEET:
            self.spreadsheet = True
        elif tag == TABLE:
            self.sheet = one_line(elem.get(_q("table:name")))
            self.sheet_path = Headings()
            self.sheet_path.enter(1, self.sheet)
            if self.spreadsheet and self.sheet:
                self.builder.blank()
                self.builder.add(self.sheet, heading=self.sheet)
        elif tag in (CELL, COVERED):
            self.cell_depth += 1
            self.cell = []
        elif tag == FRAME:
            self.frame_class.append(elem.get(_q("presentation:class")) or "")
        elif tag == NOTES:
            self.notes += 1
        elif tag == PAGE:
            self.slides += 1
            self.slide = {"title": "", "texts": [], "notes": []}

    def heading(self) -> str | None:
        if self.spreadsheet:
            return self.sheet_path.path
        return self.headings.path

    def paragraph(self, tag: str, elem: Element) -> None:
        text = clean(text_of(elem))
        if self.cell_depth:
            if text:
                self.cell.append(text)
            return
        if self.slide is not None:
            if text:
                if self.notes:
                    self.slide["notes"].append(text)
                elif self.frame_class and self.frame_class[-1] == "title" and not self.slide["title"]:
                    self.slide["title"] = one_line(text)
                else:
                    self.slide["texts"].append(text)
            return
        if tag == H:
            path = self.headings.enter(_int(elem.get(_q("text:outline-level"))), text)
            self.builder.blank()
            if text:
                self.builder.add(text, heading=path)
        elif text:
            self.builder.add(text, heading=self.heading())

    def end_cell(self, elem: Element) -> None:
        self.cell_depth -= 1
        text = " ".join(one_line(t) for t in self.cell)
        repeat = _int(elem.get(_q("table:number-columns-repeated")))
        if not text:
            repeat = min(repeat, MAX_EMPTY_RUN)
        self.budget.take(repeat)
        self.row.extend([text] * repeat)
        self.cell = []
        _clear(elem)

    def end_row(self, elem: Element) -> None:
        cells, self.row = self.row, []
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            return  # an empty row (or a run of a million of them): nothing to read
        repeat = _int(elem.get(_q("table:number-rows-repeated")))
        self.budget.take(len(cells) * (repeat - 1))
        line = " | ".join(cells).strip()
        for _ in range(repeat):
            if self.slide is not None:
                self.slide["texts"].append(line)
            else:
                self.builder.add(line, heading=self.heading())
        if self.spreadsheet and len(self.sheet_path.stack) < 2:
            self.sheet_path.enter(2, line)  # the header: every later row's heading

    def end_slide(self) -> None:
        slide, self.slide = self.slide, None
        if slide is None:
            return
        number = self.slides
        title = slide["title"]
        heading = title or f"Slide {number}"
        self.builder.blank()
        if title:
            self.builder.add(title, page=number, heading=heading)
        for text in slide["texts"]:
            self.builder.add(text, page=number, heading=heading)
        for text in slide["notes"]:
            self.builder.add(text, page=number, heading=f"{heading} > Notes")
