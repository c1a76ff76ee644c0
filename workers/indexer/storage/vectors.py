"""The usearch side of the index: one cosine HNSW index of the chunks' unit vectors, keyed by chunk id.

A chunk has a vector per unit (:mod:`..ingest.units`), all under its id (usearch's ``multi`` index: a key may hold
several vectors, ``remove`` drops them all). A search asks usearch for units and returns chunks, each at its
best unit's cosine, deepening until it has the chunks asked for. Up to ``[search] exact_search_vectors`` it
compares the query with every vector (below that size a scan costs what a graph walk does, and a document's units
lie close together, where a walk misses true neighbours); above, the HNSW graph answers, unless the caller asks
for an exact search (a folder's, :mod:`.scoped`).

SQLite keeps every vector (``chunks.vector``), so this file is a cache of them: it is saved atomically now and
then, and on start it is brought back in line with SQLite (keys of deleted chunks removed, missing vectors added).

A search never waits behind a whole embedding batch (usearch makes it wait for an add in progress): vectors are
added :data:`ADD_SLICE` at a time, and between two slices a waiting search goes first (:class:`.gate.Gate`).

While every search is exact the graph is never walked, so it is built as a draft (a narrow insert beam,
:data:`DRAFT_EXPANSION_ADD`; a ``.draft`` marker file); once it outgrows the limit, a full graph is built from
SQLite beside it (:meth:`VectorIndex.rebuilt`, on a thread of its own) while adds, removals and searches go on
here; what changed here meanwhile is replayed into it, and it takes this one's place in one step. Searches stay
exact over a draft however large. Measured: docs/tuning.md#vector-search.

SQLite commits a batch's vectors before they are added here (a hit found here always has its vector in SQLite).
Between the two, the batch's keys are :attr:`VectorIndex.arriving`, and a count of embedded chunks read from
SQLite leaves them out, so a folder reads as embedded only once a semantic search can find every chunk of it.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.protocol.runtime.home import fsync_path
from foldermind.workers.embedding import onnx_model
from foldermind.workers.indexer.storage.gate import Gate

# usearch's wheel carries its own static C++ runtime; loaded first, it makes a later onnxruntime import
# (the query encoder's) crash unless the shared runtime's locale is built before it.
onnx_model.init_cxx_locale()

from usearch.index import Index  # noqa: E402

log = logging.getLogger("foldermind.indexer.vectors")

EXPANSION_SEARCH: int = SearchPolicy.model_fields["expansion_search"].default
"""usearch's search beam (``[search] expansion_search``; measured: docs/tuning.md#vector-search)."""
EXACT_SEARCH_VECTORS: int = SearchPolicy.model_fields["exact_search_vectors"].default
"""Up to this many vectors a search compares the query with all of them (``[search] exact_search_vectors``)."""
UNITS_PER_CHUNK = 6
"""How many units a search first asks usearch for per chunk wanted (a chunk averages 5.5-7.3 units on the
benches' corpora); a search that finds fewer distinct chunks asks again twice as deep."""
ADD_SLICE = 16
"""Vectors added under one hold of the index (see the module's docstring)."""
EXPANSION_ADD = 128
"""usearch's insert beam for a graph that searches walk (an index above ``exact_search_vectors``)."""
DRAFT_EXPANSION_ADD = 32
"""The insert beam of a draft graph, which no search walks (see the module's docstring)."""
REMOVED_SHARE = 0.25
"""The share of the graph's slots that removed vectors may hold before :attr:`VectorIndex.wasted`: usearch keeps
a removed vector's slot, in memory and in the file, until the graph is rebuilt."""
REMOVED_MIN = 4096
"""Removed vectors' slots under this many (~4 MB at 384 f16 dimensions with their links) are left alone."""
BUILD_SLICE = 256
"""Vectors a graph built beside this one takes per call (:meth:`VectorIndex.rebuilt`): how soon it stops when
asked to (usearch's add lets the GIL go meanwhile, so the ingest thread never waits on it)."""
DRAFT_MARKER = ".draft"
"""Beside a file saved as a draft (its name plus this)."""


def insert_order(chunk_ids: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The order chunks' vectors go into a graph built from SQLite (a repair, a full rebuild): shuffled, with a
    fixed seed. HNSW links each vector to what is already in, and a document's similar units added one after
    another make a poorer graph, which finds fewer of the true nearest chunks (docs/tuning.md#vector-search)."""
    return np.random.default_rng(0).permutation(chunk_ids)


class VectorIndex:
    def __init__(
        self,
        path: Path,
        ndim: int,
        expansion_search: int = EXPANSION_SEARCH,
        exact_search_vectors: int = EXACT_SEARCH_VECTORS,
    ) -> None:
        self.path, self.ndim = path, ndim
        self.expansion_search, self.exact_search_vectors = expansion_search, exact_search_vectors
        self._gate = Gate()
        self.dirty = False
        self.arriving: tuple[int, ...] = ()
        """Keys whose vectors SQLite may hold already while this index does not yet (see the module's docstring)."""
        self.damaged: str | None = None
        """Why the file could not be loaded (it is refilled from SQLite), until it is."""
        self.marker = path.with_name(path.name + DRAFT_MARKER)
        self._changes: list[tuple[NDArray[np.uint64], NDArray[np.float32] | None]] | None = None
        """While a graph is built beside this one (:meth:`rebuilt`): every add (keys, vectors) and removal
        (keys, None) made here since it began, in order."""
        self._resets = 0
        # A file without the marker was built full (as every file was before drafts). usearch keeps neither beam in
        # the file: the draft's narrow one is the constructor's.
        self.draft = self.marker.exists() if path.exists() else self._draft_when_new()
        self.index = self._empty(ndim)
        if path.exists():
            try:
                self.index.load(str(path))
                self.index.expansion_search = expansion_search  # type: ignore[misc]  # not kept in the file
                if not self.index.multi:  # a file of one vector per chunk: its index is embedded again anyway
                    log.info("vector index of one vector per chunk found; starting it afresh")
                    self._start_afresh(ndim)
            except Exception as exc:  # a torn or foreign file: rebuild from SQLite
                log.warning("vector index unreadable (%s); rebuilding it from the database", exc)
                self.damaged = "its file is unreadable"
                self._start_afresh(ndim)
        if self.index.ndim != ndim:  # not the database's vectors: they are the ones put back
            log.warning("vector index of %d-d vectors, the database holds %d-d; rebuilding it", self.index.ndim, ndim)
            self.damaged = f"{self.index.ndim}-d vectors, the database's are {ndim}-d"
            self._start_afresh(ndim)

    def reset(self, ndim: int) -> None:
        """An empty index of another dimension (the configured model changed before any vector)."""
        with self._gate.write():
            self.ndim = ndim
            self._start_afresh(ndim)

    def _draft_when_new(self) -> bool:
        # With a limit of 0 every search walks the graph from the first vector: it is built full.
        return self.exact_search_vectors > 0

    def _start_afresh(self, ndim: int) -> None:
        self._resets += 1  # a graph being built beside holds what this one no longer should
        self.draft = self._draft_when_new()
        self.index = self._empty(ndim)
        self.dirty = True

    def _empty(self, ndim: int, draft: bool | None = None) -> Index:
        # f16: about half the memory of f32 at the same recall (docs/tuning.md#vector-search; i8 loses recall).
        # SQLite keeps the f32 vectors (the exact scoped search reads those).
        beam = DRAFT_EXPANSION_ADD if (self.draft if draft is None else draft) else EXPANSION_ADD
        return Index(
            ndim=ndim, metric="cos", dtype="f16", multi=True, expansion_add=beam, expansion_search=self.expansion_search
        )

    @property
    def outgrown(self) -> bool:
        """Whether a draft graph holds more vectors than a search compares one by one: searches stay exact over it
        until :meth:`rebuilt` puts a full graph in its place."""
        return self.draft and len(self.index) > self.exact_search_vectors

    @property
    def wasted(self) -> bool:
        """Whether removed vectors hold over :data:`REMOVED_SHARE` of the graph's slots (and :data:`REMOVED_MIN`)."""
        with self._gate.read():
            slots, live = int(self.index.stats.nodes), len(self.index)
        return slots - live >= max(REMOVED_MIN, slots * REMOVED_SHARE)

    def rebuilt(
        self,
        batches: Iterable[tuple[list[int], NDArray[np.float32]]],
        draft: bool = False,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> bool:
        """A graph (full, or a ``draft``) of the vectors ``batches`` yields (all this index should hold, as
        :meth:`add` takes them; read lazily, after this starts recording), built beside this one while
        searches, adds and removals go on here, then put in its place with what changed here meanwhile. Returns
        whether it was (not when ``cancelled`` said so between two slices, or :meth:`reset` came first). One
        rebuild at a time; the two graphs are held at once until the swap."""
        with self._gate.write():
            self._changes, since = [], self._resets
        try:
            fresh = self._empty(self.ndim, draft=draft)
            for keys, vectors in batches:
                ids = np.asarray(keys, dtype=np.uint64)
                for start in range(0, len(ids), BUILD_SLICE):
                    if cancelled():
                        return False
                    fresh.add(ids[start : start + BUILD_SLICE], vectors[start : start + BUILD_SLICE], threads=1)
            done = 0
            while len(self._changes) - done > ADD_SLICE:  # the bulk of them outside the gate
                if cancelled():
                    return False
                done = self._replay(fresh, done)
            with self._gate.write():
                if self._resets != since:
                    return False
                self._replay(fresh, done)
                self.index, self.draft, self.dirty = fresh, draft, True
                return True
        finally:
            with self._gate.write():
                self._changes = None

    def _replay(self, fresh: Index, done: int) -> int:
        """Apply to ``fresh`` the changes recorded here from the ``done``-th on; returns how many there are now."""
        changes = self._changes or []
        end = len(changes)  # a list grows in one step under the GIL: what was appended before this is all there
        for keys, vectors in changes[done:end]:
            _replace(fresh, keys, vectors)
        return end

    def __len__(self) -> int:
        """How many unit vectors the index holds (a chunk has one or more)."""
        return len(self.index)

    def keys(self) -> NDArray[np.uint64]:
        """The chunk ids that have vectors here, ascending, each once."""
        with self._gate.read():
            return np.unique(np.asarray(self.index.keys, dtype=np.uint64))

    @contextmanager
    def arrival(self, keys: list[int] | tuple[int, ...] = ()) -> Iterator[None]:
        """Within the block, ``keys`` (or the keys the block sets, once it knows them) are :attr:`arriving`:
        their vectors are committed to SQLite, then added here."""
        self.arriving = tuple(keys)
        try:
            yield
        finally:
            self.arriving = ()

    def add(self, keys: list[int], vectors: NDArray[np.float32], between: Callable[[], None] | None = None) -> None:
        """Set the vectors of the chunks ``keys`` names: row i of ``vectors`` is a unit of chunk ``keys[i]``, a
        chunk's units side by side, and they replace what the chunk had. About :data:`ADD_SLICE` at a time, never
        a chunk split between two (a save between them would keep half a chunk); ``between`` is called after the
        first slice when there is a second (a test's hold)."""
        if not keys:
            return
        ids = np.asarray(keys, dtype=np.uint64)
        bounds = [0]
        for begin in np.flatnonzero(ids[1:] != ids[:-1]) + 1:  # where a chunk's units begin
            if int(begin) - bounds[-1] >= ADD_SLICE:
                bounds.append(int(begin))
        bounds.append(len(ids))
        for n, (start, end) in enumerate(itertools.pairwise(bounds)):
            if n == 1 and between is not None:
                between()
            part = ids[start:end]
            with self._gate.write():
                _replace(self.index, part, vectors[start:end])
                self._changed(part, vectors[start:end])

    def remove(self, keys: list[int]) -> None:
        if not keys:
            return
        ids = np.asarray(keys, dtype=np.uint64)
        with self._gate.write():
            self.index.remove(ids)
            self._changed(ids, None)

    def _changed(self, keys: NDArray[np.uint64], vectors: NDArray[np.float32] | None) -> None:
        """Under the write gate: this index changed (``vectors`` None: the chunks ``keys`` removed); recorded
        for a graph built beside it (:meth:`rebuilt`)."""
        self.dirty = True
        if self._changes is not None:
            self._changes.append((keys, None if vectors is None else vectors.copy()))

    def search(self, vector: NDArray[np.float32], k: int, exact: bool = False) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity of its best unit) of the ``k`` nearest chunks, best first; ``exact``:
        compared with every vector whatever the index's size."""
        # A fresh, owned float32 array: usearch refuses views of foreign buffers (e.g. a bus frame).
        query = np.array(vector, dtype=np.float32, copy=True)
        depth = k * UNITS_PER_CHUNK
        while True:
            with self._gate.read():
                total = len(self.index)
                if total == 0 or k <= 0:
                    return []
                scan = exact or self.draft or total <= self.exact_search_vectors
                matches = self.index.search(query, min(depth, total), exact=scan)
            # Best first: a chunk's first unit is its best; the first of each key, in their order.
            keys, first = np.unique(matches.keys, return_index=True)
            if len(keys) >= k or depth >= total:
                at = np.sort(first)[:k]
                scores = 1.0 - np.asarray(matches.distances, dtype=np.float64)[at]
                return list(zip(matches.keys[at].tolist(), scores.tolist(), strict=True))
            depth *= 2

    def save(self) -> None:
        """Write the file atomically (a crash mid-save leaves the previous one)."""
        with self._gate.read():  # it only reads the index, but no add may change it meanwhile
            if not self.dirty:
                return
            tmp = self.path.with_suffix(".tmp")
            if self.draft:  # the marker first: a crash between the two never leaves a draft that reads as full
                self.marker.touch()
            try:
                self.index.save(str(tmp))
                fsync_path(tmp)  # else a power cut leaves the renamed file empty or cut short, rebuilt from SQLite
                os.replace(tmp, self.path)
            except BaseException:
                # A half-written copy (a full disk) would hold the very space the next save needs.
                tmp.unlink(missing_ok=True)
                raise
            if not self.draft:
                self.marker.unlink(missing_ok=True)
            fsync_path(self.path.parent)  # the rename and the marker's change
            self.dirty = False


def _replace(index: Index, keys: NDArray[np.uint64], vectors: NDArray[np.float32] | None) -> None:
    """Set the vectors of the chunks ``keys`` names in ``index`` (a chunk's units side by side; they replace what
    it had), or with ``vectors`` None remove them."""
    if vectors is None:
        index.remove(keys)
        return
    chunks = np.unique(keys)
    present = np.fromiter((index.contains(int(k)) for k in chunks), dtype=bool, count=len(chunks))
    if present.any():
        index.remove(chunks[present])
    # One thread: the embedder is using the cores for the next batch meanwhile.
    index.add(keys, vectors, threads=1)
