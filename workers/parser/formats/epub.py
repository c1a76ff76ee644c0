"""EPUB (ebooklib): the spine's documents in reading order, each made text by the HTML parser (:mod:`.html`).

A chapter is one spine item; its title (the table of contents' label for it, else the document's
``<title>`` or first heading, else its file name) is the root of its heading path, with the chapter's
own ``<h1>``..``<h6>`` below it, so a hit cites "Chapter 3 > The storm". The book's title and authors
(Dublin Core metadata) open the text and the title is the document's. The zip is checked
(:func:`.container.read_container`) before ebooklib reads it; ebooklib's own XML parser does not
resolve entities either.
"""

from __future__ import annotations

import io
import posixpath
import warnings
from collections.abc import Iterable
from typing import Any

from foldermind.workers.parser.formats.container import read_container
from foldermind.workers.parser.formats.document import Builder, ParsedDocument, add_fields, one_line
from foldermind.workers.parser.formats.html import parse_html

FORMAT = "epub"
SUFFIXES = (".epub",)
KIND = "EPUB"


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return read_container(data, max_bytes, KIND, _read)


def _read(stream: io.BytesIO) -> ParsedDocument:
    import ebooklib.epub

    return _book(ebooklib.epub.read_epub(stream, {"ignore_ncx": False}))


def _book(book: Any) -> ParsedDocument:
    builder = Builder()
    title = _metadata(book, "title")
    authors = ", ".join(_all_metadata(book, "creator"))
    add_fields(builder, [("Title", title), ("Author", authors)])
    labels = _toc_labels(book.toc)
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or not item.file_name.lower().endswith((".xhtml", ".html", ".htm")):
            continue
        with warnings.catch_warnings():
            # XHTML read by the HTML parser on purpose (lenient with broken chapters); bs4 warns each time.
            warnings.simplefilter("ignore")
            page = parse_html(item.get_content())
        chapter = labels.get(item.file_name) or page.title or posixpath.basename(item.file_name)
        chapter = one_line(chapter)
        builder.blank()
        for seg in page.segments:
            inner = seg.heading
            if inner == chapter or (inner and inner.startswith(chapter + " > ")):
                heading = inner  # the chapter's own first heading is its title: not twice
            else:
                heading = f"{chapter} > {inner}" if inner else chapter
            builder.add(seg.text, heading=heading)
    return ParsedDocument(FORMAT, builder.segments(), title=title or None)


def _metadata(book: Any, name: str) -> str:
    values = _all_metadata(book, name)
    return values[0] if values else ""


def _all_metadata(book: Any, name: str) -> list[str]:
    return [text for value, _attrs in book.get_metadata("DC", name) if (text := one_line(str(value)))]


def _toc_labels(toc: Iterable[Any]) -> dict[str, str]:
    """File name -> the table of contents' label of its first entry (without recursion: nested sections)."""
    labels: dict[str, str] = {}
    stack: list[Iterable[Any]] = [toc]
    while stack:
        entries = stack.pop()
        for entry in entries:
            if isinstance(entry, tuple | list) and len(entry) == 2:  # (Section, [children])
                section, children = entry
                _label(labels, section)
                stack.append(children)
            else:
                _label(labels, entry)
    return labels


def _label(labels: dict[str, str], entry: Any) -> None:
    href = getattr(entry, "href", None)
    title = one_line(getattr(entry, "title", None))
    if href and title:
        labels.setdefault(str(href).split("#", 1)[0], title)
