"""Search filters (file types, a path glob, a modification window), applied inside both searches.

A filter is resolved against SQLite, the source of truth, into the indexed documents it admits; the answer is
kept until the next commit (:meth:`Store.change_token`), so a client paging with the same filter pays for it
once. The keyword search then applies it inside Tantivy, so Tantivy's top N is already the filter's: a filter of
types and dates only by Tantivy's own fields (``ext``, and ``mtime`` as a fast-field range:
:class:`~foldermind.workers.indexer.storage.keyword.bm25.Where`), a path glob (and a criteria folder) by the admitted
documents as a term-set clause on ``doc_id`` (or, when the filter admits most of them, the others as a must-not clause,
whichever set is smaller). The semantic search runs over the admitted chunks' vectors only
(:meth:`ScopedVectors.search_keys`: exact up to its limit, usearch searched ever deeper above it). Nothing is
cut after ranking, so a filter that admits ``top_k`` matching chunks or more returns ``top_k``.

Why fields for types and dates: a term set on ``doc_id`` costs the same large amount whatever its size, where a
range on a fast field costs about what the text query alone does (measured: docs/tuning.md#search-filters). A glob
has no field to match against, so it keeps the id set. Tantivy's ``mtime`` follows the file: a file written
again with the same bytes is not parsed again, but its journal row has Tantivy read its chunks again
(:meth:`Documents.mark_unchanged`). The resolved set still decides what is returned (a document being parsed again
keeps its old chunks, and their old fields, in Tantivy until the new ones replace them).

What each filter means (documented in README and the tool's schema) is on the fields of :class:`Filters`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
from numpy.typing import NDArray
from pydantic import TypeAdapter, ValidationError
from wcmatch import glob as wcglob

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.workers.indexer.storage.database import SEARCHABLE
from foldermind.workers.indexer.storage.keyword.bm25 import Where, extension
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.parser import formats

MAX_TYPES = 32
MAX_GLOB_CHARS = 1000
GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB
CACHED_FILTERS = 8
_TYPE = re.compile(r"[a-z0-9][a-z0-9_+-]{0,15}")
_DURATION = TypeAdapter(timedelta)


def known_types() -> frozenset[str]:
    """Every suffix a parser reads, without the dot."""
    return frozenset(s.lstrip(".").lower() for _, suffixes, _ in formats.table() for s in suffixes)


@dataclass(frozen=True, slots=True)
class Filters:
    """A validated filter; the empty one admits everything."""

    types: frozenset[str] = frozenset()
    """``file_types``: the file name's suffix, without the dot, any case; only suffixes a parser reads are accepted."""
    glob: str = ""
    """``path_glob``: ``*`` and ``?`` within one path segment, ``**`` across segments, ``{a,b}``, ``[abc]``; matched
    against the path relative to the document's Smart Folder, or against the whole path when it starts with ``/``
    (then it must lie inside or around a registered folder)."""
    after_ns: int | None = None
    """``modified_after``: an ISO 8601 date or time (UTC unless the value carries an offset), inclusive (``mtime >=
    after``). It may also be an ISO 8601 duration, counted back from the moment the filter is read (to the second):
    ``P30D`` is "modified in the last 30 days" (pydantic reads the duration: a year is 365 days, a month 30). A
    criteria Smart Folder (:mod:`.criteria`) stores the text and reads it at each use, so its documents age out of
    such a window with no event at all."""
    before_ns: int | None = None
    """``modified_before``: the same, exclusive (``mtime < before``), so a year is ``2025-01-01 .. 2026-01-01``;
    ``P1Y`` is "not touched for a year"."""

    @property
    def active(self) -> bool:
        return bool(self.types or self.glob or self.after_ns is not None or self.before_ns is not None)


def parse(
    file_types: object,
    path_glob: object,
    modified_after: object,
    modified_before: object,
    roots: Callable[[], list[str]],
) -> Filters:
    """Check and normalise a request's filter fields (``roots``: the registered folders' paths, asked only for
    an absolute glob); a bad value is ``invalid_filter``, naming the field and the rule."""
    types = _types(file_types)
    glob = _glob(path_glob, roots)
    after = _instant("modified_after", modified_after)
    before = _instant("modified_before", modified_before)
    if after is not None and before is not None and after >= before:
        raise JobError(ErrorCode.INVALID_FILTER, "modified_after must be earlier than modified_before")
    return Filters(types, glob, after, before)


def _types(raw: object) -> frozenset[str]:
    if raw is None or (isinstance(raw, list | tuple) and not raw):
        return frozenset()
    if not isinstance(raw, list | tuple) or len(raw) > MAX_TYPES:
        raise JobError(ErrorCode.INVALID_FILTER, f"file_types must be a list of at most {MAX_TYPES} extensions")
    known = known_types()
    out: set[str] = set()
    for item in raw:
        if not isinstance(item, str) or not _TYPE.fullmatch(item.strip().lstrip(".").lower()):
            raise JobError(ErrorCode.INVALID_FILTER, "file_types holds extensions without the dot, e.g. pdf, txt")
        ext = item.strip().lstrip(".").lower()
        if ext not in known:
            raise JobError(
                ErrorCode.INVALID_FILTER, f"no format reads .{ext} files; file_types may be: {', '.join(sorted(known))}"
            )
        out.add(ext)
    return frozenset(out)


def _glob(raw: object, roots: Callable[[], list[str]]) -> str:
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str) or len(raw) > MAX_GLOB_CHARS or "\x00" in raw or not raw.strip():
        raise JobError(ErrorCode.INVALID_FILTER, f"path_glob must be 1..{MAX_GLOB_CHARS} characters without NUL")
    try:
        wcglob.compile(raw, flags=GLOB_FLAGS)
    except Exception as exc:  # wcmatch raises ValueError and others for a pattern it cannot read
        raise JobError(ErrorCode.INVALID_FILTER, f"path_glob is not a glob pattern ({type(exc).__name__})") from exc
    if raw.startswith("/"):
        fixed = _fixed_prefix(raw)
        if not any(_inside(fixed, root) or _inside(root, fixed) for root in roots()):
            raise JobError(ErrorCode.INVALID_FILTER, "an absolute path_glob must lie inside a Smart Folder")
    return raw


def _fixed_prefix(pattern: str) -> str:
    """The directories of ``pattern`` before its first wildcard."""
    parts: list[str] = []
    for part in pattern.split("/"):
        if any(ch in part for ch in "*?[{"):
            break
        parts.append(part)
    return "/".join(parts) or "/"


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def _instant(name: str, raw: object) -> int | None:
    """Epoch nanoseconds of an ISO date (midnight UTC) or time (UTC unless it carries an offset), or of now (whole
    seconds) less an ISO duration."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 40:
        raise JobError(ErrorCode.INVALID_FILTER, f"{name} must be an ISO 8601 date or time, e.g. 2025-01-31")
    text = raw.strip()
    if text[:1] in ("P", "p"):
        return _ago(name, text.upper())
    try:
        if len(text) == 10:
            moment = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        else:
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except ValueError as exc:
        raise JobError(ErrorCode.INVALID_FILTER, f"{name} must be an ISO 8601 date or time, e.g. 2025-01-31") from exc
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _ago(name: str, text: str) -> int:
    """Now, in whole seconds (so that a filter read twice in one second is one cache entry), less the duration."""
    try:
        age = _DURATION.validate_python(text)
    except ValidationError as exc:
        raise JobError(
            ErrorCode.INVALID_FILTER, f"{name} must be an ISO 8601 date, time or duration, e.g. 2025-01-31 or P30D"
        ) from exc
    return (int(time.time()) - int(age.total_seconds())) * 1_000_000_000


@dataclass(slots=True)
class Admitted:
    """The documents a filter admits in one scope, from one snapshot of SQLite."""

    name: str
    """A name for this set of documents (the vector cache's key): made from the set itself, so two filters that
    admit the same documents share one cache entry, and a set that changed between two commits (a relative
    window moving on) is never taken for the one cached."""
    docs: frozenset[int]
    others: list[int]
    """The scope's documents it does not admit, of any status (a document being parsed again keeps its old
    chunks in Tantivy until the new ones replace them)."""
    keys: NDArray[np.uint64] | None = field(default=None)
    """Ascending ids of the admitted documents' embedded chunks, read on first use."""
    where: Where | None = None
    """The same filter as Tantivy fields, when it has no glob and is not intersected with a criteria folder: the
    keyword side then applies it by those fields instead of the id set."""

    @classmethod
    def of(cls, docs: frozenset[int], others: list[int], where: Where | None = None) -> Admitted:
        return cls(f"docs:{len(docs)}:{hash(docs):x}", docs, others, where=where)

    def keyword_clause(self) -> tuple[list[int], bool]:
        """(ids, exclude) for Tantivy: the admitted documents, or the others to exclude when fewer."""
        if len(self.others) < len(self.docs):
            return self.others, True
        return sorted(self.docs), False


def intersect(admitted: Admitted, docs: frozenset[int]) -> Admitted:
    """What ``admitted`` admits of ``docs``, in the same scope."""
    kept = admitted.docs & docs
    return Admitted.of(kept, sorted({*admitted.others, *(admitted.docs - kept)}))


class FilterIndex:
    """Resolves filters for the indexer's searches, side by side: one lock keeps the cache whole (each
    thread reads through its own SQLite connection)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[tuple[Filters, str | None], tuple[int, Admitted]] = OrderedDict()
        self._lock = threading.Lock()

    def admitted(self, filters: Filters, folder_id: str | None) -> Admitted:
        with self._lock:
            return self._admitted_locked(filters, folder_id)

    def _admitted_locked(self, filters: Filters, folder_id: str | None) -> Admitted:
        token = self.store.change_token()
        key = (filters, folder_id)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == token:
            self._cache.move_to_end(key)
            return cached[1]
        admitted = self._resolve(filters, folder_id)
        self._cache[key] = (token, admitted)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHED_FILTERS:
            self._cache.popitem(last=False)
        return admitted

    def keys(self, admitted: Admitted) -> NDArray[np.uint64]:
        with self._lock:
            if admitted.keys is None:
                admitted.keys = np.asarray(self.store.embeddings.ids_of(sorted(admitted.docs)), dtype=np.uint64)
            return admitted.keys

    def _resolve(self, filters: Filters, folder_id: str | None) -> Admitted:
        match = wcglob.compile(filters.glob, flags=GLOB_FLAGS).match if filters.glob else None
        absolute = filters.glob.startswith("/")
        docs: set[int] = set()
        others: list[int] = []
        for doc_id, path, mtime_ns, status, root in self.store.documents.filter_candidates(folder_id):
            ok = status in SEARCHABLE
            if ok and filters.types:
                ok = extension(path) in filters.types
            if ok and filters.after_ns is not None:
                ok = mtime_ns >= filters.after_ns
            if ok and filters.before_ns is not None:
                ok = mtime_ns < filters.before_ns
            if ok and match is not None:
                ok = bool(match(path if absolute else path[len(root.rstrip("/")) + 1 :]))
            if ok:
                docs.add(doc_id)
            else:
                others.append(doc_id)
        where = None if filters.glob else Where(filters.types, filters.after_ns, filters.before_ns)
        return Admitted.of(frozenset(docs), others, where)
