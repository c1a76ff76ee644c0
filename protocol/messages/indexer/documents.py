"""One indexed document: its text by lines or around a chunk (``doc.read``), the documents like it
(``doc.similar``) and its analysis (``doc.summary``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foldermind.protocol.messages.envelope import Message, message
from foldermind.protocol.messages.indexer.search import OcrPage, SearchHit


@message("doc.read.request")
@dataclass(slots=True)
class ReadDocumentRequest(Message):
    """A line-ranged read of an indexed file's extracted text (1-based, inclusive ``end_line``; ``None``:
    to the end), at most ``max_chars`` characters; or, with ``chunk_id``, the lines of that chunk and of
    ``before`` / ``after`` chunks (or lines) around it. ``path`` must be absolute; it is resolved (symlinks
    followed) and must lie inside a registered folder. Errors: ``invalid_path`` (outside every folder,
    or not a file), ``file_not_indexed`` (inside a folder but not indexed: pending, failed, skipped),
    ``unknown_chunk`` (the chunk is not the file's now: it changed since the search), ``bad_request``."""

    path: str
    """The file's absolute path; may be empty with `chunk_id` (the chunk's file is read)."""
    start_line: int = 1
    """First line to return, 1-based."""
    end_line: int | None = None
    """Last line to return, inclusive; `null` means to the end."""
    max_chars: int = 100_000
    """Most characters to return; values above 100,000 count as 100,000."""
    chunk_id: int | None = None
    """Read around this chunk of the file (a search hit's `chunk_id`) instead of `start_line..end_line`, which must
    then be left as they are (1 and `null`)."""
    before: int = 0
    """With `chunk_id`: this many chunks (or lines, see `unit`) before it as well, as far as the file's start."""
    after: int = 0
    """With `chunk_id`: this many chunks (or lines) after it as well, as far as the file's end."""
    unit: str = "chunks"
    """What `before` and `after` count: `chunks` or `lines`."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("doc.read.reply")
@dataclass(slots=True)
class ReadDocumentReply(Message):
    """The text of lines ``start_line..end_line`` (the lines actually returned), the document's line
    count, and ``truncated`` when ``max_chars`` or the document's end cut the asked range short."""

    file_path: str
    """The resolved path of the file read."""
    text: str
    """The lines `start_line..end_line`, joined by `"\\n"` (no trailing line break)."""
    start_line: int
    """The first line returned (as asked)."""
    end_line: int
    """The last line returned; `start_line - 1` when none was."""
    total_lines: int
    """The document's line count (0 for a document without text)."""
    truncated: bool
    """`max_chars` cut the asked range short, or `end_line` was past the end of the document."""
    ocr_pages: list[OcrPage] = field(default_factory=list)
    """The pages among the lines returned whose text was read with OCR (a scanned PDF page, an image file), each
    `{page, line_start, line_end, confidence}` (`OcrPage`); empty when the text is the file's own."""


@message("doc.similar.request")
@dataclass(slots=True)
class SimilarRequest(Message):
    """Documents nearest to the indexed file at ``path``, from its stored vectors (no model call); the
    file itself is left out. Errors as ``doc.read.request``, plus ``not_embedded`` when the file has
    no vectors yet."""

    path: str
    """The file's absolute path (path rules as `doc.read.request`)."""
    top_k: int = 5
    """How many documents; clamped to 1..50 (the MCP tool allows 1..25)."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("doc.similar.reply")
@dataclass(slots=True)
class SimilarReply(Message):
    """One hit per similar document (its best chunk), best first."""

    results: list[SearchHit]
    """One `SearchHit` per similar document (its chunk nearest to the centroid), best first; the snippet is that chunk's
    beginning."""
    note: str | None = None
    """`based on N of M chunks: the rest are not embedded yet` while the file is still being embedded."""


@message("doc.summary.request")
@dataclass(slots=True)
class SummaryRequest(Message):
    """The analysis of a file, by its current path or the path it was analyzed at. The indexer analyses
    files once nothing is left to parse or embed; a file written since its last analysis is analysed on the
    spot (the same fields, dated when its content was written). Errors: ``invalid_path``,
    ``file_not_analyzed`` (with a hint in the message)."""

    path: str
    """The file's current absolute path, or the path it had when it was analyzed."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("doc.summary.reply")
@dataclass(slots=True)
class SummaryReply(Message):
    """The analysis fields (summary, category, entity, type, date, keywords, key_entities,
    suggested_name, confidence, analyzed_at) and ``file_path`` = where the file is now."""

    analysis: dict[str, Any]
    """The analysis fields (summary, category, entity, type, date, keywords, key_entities, suggested_name, confidence),
    `analyzed_at` (epoch seconds) and `file_path`, where the file is now. A plain map: the analysis record is
    the stored JSON of `workers/indexer/analysis/` (its `Analysis` record) plus the model's fields, which
    grow with it."""
