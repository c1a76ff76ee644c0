"""The usearch file kept in line with SQLite, which holds every vector.

At the first step after a start the file is reconciled with SQLite (stale keys out, missing vectors back,
a damaged file refilled); it is saved every :attr:`VectorUpkeep.SAVE_EVERY_S` and on stop. A draft graph that
outgrew exact search, or a graph whose removed vectors waste its file, is built again from SQLite by
:class:`GraphBuild`, a thread of its own started at an idle moment: the ingest thread goes on adding (a file
saved meanwhile is indexed and embedded as ever) and searches go on over the old graph until the new one takes
its place. Only the ingest thread saves; a kill meanwhile leaves the last saved file, rebuilt again after.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.ingest import units
from foldermind.workers.indexer.ingest.priority import lower_thread_priority
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

    def __init__(
        self,
        store: Store,
        vectors: VectorIndex,
        data_dir: Path,
        wrote: Callable[[], None],
        wake: Callable[[], None] = lambda: None,
        hold: Callable[[], None] | None = None,
    ) -> None:
        self.store, self.vectors, self.data_dir, self._wrote = store, vectors, data_dir, wrote
        self._wake, self.hold = wake, hold
        self.reconciled = False
        self.rebuild: str | None = None
        """Why the usearch file is being refilled from SQLite, while it is."""
        self._next_save = 0.0
        self.graph: GraphBuild | None = None
        """The graph being built beside the vector index, while it is."""

    def note(self) -> str | None:
        if self.rebuild is not None:
            return f"{self.rebuild}, {len(self.vectors.arriving)} chunks left"
        graph = self.graph
        return None if graph is None or not graph.is_alive() else graph.note()

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
                stored = self.stored_units(missing[start : start + STORED_BATCH])
                if stored is not None:
                    self.vectors.add(*stored)
        if len(extra) or len(missing):
            log.info("vector index repaired: %d stale keys removed, %d vectors restored", len(extra), len(missing))
        self.save()
        self.rebuild = self.vectors.damaged = None
        self.reconciled = True

    def full_graph(self) -> None:
        """The vector index's draft graph, outgrown, replaced by a full one of SQLite's vectors (added in a
        shuffled order, as at a repair), built on a thread of its own (:class:`GraphBuild`)."""
        self._build(draft=False, why="vector index outgrew exact search: graph rebuilt full")

    def compact(self) -> None:
        """The graph rebuilt from SQLite's vectors without the slots of removed ones (:attr:`VectorIndex.wasted`),
        a draft staying a draft, as :meth:`full_graph`: the file shrinks back after a big deletion."""
        self._build(draft=self.vectors.draft, why="vector index compacted: removed vectors dropped")

    @property
    def building(self) -> bool:
        return self.graph is not None and self.graph.is_alive()

    def _build(self, draft: bool, why: str) -> None:
        last = self.graph
        if last is not None and (last.is_alive() or time.monotonic() < last.failed_at + GraphBuild.RETRY_S):
            return
        self.graph = GraphBuild(self, draft, why)
        self.graph.start()

    def stop_building(self) -> None:
        """Stop a graph being built (the thread is stopping): the saved file is rebuilt again after a start."""
        graph = self.graph
        if graph is not None:
            graph.cancel.set()
            graph.join(timeout=GraphBuild.JOIN_S)

    def built(self) -> None:
        """From the building thread: the new graph is in place; the ingest thread saves it at its next step."""
        self._next_save = 0.0
        self._wake()

    def stored_units(self, ids: NDArray[np.uint64]) -> tuple[list[int], NDArray[np.float32]] | None:
        """The unit vectors SQLite holds for the chunks ``ids``, as usearch takes them (None: none has any now)."""
        part = self.store.embeddings.get([int(k) for k in ids])
        return embeddings.stack(part, self.vectors.ndim) if part else None


class GraphBuild(threading.Thread):
    """One rebuild of the vector graph from SQLite (its own connection), beside the graph in use
    (:meth:`VectorIndex.rebuilt`), at a lowered CPU priority: the parsers, the embedder and searches go first."""

    NICE = 10
    """The building thread's nice value (Linux; its own, not the indexer's)."""
    JOIN_S = 10.0
    """How long a stopping ingest thread waits for it to notice (it looks between slices of vectors)."""
    RETRY_S = 300.0
    """After a rebuild failed (the graph in use stays), how long before the next one may start."""

    def __init__(self, upkeep: VectorUpkeep, draft: bool, why: str) -> None:
        super().__init__(name="vector-graph", daemon=True)
        self.upkeep, self.draft, self.why = upkeep, draft, why
        self.cancel = threading.Event()
        self.total = self.read = 0
        self.failed_at = -self.RETRY_S

    def note(self) -> str:
        return f"vector graph being built beside the one in use: {self.read}/{self.total} chunks read"

    def run(self) -> None:
        upkeep, vectors = self.upkeep, self.upkeep.vectors
        lower_thread_priority(self.NICE)
        started = time.monotonic()
        try:
            swapped = vectors.rebuilt(self._batches(), draft=self.draft, cancelled=self.cancel.is_set)
        except Exception as exc:  # SQLite holds every vector: the graph in use stays, and is built again later
            log.warning("vector graph not rebuilt (%s: %s); the graph in use stays", type(exc).__name__, exc)
            self.failed_at = time.monotonic()
            return
        if swapped:
            log.info("%s, %d vectors in %.1f s", self.why, len(vectors), time.monotonic() - started)
            upkeep.built()

    def _batches(self) -> Iterator[tuple[list[int], NDArray[np.float32]]]:
        """SQLite's vectors in a shuffled order (:func:`insert_order`), read after the rebuild began to record
        the changes made beside it."""
        ids = insert_order(np.asarray(self.upkeep.store.embeddings.ids(), dtype=np.uint64))
        self.total = len(ids)
        for start in range(0, len(ids), STORED_BATCH):
            if self.upkeep.hold is not None:
                self.upkeep.hold()
            stored = self.upkeep.stored_units(ids[start : start + STORED_BATCH])
            self.read = min(len(ids), start + STORED_BATCH)
            if stored is not None:
                yield stored
