"""Every message kind of the bus, declared once.

A message on the wire is an :class:`Envelope` (routing and bookkeeping) plus a body (the fields of
one :class:`Message` subclass) plus zero or more raw buffer frames for bulk numeric data. Each kind
below is a dataclass whose docstring is its specification; ``docs/protocol.md`` documents every
kind and a test fails when one is missing there.

Decoding ignores fields it does not know (a newer peer may add some) but a missing required field
is a ``bad_request``. Requests end in ``.request`` and their answer has the same stem with
``.reply``; ``event.*`` kinds are published, never answered.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NotRequired, Self, TypedDict, TypeVar, cast

from foldermind.protocol.errors import ErrorInfo, ProtocolError

PROTOCOL_VERSION = 1
"""Bumped on any change an older peer would misread; a peer rejects other versions."""

Status = Literal["ok", "error", "partial"]
_STATUSES = frozenset(("ok", "error", "partial"))

_ID_PREFIX = os.urandom(6).hex()
_ID_COUNTER = itertools.count(1)


def new_id() -> str:
    """A message id unique across processes: a random per-process prefix plus a counter."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):x}"


def reply_kind(kind: str) -> str:
    """The kind that answers ``kind`` (``ping.request`` -> ``ping.reply``)."""
    stem = kind.removesuffix(".request")
    return f"{stem}.reply"


@dataclass(slots=True)
class Envelope:
    """Routing and bookkeeping of one message, the header frame on the wire.

    - ``v``: protocol version; any other value is rejected.
    - ``kind``: the message kind (see the classes below).
    - ``id``: unique id of this message.
    - ``cid``: correlation id: on a reply, the ``id`` of the request it answers.
    - ``src``: the sending worker's name (``parser#2``), or the client's name (``cli``).
    - ``to``: a request's target, a service (``parser``) or one worker (``parser#2``) or ``kernel``.
    - ``ts``: send time, seconds since the epoch.
    - ``deadline``: absolute time (epoch seconds) after which the caller no longer waits; 0 = none.
    - ``attempt``: 1 for a first try, 2 for the first retry, and so on.
    - ``status``: ``ok``, ``error`` (then ``error`` is set) or ``partial`` (more replies follow).
    - ``error``: ``{code, message, retryable}`` on an error reply.
    """

    kind: str
    id: str = field(default_factory=new_id)
    cid: str = ""
    src: str = ""
    to: str = ""
    ts: float = field(default_factory=time.time)
    deadline: float = 0.0
    attempt: int = 1
    status: Status = "ok"
    error: ErrorInfo | None = None
    v: int = PROTOCOL_VERSION

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "v": self.v,
            "kind": self.kind,
            "id": self.id,
            "cid": self.cid,
            "src": self.src,
            "to": self.to,
            "ts": self.ts,
            "deadline": self.deadline,
            "attempt": self.attempt,
            "status": self.status,
        }
        if self.error is not None:
            wire["error"] = self.error.to_wire()
        return wire

    @classmethod
    def from_wire(cls, raw: Any) -> Envelope:
        # On the broker's hot path (twice per round trip): plain type checks, positional arguments.
        if type(raw) is not dict:
            raise ProtocolError("header is not a map")
        version = raw.get("v")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(f"unsupported protocol version {version!r} (this peer speaks {PROTOCOL_VERSION})")
        get = raw.get
        kind, mid = get("kind"), get("id")
        if type(kind) is not str or not kind or type(mid) is not str or not mid:
            raise ProtocolError("header lacks kind or id")
        status = get("status", "ok")
        if status not in _STATUSES:
            raise ProtocolError(f"unknown status {status!r}")
        cid, src, to = get("cid") or "", get("src") or "", get("to") or ""
        ts, deadline, attempt = get("ts") or 0.0, get("deadline") or 0.0, get("attempt") or 1
        if not (
            type(cid) is str
            and type(src) is str
            and type(to) is str
            and isinstance(ts, int | float)
            and isinstance(deadline, int | float)
            and type(attempt) is int
        ):
            raise ProtocolError("malformed header field")
        error = get("error")
        return cls(
            kind,
            mid,
            cid,
            src,
            to,
            float(ts),
            float(deadline),
            attempt,
            status,
            ErrorInfo.from_wire(error) if error is not None else None,
        )

    def reply(self, src: str, status: Status = "ok", error: ErrorInfo | None = None) -> Envelope:
        """The envelope of a reply to this request."""
        return Envelope(kind=reply_kind(self.kind), cid=self.id, src=src, status=status, error=error)


class Message:
    """Base of every message body. Subclasses are dataclasses registered with :func:`message`."""

    KIND: ClassVar[str] = ""
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _REQUIRED: ClassVar[frozenset[str]] = frozenset()
    _SHAPES: ClassVar[dict[str, tuple[type, ...]] | None] = None

    def to_body(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._FIELDS}

    @classmethod
    def from_body(cls, body: Any) -> Self:
        if not isinstance(body, dict):
            raise ProtocolError(f"{cls.KIND}: body is not a map")
        missing = cls._REQUIRED - body.keys()
        if missing:
            raise ProtocolError(f"{cls.KIND}: missing field(s) {', '.join(sorted(missing))}")
        shapes = cls._SHAPES if cls._SHAPES is not None else cls._resolve_shapes()
        values = {name: body[name] for name in cls._FIELDS if name in body}
        for name, value in values.items():
            allowed = shapes.get(name)
            # bool is an int to isinstance, never a count or a size on this bus.
            if allowed is not None and (
                not isinstance(value, allowed) or ((value is True or value is False) and bool not in allowed)
            ):
                raise ProtocolError(f"{cls.KIND}: field {name} is {type(value).__name__}, not {_names(allowed)}")
        return cls(**values)

    @classmethod
    def _resolve_shapes(cls) -> dict[str, tuple[type, ...]]:
        """The runtime types each field accepts (one level deep: a list is checked to be a list, not its
        items), from the class's type hints; resolved on first use, once every class of the module exists."""
        hints = typing.get_type_hints(cls)
        cls._SHAPES = {name: shape for name in cls._FIELDS if (shape := _shape(hints.get(name, Any))) is not None}
        return cls._SHAPES


def _shape(hint: Any) -> tuple[type, ...] | None:
    """Runtime types for a type hint as msgpack decodes values; None = not checked."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_shape(arg) for arg in typing.get_args(hint)]
        if any(part is None for part in parts):
            return None
        return tuple(t for part in parts if part is not None for t in part)
    if origin is Literal:
        return tuple({type(arg) for arg in typing.get_args(hint)})
    if hint is type(None):
        return (type(None),)
    if hint is float:
        return (float, int)
    if hint is bytes:
        return (bytes, bytearray, memoryview)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        return (list, tuple)
    if origin is dict or hint is dict or typing.is_typeddict(hint):
        return (dict,)
    if hint in (str, int, bool):
        return (hint,)
    return None


def _names(allowed: tuple[type, ...]) -> str:
    return " or ".join(sorted({"null" if t is type(None) else t.__name__ for t in allowed}))


REGISTRY: dict[str, type[Message]] = {}
"""Every declared kind, by name."""

M = TypeVar("M", bound=type[Message])


def message(kind: str) -> Callable[[M], M]:
    """Declare ``cls`` as the body of ``kind`` (one class per kind, one kind per class)."""

    def register(cls: M) -> M:
        if kind in REGISTRY:
            raise ValueError(f"message kind {kind!r} declared twice")
        cls.KIND = kind
        flds = dataclasses.fields(cast(Any, cls))
        cls._FIELDS = tuple(f.name for f in flds)
        cls._REQUIRED = frozenset(
            f.name for f in flds if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        REGISTRY[kind] = cls
        return cls

    return register


# --------------------------------------------------------------------------------------------
# Worker lifecycle (worker <-> kernel)


@message("worker.ready")
@dataclass(slots=True)
class WorkerReady(Message):
    """Sent once by a worker on its job socket when it can take jobs.

    ``name`` is the worker's slot (``parser#2``), ``service`` the name requests are routed by
    (``parser``), ``capacity`` how many jobs it may hold at once (1 unless the worker serves
    concurrently). The kernel answers nothing; from then on it routes requests and heartbeats.
    A READY from a name the supervisor did not start (and did not hand to ``worker run``) is refused
    with a ``worker.disconnect``.
    """

    name: str
    service: str
    pid: int
    capacity: int = 1
    kinds: list[str] = field(default_factory=list)


@message("worker.heartbeat")
@dataclass(slots=True)
class Heartbeat(Message):
    """Liveness, both ways, every ``bus.heartbeat_interval_s``, on the worker's heartbeat socket.

    A worker's heartbeat comes from its own thread, so a long job does not look dead; a worker that
    misses ``bus.heartbeat_liveness`` intervals is declared lost (its jobs fail with ``worker_lost``
    and it is killed and restarted). A worker that hears no kernel heartbeat for as long exits, so
    no worker outlives its kernel.
    """

    name: str
    pid: int
    busy: int = 0
    note: str = ""
    """A short state line the kernel shows in ``status`` (e.g. ``model ready``); never document text."""
    loading: bool = False
    """The worker is loading a model: a load can hold the GIL for seconds on a starved CPU, so the kernel
    then allows ``bus.loading_liveness`` missed heartbeats instead of ``bus.heartbeat_liveness``."""


@message("worker.disconnect")
@dataclass(slots=True)
class Disconnect(Message):
    """Either side says goodbye: a worker stopping cleanly, or the kernel refusing/dismissing one."""

    name: str
    reason: str = ""


@message("job.cancel")
@dataclass(slots=True)
class JobCancel(Message):
    """A caller gives up a job it sent: ``to="kernel"``, ``cid`` = the job's id. Not answered itself.

    The broker acts only on a cancel from the job's own caller (the same socket identity); others are
    ignored. A job still queued is failed at once with ``cancelled``. A job a worker holds stays in the
    job table and the cancel is forwarded to that worker's heartbeat socket (free while the job socket's
    thread is busy); a handler that looks (``Request.cancelled()``) stops early and answers ``cancelled``,
    and one that does not simply finishes. Either way the caller still gets exactly one final reply."""

    reason: str = ""


# --------------------------------------------------------------------------------------------
# Requests every worker answers


@message("ping.request")
@dataclass(slots=True)
class PingRequest(Message):
    """Are you there? Any worker (and the kernel, ``to="kernel"``) answers with ``ping.reply``."""


@message("ping.reply")
@dataclass(slots=True)
class PingReply(Message):
    """The answering process's name, pid and seconds since it started."""

    name: str
    pid: int
    uptime_s: float


@message("describe.request")
@dataclass(slots=True)
class DescribeRequest(Message):
    """Ask a worker what it is and what it handles."""


@message("describe.reply")
@dataclass(slots=True)
class DescribeReply(Message):
    """Name, service, pid, the kinds it handles, its RSS and worker-specific ``details``."""

    name: str
    service: str
    pid: int
    kinds: list[str]
    rss_bytes: int
    details: dict[str, Any] = field(default_factory=dict)


@message("echo.request")
@dataclass(slots=True)
class EchoRequest(Message):
    """Send ``data`` and every buffer frame straight back (benchmarks and tests)."""

    data: bytes = b""


@message("echo.reply")
@dataclass(slots=True)
class EchoReply(Message):
    """The request's ``data``; the request's buffer frames follow unchanged."""

    data: bytes = b""


# --------------------------------------------------------------------------------------------
# Control API (CLI -> kernel, ``to="kernel"``)


class KernelInfo(TypedDict):
    pid: int
    uptime_s: float
    version: str
    rss_bytes: int


class WorkerInfo(TypedDict):
    name: str
    service: str
    state: str
    pid: int | None
    uptime_s: float | None
    restarts: int
    in_flight: int
    last_error: str | None
    rss_bytes: int | None
    note: str


class McpInfo(TypedDict):
    url: str | None
    port: int | None
    state: str


@message("ctl.status.request")
@dataclass(slots=True)
class StatusRequest(Message):
    """The whole process map, as ``foldermind status`` prints it."""


@message("ctl.status.reply")
@dataclass(slots=True)
class StatusReply(Message):
    """``kernel``, ``workers`` (name, service, state, pid, uptime_s, restarts, in_flight,
    last_error, rss_bytes), ``mcp`` (url, port, state) and ``folders`` (per-folder progress)."""

    kernel: KernelInfo
    workers: list[WorkerInfo]
    mcp: McpInfo
    folders: list[dict[str, Any]] = field(default_factory=list)


@message("ctl.restart.request")
@dataclass(slots=True)
class RestartRequest(Message):
    """Restart one worker (``parser#2``) or a whole pool (``parser``), FAILED ones included.

    The others keep serving. Jobs held by a restarted worker fail with ``worker_lost``.
    """

    target: str


@message("ctl.restart.reply")
@dataclass(slots=True)
class RestartReply(Message):
    """The worker names being restarted."""

    restarted: list[str]


@message("ctl.stop.request")
@dataclass(slots=True)
class StopRequest(Message):
    """Stop every worker (SIGTERM, a grace period, then SIGKILL), then the kernel itself."""


@message("ctl.stop.reply")
@dataclass(slots=True)
class StopReply(Message):
    """Sent once every worker is gone: ``report`` maps worker name to how it ended
    (``exited 0``, ``killed by signal 9``, ``killed after 5 s grace``, ``was FAILED``, ...)."""

    report: dict[str, str]


@message("ctl.attach.request")
@dataclass(slots=True)
class AttachRequest(Message):
    """``foldermind worker run NAME``: stand the supervisor's copy of ``name`` down and accept a
    READY for that name from the foreground process ``pid`` instead. When that process goes away
    (disconnect or missed heartbeats) the supervisor starts its own copy again."""

    name: str
    pid: int


@message("ctl.attach.reply")
@dataclass(slots=True)
class AttachReply(Message):
    """The worker was stood down; ``service`` is the service name the foreground copy must use."""

    name: str
    service: str


# --------------------------------------------------------------------------------------------
# Events (kernel PUB socket; the topic frame is the kind)


@message("event.worker_state")
@dataclass(slots=True)
class WorkerStateEvent(Message):
    """A worker changed state (STARTING, RUNNING, BACKOFF, STOPPING, EXITED, FAILED).

    ``reason`` says why (``spawned``, ``ready``, ``exited with status -9``, ``restart limit``...).
    """

    name: str
    service: str
    old: str
    new: str
    pid: int | None
    reason: str = ""


def decode_body(env: Envelope, body: Any) -> Message:
    """The typed body of ``env.kind``; raises ProtocolError for unknown kinds or bad bodies."""
    cls = REGISTRY.get(env.kind)
    if cls is None:
        raise ProtocolError(f"unknown message kind {env.kind!r}")
    try:
        return cls.from_body(body)
    except TypeError as exc:
        raise ProtocolError(f"{env.kind}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Ingestion: parsing, embedding, indexing (watcher -> indexer -> parser/embedder)


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


@message("embed.request")
@dataclass(slots=True)
class EmbedRequest(Message):
    """Embed ``texts`` (at most a few hundred). Errors: ``model_unavailable`` (retryable; the
    message says why the model cannot load)."""

    texts: list[str]


@message("embed.reply")
@dataclass(slots=True)
class EmbedReply(Message):
    """One buffer frame follows: ``count`` x ``dim`` normalised vectors, ``dtype`` (float32), C
    order. ``model`` names the model that made them."""

    count: int
    dim: int
    model: str
    dtype: str = "float32"


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


@message("mcp.info.request")
@dataclass(slots=True)
class McpInfoRequest(Message):
    """-> frontdoor: where the MCP server listens and its state."""


@message("mcp.info.reply")
@dataclass(slots=True)
class McpInfoReply(Message):
    """``url``, ``port`` (the one actually bound), ``state`` (starting, running, error), ``error``, the
    token's storage ``token_mode`` (keyring or file) and open ``sessions``."""

    url: str
    port: int
    state: str
    error: str = ""
    token_mode: str = ""
    sessions: int = 0


@message("mcp.token.rotate.request")
@dataclass(slots=True)
class TokenRotateRequest(Message):
    """-> frontdoor: make a new bearer token, persist it atomically and use it at once; if persisting
    fails the old token stays in use (error ``token_persist_failed``)."""


@message("mcp.token.rotate.reply")
@dataclass(slots=True)
class TokenRotateReply(Message):
    """The storage mode the new token went to (never the token itself: the CLI reads the store)."""

    token_mode: str


@message("watch.sync.request")
@dataclass(slots=True)
class WatchSyncRequest(Message):
    """CLI -> watcher: re-read the folder list from the indexer, (un)watch folders accordingly and
    reconcile the new ones."""


@message("watch.sync.reply")
@dataclass(slots=True)
class WatchSyncReply(Message):
    """How many folders are now watched."""

    folders: int


# --------------------------------------------------------------------------------------------
# The llm worker


class ChatPassage(TypedDict):
    file_name: str
    text: str


class ChatTurn(TypedDict):
    question: str
    answer: str


@message("llm.chat.request")
@dataclass(slots=True)
class ChatRequest(Message):
    """-> llm: answer ``question`` from ``passages`` (ranked, best first; numbered 1..n in the prompt).

    The worker fits the prompt into the model's context window by counting tokens: the system rules
    (with ``persona``, tone only), as many passages as fit (the last one may be cut) and then as many of
    the most recent ``history`` turns as fit, leaving ``max_tokens`` (0 = ``[llm] max_answer_tokens``)
    for the answer. With ``stream`` set it sends ``llm.chat.partial`` replies (status ``partial``) while
    generating. Errors: ``model_not_ready`` (loading, retryable; or failed, with the reason),
    ``prompt_too_long``, ``llm_timeout`` (the request's deadline passed while generating).
    """

    question: str
    passages: list[ChatPassage] = field(default_factory=list)
    history: list[ChatTurn] = field(default_factory=list)
    persona: str = ""
    max_tokens: int = 0
    stream: bool = False


@message("llm.chat.partial")
@dataclass(slots=True)
class ChatPartial(Message):
    """A piece of an answer being generated (status ``partial``): ``delta`` is new text, raw (its ``[n]``
    markers are the prompt's numbers, not yet checked); ``completion_tokens`` counts tokens so far."""

    delta: str
    completion_tokens: int
    max_tokens: int


@message("llm.chat.reply")
@dataclass(slots=True)
class ChatReply(Message):
    """The checked answer: every ``[n]`` marker is 1-based into ``cited``, which lists the passages used
    (0-based indexes into the request's ``passages``) in first-use order; ``grounded`` is false when
    nothing is cited. ``passages_used`` says how many passages fit the prompt; ``finish`` is ``eos``,
    ``stop``, ``max_tokens`` or ``context``; ``timings`` holds ``prompt_s``, ``first_token_s``,
    ``generate_s``."""

    answer: str
    cited: list[int]
    grounded: bool
    prompt_tokens: int
    completion_tokens: int
    passages_used: int
    finish: str
    model: str
    backend: str
    attributed: int = 0
    """Sentences the model left uncited that were given the marker of the passage holding their words
    (``[llm] attribute_uncited``)."""
    timings: dict[str, float] = field(default_factory=dict)


@message("llm.analyze.request")
@dataclass(slots=True)
class AnalyzeRequest(Message):
    """-> llm: a summary and the named entities of one document from its leading ``text`` (cut by the
    worker to ``[llm] analysis_input_tokens``). Sent by the indexer at low priority, one at a time, when
    its ingest queue is idle. Errors as ``llm.chat.request``."""

    file_name: str
    text: str


@message("llm.analyze.reply")
@dataclass(slots=True)
class AnalyzeReply(Message):
    """``summary`` (one or two sentences), ``entities`` (up to eight names), and the ``model`` that wrote
    them."""

    summary: str
    entities: list[str]
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
