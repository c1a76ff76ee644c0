"""Search: a query in, ranked hits out, each with where its chunk sits in its file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from foldermind.protocol.messages.envelope import Message, message


class Location(TypedDict):
    """Where a chunk is in its file: 1-based lines of the extracted text, the page(s) of a paginated
    format, the heading path it sits under, and whether its text was read with OCR."""

    line_start: int
    line_end: int
    page: NotRequired[int]
    page_end: NotRequired[int]
    """Only when the chunk runs onto a later page than ``page``."""
    heading: NotRequired[str]
    ocr: NotRequired[bool]
    """Only for text read with OCR from a page image (a scanned PDF page, an image file): `true`."""
    ocr_confidence: NotRequired[float]
    """With `ocr`: the OCR's mean confidence on that page, 0..1."""


class OcrPage(TypedDict):
    """A page of a document whose text was read with OCR: its lines in the extracted text and the OCR's
    mean confidence."""

    page: int | None
    line_start: int
    line_end: int
    confidence: float


class SearchHit(TypedDict):
    chunk_id: int
    chunk_index: int
    file_path: str
    file_name: str
    score: float
    snippet: str
    smart_folder: str
    folder_id: str
    modified_at: float
    location: Location
    text: NotRequired[str]
    """The whole chunk, only when the request set ``with_text`` (grounded chat builds its prompt from it)."""
    marks: NotRequired[list[list[int]]]
    """Only when the request set ``with_marks``: the ``[start, end)`` character spans of the snippet's words that a
    query word matches as the index stems them in the document's language (English function words left out)."""


@message("search.request")
@dataclass(slots=True)
class SearchRequest(Message):
    """Search the index. ``mode``: keyword, semantic or hybrid; ``folder_id`` (an id or a folder's path)
    scopes both searches before they are cut to ``top_k``, and so do the filters (``file_types``,
    ``path_glob``, ``modified_after``, ``modified_before``; a filter that admits nothing gives no results,
    not an error). ``fusion`` picks how hybrid merges the two rankings (``blend``, ``weighted``, ``rrf`` or
    ``evidence``; empty: the configured default). In the query, ``"two words"`` is a phrase every hit must hold and
    ``-word`` a word no hit may hold (any other character is plain text). ``with_text`` adds each hit's
    whole chunk text as ``text``. Errors: ``invalid_query``, ``invalid_smart_folder``, ``invalid_filter``."""

    query: str
    """The query, 1 to 1000 characters once stripped."""
    mode: str = "hybrid"
    """`keyword`, `semantic` or `hybrid`."""
    top_k: int = 10
    """How many results; clamped to 1..200 (the MCP tool allows 1..50)."""
    folder_id: str | None = None
    """Only this Smart Folder's documents: its id or its registered path, or a criteria folder's id or name (its
    documents matching now, as a filter)."""
    fusion: str = ""
    """How `hybrid` merges the two rankings: `blend`, `weighted`, `rrf` or `evidence`; `""` means `[search] fusion`."""
    with_text: bool = False
    """Add each hit's whole chunk text as `text` (the front door's chat builds its prompt from it)."""
    with_marks: bool = False
    """Add each hit's `marks`: where its snippet holds the query's words as the index stems them (the console)."""
    file_types: list[str] = field(default_factory=list)
    """Only files with these suffixes, without the dot (`["pdf", "txt"]`, any case; only suffixes a parser reads);
    empty: any."""
    path_glob: str = ""
    """Only files whose path matches this glob (`*`, `?` within a segment, `**` across, `{a,b}`, `[abc]`): relative
    to the file's Smart Folder, or the whole path when it starts with `/` (then inside a Smart Folder); `""`: any."""
    modified_after: str = ""
    """Only files modified at or after this ISO 8601 date or time (UTC unless it has an offset); `""`: any."""
    modified_before: str = ""
    """Only files modified before this ISO 8601 date or time (exclusive); `""`: any."""
    min_score: float | None = None
    """Only hits whose `score` is at least this (the scale of the mode used: BM25 for keyword, cosine for semantic, the
    fused score for hybrid, whose best hit scores about 1); `null`: no cut."""
    group_by_file: bool = False
    """At most one hit per file (its best chunk), so one long file does not fill the results."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("search.reply")
@dataclass(slots=True)
class SearchReply(Message):
    """Ranked results, the number of matches, the time taken, the mode actually used, a ``note`` when
    it answered in a degraded way, and ``timings`` (ms: ``embed``, ``keyword``, ``vector``, ``fuse``,
    ``rows``) so the cost of each stage is visible beside the process hops."""

    results: list[SearchHit]
    """At most `top_k` hits, best first (see below)."""
    total_matches: int
    """Keyword: the chunks Tantivy matched; semantic: the neighbours retrieved; hybrid: the larger of the keyword count
    and the fused list's length."""
    query_ms: float
    """Time spent in the indexer, in milliseconds."""
    mode_used: str
    """The mode that produced the results."""
    note: str | None = None
    """Why the mode differs from the one asked: `semantic search unavailable (REASON): answered from keyword search`."""
    timings: dict[str, float] = field(default_factory=dict)
    """Milliseconds per stage: `embed` (the query vector), `keyword` (Tantivy), `vector` (usearch or the exact folder
    search), `fuse`, `rows` (reading the hits back from SQLite and making snippets); a stage that did not run is 0."""
