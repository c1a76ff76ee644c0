"""Parsing (indexer -> parser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message


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


@message("parse.request")
@dataclass(slots=True)
class ParseRequest(Message):
    """Parse the file at ``path`` (absolute) into chunks no longer than ``max_tokens`` tokens of the
    embedding model's own tokenizer, overlapping by ``overlap_tokens``; refuse files over
    ``max_bytes``. Errors: ``parse_failed`` (message says why: ``no extractable text (scanned?)``,
    ``encrypted PDF``, ``not a text file``, ...), ``file_too_large``, ``unreadable``."""

    path: str
    max_bytes: int = 50 * 1024 * 1024
    max_tokens: int = 256
    overlap_tokens: int = 32


@message("parse.reply")
@dataclass(slots=True)
class ParseReply(Message):
    """``format`` (txt, md, pdf, docx, html), ``title`` if the document names one, ``pages`` for
    paginated formats, and the ``chunks`` in order."""

    format: str
    chunks: list[ChunkInfo]
    title: str | None = None
    pages: int | None = None
