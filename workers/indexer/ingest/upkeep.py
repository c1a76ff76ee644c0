"""The usearch file kept in line with SQLite, which holds every vector.

At the first step after a start the file is reconciled with SQLite (stale keys out, missing vectors back,
a damaged file refilled); it is saved every :attr:`VectorUpkeep.SAVE_EVERY_S` and on stop, and its draft
graph is replaced by a full one once it outgrows exact search and nothing else is left to do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.ingest import units
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.storage import writing
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex, insert_order

log = logging.getLogger("foldermind.indexer.pipeline")

STORED_BATCH = 2000
"""Chunks whose vectors one SQLite read brings back, when the index is repaired or rebuilt from SQLite."""


class VectorUpkeep:
    SAVE_EVERY_S = 30.0
    """How often the usearch file is saved: SQLite holds every vector, so the file may lag, and a save costs
    a full serialisation."""

    def __init__(self, store: Store, vectors: VectorIndex, data_dir: Path, wrote: Callable[[], None]) -> None:
        self.store, self.vectors, self.data_dir, self._wrote = store, vectors, data_dir, wrote
        self.reconciled = False
        self.rebuild: str | None = None
        """Why the usearch file is being refilled from SQLite, while it is."""
        self._next_save = 0.0

    def note(self) -> str | None:
        return None if self.rebuild is None else f"{self.rebuild}, {len(self.vectors.arriving)} chunks left"

    def save_soon(self) -> None:
        """A step failed: the next one saves the file too, in case the save was what failed."""
        self._next_save = 0.0

    def maybe_save(self) -> None:
        now = time.monotonic()
        if now < self._next_save:
            return
        self._next_save = now + self.SAVE_EVERY_S
        self.save()

    def save(self) -> None:
        dead = self.store.embeddings.dead()
        self.vectors.remove(dead)
        wrote = self.vectors.dirty
        with writing("saving the vector index", self.vectors.path, self.data_dir):
            self.vectors.save()
        if dead:
            self.store.embeddings.forget_dead(dead)
        if wrote:
            self._wrote()

    def reconcile(self, embedded_with: tuple[str, str]) -> None:
        """Bring the usearch file in line with SQLite after whatever ended the last run (and an index embedded
        by another scheme than :mod:`.units` into the re-embedding that replaces its vectors)."""
        if self.store.get_meta("embed_units") != units.VERSION:
            if self.store.embeddings.ids():
                self.vectors.reset(self.vectors.ndim)
                held = f"{model_files.vectors_key(*embedded_with)} chunk"
                dropped = self.store.embeddings.drop_all(*embedded_with, reembedding=held)
                log.info("the index held one vector per chunk: %d dropped, every chunk is embedded again", dropped)
            with self.store.tx() as db:
                self.store.set_meta(db, "embed_units", units.VERSION)
        wanted = np.asarray(self.store.embeddings.ids(), dtype=np.uint64)
        have = self.vectors.keys()
        extra = np.setdiff1d(have, wanted)
        missing = insert_order(np.setdiff1d(wanted, have))
        self.vectors.remove([int(k) for k in extra])
        if self.vectors.damaged is not None:
            self.rebuild = f"vector index damaged ({self.vectors.damaged}): rebuilding from the database"
        elif len(missing) > STORED_BATCH:  # a crash before the last save
            self.rebuild = f"vector index {len(missing)} chunks behind the database: restoring them"
        # Until a chunk's vectors are back its folder does not read as embedded (a search meanwhile sees only
        # part of the index).
        with self.vectors.arrival():
            for start in range(0, len(missing), STORED_BATCH):
                self.vectors.arriving = tuple(int(k) for k in missing[start:])
                stored = self._stored_units(missing[start : start + STORED_BATCH])
                if stored is not None:
                    self.vectors.add(*stored)
        if len(extra) or len(missing):
            log.info("vector index repaired: %d stale keys removed, %d vectors restored", len(extra), len(missing))
        self.save()
        self.rebuild = self.vectors.damaged = None
        self.reconciled = True

    def full_graph(self) -> None:
        """The vector index's draft graph, outgrown, replaced by a full one of SQLite's vectors (added in a
        shuffled order, as at a repair) and saved. Run when nothing is left to parse or embed: new work waits
        for it (~55k vectors take a few seconds: docs/tuning.md#vector-search)."""
        self._rebuild(draft=False, why="vector index outgrew exact search: graph rebuilt full")

    def compact(self) -> None:
        """The graph rebuilt from SQLite's vectors without the slots of removed ones (:attr:`VectorIndex.wasted`),
        a draft staying a draft, and saved: the file shrinks back after a big deletion. Run when idle, as
        :meth:`full_graph`; searches go on over the old graph meanwhile."""
        self._rebuild(draft=self.vectors.draft, why="vector index compacted: removed vectors dropped")

    def _rebuild(self, draft: bool, why: str) -> None:
        started = time.monotonic()
        ids = insert_order(np.asarray(self.store.embeddings.ids(), dtype=np.uint64))
        read = (self._stored_units(ids[start : start + STORED_BATCH]) for start in range(0, len(ids), STORED_BATCH))
        self.vectors.rebuilt((stored for stored in read if stored is not None), draft=draft)
        log.info("%s, %d vectors in %.1f s", why, len(self.vectors), time.monotonic() - started)
        self.save()

    def _stored_units(self, ids: NDArray[np.uint64]) -> tuple[list[int], NDArray[np.float32]] | None:
        """The unit vectors SQLite holds for the chunks ``ids``, as usearch takes them (None: none has any now)."""
        part = self.store.embeddings.get([int(k) for k in ids])
        return embeddings.stack(part, self.vectors.ndim) if part else None
