"""One file -> its extracted text, as segments that know where they came from.

A document's *extracted text* is its segments joined by ``"\\n"`` (:func:`extracted_text`). Every
position a segment (and later a chunk) records is into that text: ``char_start``/``char_end`` are
string offsets, ``line_start``/``line_end`` 1-based line numbers, so ``read_document`` can rebuild
the same text with :func:`document_text` and open it by line. The text is normalised once: every
line break (``\\r\\n``, ``\\r``, form feed, U+2028, ...) becomes ``"\\n"`` and NUL characters are
dropped, so ``str.splitlines()`` and ``split("\\n")`` agree on the line numbers.

A plain-text file's extracted text is the file itself (decoded, line breaks normalised), so its
line numbers are the file's. Other formats give their visible text, one block (paragraph, heading,
list item, table row, PDF page) per segment. Empty segments stand for blank lines.

Failures raise :class:`ParseError` with the code a ``parse.reply`` error carries.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import os
import re
import stat
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bs4.element import Tag
    from docx.document import Document as DocxDocument

log = logging.getLogger("foldermind.parser")

SUFFIXES: dict[str, str] = {
    ".txt": "txt",
    ".text": "txt",
    ".md": "md",
    ".markdown": "md",
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
}
"""File name suffix (lower case) -> format name."""

FORMATS: tuple[str, ...] = ("txt", "md", "pdf", "docx", "html")

PARSE_FAILED = "parse_failed"
FILE_TOO_LARGE = "file_too_large"
UNREADABLE = "unreadable"

DOCX_MAX_EXPANSION = 20
"""A DOCX whose entries add up to more than this many times ``max_bytes`` is refused."""
DOCX_MAX_RATIO = 200
"""A DOCX entry that inflates more than this many times is refused..."""
DOCX_RATIO_MIN_BYTES = 1024 * 1024
"""...when it inflates to at least this size (a tiny, very repetitive XML part is no threat)."""
MAX_HEADING_CHARS = 200
"""Longer heading texts are cut in heading paths (the heading's own segment keeps all of it)."""

NOT_TEXT = "not a text file"
NO_TEXT_PDF = "no extractable text (scanned?)"
ENCRYPTED_PDF = "encrypted PDF"
ZIP_BOMB = "suspicious DOCX (zip bomb?)"


class ParseError(Exception):
    """A file that cannot be parsed; ``code`` is ``parse_failed``, ``file_too_large`` or ``unreadable``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ParseError({self.code!r}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class Segment:
    """One block of extracted text and its location (positions into the extracted text)."""

    text: str
    page: int | None = None
    heading: str | None = None
    line_start: int = 1
    line_end: int = 1
    char_start: int = 0
    char_end: int = 0


@dataclass(slots=True)
class ParsedDocument:
    """What one file gave: its format, title and page count when it has them, and its segments."""

    format: str
    segments: list[Segment] = field(default_factory=list)
    title: str | None = None
    pages: int | None = None

    @property
    def text(self) -> str:
        """The extracted text: the segments joined by ``"\\n"``."""
        return extracted_text(self.segments)


def extracted_text(segments: Sequence[Segment]) -> str:
    """The extracted text that every position of ``segments`` (and of their chunks) points into."""
    return "\n".join(seg.text for seg in segments)


def document_text(path: Path, max_bytes: int) -> str:
    """The extracted text of the file at ``path`` (what ``read_document`` opens by line)."""
    return parse_file(path, max_bytes).text


# ------------------------------------------------------------------------------------------------
# Text normalisation and segment assembly

_LINE_BREAKS: dict[int, str | None] = {ord(c): "\n" for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}
_LINE_BREAKS[0] = None  # NUL characters are dropped
_SPACES = re.compile(r"[^\S\n]+")
_SURROGATES = re.compile("[\ud800-\udfff]")


def normalize(text: str) -> str:
    """Every line break as ``"\\n"``, no NUL characters, no lone surrogates (they cannot be sent as UTF-8)."""
    return _SURROGATES.sub("\ufffd", text.replace("\r\n", "\n").translate(_LINE_BREAKS))


def clean(text: str) -> str:
    """Normalised, runs of spaces collapsed, lines stripped, no blank lines."""
    lines = (_SPACES.sub(" ", line).strip() for line in normalize(text).split("\n"))
    return "\n".join(line for line in lines if line)


class _Headings:
    """The open headings, outermost first; ``path`` is ``"Setup > Windows"``."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []

    def enter(self, level: int, text: str) -> str | None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        text = " ".join(text.split())
        if text:
            if len(text) > MAX_HEADING_CHARS:
                text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
            self.stack.append((level, text))
        return self.path

    @property
    def path(self) -> str | None:
        return " > ".join(text for _, text in self.stack) or None


class _Builder:
    """Collects segments in reading order and fixes their positions in the extracted text."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, int | None, str | None]] = []

    def add(self, text: str, page: int | None = None, heading: str | None = None) -> None:
        self.parts.append((normalize(text), page, heading))

    def blank(self) -> None:
        """A blank line between blocks (never two in a row, none at the start)."""
        if self.parts and self.parts[-1][0]:
            _, page, heading = self.parts[-1]
            self.parts.append(("", page, heading))

    def segments(self, strip_blank_ends: bool = True) -> list[Segment]:
        parts = self.parts
        if strip_blank_ends:
            while parts and not parts[-1][0]:
                parts = parts[:-1]
        out: list[Segment] = []
        char, line = 0, 1
        for text, page, heading in parts:
            end_line = line + text.count("\n")
            out.append(Segment(text, page, heading, line, end_line, char, char + len(text)))
            char += len(text) + 1
            line = end_line + 1
        return out


# ------------------------------------------------------------------------------------------------
# Entry point


def format_of(path: Path) -> str | None:
    """The format a file name says, or None when it is not one this parser reads."""
    return SUFFIXES.get(path.suffix.lower())


def parse_file(path: Path, max_bytes: int) -> ParsedDocument:
    """Parse the file at ``path``; raises :class:`ParseError` when it cannot."""
    fmt = format_of(path)
    if fmt is None:
        raise ParseError(PARSE_FAILED, f"unsupported format: {path.suffix or 'no suffix'}")
    data = read_bytes(path, max_bytes)
    if fmt == "txt":
        return parse_txt(data)
    if fmt == "md":
        return parse_md(data)
    if fmt == "pdf":
        return parse_pdf(data)
    if fmt == "docx":
        return parse_docx(data, max_bytes)
    return parse_html(data)


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The file's bytes; ``unreadable`` when it cannot be read or is not a regular file,
    ``file_too_large`` over ``max_bytes``.

    Opened without blocking and checked on the open descriptor: a FIFO swapped in for the file after
    the indexer looked at it would otherwise block this parser until someone writes to it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ParseError(UNREADABLE, f"unreadable: {path.name} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise ParseError(UNREADABLE, "unreadable: not a regular file")
            if st.st_size > max_bytes:
                raise ParseError(FILE_TOO_LARGE, _too_large(st.st_size, max_bytes))
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ParseError(UNREADABLE, f"unreadable: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:  # it grew since stat()
        raise ParseError(FILE_TOO_LARGE, _too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"file too large: {size} bytes (the limit is {max_bytes})"


# ------------------------------------------------------------------------------------------------
# Plain text

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Among equally plausible single-byte guesses, the commonest encodings win.
_PREFERRED = ("utf_8", "ascii", "cp1252", "latin_1", "iso8859_15")
_ALLOWED_CONTROLS = frozenset("\t\n\r\x0b\x0c")
MAX_CONTROL_RATIO = 0.01
"""Decoded text with more control characters (or U+FFFD) than this share is not text."""


def decode_text(data: bytes) -> str:
    """Bytes of a text file -> text, the encoding detected (BOM, UTF-8, then charset-normalizer)."""
    if not data:
        return ""
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                raise ParseError(PARSE_FAILED, NOT_TEXT) from None
            break
    if text is None:
        text = _utf8(data)
    if text is None:
        text = _detect(data)
    if _looks_binary(text):
        raise ParseError(PARSE_FAILED, NOT_TEXT)
    return text


def _utf8(data: bytes) -> str | None:
    """``data`` as UTF-8, or None when it is not. A few NUL bytes and a few invalid bytes (each read as
    U+FFFD) are allowed, within the share of control characters any text may hold, when the rest is
    plainly UTF-8 (a log with a stray NUL or a cut character is still text); NUL bytes are dropped by
    :func:`normalize`. More NULs than that are left to detection: UTF-16 and UTF-32 are full of them."""
    nuls = data.count(0)
    if not nuls:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    if nuls + bad > len(text) * MAX_CONTROL_RATIO:
        return None
    # An invalid byte in otherwise ASCII text says nothing about UTF-8 (a Latin-1 "é" is one): only
    # characters that decoded as real multi-byte UTF-8 show it is UTF-8 with a few broken bytes.
    if bad and not any("\x7f" < c != "\ufffd" for c in text):
        return None
    return text


def _detect(data: bytes) -> str:
    import charset_normalizer

    results = charset_normalizer.from_bytes(data)
    best = results.best()
    if best is None:
        raise ParseError(PARSE_FAILED, NOT_TEXT)
    tied = {r.encoding: r for r in results if r.chaos == best.chaos and r.coherence == best.coherence}
    chosen = next((tied[name] for name in _PREFERRED if name in tied), best)
    return str(chosen)


def _looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:65536]
    bad = sum(
        1
        for c in sample
        if c == "\ufffd" or (c not in _ALLOWED_CONTROLS and unicodedata.category(c) == "Cc" and c != "\x85")
    )
    return bad > len(sample) * MAX_CONTROL_RATIO


def parse_txt(data: bytes) -> ParsedDocument:
    """A text file: its extracted text is the file itself; one segment per paragraph or blank line."""
    text = normalize(decode_text(data))
    builder = _Builder()
    paragraph: list[str] = []
    for line in text.split("\n"):
        if line.strip():
            paragraph.append(line)
            continue
        if paragraph:
            builder.add("\n".join(paragraph))
            paragraph = []
        builder.add(line)
    if paragraph:
        builder.add("\n".join(paragraph))
    # Trailing blank lines stay: the extracted text is the file's text, line for line.
    return ParsedDocument("txt", builder.segments(strip_blank_ends=False) if text.strip() else [])


# ------------------------------------------------------------------------------------------------
# Markdown

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
    builder = _Builder()
    headings = _Headings()
    row: list[str] | None = None
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
        if kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            if any(row):
                builder.add(" | ".join(row), heading=headings.path)
            row = None
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


# ------------------------------------------------------------------------------------------------
# PDF


def parse_pdf(data: bytes) -> ParsedDocument:
    """PDF, page by page (pypdf): one segment per page with text; pages count from 1."""
    with _PypdfWarnings() as warnings:
        return _parse_pdf(data, warnings)


def _parse_pdf(data: bytes, warnings: _PypdfWarnings) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            opened = 0
            with contextlib.suppress(DependencyError, NotImplementedError, FileNotDecryptedError, PdfReadError):
                opened = int(reader.decrypt(""))  # an empty user password opens it
            if not opened:
                raise ParseError(PARSE_FAILED, ENCRYPTED_PDF)
        pages = reader.pages
        count = len(pages)
        if not count:
            raise ParseError(PARSE_FAILED, "corrupt PDF: no pages")
    except ParseError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise ParseError(PARSE_FAILED, f"corrupt PDF: {_reason(exc)}") from exc

    builder = _Builder()
    failures: list[str] = []
    for number in range(1, count + 1):
        try:
            raw = pages[number - 1].extract_text()
        except MemoryError:
            raise
        except Exception as exc:
            log.warning("page %d: text extraction failed: %s", number, _reason(exc))
            failures.append(_reason(exc))
            continue
        text = _pdf_page_text(raw)
        if text:
            builder.add(text, page=number)
    segments = builder.segments()
    if not segments:
        if failures and len(failures) == count:
            raise ParseError(PARSE_FAILED, f"corrupt PDF: {failures[0]}")
        if warnings.read_errors:
            # pypdf skipped what it could not read (a page's resources nested 100,000 deep, say) and
            # found no text in the rest: the file is broken, not scanned.
            raise ParseError(PARSE_FAILED, f"corrupt PDF: {warnings.read_errors[0]}")
        raise ParseError(PARSE_FAILED, NO_TEXT_PDF)
    return ParsedDocument("pdf", segments, title=_pdf_title(reader), pages=count)


class _PypdfWarnings(logging.Handler):
    """Collects what pypdf warns about while it reads one file, instead of logging it (malformed files
    make it chatty). Not strict, pypdf reads past the parts it cannot read and only warns: those
    warnings explain a PDF that then has no text."""

    _READ_ERROR = re.compile(r"^(?:\w*Error)?\(?'?(.*?(?:[Ee]rror|[Rr]ecursion|[Dd]epth).*?)'?\)?$")
    MAX_KEPT = 20

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.read_errors: list[str] = []
        self._saved = (logging.NOTSET, True)

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.read_errors) < self.MAX_KEPT:
            found = self._READ_ERROR.match(" ".join(record.getMessage().split()))
            if found:
                self.read_errors.append(found.group(1)[:200])

    def __enter__(self) -> _PypdfWarnings:
        logger = logging.getLogger("pypdf")
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("pypdf")
        logger.removeHandler(self)
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]


def _pdf_page_text(raw: str) -> str:
    """A page's text with lines right-stripped, runs of blank lines collapsed, no blank ends."""
    lines = [line.rstrip() for line in normalize(raw).split("\n")]
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1]):
            out.append(line if line.strip() else "")
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _pdf_title(reader: Any) -> str | None:
    try:
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except MemoryError:
        raise
    except Exception:
        return None
    title = " ".join(str(title).split()) if title else ""
    return title or None


# ------------------------------------------------------------------------------------------------
# DOCX


def check_zip(data: bytes, max_bytes: int) -> None:
    """Refuse a DOCX that is not a zip, or whose entries would inflate suspiciously."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise ParseError(PARSE_FAILED, f"corrupt DOCX: {_reason(exc)}") from exc
    total = 0
    for info in infos:
        total += info.file_size
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size >= DOCX_RATIO_MIN_BYTES and ratio > DOCX_MAX_RATIO:
            raise ParseError(PARSE_FAILED, ZIP_BOMB)
    if total > DOCX_MAX_EXPANSION * max_bytes:
        raise ParseError(PARSE_FAILED, ZIP_BOMB)


_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def parse_docx(data: bytes, max_bytes: int) -> ParsedDocument:
    """DOCX (python-docx): paragraphs, ``Heading N`` styles as heading paths, tables row by row."""
    check_zip(data, max_bytes)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        return _docx_document(document)
    except ParseError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise ParseError(PARSE_FAILED, f"corrupt DOCX: {_reason(exc)}") from exc


def _docx_document(document: DocxDocument) -> ParsedDocument:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    builder = _Builder()
    headings = _Headings()
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


# ------------------------------------------------------------------------------------------------
# HTML

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
        raise ParseError(PARSE_FAILED, f"malformed HTML: {_reason(exc)}") from exc
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag is not None else ""
    walker = _HtmlWalker()
    walker.walk(soup)
    doc = ParsedDocument("html", walker.builder.segments(), title=title or walker.first_h1)
    # The HTML parsers read any bytes as text: binary data named .html would be indexed as junk.
    if _looks_binary(doc.text):
        raise ParseError(PARSE_FAILED, NOT_TEXT)
    return doc


class _HtmlWalker:
    def __init__(self) -> None:
        self.builder = _Builder()
        self.headings = _Headings()
        self.buffer: list[str] = []
        self.first_h1: str | None = None

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
        from bs4.element import Tag

        self.flush()
        cells = [" ".join(c.get_text(" ").split()) for c in tr.find_all(["td", "th"]) if isinstance(c, Tag)]
        if any(cells):
            self.builder.add(" | ".join(cells), heading=self.headings.path)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:199] + "…"
    return text or exc.__class__.__name__
