"""The document model every format parser fills: :class:`Segment`, :class:`ParsedDocument`, the
normalisation of text and the :class:`Builder` that fixes each segment's position in the extracted text.

A document's *extracted text* is its segments joined by ``"\\n"`` (:func:`extracted_text`). Every
position a segment (and later a chunk) records is into that text: ``char_start``/``char_end`` are
string offsets, ``line_start``/``line_end`` 1-based line numbers, so ``read_document`` can rebuild
the same text and open it by line. The text is normalised once: every line break (``\\r\\n``,
``\\r``, form feed, U+2028, ...) becomes ``"\\n"`` and NUL characters are dropped, so
``str.splitlines()`` and ``split("\\n")`` agree on the line numbers.

Failures raise :class:`ParseError` with the code a ``parse.reply`` error carries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats import progress

MAX_HEADING_CHARS = 200
"""Longer heading texts are cut in heading paths (the heading's own segment keeps all of it)."""

NOT_TEXT = "not a text file"


class ParseError(Exception):
    """A file that cannot be parsed; ``code`` is ``parse_failed``, ``file_too_large`` or ``unreadable``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
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
    ocr: float | None = None
    """The mean confidence (0..1) of the OCR that read this text from an image; None: the file's own text."""


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


_ODD = re.compile("[\x00\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""NUL (dropped) and the line breaks other than "\\n" (made "\\n")."""
_SPACES = re.compile(r"[^\S\n]+")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _odd(found: re.Match[str]) -> str:
    return "" if found[0] == "\x00" else "\n"


def normalize(text: str) -> str:
    """Every line break as ``"\\n"``, no NUL characters, no lone surrogates (they cannot be sent as UTF-8).

    A regex scan, not ``str.translate``: translate looks every character up in a dict while holding the GIL
    (2.6 CPU-s for a 50 MB text, 18 s on a busy machine), and a parser that holds it that long misses its
    heartbeats and is killed as hung (docs/benchmarks/ingest.md, "Long text files")."""
    return _SURROGATES.sub("\ufffd", _ODD.sub(_odd, text.replace("\r\n", "\n")))


def clean(text: str) -> str:
    """Normalised, runs of spaces collapsed, lines stripped, no blank lines."""
    lines = (_SPACES.sub(" ", line).strip() for line in normalize(text).split("\n"))
    return "\n".join(line for line in lines if line)


class Headings:
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


class Builder:
    """Collects segments in reading order and fixes their positions in the extracted text."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, int | None, str | None, float | None]] = []

    def add(self, text: str, page: int | None = None, heading: str | None = None, ocr: float | None = None) -> None:
        self.parts.append((normalize(text), page, heading, ocr))
        progress.step()

    def blank(self) -> None:
        """A blank line between blocks (never two in a row, none at the start)."""
        if self.parts and self.parts[-1][0]:
            _, page, heading, _ = self.parts[-1]
            self.parts.append(("", page, heading, None))

    def segments(self, strip_blank_ends: bool = True) -> list[Segment]:
        parts = self.parts
        if strip_blank_ends:
            while parts and not parts[-1][0]:
                parts = parts[:-1]
        out: list[Segment] = []
        char, line = 0, 1
        for text, page, heading, ocr in parts:
            end_line = line + text.count("\n")
            out.append(Segment(text, page, heading, line, end_line, char, char + len(text), ocr))
            char += len(text) + 1
            line = end_line + 1
        return out


def one_line(text: str | None) -> str:
    """``text`` on one line, runs of whitespace as one space ("" for None)."""
    return " ".join((text or "").split())


def add_fields(
    builder: Builder, fields: Sequence[tuple[str, str | None]], page: int | None = None, heading: str | None = None
) -> None:
    """``Name: value`` lines for the fields that have a value (a document's title and author, a mail's
    header block), so what users search by is in the extracted text; then a blank line."""
    lines = [f"{name}: {one_line(value)}" for name, value in fields if one_line(value)]
    if lines:
        builder.add("\n".join(lines), page=page, heading=heading)
        builder.blank()


def table_row(header: Sequence[str], cells: Sequence[str]) -> str:
    """A table's row as a person reads it out: each cell after its column's header (``Step: Copy; Time: 2 min``),
    a cell under an empty header alone, empty cells left out. Not ``Copy | 2 min``, which in a quote says nothing
    of what the figures are; each row is a block of its own (the caller's blank line), so a quote is one row."""
    return "; ".join(
        f"{name}: {cell}" if name else cell for name, cell in zip_longest(header, cells, fillvalue="") if cell
    )


def reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:199] + "…"
    return text or exc.__class__.__name__
