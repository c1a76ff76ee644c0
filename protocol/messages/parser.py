"""Parsing (indexer -> parser)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the parser pool"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""

EXTRACTION = 4
"""What the parsers of this version make of a file (its text, segments, headings, chunks). Bumped whenever a
format's output changes (2: reST section titles in text files became headings; 3: PPTX, XLSX/XLSM, CSV/TSV,
EPUB, EML/MBOX, ODT/ODS/ODP and RTF files are read, where they were skipped before; 4: PDF pages without a
text layer and image files are read with OCR, where a scanned PDF failed with "no extractable text"); an
index that recorded an older one parses every document again, once, so an upgrade reaches files that did
not change."""


class ChunkInfo(TypedDict):
    """One chunk of a parsed document, with where it came from."""

    ordinal: int
    text: str
    tokens: int
    heading: str | None
    page_start: int | None
    page_end: int | None
    line_start: int
    line_end: int
    char_start: int
    char_end: int
    ocr_confidence: NotRequired[float]
    """Only for text read with OCR from a page image: the OCR's mean confidence on the page it was read from, 0..1."""


@message("parse.request")
@dataclass(slots=True)
class ParseRequest(Message):
    """Parse the file named ``path`` (absolute), whose bytes come with the request, into chunks no longer than
    ``max_tokens`` tokens of the embedding model's own tokenizer, overlapping by ``overlap_tokens``; refuse files
    over ``max_bytes``. Errors: ``parse_failed`` (message says why: ``no extractable text (scanned?)``,
    ``encrypted PDF``, ``not a text file``, ``image too large``, ``OCR is off``, ...), ``file_too_large``,
    ``unreadable``, ``file_content_needed`` (a request without the bytes: a parser opens no path)."""

    path: str
    """Absolute path of the file."""
    max_bytes: int = 50 * 1024 * 1024
    """Refuse a file larger than this (50 MiB by default)."""
    max_tokens: int = 256
    """Largest chunk, in tokens of the embedding model's tokenizer, `[CLS]`/`[SEP]` included (8 to 8192)."""
    overlap_tokens: int = 32
    """How far each chunk of a section starts before the end of the previous one (at most half the chunk budget)."""
    content: bool = False
    """The file's bytes follow as the message's one buffer frame (at most ``max_bytes``), and ``path`` only names
    the file (its suffix picks the format). Always set by the indexer, which read the bytes from the one descriptor
    it opened and checked: a parser opens no path, so a file swapped for a link since is never read through it."""
    format: str = ""
    """Read the bytes as this format (`txt`: a file with no known suffix whose first bytes are text, or a suffix of
    `[ingest] extra_text_suffixes`); `""`: the suffix picks it."""


@message("parse.partial")
@dataclass(slots=True)
class ParsePartial(Message):
    """The next chunks of a parse in flight (status ``partial``), in document order; the ``parse.reply`` carries
    the last. Sent while a long paginated document (PDF) is read, with ``pages_read``: the chunks of the pages
    read so far, which the indexer makes searchable before the parse ends; and after the parse, without it, when
    the chunks do not fit one message (each part fills at most 90 % of the bus's message limit)."""

    chunks: list[ChunkInfo]
    """The next chunks in document order."""
    pages_read: int | None = None
    """Set while pages are being read: pages 1 to this one are read, and their chunks have all been sent."""
    pages: int | None = None
    """With ``pages_read``: the document's page count."""
    title: str | None = None
    """With ``pages_read``: the document's title, as the reply will give it."""


@message("parse.reply")
@dataclass(slots=True)
class ParseReply(Message):
    """``format`` (txt, md, pdf, docx, html, pptx, xlsx, csv, epub, email, odf, rtf, image), ``title`` if the
    document names one, ``pages`` for paginated formats, and the ``chunks`` in order (after those of the
    ``parse.partial`` replies before it, when the chunks did not fit one message)."""

    format: str
    """`txt`, `md`, `pdf`, `docx`, `html`, `pptx`, `xlsx` (also .xlsm), `csv` (also .tsv), `epub`, `email` (.eml and
    .mbox), `odf` (.odt, .ods, .odp), `rtf` or `image` (.png, .jpg, .jpeg, .tif, .tiff, .webp, .bmp: read with
    OCR)."""
    chunks: list[ChunkInfo]
    """The chunks in document order (see below); empty for a file with no text, such as an empty `.txt`."""
    title: str | None = None
    """The title the document names: the PDF's metadata title, the HTML `<title>` (else the first `<h1>`), the Markdown
    front matter's `title:` (else the first `#` heading), the DOCX title property (else the first `Title`-style
    paragraph), the PPTX title property (else the first slide's title), the XLSX, EPUB, OpenDocument or RTF title
    metadata, or an `.eml`'s subject."""
    pages: int | None = None
    """The page count, for PDF; the slide count, for PPTX and ODP (a slide is a page: chunks cite its number); the
    frame count of an image (a multi-page TIFF has several)."""


@message("parse.render.request")
@dataclass(slots=True)
class RenderRequest(Message):
    """Render one page of a PDF as a PNG (the console's preview), the lines of ``highlight`` found in its text
    layer drawn over in translucent yellow. The caller checks the path first (the console asks the indexer, which
    reads only files of the registered folders). Errors: ``bad_request`` (a relative path, a page out of range),
    ``unreadable`` (not a PDF pdfium can open)."""

    path: str
    """The PDF's absolute path."""
    page: int
    """The page, 1-based."""
    max_pixels: int = 2_000_000
    """The image holds at most this many pixels (a page is rendered at 2x its size in points, or smaller)."""
    highlight: list[str] = field(default_factory=list)
    """Texts to find on the page (any case) and mark, each at most 500 characters; at most 50."""


@message("parse.render.reply")
@dataclass(slots=True)
class RenderReply(Message):
    """The page's size in pixels and the document's page count; the PNG is the reply's one buffer frame."""

    page: int
    """The page rendered."""
    pages: int
    """The document's page count."""
    width: int
    """The image's width in pixels."""
    height: int
    """The image's height in pixels."""
    marked: int
    """How many of the `highlight` texts were found and drawn over."""
