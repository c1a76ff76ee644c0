"""Markdown (``.md``, ``.markdown``, markdown-it-py): visible text per block; ``#``/``##``... headings
make the heading paths; a front-matter or first ``#`` title is the document's title; a table's body row is a
block of its own, each cell after its column's header (:func:`.document.table_row`)."""

from __future__ import annotations

import re
from typing import Any

from foldermind.workers.parser.formats.document import Builder, Headings, ParsedDocument, clean, normalize, table_row
from foldermind.workers.parser.formats.txt import decode_text

FORMAT = "md"
SUFFIXES = (".md", ".markdown")


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return parse_md(data)


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_TAG = re.compile(r"<[^>]*>")


def parse_md(data: bytes) -> ParsedDocument:
    """Markdown: visible text per block; ``#``/``##``... headings make the heading paths."""
    from markdown_it import MarkdownIt

    source = normalize(decode_text(data))
    title: str | None = None
    front = _FRONT_MATTER.match(source)
    if front:
        named = _FRONT_TITLE.search(front.group())
        if named:
            title = " ".join(named.group(1).strip("'\"").split()) or None
        source = source[front.end() :]
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    builder = Builder()
    headings = Headings()
    row: list[str] | None = None
    header: list[str] = []
    in_head = False
    rows = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type
        if kind == "heading_open":
            text = _md_inline(tokens[i + 1]) if i + 1 < len(tokens) else ""
            text = " ".join(text.split())
            level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
            if level == 1 and title is None and text:
                title = text
            path = headings.enter(level, text)
            builder.blank()
            if text:
                builder.add(text, heading=path)
            i += 3  # heading_open, inline, heading_close
            continue
        if kind == "table_open":
            header, rows = [], 0
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            if in_head:
                header = row  # said with each body row; alone only when the table has none
            elif any(row):
                builder.add(table_row(header, row), heading=headings.path)
                builder.blank()
                rows += 1
            row = None
        elif kind in ("thead_open", "thead_close"):
            in_head = kind == "thead_open"
        elif kind == "table_close" and not rows and any(header):
            builder.add(table_row([], header), heading=headings.path)
        elif kind == "inline":
            text = clean(_md_inline(tok))
            if row is not None:
                row.append(" ".join(text.split()))
            elif text:
                builder.add(text, heading=headings.path)
        elif kind in ("fence", "code_block"):
            code = "\n".join(line.rstrip() for line in normalize(tok.content).strip("\n").split("\n"))
            if code.strip():
                builder.add(code, heading=headings.path)
        elif kind == "html_block":
            text = clean(_TAG.sub(" ", tok.content))
            if text:
                builder.add(text, heading=headings.path)
        elif kind in ("paragraph_close", "table_close", "bullet_list_close", "ordered_list_close", "hr"):
            builder.blank()
        i += 1
    return ParsedDocument("md", builder.segments(), title=title)


def _md_inline(tok: Any) -> str:
    """The visible text of an inline token: text, code, image alt text; breaks as newlines."""
    parts: list[str] = []
    for child in tok.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(_md_inline(child))
    return "".join(parts)
