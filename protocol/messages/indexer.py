"""The indexer: changes from the watcher, Smart Folders, search, evidence and documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from foldermind.protocol.messages.envelope import Message, message


class FileEntry(TypedDict):
    path: str
    size: int
    mtime_ns: int


class ChangeEvent(TypedDict):
    """``kind``: created, modified, deleted or moved (then ``dest`` is the new path)."""

    kind: str
    path: str
    dest: str | None


@message("index.reconcile.request")
@dataclass(slots=True)
class ReconcileRequest(Message):
    """Watcher -> indexer: the full list of eligible files now in folder ``folder_id``. The indexer
    queues new and changed files, forgets vanished ones, and records ``skipped`` (path -> reason)."""

    folder_id: str
    files: list[FileEntry]
    skipped: dict[str, str] = field(default_factory=dict)


@message("index.reconcile.reply")
@dataclass(slots=True)
class ReconcileReply(Message):
    """How many files were new, changed, unchanged and deleted."""

    new: int
    changed: int
    unchanged: int
    deleted: int


@message("index.changes.request")
@dataclass(slots=True)
class ChangesRequest(Message):
    """Watcher -> indexer: debounced file events. A move inside the indexed set keeps the document
    (and its analysis) and only updates its path."""

    events: list[ChangeEvent]


@message("index.changes.reply")
@dataclass(slots=True)
class ChangesReply(Message):
    """How many events were taken into account."""

    accepted: int


class FolderInfo(TypedDict):
    id: str
    name: str
    description: str
    path: str
    added_at: float
    last_organized_at: float | None
    files_total: int
    files_indexed: int
    files_failed: int
    chunks: int
    chunks_embedded: int
    state: str


@message("folders.add.request")
@dataclass(slots=True)
class FolderAddRequest(Message):
    """Register ``path`` (absolute, an existing folder) as a Smart Folder. Errors:
    ``invalid_path``, ``folder_overlap`` (inside or around a registered folder)."""

    path: str
    name: str = ""
    description: str = ""


@message("folders.add.reply")
@dataclass(slots=True)
class FolderAddReply(Message):
    """The registered folder."""

    folder: FolderInfo


@message("folders.list.request")
@dataclass(slots=True)
class FolderListRequest(Message):
    """Every Smart Folder with its indexing progress."""


@message("folders.list.reply")
@dataclass(slots=True)
class FolderListReply(Message):
    """The folders, in the order they were added."""

    folders: list[FolderInfo]


@message("folders.remove.request")
@dataclass(slots=True)
class FolderRemoveRequest(Message):
    """Unregister a folder by id or path and purge its entries from every index (files are never
    touched). Errors: ``unknown_folder``."""

    folder: str


@message("folders.remove.reply")
@dataclass(slots=True)
class FolderRemoveReply(Message):
    """The folder removed and how many documents were purged."""

    folder: FolderInfo
    documents_purged: int


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
    location: dict[str, Any]
    text: NotRequired[str]
    """The whole chunk, only when the request set ``with_text`` (grounded chat builds its prompt from it)."""


@message("search.request")
@dataclass(slots=True)
class SearchRequest(Message):
    """Search the index. ``mode``: keyword, semantic or hybrid; ``folder_id`` (an id or a folder's path)
    scopes both searches before they are cut to ``top_k``. ``fusion`` picks how hybrid merges the two
    rankings (``rrf`` or ``weighted``; empty: the configured default). ``with_text`` adds each hit's
    whole chunk text as ``text``. Errors: ``invalid_query``, ``invalid_smart_folder``."""

    query: str
    mode: str = "hybrid"
    top_k: int = 10
    folder_id: str | None = None
    fusion: str = ""
    with_text: bool = False


@message("search.reply")
@dataclass(slots=True)
class SearchReply(Message):
    """Ranked results, the number of matches, the time taken, the mode actually used, a ``note`` when
    it answered in a degraded way, and ``timings`` (ms: ``embed``, ``keyword``, ``vector``, ``fuse``,
    ``rows``) so the cost of each stage is visible beside the process hops."""

    results: list[SearchHit]
    total_matches: int
    query_ms: float
    mode_used: str
    note: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class EvidenceSpan(TypedDict):
    passage: int
    """Index into the reply's ``passages``."""
    text: str
    """The sentence as quoted: verbatim, white space collapsed."""
    line_start: int
    line_end: int
    score: float
    semantic: float
    """Cosine of the sentence's vector and the question's (0 when no vector was made)."""
    lexical: float
    """The share of the question's terms (idf-weighted) that the sentence holds."""
    window: str
    """The sentence with its neighbours in the chunk: what a model is shown as the source."""
    window_line_start: int
    window_line_end: int


@message("evidence.request")
@dataclass(slots=True)
class EvidenceRequest(Message):
    """-> indexer: the sentences that answer ``question``. A hybrid search for ``question`` (with
    ``context``, the previous question of a conversation, in front of it) picks the best chunks of the
    ``max_files`` best files (``per_file`` each); their sentences are scored against the question (its
    vector against theirs, its terms in them, their chunk's rank) and the best ``max_spans`` come back,
    best first. Errors as ``search.request``."""

    question: str
    context: str = ""
    max_files: int = 5
    per_file: int = 1
    max_spans: int = 4
    folder_id: str | None = None


@message("evidence.reply")
@dataclass(slots=True)
class EvidenceReply(Message):
    """``passages``: the chunks searched (search hits, rank order, without text); ``spans``: the chosen
    sentences, best first; ``supported``: whether the best of them answers the question at all (else
    the documents do not say); ``mode_used`` and ``note`` of the search (keyword-only when vectors are
    unavailable, and then sentences are scored by their terms alone); ``timings`` in ms (``search``,
    ``split``, ``encode``, ``score``) and ``encoded``: sentence vectors made (not from the cache)."""

    passages: list[SearchHit]
    spans: list[EvidenceSpan]
    supported: bool
    mode_used: str
    note: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    encoded: int = 0


class Claim(TypedDict):
    text: str
    sources: list[int]
    """The sources (0-based into the request's ``sources``) the sentence cites; empty: none."""


class ClaimCheck(TypedDict):
    supported: bool
    source: int
    """The source that supports it (the cited one when it does, else the best other); -1: none."""
    quote: str
    """The sentence of that source closest to the claim (its exact words), else empty."""
    similarity: float
    missing: list[str]
    """Facts (figures, names) the claim states that the best source does not hold."""


@message("evidence.check.request")
@dataclass(slots=True)
class CheckRequest(Message):
    """-> indexer: is each generated sentence of ``claims`` backed by a source? A claim is supported by a
    source that holds every figure and name it states, most of its content words (the question's words
    count as given), and a sentence whose vector is close to the claim's."""

    question: str
    claims: list[Claim]
    sources: list[str]
    reference: str = ""
    """An answer the claims are compared with (the best quote): see the reply's ``carries``."""


@message("evidence.check.reply")
@dataclass(slots=True)
class CheckReply(Message):
    """One check per claim, in order; ``carries`` is whether the supported claims state at least one fact
    (a figure, a name) of ``reference`` that the question does not: an answer that does, answers; one that
    does not only talks around the question."""

    checks: list[ClaimCheck]
    carries: bool = False


@message("doc.read.request")
@dataclass(slots=True)
class ReadDocumentRequest(Message):
    """A line-ranged read of an indexed file's extracted text (1-based, inclusive ``end_line``; ``None``:
    to the end), at most ``max_chars`` characters. ``path`` must be absolute; it is resolved (symlinks
    followed) and must lie inside a registered folder. Errors: ``invalid_path`` (outside every folder,
    or not a file), ``file_not_indexed`` (inside a folder but not indexed: pending, failed, skipped)."""

    path: str
    start_line: int = 1
    end_line: int | None = None
    max_chars: int = 100_000


@message("doc.read.reply")
@dataclass(slots=True)
class ReadDocumentReply(Message):
    """The text of lines ``start_line..end_line`` (the lines actually returned), the document's line
    count, and ``truncated`` when ``max_chars`` or the document's end cut the asked range short."""

    file_path: str
    text: str
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool


@message("doc.similar.request")
@dataclass(slots=True)
class SimilarRequest(Message):
    """Documents nearest to the indexed file at ``path``, from its stored vectors (no model call); the
    file itself is left out. Errors as ``doc.read.request``, plus ``not_embedded`` when the file has
    no vectors yet."""

    path: str
    top_k: int = 5


@message("doc.similar.reply")
@dataclass(slots=True)
class SimilarReply(Message):
    """One hit per similar document (its best chunk), best first."""

    results: list[SearchHit]
    note: str | None = None


@message("doc.summary.request")
@dataclass(slots=True)
class SummaryRequest(Message):
    """The cached analysis of a file, by its current path or the path it was analyzed at. A pure lookup.
    Errors: ``invalid_path``, ``file_not_analyzed`` (with a hint in the message)."""

    path: str


@message("doc.summary.reply")
@dataclass(slots=True)
class SummaryReply(Message):
    """The analysis fields (summary, category, entity, type, date, keywords, key_entities,
    suggested_name, confidence, analyzed_at) and ``file_path`` = where the file is now."""

    analysis: dict[str, Any]


class FailureInfo(TypedDict):
    path: str
    folder_id: str
    status: str
    error: str


@message("index.status.request")
@dataclass(slots=True)
class IndexStatusRequest(Message):
    """Totals, per-folder progress, the embedding model and its state, recent failures."""

    max_failures: int = 20


@message("index.status.reply")
@dataclass(slots=True)
class IndexStatusReply(Message):
    """``totals`` (files_total, files_indexed, files_failed, files_pending, chunks, chunks_embedded),
    ``folders``, ``embedding`` (model, dim, state: ready/loading/unavailable, note) and the most recent
    failures with their reasons; ``storage``: ``{state: ok/disk_full, message, what, path, free_bytes,
    since}`` (a full disk pauses indexing, nothing is marked failed for it)."""

    totals: dict[str, int]
    folders: list[FolderInfo]
    embedding: dict[str, Any]
    recent_failures: list[FailureInfo]
    storage: dict[str, Any] = field(default_factory=dict)
