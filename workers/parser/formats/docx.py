"""DOCX (python-docx): paragraphs, ``Heading N`` styles as heading paths, tables row by row, content
controls opened up; the zip is checked for bombs and for what its parts inflate to
(:func:`.container.check_container`, shared with the other zip formats) before python-docx opens it."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from foldermind.workers.parser.formats.container import check_container, library_error, zip_bomb
from foldermind.workers.parser.formats.document import (
    Builder,
    Headings,
    ParsedDocument,
    ParseError,
    clean,
)

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument

FORMAT = "docx"
SUFFIXES = (".docx",)

ZIP_BOMB = zip_bomb("DOCX")


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return parse_docx(data, max_bytes)


_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def parse_docx(data: bytes, max_bytes: int) -> ParsedDocument:
    """DOCX (python-docx): paragraphs, ``Heading N`` styles as heading paths, tables row by row."""
    check_container(data, max_bytes, "DOCX", entities=False)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        return _docx_document(document)
    except ParseError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise library_error("DOCX", exc) from exc


def _docx_document(document: DocxDocument) -> ParsedDocument:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    builder = Builder()
    headings = Headings()
    title = " ".join((document.core_properties.title or "").split()) or None
    for block in _docx_blocks(document):
        if isinstance(block, Table):
            builder.blank()
            for row_text in _docx_rows(block):
                builder.add(row_text, heading=headings.path)
            builder.blank()
            continue
        assert isinstance(block, Paragraph)
        text = clean(block.text)
        style = _docx_style(block)
        level = _HEADING_STYLE.match(style)
        if level:
            path = headings.enter(int(level.group(1)), text)
            builder.blank()
            if text:
                builder.add(text, heading=path)
        elif text:
            if style.lower() == "title" and title is None:
                title = " ".join(text.split())
            builder.add(text, heading=headings.path)
    return ParsedDocument("docx", builder.segments(), title=title)


def _docx_blocks(document: DocxDocument) -> Iterator[object]:
    """Paragraphs and tables of the body in reading order (content controls opened up)."""
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    p_tag, tbl_tag, sdt_tag, content_tag = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:sdtContent")
    body = document.element.body
    parent = document._body
    stack: list[Iterator[Any]] = [iter(body.iterchildren())]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        if child.tag == p_tag:
            yield Paragraph(child, parent)
        elif child.tag == tbl_tag:
            yield Table(child, parent)
        elif child.tag == sdt_tag:
            for content in child.iterchildren(content_tag):
                stack.append(iter(content.iterchildren()))


def _docx_style(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError, AttributeError):
        return ""
    if style is None:
        return ""
    return str(style.name or style.style_id or "")


def _docx_rows(table: Any) -> Iterable[str]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats across the columns it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            yield " | ".join(cells)
