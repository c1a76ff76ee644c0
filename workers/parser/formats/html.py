"""HTML (BeautifulSoup, lxml when it takes the input): visible text per block, ``<h1>``..``<h6>`` as
heading paths, a table's row a block of its own, each cell after its header (:func:`.document.table_row`, when
the table's first row is all ``th``); scripts, styles, navs and hidden elements dropped; walked without recursion,
since hostile pages nest deeply."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import (
    NOT_TEXT,
    Builder,
    Headings,
    ParsedDocument,
    ParseError,
    clean,
    normalize,
    reason,
    table_row,
)
from foldermind.workers.parser.formats.txt import looks_binary

if TYPE_CHECKING:
    from bs4.element import Tag

FORMAT = "html"
SUFFIXES = (".html", ".htm")


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return parse_html(data)


_DROP = frozenset(
    {"script", "style", "nav", "noscript", "template", "head", "svg", "canvas", "iframe", "object", "embed"}
)
_WHITESPACE = re.compile(r"\s+")
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog"),
        *("div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr"),
        *("html", "legend", "li", "main", "menu", "ol", "p", "section", "summary", "table", "tbody", "thead"),
        *("tfoot", "ul", "option", "select", "textarea", "label"),
    }
)


def parse_html(data: bytes) -> ParsedDocument:
    """HTML: visible text per block, ``<h1>``..``<h6>`` as heading paths; scripts, styles and navs dropped."""
    from bs4 import BeautifulSoup

    try:
        try:
            soup = BeautifulSoup(data, "lxml")
        except Exception:  # no lxml, or it refused the input
            soup = BeautifulSoup(data, "html.parser")
    except MemoryError:
        raise
    except Exception as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"malformed HTML: {reason(exc)}") from exc
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag is not None else ""
    walker = _HtmlWalker()
    walker.walk(soup)
    doc = ParsedDocument("html", walker.builder.segments(), title=title or walker.first_h1)
    # The HTML parsers read any bytes as text: binary data named .html would be indexed as junk.
    if looks_binary(doc.text):
        raise ParseError(ErrorCode.PARSE_FAILED, NOT_TEXT)
    return doc


class _HtmlWalker:
    def __init__(self) -> None:
        self.builder = Builder()
        self.headings = Headings()
        self.buffer: list[str] = []
        self.first_h1: str | None = None
        self.headers: dict[int, tuple[Any, list[str]]] = {}
        """Each table's first row and, when every cell of it is a ``th``, its header (by the table's id)."""

    def flush(self) -> None:
        text = clean("".join(self.buffer))
        self.buffer = []
        if text:
            self.builder.add(text, heading=self.headings.path)

    def walk(self, root: Tag) -> None:
        """Depth first, without recursion (hostile pages nest deeply)."""
        from bs4.element import NavigableString, Tag

        stack: list[Any] = [iter(root.children)]
        blocks: list[bool] = []  # per open tag below root: is it a block (flush when it closes)
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                if blocks and blocks.pop():
                    self.flush()
                continue
            if isinstance(node, Tag):
                name = (node.name or "").lower()
                if name in _DROP or node.has_attr("hidden"):
                    continue
                if name in _HEADING_TAGS:
                    self.heading(_HEADING_TAGS[name], node.get_text(" "))
                elif name == "tr":
                    self.row(node)
                elif name == "pre":
                    self.flush()
                    code = "\n".join(line.rstrip() for line in normalize(node.get_text()).strip("\n").split("\n"))
                    if code.strip():
                        self.builder.add(code, heading=self.headings.path)
                elif name == "br":
                    self.buffer.append("\n")
                else:
                    block = name in _BLOCKS
                    if block:
                        self.flush()
                    stack.append(iter(node.children))
                    blocks.append(block)
            elif type(node) is NavigableString:  # not a comment, doctype, CDATA or processing instruction
                self.buffer.append(_WHITESPACE.sub(" ", str(node)))  # source line breaks are spaces in HTML
        self.flush()

    def heading(self, level: int, raw: str) -> None:
        self.flush()
        text = " ".join(raw.split())
        if level == 1 and text and self.first_h1 is None:
            self.first_h1 = text
        path = self.headings.enter(level, text)
        self.builder.blank()
        if text:
            self.builder.add(text, heading=path)

    def row(self, tr: Tag) -> None:
        """A table's row as :func:`.document.table_row` says it, after its table's header row (its first, when
        every cell of it is a ``th``), a block of its own; the header row itself only when the table has no other."""
        self.flush()
        cells = _cells(tr)
        table = tr.find_parent("table")
        if table is not None and id(table) not in self.headers:  # once a table: a page may hold thousands of rows
            first = table.find("tr")
            heads = first is not None and first.find("td") is None and len(table.find_all("tr", limit=2)) == 2
            self.headers[id(table)] = (first, _cells(first) if heads and first is not None else [])
        first, header = self.headers.get(id(table), (tr, []))
        if tr is first and header:
            return  # said with each row
        if any(cells):
            self.builder.add(table_row(header, cells), heading=self.headings.path)
            self.builder.blank()


def _cells(tr: Tag) -> list[str]:
    from bs4.element import Tag

    return [" ".join(c.get_text(" ").split()) for c in tr.find_all(["td", "th"]) if isinstance(c, Tag)]
