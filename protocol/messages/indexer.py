"""The indexer: changes from the watcher, Smart Folders, search, evidence and documents.

Its length (~640 lines): the indexer serves 14 request kinds here (its criteria folders' own one is in
:mod:`.criteria`), and each field carries its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from foldermind.protocol.messages.criteria import CriteriaInfo
from foldermind.protocol.messages.envelope import Message, message


def iso_time(epoch: float | None) -> str | None:
    """A time (epoch seconds on the bus) as every user-facing answer gives it, the MCP tools and the CLI's
    ``--json`` alike: ISO 8601 in UTC to the second (``2026-12-06T07:04:05Z``)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


SERVED_BY = "the indexer"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


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
    """The Smart Folder's id."""
    files: list[FileEntry]
    """Every eligible file now in the folder, each `{path, size, mtime_ns}` (absolute path, bytes, modification time in
    ns)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Paths to record as skipped, with the reason (a file name that is not valid UTF-8)."""
    unsupported: dict[str, int] = field(default_factory=dict)
    """How many files of the folder no parser reads, by suffix (lower case, `""` for none): left out, counted in
    `index.status.reply`."""
    unsupported_files: list[str] = field(default_factory=list)
    """The first of those files (at most 200, paths as `skipped` shows them), listed by `index.status.reply`."""


@message("index.reconcile.reply")
@dataclass(slots=True)
class ReconcileReply(Message):
    """How many files were new, changed, unchanged and deleted."""

    new: int
    """Files recorded as new."""
    changed: int
    """Known files queued again."""
    unchanged: int
    """Known files left as they were."""
    deleted: int
    """Documents deleted because their file is gone."""


@message("index.changes.request")
@dataclass(slots=True)
class ChangesRequest(Message):
    """Watcher -> indexer: debounced file events. A move inside the indexed set keeps the document
    (and its analysis) and only updates its path."""

    events: list[ChangeEvent]
    """Each `{kind, path, dest}` (`ChangeEvent`)."""


@message("index.changes.reply")
@dataclass(slots=True)
class ChangesReply(Message):
    """How many events were taken into account."""

    accepted: int
    """Documents affected: deleted or moved ones, plus 1 per `created`/`modified` event inside a Smart Folder."""


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
    """Files a parser could not read (a corrupt PDF, a file too large): each has its reason."""
    files_unsupported: int
    """Files in the folder that no parser reads (other formats, by their suffix), as of its last scan; they
    are not documents, so `files_total` leaves them out."""
    files_skipped: NotRequired[int]
    """Files left unindexed without being read (a name that is not UTF-8, a link out of the folder), each with its
    reason; `files_total` counts them, apart from `files_failed`."""
    unsupported: NotRequired[dict[str, int]]
    """`files_unsupported` by suffix (lower case, `""`: none), most first."""
    chunks: int
    chunks_embedded: int
    """Those chunks whose vectors a semantic search finds: a batch counts once it is in the vector index, not
    when the database has it."""
    state: str
    """``indexing`` (just added and not yet scanned, files pending, or not yet found by keyword search),
    ``embedding`` (every file found by keyword search, some chunks not yet by meaning), ``ready`` (all of it; or
    keyword search only while no embedder can embed), ``disk_full``."""
    changed_at: float | None
    """The last time one of its documents was recorded, indexed, failed or moved (epoch seconds); a reader that
    compares it (the MCP front door's resource notifications) learns that the folder's content changed."""


@message("folders.add.request")
@dataclass(slots=True)
class FolderAddRequest(Message):
    """Register ``path`` (absolute, an existing folder) as a Smart Folder; the indexer then has the watcher sync
    (``watch.sync``), so this one request is all adding a folder takes. Errors: ``invalid_path``,
    ``folder_overlap`` (inside or around a registered folder)."""

    path: str
    """Absolute path of an existing folder (the CLI makes it absolute)."""
    name: str = ""
    """Display name (cut to 200 characters); `""` means the folder's own name."""
    description: str = ""
    """What the folder holds (cut to 2000 characters)."""


@message("folders.add.reply")
@dataclass(slots=True)
class FolderAddReply(Message):
    """The registered folder."""

    folder: FolderInfo
    """The registered folder (`FolderInfo`, below)."""


@message("folders.list.request")
@dataclass(slots=True)
class FolderListRequest(Message):
    """Every Smart Folder with its indexing progress, and with ``with_criteria`` every criteria folder with its
    count."""

    with_criteria: bool = False
    """Add the criteria folders (`criteria` in the reply). Off by default: counting them resolves each one (several
    ms after an index commit: docs/tuning.md#search-filters), which the callers that poll the list for
    progress (the watcher, `status`, the front door's change feed) have no use for."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("folders.list.reply")
@dataclass(slots=True)
class FolderListReply(Message):
    """The folders, in the order they were added."""

    folders: list[FolderInfo]
    """One `FolderInfo` per folder, in the order they were added."""
    criteria: list[CriteriaInfo] = field(default_factory=list)
    """With `with_criteria`, one `CriteriaInfo` per criteria folder (`folders.criteria.add.request`), in the order they
    were added; else empty."""


@message("folders.remove.request")
@dataclass(slots=True)
class FolderRemoveRequest(Message):
    """Unregister a folder by id or path and purge its entries from every index (files are never
    touched), with the criteria folders ``within`` it; or remove a criteria folder by id or name (no
    document is purged); the indexer then has the watcher sync. Errors: ``unknown_folder``."""

    folder: str
    """The folder's id or its registered path (a trailing `/` is ignored), or a criteria folder's id or name; the CLI
    makes an existing path absolute."""


@message("folders.remove.reply")
@dataclass(slots=True)
class FolderRemoveReply(Message):
    """The folder removed, how many documents were purged and the criteria folders removed with it."""

    folder: FolderInfo | None
    """The removed folder's `FolderInfo`, as it was just before the removal; `null` when a criteria folder was named."""
    documents_purged: int
    """The number of documents deleted."""
    criteria: list[CriteriaInfo] = field(default_factory=list)
    """The criteria folders removed: the one named, or those `within` the removed folder."""


class DocumentEntry(TypedDict):
    """One document of a folder's listing."""

    id: int
    """The document's id: stable while the file keeps its path or is moved; the listing's order."""
    path: str
    folder_id: str
    status: str
    """`pending`, `indexed`, `failed` or `skipped`."""
    size: int
    mtime_ns: int
    title: str | None
    format: str | None
    error: NotRequired[str | None]
    """Why a `failed` or `skipped` document is not indexed."""


@message("folders.documents.request")
@dataclass(slots=True)
class FolderDocumentsRequest(Message):
    """The documents recorded for one Smart Folder (or every folder), in id order, a page at a time: those
    with an id above ``after``, at most ``limit``. Errors: ``unknown_folder``."""

    folder: str = ""
    """The folder's id or registered path; `""` means every folder."""
    after: int = 0
    """Only documents with an id above this one (the previous page's `next_after`)."""
    limit: int = 100
    """Most documents to return; clamped to 1..500."""
    indexed_only: bool = False
    """Only documents whose status is `indexed` (those a read can open)."""
    statuses: list[str] = field(default_factory=list)
    """Only documents with one of these statuses (`pending`, `indexed`, `failed`, `skipped`); empty: any."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("folders.documents.reply")
@dataclass(slots=True)
class FolderDocumentsReply(Message):
    """A page of documents and where the next one starts."""

    documents: list[DocumentEntry]
    """At most `limit` `DocumentEntry` maps, in id order."""
    next_after: int | None = None
    """The `after` of the next page; `null` when this page is the last."""


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
    ``context``, the previous question of a conversation, in front of it; and then alone, the two rankings taken
    in turns) picks the best chunks of the ``max_files`` best files (``per_file`` each); their sentences are
    scored against the question (its vector against theirs, its terms in them, their chunk's rank) and the best
    ``max_spans`` come back, best first. Errors as ``search.request``."""

    question: str
    """The question (the front door cuts it to 1000 characters)."""
    context: str = ""
    """The previous question of the conversation: put in front of the question for a search (the question is searched
    alone too), and counted at 0.3 of its weight when sentences and passages are scored, so a follow-up keeps its
    subject."""
    max_files: int = 5
    """Files the passages come from (1..20)."""
    per_file: int = 1
    """Chunks taken from each file (1..10)."""
    max_spans: int = 4
    """Sentences returned at most (1..12)."""
    folder_id: str | None = None
    """Only this Smart Folder (an id or its path)."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("evidence.reply")
@dataclass(slots=True)
class EvidenceReply(Message):
    """``passages``: the chunks searched (search hits, rank order, without text); ``spans``: the chosen
    sentences, best first; ``supported``: whether the best of them answers the question at all (else
    the documents do not say); ``mode_used`` and ``note`` of the search (keyword-only when vectors are
    unavailable, and then sentences are scored by their terms alone); ``timings`` in ms (``search``,
    ``split``, ``encode``, ``score``) and ``encoded``: sentence vectors made (not from the cache)."""

    passages: list[SearchHit]
    """The chunks searched, as `SearchHit`s (see `search.reply`), rank order, without `text`."""
    spans: list[EvidenceSpan]
    """The chosen sentences, best first (below)."""
    supported: bool
    """Whether the best evidence answers the question at all: a sentence of the leading passages is close enough to
    it or holds enough of its terms (idf-weighted; the floor is the indexer's). False: the documents do not say."""
    mode_used: str
    """The search's mode (`keyword` when no vectors exist yet)."""
    note: str | None = None
    """The search's note, or `sentences scored by their words only (REASON)` when no sentence vector could be made."""
    timings: dict[str, float] = field(default_factory=dict)
    """Milliseconds: `search`, `split`, `encode`, `score`."""
    encoded: int = 0
    """Sentence vectors made for this request (the rest came from the cache)."""
    spread: bool = False
    """The spans lead with each file's best sentence (a yes-no question: what each document says about the
    statement); an answer quotes the first few that score close to the first (``[llm] yes_no_files``,
    ``yes_no_ratio``)."""
    support: dict[str, float] = field(default_factory=dict)
    """What `supported` was judged on: `semantic`, the best cosine, and `lexical`, the best share of the question's
    terms, over the sentences of the leading passages; beside them `rare`, measured and not judged: the best share of
    the question's rare terms (idf over the index) one leading passage holds."""


class Claim(TypedDict):
    text: str
    sources: list[int]
    """The sources (0-based into the request's ``sources``) the sentence cites; empty: none."""


class ClaimCheck(TypedDict):
    supported: bool
    source: int
    """The source that supports it (one the claim cites; any, for a claim that cites none); -1: none."""
    quote: str
    """The sentence of that source closest to the claim (its exact words), else empty."""
    similarity: float
    missing: list[str]
    """Facts (figures, names) the claim states that the best source does not hold."""
    about: bool
    """Whether the claim, with the sentence that backs it, is about what the question asks: it holds at least half
    the question's terms, weighted by how few of the sources' sentences hold each (its subject, not only its
    topic: "chage -E", not "chage")."""


@message("evidence.check.request")
@dataclass(slots=True)
class CheckRequest(Message):
    """-> indexer: is each generated sentence of ``claims`` backed by a source, and about the question? A claim is
    supported by a source that holds every figure and name it states, most of its content words (the question's
    words count as given), and a sentence whose vector is close to the claim's."""

    question: str
    """The question the answer was written for."""
    claims: list[Claim]
    """The answer's sentences, each `{text, sources}` (`Claim`): the sentence without markers, and the 0-based indexes
    into `sources` that it cites."""
    sources: list[str]
    """The texts the model was shown (the spans' windows)."""
    reference: str = ""
    """An answer the claims are compared with (the best quote): see the reply's ``carries``."""


@message("evidence.check.reply")
@dataclass(slots=True)
class CheckReply(Message):
    """One check per claim, in order; ``carries`` is whether the supported claims state at least one fact
    (a figure, a name) of ``reference`` that the question does not: an answer that does, answers; one that
    does not only talks around the question."""

    checks: list[ClaimCheck]
    """One `ClaimCheck` per claim, in order: `{supported, source, quote, similarity, missing, about}`: the supporting
    source's index (-1: none), its sentence nearest the claim (its exact words; empty when unsupported), that cosine
    (-1 without vectors), the facts of the claim the best source lacks, and whether it is about the question."""
    carries: bool = False
    """Whether the supported claims state at least one fact (a figure, a name) of the request's ``reference``
    that the question does not."""


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


class FailureInfo(TypedDict):
    path: str
    folder_id: str
    status: str
    error: str


class EmbeddingInfo(TypedDict):
    """The index's vectors and the query encoder (see ``index.status.reply``)."""

    model: str
    precision: str
    dim: int
    state: str
    note: str
    query_encoder: str
    query_backend: str | None
    query_backend_note: str | None


class StorageInfo(TypedDict):
    """The disk under the index: ``state`` is ``ok`` or ``disk_full`` (with what failed, where, the free
    bytes then and since when, epoch seconds)."""

    state: str
    message: str
    what: str
    path: str
    free_bytes: int
    since: float | None


class FormatInfo(TypedDict):
    """A file format the parsers read: its name, the suffixes that name it (any case), and whether its text is
    read with OCR (every image file; the pages of a PDF without a text layer)."""

    format: str
    suffixes: list[str]
    ocr: bool


class OcrInfo(TypedDict):
    """Whether scanned pages and image files are read: ``enabled`` is ``[ingest] ocr``, ``available`` that
    the engine is installed, ``engine`` its name, ``note`` why OCR does not run when it does not."""

    enabled: bool
    available: bool
    engine: str
    note: str


def ocr_unknown() -> OcrInfo:
    """OCR's state, not reported (an indexer of an older version)."""
    return OcrInfo(enabled=False, available=False, engine="", note="not reported")


def storage_ok() -> StorageInfo:
    """The disk has room (``free_bytes`` -1: not measured)."""
    return StorageInfo(state="ok", message="", what="", path="", free_bytes=-1, since=None)


@message("index.status.request")
@dataclass(slots=True)
class IndexStatusRequest(Message):
    """Totals, per-folder progress, the embedding model and its state, recent failures."""

    max_failures: int = 20
    """How many recent failures to list; clamped to 0..200."""
    folder: str = ""
    """Only this folder's failures and unsupported files (its id or registered path); `""`: every folder's. Errors:
    `unknown_folder`."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("index.status.reply")
@dataclass(slots=True)
class IndexStatusReply(Message):
    """``totals`` (files_total, files_indexed, files_failed, files_skipped, files_pending, files_unsupported, chunks,
    chunks_embedded), ``folders``, ``embedding`` (model, dim, state: ready/loading/unavailable, note) and the
    most recent failures with their reasons; ``storage``: ``{state: ok/disk_full, message, what, path,
    free_bytes, since}`` (a full disk pauses indexing, nothing is marked failed for it); the ``formats``
    read, whether ``ocr`` runs, and the ``unsupported`` files by suffix."""

    totals: dict[str, int]
    """Over every folder: `files_total`, `files_indexed`, `files_failed`, `files_skipped`, `files_pending`,
    `files_unsupported` (left out: no parser reads their suffix; as of each folder's last scan), `chunks`,
    `chunks_embedded`."""
    folders: list[FolderInfo]
    """One `FolderInfo` per folder (as `folders.list.reply`)."""
    embedding: EmbeddingInfo
    """`{model, precision, dim, state, note, query_encoder, query_backend, query_backend_note}`, see below."""
    recent_failures: list[FailureInfo]
    """Documents `failed` or `skipped`, most recently changed first, each `{path, folder_id, status, error}`
    (`FailureInfo`)."""
    storage: StorageInfo = field(default_factory=storage_ok)
    """`{state, message, what, path, free_bytes, since}`: `state` is `ok`, or `disk_full` while a write of the index
    found no room (indexing pauses and resumes by itself once space is freed; no file is marked failed for it;
    `since` is epoch seconds)."""
    formats: list[FormatInfo] = field(default_factory=list)
    """Every format the parsers read, each `{format, suffixes, ocr}` (`FormatInfo`)."""
    ocr: OcrInfo = field(default_factory=ocr_unknown)
    """`{enabled, available, engine, note}` (`OcrInfo`): whether scanned pages and image files are read."""
    unsupported: dict[str, int] = field(default_factory=dict)
    """The files left out because no parser reads their suffix, by suffix (`""`: no suffix), over every folder."""
    unsupported_files: list[str] = field(default_factory=list)
    """The first of those files (at most 200 a folder) as of each folder's last scan."""
    indexing: list[FailureInfo] = field(default_factory=list)
    """Long documents searchable in part while their parse goes on (status `indexing`), each with `error` saying
    how far: `n of N pages indexed, reading on` (as many as `max_failures`)."""
