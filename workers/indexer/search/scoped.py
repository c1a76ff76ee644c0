"""Semantic search inside one Smart Folder that returns that folder's true nearest chunks.

usearch's Python API has no filtered search, and taking the index's top-k and dropping the other
folders' chunks leaves a small folder in a big index with nothing. So:

- a folder with at most ``EXACT_LIMIT`` unit vectors (:mod:`.units`) is searched exactly: one matrix product
  over its own vectors, read from SQLite (the source of truth) and cached per folder, a chunk scored by its
  best unit;
- a bigger folder is searched in usearch ever deeper (from its share of the index, doubling) until
  the folder's chunks fill the ``k`` asked: an exact scan of the index up to :data:`EXACT_INDEX` vectors
  (where the unscoped search may walk the graph already), above it the graph's top-k, as an unscoped search.

The cache is checked against :meth:`Store.change_token` on every search: any commit (a chunk
embedded, a document moved to another folder, a folder removed) makes it re-read the folder's key
list, and only the vectors it has not got yet.

A search filter (:mod:`.filters`) is searched the same way over the chunks it admits
(:meth:`ScopedVectors.search_keys`, the key list given by the caller).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.indexer.storage.embeddings import unpack
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

Ranking = list[tuple[int, float]]

EXACT_LIMIT = 20_000
"""Above this many unit vectors (30 MiB at 384-d, a cached folder's matrix; ~5,000 abstracts make ~55k) a folder
is searched through usearch instead."""
EXACT_INDEX = 100_000
"""Up to this many unit vectors in the whole index a folder above the exact limit is searched by an exact scan of
the index (~13 ms at 100k): its results are its true nearest chunks, as a smaller folder's are."""
CACHED_FOLDERS = 4
DEEPER = 1.25
SLACK = 8
"""A folder searched through usearch first asks for DEEPER * k / (its share of the embedded chunks) + SLACK chunks."""


@dataclass(slots=True)
class _Folder:
    token: int
    keys: NDArray[np.uint64]  # ascending
    matrix: NDArray[np.float32] | None  # a row per unit, a chunk's side by side; None above the exact limit
    present: NDArray[np.intp]  # the chunks (indexes into keys) that have rows, ascending
    starts: NDArray[np.intp]  # the first row of each of them
    chunks: int  # embedded chunks in the whole index when it was read (a searched-through-usearch folder's share)


class ScopedVectors:
    """Used by the indexer's searches, side by side: one lock keeps the cache whole."""

    def __init__(self, store: Store, vectors: VectorIndex, exact_limit: int = EXACT_LIMIT) -> None:
        self.store, self.vectors, self.exact_limit = store, vectors, exact_limit
        self._folders: OrderedDict[str, _Folder] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, folder_id: str) -> int:
        """How many embedded chunks the folder has."""
        return len(self._folder(folder_id).keys)

    def search(self, folder_id: str, vector: NDArray[np.float32], k: int) -> Ranking:
        """(chunk id, cosine similarity) of the folder's ``k`` nearest chunks, best first."""
        return self._search(self._folder(folder_id), vector, k)

    def search_keys(self, name: str, keys: NDArray[np.uint64], vector: NDArray[np.float32], k: int) -> Ranking:
        """As :meth:`search`, over the chunks ``keys`` (ascending) that a caller picked, cached as ``name``."""
        return self._search(self._entry(name, lambda: keys), vector, k)

    def _search(self, folder: _Folder, vector: NDArray[np.float32], k: int) -> Ranking:
        if not len(folder.keys) or k <= 0:
            return []
        if folder.matrix is not None:
            if not len(folder.present):  # every chunk deleted since its key was read
                return []
            best = np.maximum.reduceat(folder.matrix @ np.asarray(vector, dtype=np.float32), folder.starts)
            return _top(folder.keys[folder.present], best, k)
        return self._deepening(folder, vector, k)

    def _deepening(self, folder: _Folder, vector: NDArray[np.float32], k: int) -> Ranking:
        # Asked for about k / share chunks (a quarter more, and a few), so one pass finds k of the scope's almost
        # always; each pass costs a whole search (an exact one reads every vector), so a short first pass costs more
        # than a deep one. Which chunks come back does not depend on the depth (an exact search; a graph walk
        # at or below its beam), only how often it deepens.
        total = max(folder.chunks, len(folder.keys), 1)
        depth = min(total, math.ceil(DEEPER * k * total / len(folder.keys)) + SLACK)
        while True:
            found = self.vectors.search(vector, depth, exact=len(self.vectors) <= EXACT_INDEX)
            keys = np.fromiter((key for key, _ in found), dtype=np.uint64, count=len(found))
            inside = _members(folder.keys, keys)
            kept = [hit for hit, ok in zip(found, inside.tolist(), strict=True) if ok]
            if len(kept) >= k or depth >= total:
                return kept[:k]
            depth = min(total, depth * 2)

    def _folder(self, folder_id: str) -> _Folder:
        return self._entry(folder_id, lambda: np.asarray(self.store.embeddings.folder_ids(folder_id), dtype=np.uint64))

    def _entry(self, folder_id: str, read_keys: Callable[[], NDArray[np.uint64]]) -> _Folder:
        with self._lock:
            return self._entry_locked(folder_id, read_keys)

    def _entry_locked(self, folder_id: str, read_keys: Callable[[], NDArray[np.uint64]]) -> _Folder:
        token = self.store.change_token()
        cached = self._folders.get(folder_id)
        if cached is not None and cached.token == token:
            self._folders.move_to_end(folder_id)
            return cached
        keys = read_keys()
        if cached is not None and np.array_equal(keys, cached.keys):
            cached.token, cached.chunks = token, self._chunks(cached.matrix)
            self._folders.move_to_end(folder_id)
            return cached
        matrix, present, starts = self._matrix(keys, cached)
        entry = _Folder(token, keys, matrix, present, starts, self._chunks(matrix))
        self._folders[folder_id] = entry
        self._folders.move_to_end(folder_id)
        while len(self._folders) > CACHED_FOLDERS:
            self._folders.popitem(last=False)
        return entry

    def _chunks(self, matrix: NDArray[np.float32] | None) -> int:
        """The embedded chunks of every folder, for a folder searched through usearch (an exact one needs none)."""
        return self.store.embeddings.count(None, lambda: self.vectors.arriving) if matrix is None else 0

    def _matrix(
        self, keys: NDArray[np.uint64], old: _Folder | None
    ) -> tuple[NDArray[np.float32] | None, NDArray[np.intp], NDArray[np.intp]]:
        """The folder's unit vectors, the chunks that have them and where each one's rows start (see
        :class:`_Folder`); no matrix when the units are more than the exact limit. The rows of chunks ``old``
        had are taken from it, the others read from SQLite."""
        ndim = self.vectors.ndim
        none = (None, np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp))
        if len(keys) > self.exact_limit:  # a chunk has one unit at least
            return none
        kept: dict[int, NDArray[np.float32]] = {}
        if old is not None and old.matrix is not None and len(old.present) and old.matrix.shape[1] == ndim:
            wanted = {int(k) for k in keys}
            ends = [*old.starts[1:], len(old.matrix)]
            for j, start, end in zip(old.present, old.starts, ends, strict=True):
                if int(old.keys[j]) in wanted:
                    kept[int(old.keys[j])] = old.matrix[start:end]
        count = sum(len(rows) for rows in kept.values())
        # A chunk deleted since the key list was read has no rows: the search never returns it.
        for chunk_id, blob in self.store.embeddings.get([int(k) for k in keys if int(k) not in kept]):
            rows = unpack(blob, ndim)
            if rows is not None:  # a vector of another dimension can only be a stale leftover
                kept[chunk_id] = rows
                count += len(rows)
                if count > self.exact_limit:
                    return none
        parts = [(i, kept[int(k)]) for i, k in enumerate(keys) if int(k) in kept]
        if not parts:
            return np.zeros((0, ndim), dtype=np.float32), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
        sizes = np.array([len(rows) for _, rows in parts], dtype=np.intp)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        present = np.array([i for i, _ in parts], dtype=np.intp)
        return np.vstack([rows for _, rows in parts]), present, starts


def _members(keys: NDArray[np.uint64], asked: NDArray[np.uint64]) -> NDArray[np.bool_]:
    """Which of ``asked`` are among ``keys`` (ascending)."""
    if not len(keys):
        return np.zeros(len(asked), dtype=bool)
    at = np.minimum(np.searchsorted(keys, asked), len(keys) - 1)
    return np.asarray(keys[at] == asked)


def _top(keys: NDArray[np.uint64], scores: NDArray[np.float32], k: int) -> Ranking:
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    order = part[np.lexsort((keys[part], -scores[part]))]
    return [(int(keys[i]), float(scores[i])) for i in order]
