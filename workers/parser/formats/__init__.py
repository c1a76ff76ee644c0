"""One file -> its extracted text, as segments that know where they came from: the format registry.

Each format is one module of this package (:mod:`.txt`, :mod:`.md`, :mod:`.pdf`, :mod:`.docx`,
:mod:`.html`, :mod:`.pptx`, :mod:`.xlsx`, :mod:`.delimited` (CSV/TSV), :mod:`.epub`, :mod:`.mail`,
:mod:`.opendocument`, :mod:`.rtf`, :mod:`.image`) declaring its ``FORMAT`` name, the file name ``SUFFIXES`` it reads and
``parse(data, max_bytes) -> ParsedDocument``; a new format is one more module and one more entry in
:data:`PARSERS`. The document model they fill (segments, positions, normalisation) is
:mod:`.document`.

A plain-text file's extracted text is the file itself (decoded, line breaks normalised), so its
line numbers are the file's. Other formats give their visible text, one block (paragraph, heading,
list item, table row, PDF page, slide text frame) per segment. Empty segments stand for blank lines.
Every module imports its library inside ``parse``, so importing the registry (the watcher does, for
the suffixes) loads none of them. What the zip formats share is :mod:`.container`, what the
spreadsheets share :mod:`.sheets`, what PDF scans and image files share (OCR) :mod:`.ocr`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats import (
    delimited,
    docx,
    epub,
    html,
    image,
    mail,
    md,
    opendocument,
    pdf,
    pptx,
    rtf,
    txt,
    xlsx,
)
from foldermind.workers.parser.formats.document import (
    NOT_TEXT,
    ParsedDocument,
    ParseError,
    Segment,
    extracted_text,
    normalize,
)
from foldermind.workers.parser.formats.docx import ZIP_BOMB
from foldermind.workers.parser.formats.md import parse_md
from foldermind.workers.parser.formats.pdf import ENCRYPTED_PDF, NO_TEXT_OCR, NO_TEXT_PDF, NOT_PDF
from foldermind.workers.parser.formats.txt import decode_text, parse_txt

__all__ = [
    "ENCRYPTED_PDF",
    "FORMATS",
    "NOT_PDF",
    "NOT_TEXT",
    "NO_TEXT_OCR",
    "NO_TEXT_PDF",
    "SUFFIXES",
    "ZIP_BOMB",
    "ParseError",
    "ParsedDocument",
    "Segment",
    "decode_text",
    "document_text",
    "extracted_text",
    "format_of",
    "normalize",
    "parse_content",
    "parse_file",
    "parse_md",
    "parse_txt",
    "read_bytes",
]

MODULES: tuple[ModuleType, ...] = (
    txt,
    md,
    pdf,
    docx,
    html,
    pptx,
    xlsx,
    delimited,
    epub,
    mail,
    opendocument,
    rtf,
    image,
)
"""The format modules, in the order their names are listed."""
PARSERS: dict[str, Callable[[bytes, int], ParsedDocument]] = {m.FORMAT: m.parse for m in MODULES}
"""Format name -> its parse function."""
FORMATS: tuple[str, ...] = tuple(PARSERS)
SUFFIXES: dict[str, str] = {suffix: m.FORMAT for m in MODULES for suffix in m.SUFFIXES}
"""File name suffix (lower case) -> format name."""
OCR_FORMATS = frozenset({pdf.FORMAT, image.FORMAT})
"""The formats whose text may be read with OCR: every image file, a PDF's pages without a text layer."""


def table() -> list[tuple[str, tuple[str, ...], bool]]:
    """(format, its suffixes, read with OCR) for every format, in :data:`MODULES` order."""
    return [(m.FORMAT, tuple(m.SUFFIXES), m.FORMAT in OCR_FORMATS) for m in MODULES]


def format_of(path: Path) -> str | None:
    """The format a file name says, or None when it is not one this parser reads."""
    return SUFFIXES.get(path.suffix.lower())


def parse_file(path: Path, max_bytes: int) -> ParsedDocument:
    """Parse the file at ``path``; raises :class:`ParseError` when it cannot."""
    _format(path)  # an unsupported name is refused before the file is opened
    return parse_content(path, read_bytes(path, max_bytes), max_bytes)


def parse_content(path: Path, data: bytes, max_bytes: int, fmt: str = "") -> ParsedDocument:
    """Parse ``data``, the bytes of the file ``path`` names, as the format ``fmt`` (``""``: the suffix picks it).
    Every format parses from memory, so bytes sent by another machine need no temporary file."""
    if fmt and fmt not in PARSERS:
        raise ParseError(ErrorCode.PARSE_FAILED, f"unknown format: {fmt[:40]}")
    fmt = fmt or _format(path)
    if len(data) > max_bytes:
        raise ParseError(ErrorCode.FILE_TOO_LARGE, _too_large(len(data), max_bytes))
    return PARSERS[fmt](data, max_bytes)


def _format(path: Path) -> str:
    fmt = format_of(path)
    if fmt is None:
        raise ParseError(ErrorCode.PARSE_FAILED, f"unsupported format: {path.suffix or 'no suffix'}")
    return fmt


def document_text(path: Path, max_bytes: int) -> str:
    """The extracted text of the file at ``path`` (what ``read_document`` opens by line)."""
    return parse_file(path, max_bytes).text


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The file's bytes; ``unreadable`` when it cannot be read or is not a regular file,
    ``file_too_large`` over ``max_bytes``.

    Opened without blocking and checked on the open descriptor: a FIFO would otherwise block until someone
    writes to it. For tools and tests: the parser worker opens no path (the indexer sends the bytes it read
    through :mod:`foldermind.workers.userfiles`).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ParseError(ErrorCode.UNREADABLE, f"unreadable: {path.name} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise ParseError(ErrorCode.UNREADABLE, "unreadable: not a regular file")
            if st.st_size > max_bytes:
                raise ParseError(ErrorCode.FILE_TOO_LARGE, _too_large(st.st_size, max_bytes))
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ParseError(ErrorCode.UNREADABLE, f"unreadable: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:  # it grew since stat()
        raise ParseError(ErrorCode.FILE_TOO_LARGE, _too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"file too large: {size} bytes (the limit is {max_bytes})"
