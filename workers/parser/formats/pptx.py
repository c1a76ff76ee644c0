"""PPTX (python-pptx): each slide's text frames, tables and speaker notes, in slide order.

A slide is a page (``page`` is the slide number, counting from 1) and its title is its heading path, so a
hit cites "slide 3, Quarterly results"; the notes follow the slide's own text under "<title> > Notes". A
slide without a title placeholder is headed "Slide N" so that consecutive untitled slides still never
share a chunk (a chunk never crosses a page either). The deck's title and author (core properties) open
the text, so they are searchable. The zip is checked (:func:`.container.read_container`) before
python-pptx opens it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from foldermind.workers.parser.formats.container import read_container
from foldermind.workers.parser.formats.document import Builder, ParsedDocument, add_fields, clean, one_line

if TYPE_CHECKING:
    from pptx.presentation import Presentation
    from pptx.slide import Slide

FORMAT = "pptx"
SUFFIXES = (".pptx",)
KIND = "PPTX"


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return read_container(data, max_bytes, KIND, _read)


def _read(stream: io.BytesIO) -> ParsedDocument:
    import pptx

    return _deck(pptx.Presentation(stream))


def _deck(deck: Presentation) -> ParsedDocument:
    builder = Builder()
    props = deck.core_properties
    title = one_line(props.title) or None
    add_fields(builder, [("Title", title), ("Author", one_line(props.author))])
    pages = 0
    for number, slide in enumerate(deck.slides, 1):
        pages = number
        slide_title = _slide(builder, slide, number)
        title = title or slide_title or None  # no title property: the first slide's title names the deck
    return ParsedDocument(FORMAT, builder.segments(), title=title, pages=pages or None)


def _slide(builder: Builder, slide: Slide, number: int) -> str:
    """Adds the slide's text; returns its title ("" when it has none)."""
    title_shape = slide.shapes.title
    title = one_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
    heading = title or f"Slide {number}"
    builder.blank()
    if title:
        builder.add(title, page=number, heading=heading)
    for shape in _shapes(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        for text in _shape_text(shape):
            builder.add(text, page=number, heading=heading)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = clean(frame.text) if frame is not None else ""
        if notes:
            builder.add(notes, page=number, heading=f"{heading} > Notes")
    return title


def _shapes(shapes: Any) -> Iterator[Any]:
    """Every shape, group shapes opened up (without recursion: a hostile deck nests groups deeply)."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    stack: list[Iterator[Any]] = [iter(shapes)]
    while stack:
        shape = next(stack[-1], None)
        if shape is None:
            stack.pop()
        elif shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            stack.append(iter(shape.shapes))
        else:
            yield shape


def _shape_text(shape: Any) -> Iterator[str]:
    """A text frame's paragraphs (as one block), or a table's rows (one line each)."""
    if shape.has_text_frame:
        text = clean("\n".join(p.text for p in shape.text_frame.paragraphs))
        if text:
            yield text
    elif getattr(shape, "has_table", False) and shape.has_table:
        for row in shape.table.rows:
            cells = [one_line(cell.text) for cell in row.cells if not cell.is_spanned]
            if any(cells):
                yield " | ".join(cells)
