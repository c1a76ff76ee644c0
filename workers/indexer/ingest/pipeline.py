"""The ingest thread of the indexer: pending documents -> parser pool -> SQLite -> Tantivy and usearch.

It runs beside the indexer's serving thread with a bus client of its own. Each part owns its state: the
parse window (:mod:`.parses`), the embed window (:mod:`.embeds`), the keyword journal (:mod:`.journal`),
the vector file's upkeep (:mod:`.upkeep`), the disk guard (:mod:`.disk`), and the model turns the embedder
and the llm share (:mod:`.turns`). :meth:`Pipeline.run` is a loop of named steps (:meth:`Pipeline.tick`),
then a wait for replies or a wake-up; a step that fails is told once and retried with a backoff
(:class:`..storage.persistent.PersistentFault`), a full disk pauses writes, a damaged database stops them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ProtocolError
from foldermind.protocol.messages import WatchSyncRequest
from foldermind.protocol.runtime.config import IngestPolicy, llm_from_env, search_from_env
from foldermind.workers.framework.base import testing
from foldermind.workers.indexer.analysis.analyzer import SLICE as ANALYZE_SLICE
from foldermind.workers.indexer.analysis.analyzer import analyze_due
from foldermind.workers.indexer.ingest.disk import DiskGuard
from foldermind.workers.indexer.ingest.embeds import EmbedWindow
from foldermind.workers.indexer.ingest.enrich import Enricher
from foldermind.workers.indexer.ingest.journal import KeywordJournal
from foldermind.workers.indexer.ingest.parses import ParseWindow
from foldermind.workers.indexer.ingest.priority import lower_thread_priority
from foldermind.workers.indexer.ingest.turns import EMBEDDER, LLM, Turns
from foldermind.workers.indexer.ingest.upkeep import VectorUpkeep
from foldermind.workers.indexer.storage.integrity import Damage, is_database_damage
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.persistent import PersistentFault
from foldermind.workers.indexer.storage.storage import DiskFull, classify
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

log = logging.getLogger("foldermind.indexer.pipeline")

WATCH_SYNC_S = 120.0
"""The deadline of the watcher's sync after a folder change (a first scan of a large folder takes a while)."""


def hold_at(stage: str) -> Callable[[], None] | None:
    """A test switch's hold of the indexer at ``stage`` (:func:`foldermind.workers.framework.faults.indexer_hold`);
    None in a normal run."""
    if not testing():
        return None
    from foldermind.workers.framework import faults

    return lambda: faults.indexer_hold(stage)


class Pipeline(threading.Thread):
    def __init__(
        self,
        store: Store,
        bm25: KeywordIndex,
        vectors: VectorIndex,
        bus_endpoint: str,
        policy: IngestPolicy,
        name: str,
    ) -> None:
        super().__init__(name="ingest", daemon=True)
        self.store, self.bm25, self.vectors, self.policy = store, bm25, vectors, policy
        self.bus_endpoint, self.worker_name = bus_endpoint, name
        self._wake_endpoint = f"inproc://ingest-wake-{id(self)}"
        self._ctx: zmq.Context[Any] = zmq.Context.instance()
        self._wake_recv: zmq.Socket[Any] = self._ctx.socket(zmq.PULL)
        self._wake_recv.bind(self._wake_endpoint)
        self._wakers = threading.local()
        self._stopping = threading.Event()
        self._folders_changed = threading.Event()  # the watcher is to learn the folders again
        self._analysis_left = False  # more documents' analyses are due than one step makes
        self.errors = 0
        self.data_dir = store.path.parent
        self.enricher = Enricher(store, llm_from_env())
        llm = self.enricher.policy
        # A release to the llm stops the one summary it may be writing (asked again later) and is answered once
        # the model is freed; it waits for the summary's next step, or a load in progress.
        idle = {EMBEDDER: policy.embed_idle_unload_s, LLM: llm.idle_unload_s}
        queries = search_from_env().query_encoder == "embedder"  # the embedder then serves searches too
        self.turns = Turns(idle, llm.analysis_timeout_s + 30, keep=frozenset({EMBEDDER} if queries else ()))
        self.disk = DiskGuard(self.data_dir)
        self.journal = KeywordJournal(store, bm25, self.data_dir, hold_at("commit"))
        self.parses = ParseWindow(store, vectors, policy, self.journal, self.disk, hold_at("read"))
        self.embeds = EmbedWindow(store, vectors, policy, self.turns, self.disk.wrote, hold_at("vectors"))
        self.upkeep = VectorUpkeep(store, vectors, self.data_dir, self.disk.wrote, self.wake, hold_at("graph"))
        # Any other failure that repeats (a read-only data folder, a folder where an index file belongs): told
        # once, shown by status with its fix, retried with a growing backoff until a step goes through.
        self.fault = PersistentFault(self.data_dir, log)
        self.damage = Damage(store.path)
        """Once the database is found damaged (the indexer shares its own), nothing more is written."""
        self.nice = "not started"
        """The ingest thread's CPU priority (nice), or why it was left as the process's."""

    # What the indexer's status and describe read.

    @property
    def disk_full(self) -> DiskFull | None:
        return self.disk.full

    @property
    def embed_error(self) -> str | None:
        return self.embeds.error

    @property
    def probe(self) -> str:
        return self.embeds.probe

    def refilling(self, why: str | None) -> None:
        """Before the thread starts: the keyword index is being refilled from SQLite for ``why`` (None: it is not)."""
        self.journal.refilling(why)

    def rebuild_note(self) -> str | None:
        """What is being refilled from SQLite and how far it is, for the status note (None: nothing)."""
        return "; ".join(n for n in (self.journal.note(), self.upkeep.note()) if n) or None

    def wake(self) -> None:
        """Tell the thread there is work (new pending files, or journal entries to apply)."""
        sock: zmq.Socket[Any] | None = getattr(self._wakers, "sock", None)
        if sock is None:
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self._wake_endpoint)
            self._wakers.sock = sock
        sock.send(b"", zmq.NOBLOCK)

    def tell_watcher(self) -> None:
        """A folder was added or removed: the thread asks the watcher to sync (it then reads the folders from
        the indexer and reconciles each), so that one request from a user is all a folder change takes."""
        self._folders_changed.set()
        self.wake()

    def stop(self) -> None:
        self._stopping.set()
        self.wake()

    # ---------------------------------------------------------------------------------------

    def run(self) -> None:
        # Off by default ([ingest] ingest_nice): below the parsers and the embedder this thread fell behind
        # them, and keyword search waited for it (docs/tuning.md#ingest-priority).
        self.nice = lower_thread_priority(self.policy.ingest_nice)
        client = BusClient(self.bus_endpoint, name=f"{self.worker_name}.ingest")
        poller = zmq.Poller()
        poller.register(client.sock, zmq.POLLIN)
        poller.register(self._wake_recv, zmq.POLLIN)
        try:
            while not self._stopping.is_set():
                if self._folders_changed.is_set():
                    self._folders_changed.clear()
                    # Its reply is not awaited (nothing else waits on it); no watcher running: it syncs as it starts.
                    client.send("watcher", WatchSyncRequest(), timeout=WATCH_SYNC_S)
                try:
                    if self.damage.line is None and self.disk.allowed() and self.fault.due():
                        self.tick(client)
                        self.fault.worked()
                except Exception as exc:
                    self._step_failed(exc)
                events = dict(poller.poll(self._wait_ms()))
                if self._wake_recv in events:
                    while self._wake_recv.poll(0):
                        self._wake_recv.recv()
                    self.journal.touched()
                if client.sock in events:
                    try:
                        self._drain(client)
                    except Exception as exc:  # a reply that could not be stored: its document stays pending
                        self._step_failed(exc)
        finally:
            client.close()
            self._wake_recv.close(0)
            self.upkeep.stop_building()
            try:
                self.upkeep.save()
            except Exception as exc:  # SQLite holds every vector: the next start rebuilds the file
                log.warning("vector index not saved on stop (%s)", type(exc).__name__)

    def tick(self, client: BusClient) -> None:
        """One pass of every step, in the order work should go: search first, analysis and upkeep last."""
        self.turns.hand_over = self.embeds.error is None
        if not self.upkeep.reconciled:
            self.upkeep.reconcile(self.embeds.embedded_with)
        if self.journal.apply(parsing=bool(self.parses.inflight)):
            self.disk.wrote()
        self.parses.fill(client)
        self.embeds.fill(client)
        # Documents are analysed once nothing is left to parse or embed.
        self._analysis_left = self._idle() and analyze_due(self.store, self.bm25) >= ANALYZE_SLICE
        self.enricher.fill(client, idle=self._idle, turns=self.turns)
        self.upkeep.maybe_save()
        if self.upkeep.building:
            pass  # new work goes on meanwhile: the graph is built on a thread of its own
        elif self.vectors.outgrown and self._idle():
            self.upkeep.full_graph()
        elif self.vectors.wasted and self._idle():  # a deleted file's vectors out of the graph and the file
            self.upkeep.compact()
        if self._idle() and self.store.compact():  # a deleted file's pages back to the disk
            log.info("database compacted: %d bytes", self.store.path.stat().st_size)

    def _wait_ms(self) -> int:
        """How long to wait for a reply or a wake-up before the next pass."""
        jobs = (self.parses.inflight, self.embeds.inflight, self.enricher.inflight, self.turns.releasing)
        busy = self.vectors.dirty or any(jobs)
        timeout = 0 if self._analysis_left else 1000 if busy else 5000
        if self.disk.full is not None:
            return 250  # look for freed space often: resuming should not wait on a long backoff
        if (retry := self.fault.wait_ms()) is not None:
            return retry  # nothing runs before the next try (a step due now would not spin)
        commit = self.journal.wait_ms()
        return timeout if commit is None else min(timeout, commit)

    def _drain(self, client: BusClient) -> None:
        while client.sock.poll(0):
            try:
                packet = frames.recv(client.sock)
            except ProtocolError as exc:
                log.warning("dropped a bad reply: %s", exc)
                continue
            cid = packet.env.cid
            if self.embeds.owns(cid):
                self.embeds.answered(packet)
            elif self.enricher.owns(cid):
                self.enricher.answered(packet)
            elif self.turns.owns(cid):
                self.turns.answered(packet)
            elif self.parses.owns(cid):
                self.parses.answered(client, packet)

    def _step_failed(self, exc: Exception) -> None:
        if is_database_damage(exc):  # said once: every later step would fail the same way
            self.damage.found(exc, "indexing stopped")
            return
        filename = getattr(exc, "filename", None)
        path = self.store.path if filename is None else Path(str(filename))
        classified = classify(exc, "a database write", path, self.data_dir)
        if classified is None:
            self.errors += 1
            self.fault.failed(exc, "ingest step")
            self.upkeep.save_soon()
            return
        # Kept without its cause and traceback: their frames hold what failed alive (a killed Tantivy
        # writer, and with it the index's writer lock, so no fresh writer could ever be made).
        self.disk.failed(DiskFull(classified.what, classified.path, classified.detail, classified.free_bytes))

    def _idle(self) -> bool:
        """Nothing to parse or embed: only then may the model's analysis run (it never delays indexing)."""
        if self.parses.inflight or self.embeds.busy() or self.disk.full is not None:
            return False
        if self.embeds.error is None and self.store.embeddings.unembedded(1, set()):
            return False
        return not self.store.documents.pending(1)
