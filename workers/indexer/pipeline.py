"""The ingest thread of the indexer: pending documents -> parser pool -> SQLite -> Tantivy.

It runs beside the indexer's serving thread with a bus client of its own, keeps up to
``parse_window`` parses in flight, writes each parsed document in one SQLite transaction, and
applies the journal to Tantivy (one commit for everything finished since the last one). A parse
that loses its parser (crash, hang, memory limit) is retried once on a fresh parser and then
quarantined as failed with its reason.

Its length (~850 lines): one thread's loop, whose parse window, retries and commits share state and
locks; split, the rules about when a document is written or retried would be read in pieces.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zmq
from numpy.typing import NDArray

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, ErrorInfo, Fault, ProtocolError
from foldermind.protocol.messages import ChunkInfo, EmbedReply, EmbedRequest, ParsePartial, ParseReply, ParseRequest
from foldermind.protocol.runtime.config import IngestPolicy, llm_from_env, search_from_env
from foldermind.workers import model_files, onnx_model, userfiles
from foldermind.workers.base import testing
from foldermind.workers.indexer import languages, units
from foldermind.workers.indexer.analyzer import SLICE as ANALYZE_SLICE
from foldermind.workers.indexer.analyzer import analyze_due
from foldermind.workers.indexer.bm25 import KeywordIndex
from foldermind.workers.indexer.enrich import Enricher
from foldermind.workers.indexer.integrity import Damage, is_database_damage
from foldermind.workers.indexer.pages import PagesRead, PageWriter
from foldermind.workers.indexer.persistent import PersistentFault
from foldermind.workers.indexer.storage import LOW_SPACE_BYTES, DiskFull, classify, free_bytes, writing
from foldermind.workers.indexer.store import Document, Store
from foldermind.workers.indexer.turns import EMBEDDER, LLM, Turns
from foldermind.workers.indexer.vectors import VectorIndex, insert_order
from foldermind.workers.ingest_rules import parse_format

log = logging.getLogger("foldermind.indexer.pipeline")

STORED_BATCH = 2000
"""Chunks whose vectors one SQLite read brings back, when the index is repaired or rebuilt from SQLite."""
_LOST = (Fault.LOST, Fault.TIMEOUT)
"""A parse that died with its parser or ran past its deadline: tried once more, then the file is quarantined."""
PARSER = "parser"
CONTENT_HEADROOM = 0.9
"""A file sent to a parser (its bytes travel with the request) may fill at most this share of the bus's
message limit."""


def hold_at(stage: str) -> Callable[[], None] | None:
    """A test switch's hold of the indexer at ``stage`` (:func:`foldermind.workers.faults.indexer_hold`);
    None in a normal run."""
    if not testing():
        return None
    from foldermind.workers import faults

    return lambda: faults.indexer_hold(stage)


def lower_thread_priority(nice: int) -> str:
    """Give the calling thread at least ``nice`` (Linux, where a thread has a nice value of its own and the
    threads it starts inherit it); returns what was done, for describe. Elsewhere it would renice the whole
    indexer, searches included, so it is left alone there."""
    if nice <= 0:
        return "off"
    if not sys.platform.startswith("linux"):
        return f"not on {sys.platform}"
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)
        if now < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:
        return f"unchanged ({exc.strerror or exc})"
    return str(max(now, nice))


@dataclass(slots=True)
class _Embedding:
    """An embedding request in flight: its chunks, and how many units (texts) each sent, in order."""

    ids: list[int]
    counts: list[int]


@dataclass(slots=True)
class _Parse:
    doc: Document
    size: int
    mtime_ns: int
    sha256: str
    attempt: int
    ident: tuple[int, int]
    """(device, inode) of the file whose bytes were read: a re-read for a retry must find the same file."""
    to: str = PARSER
    """The pool, or one parser by name: one on another machine that asked for the file's bytes."""
    parts: list[ChunkInfo] = field(default_factory=list)
    """Chunks received so far in ``parse.partial`` replies (pages read so far, or text that does not fit one
    message)."""
    read: PagesRead = field(default_factory=PagesRead)
    """How many of them are written already, page by page (:mod:`.pages`)."""


class Pipeline(threading.Thread):
    # SQLite holds every vector, so the usearch file may lag: saving it costs a full serialisation.
    SAVE_EVERY_S = 30.0
    # A Tantivy commit (and reader reload) per parsed file would cost more than the parse itself:
    # during bulk indexing, commit at most this often; a lone edit is committed at once.
    COMMIT_EVERY_S = 0.5
    # Chunks are fetched this many batches at a time and sent longest-first, so each request holds
    # texts of similar length (less padding for the model) while requests stay small.
    EMBED_LOOKAHEAD = 8
    PARSE_RETRY_S = 5.0
    # A full disk: writes are retried after this backoff (doubling), or at once when space comes back.
    DISK_RETRY_MIN_S = 0.5
    DISK_RETRY_MAX_S = 5.0
    DISK_FREED_BYTES = 4 * 1024 * 1024
    # Journal rows one Tantivy commit takes: a keyword index refilled from SQLite shows its progress by slices.
    REPLAY_SLICE = 1000

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
        self._inflight: dict[str, _Parse] = {}
        self._journal_dirty = True  # replay whatever a crash left unapplied, first thing
        self._analysis_left = False  # more documents' analyses are due than one step makes
        self._embeds: dict[str, _Embedding] = {}
        self._embed_backlog: list[tuple[int, str, str]] = []
        self._next_commit = 0.0
        self._embed_retry_at = 0.0
        self._parse_retry_at = 0.0
        self._next_save = 0.0
        self.embed_error: str | None = None
        self.embedded_with = store.embedded_with()
        """(model, precision) of the stored vectors, ("", "") before any."""
        self._probed = False  # asked the embedder what it runs since this start
        self.probe = "not yet"
        """Whether (and why) the embedder was asked what it runs since this start (describe shows it)."""
        self.errors = 0
        self.enricher = Enricher(store, llm_from_env())
        llm = self.enricher.policy
        # A release to the llm waits behind the one summary it may be writing.
        idle = {EMBEDDER: policy.embed_idle_unload_s, LLM: llm.idle_unload_s}
        queries = search_from_env().query_encoder == "embedder"  # the embedder then serves searches too
        self.turns = Turns(idle, llm.analysis_timeout_s + 30, keep=frozenset({EMBEDDER} if queries else ()))
        self.data_dir = store.path.parent
        # Set while the disk under the index is full (the first failure's time is kept); cleared by the
        # next write that succeeds. Reported by status and index_status; nothing is marked failed for it.
        self.disk_full: DiskFull | None = None
        self._disk_retry_at = 0.0
        self._disk_backoff = self.DISK_RETRY_MIN_S
        self._free_at_fault = 0
        # Any other failure that repeats (a read-only data folder, a folder where an index file belongs): told
        # once, shown by status with its fix, retried with a growing backoff until a step goes through.
        self.fault = PersistentFault(self.data_dir, log)
        self._reconciled = False
        self.keyword_rebuild: str | None = None
        """Why the keyword index is being refilled from SQLite (set before the thread starts), until it is."""
        self.replay_total = self.replay_left = 0
        """Documents the refill journaled, and those it has yet to replay."""
        self.vector_rebuild: str | None = None
        """Why the usearch file is being refilled from SQLite, while it is."""
        self.damage = Damage(store.path)
        """Once the database is found damaged (the indexer shares its own), nothing more is written."""
        self.nice = "not started"
        """The ingest thread's CPU priority (nice), or why it was left as the process's."""
        self.pages = PageWriter(store, vectors)

    def wake(self) -> None:
        """Tell the thread there is work (new pending files, or journal entries to apply)."""
        sock: zmq.Socket[Any] | None = getattr(self._wakers, "sock", None)
        if sock is None:
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self._wake_endpoint)
            self._wakers.sock = sock
        sock.send(b"", zmq.NOBLOCK)

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
                try:
                    if self.damage.line is None and self._writes_allowed() and self.fault.due():
                        self.turns.hand_over = self.embed_error is None
                        if not self._reconciled:
                            self._reconcile_vectors()
                            self._reconciled = True
                        self._apply_journal()
                        self._fill(client)
                        self._fill_embeds(client)
                        # Search first: documents are analysed once nothing is left to parse or embed.
                        self._analysis_left = self._idle() and analyze_due(self.store, self.bm25) >= ANALYZE_SLICE
                        self.enricher.fill(client, idle=self._idle, turns=self.turns)
                        self._maybe_save()
                        if self.vectors.outgrown and self._idle():
                            self._full_graph()
                        self.fault.worked()
                except Exception as exc:
                    self._step_failed(exc)
                jobs = (self._inflight, self._embeds, self.enricher.inflight, self.turns.releasing)
                busy = self.vectors.dirty or any(jobs)
                timeout = 0 if self._analysis_left else 1000 if busy else 5000
                if self.disk_full is not None:
                    timeout = 250  # look for freed space often: resuming should not wait on a long backoff
                elif (retry := self.fault.wait_ms()) is not None:
                    timeout = retry  # nothing runs before the next try (a step due now would not spin)
                elif self._journal_dirty:
                    timeout = min(timeout, max(1, int((self._next_commit - time.monotonic()) * 1000) + 1))
                events = dict(poller.poll(timeout))
                if self._wake_recv in events:
                    while self._wake_recv.poll(0):
                        self._wake_recv.recv()
                    self._journal_dirty = True
                if client.sock in events:
                    try:
                        self._drain(client)
                    except Exception as exc:  # a reply that could not be stored: its document stays pending
                        self._step_failed(exc)
        finally:
            client.close()
            self._wake_recv.close(0)
            try:
                self._save_vectors()
            except Exception as exc:  # SQLite holds every vector: the next start rebuilds the file
                log.warning("vector index not saved on stop (%s)", type(exc).__name__)

    # ---------------------------------------------------------------------------------------
    # a full disk

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
            self._next_save = 0.0  # the next try saves the vector index too, in case that was what failed
            return
        # Kept without its cause and traceback: their frames hold what failed alive (a killed Tantivy
        # writer, and with it the index's writer lock, so no fresh writer could ever be made).
        full = DiskFull(classified.what, classified.path, classified.detail, classified.free_bytes)
        now = time.monotonic()
        if self.disk_full is None:
            log.warning("%s; indexing paused until space is freed", full)
            self._disk_backoff = self.DISK_RETRY_MIN_S
            self._disk_retry_at = now + self._disk_backoff
        else:
            full.since = self.disk_full.since
            if now >= self._disk_retry_at:  # a retry failed (not a straggler reply): back off further
                self._disk_backoff = min(self._disk_backoff * 2, self.DISK_RETRY_MAX_S)
                self._disk_retry_at = now + self._disk_backoff
        self.disk_full = full
        self._free_at_fault = full.free_bytes

    def _writes_allowed(self) -> bool:
        """False while the disk is full, until the backoff has passed or space has been freed."""
        if self.disk_full is None or time.monotonic() >= self._disk_retry_at:
            return True
        return free_bytes(self.data_dir) >= self._free_at_fault + self.DISK_FREED_BYTES

    def _wrote(self) -> None:
        """A write succeeded: a full disk is over once there is room again. A small write can fit in
        space SQLite already holds (a checkpointed WAL) on a disk still full: that alone proves nothing."""
        if self.disk_full is not None:
            free = free_bytes(self.data_dir)
            if free < self._free_at_fault + self.DISK_FREED_BYTES and free < LOW_SPACE_BYTES:
                return
            log.warning("disk space available again: indexing resumed after %.1f s", time.time() - self.disk_full.since)
            self.disk_full = None

    def _idle(self) -> bool:
        """Nothing to parse or embed: only then may the model's analysis run (it never delays indexing)."""
        if self._inflight or self._embeds or self._embed_backlog or self.disk_full is not None:
            return False
        if self.embed_error is None and self.store.unembedded(1, set()):
            return False
        return not self.store.pending(1)

    def _fill(self, client: BusClient) -> None:
        room = self.policy.parse_window - len(self._inflight)
        if room <= 0 or time.monotonic() < self._parse_retry_at:
            return
        busy = {p.doc.id for p in self._inflight.values()}
        for doc in self.store.pending(room + len(busy)):
            if doc.id in busy:
                continue
            if room <= 0:
                break
            read = self._read(client, doc)
            if read is None:
                continue
            st, data = read
            digest = hashlib.sha256(data).hexdigest()
            if digest == doc.sha256 and doc.attempts == 0 and self._has_chunks(doc.id):
                self.store.mark_unchanged(doc.id, st.st_size, st.st_mtime_ns)  # touched, not changed
                self._journal_dirty = True  # Tantivy's mtime field follows the touch
                continue
            job = _Parse(doc, st.st_size, st.st_mtime_ns, digest, 1, userfiles.identity(st))
            self._send(client, job, data)
            room -= 1

    def _inside(self, real: str) -> bool:
        return self.store.folder_for_path(real) is not None

    def _read(
        self, client: BusClient, doc: Document, same: tuple[int, int] | None = None
    ) -> tuple[os.stat_result, bytes] | None:
        """The file's stat and bytes, read from one descriptor opened and checked by :mod:`userfiles` (``same``:
        the file a retry must find again); None when there is nothing to send, its document then forgotten,
        failed with the reason, or queued again."""
        limit = min(self.policy.max_file_bytes, int(client.max_bytes * CONTENT_HEADROOM))
        if hold := hold_at("read"):
            hold()
        try:
            with userfiles.open_file(doc.path, self._inside, same) as opened:
                st = opened.st
                if st.st_size > self.policy.max_file_bytes:
                    self._fail(doc.id, f"file too large ({st.st_size} bytes > {self.policy.max_file_bytes})")
                    return None
                if st.st_size > limit:
                    self._fail(
                        doc.id,
                        f"file too large to send to a parser ({st.st_size} bytes; the bus carries"
                        f" {client.max_bytes}: [bus] max_message_mb)",
                    )
                    return None
                data = opened.read(limit + 1)
        except userfiles.Outside:
            log.warning("document %d: %s; left unindexed", doc.id, userfiles.LINK_OUTSIDE)
            self._fail(doc.id, userfiles.LINK_OUTSIDE)
            return None
        except userfiles.Replaced:
            self.store.requeue(doc.id)  # another file since the one parsed: looked at afresh
            return None
        except (FileNotFoundError, NotADirectoryError, userfiles.NotRegular):
            self._forget(doc)
            return None
        except OSError as exc:
            self._fail(doc.id, f"unreadable: {exc.strerror or exc}")
            return None
        if len(data) > limit:  # it grew since its fstat: its event follows
            self.store.requeue(doc.id)
            return None
        return st, data

    def _fail(self, doc_id: int, reason: str) -> None:
        self.store.set_failed(doc_id, reason)
        self._journal_dirty = True  # its chunks leave Tantivy too

    def _forget(self, doc: Document) -> None:
        """The file is gone (or is no longer a regular file) since it was queued: it leaves the index
        instead of staying behind as a failure of a file that does not exist. A document moved
        meanwhile is not touched: it is parsed again at its new path."""
        current = self.store.document(doc.path)
        if current is not None and current.id == doc.id:
            with self.store.tx() as db:
                self.store.delete_documents(db, [doc.id])
            self._journal_dirty = True

    def _has_chunks(self, doc_id: int) -> bool:
        row = self.store.db.execute("SELECT chunks, format FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return bool(row and row[1] is not None)

    def _send(self, client: BusClient, job: _Parse, content: bytes) -> None:
        """The parse request with the file's bytes as its buffer: a parser never opens the path itself."""
        request = ParseRequest(
            path=job.doc.path,
            max_bytes=self.policy.max_file_bytes,
            max_tokens=self.policy.chunk_max_tokens,
            overlap_tokens=self.policy.chunk_overlap_tokens,
            content=True,
            format=parse_format(job.doc.path),
        )
        deadline = self.policy.parse_deadline_s(job.size)
        # Recorded before a parser can hold it: a crash during the parse finds its attempt counted.
        self.store.set_attempts(job.doc.id, job.attempt)
        job.parts.clear()  # a retry's parts start over
        job.read.written = 0
        env = client.send(job.to, request, (content,), timeout=deadline, attempt=job.attempt)
        self._inflight[env.id] = job

    def _resend(self, client: BusClient, job: _Parse, to: str = PARSER) -> None:
        """Send ``job`` again (to the pool, or to one parser by name), with the bytes read again from the same
        file; one that changed since is parsed again from the start instead."""
        read = self._read(client, job.doc, job.ident)
        if read is None:
            return
        if hashlib.sha256(read[1]).hexdigest() != job.sha256:
            log.info("document %d changed before it was sent again; parsing it again", job.doc.id)
            self.store.requeue(job.doc.id)
            return
        job.to = to
        self._send(client, job, read[1])

    def _drain(self, client: BusClient) -> None:
        while client.sock.poll(0):
            try:
                packet = frames.recv(client.sock)
            except ProtocolError as exc:
                log.warning("dropped a bad reply: %s", exc)
                continue
            if packet.env.cid in self._embeds:
                self._embedded(self._embeds.pop(packet.env.cid), packet)
                continue
            if self.enricher.owns(packet.env.cid):
                self.enricher.answered(packet)
                continue
            if self.turns.owns(packet.env.cid):
                self.turns.answered(packet)
                continue
            if packet.env.status == "partial":
                self._partial(packet)
                continue
            job = self._inflight.pop(packet.env.cid, None)
            if job is None:
                continue
            if packet.env.status == "error":
                error = packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error without detail")
                self._failed(client, job, error, packet.env.src)
                continue
            body = packet.body()
            assert isinstance(body, ParseReply)
            self._store(job, body)

    def _partial(self, packet: frames.Packet) -> None:
        """Chunks of a parse in flight, ahead of its reply: written at once when they are pages read (:mod:`.pages`)."""
        job = self._inflight.get(packet.env.cid)
        body = packet.body()
        if job is None or not isinstance(body, ParsePartial):
            return
        job.parts.extend(body.chunks)
        if body.pages_read is None or not self.pages.may_write(job.doc.id, job.doc.path, job.read):
            return
        if self._now(job) != self._parsed(job):
            return  # changed since it was read: its event has queued it again, and the newer version wins
        self.pages.write(job.doc.id, job.read, job.parts, body)
        self._wrote()
        self._journal_dirty = True

    def _failed(self, client: BusClient, job: _Parse, error: ErrorInfo, src: str) -> None:
        named, job.to = job.to != PARSER, PARSER  # whatever happens next goes to the pool
        if error.code == ErrorCode.FILE_CONTENT_NEEDED and not named:
            self._resend(client, job, src)  # a parser of an older version, which reads no path of ours
            return
        if named and error.code == ErrorCode.SERVICE_UNAVAILABLE:
            self._resend(client, job)  # that parser left before it had the bytes: nothing ran
            return
        if error.code == ErrorCode.DEADLINE_EXCEEDED and error.retryable:
            self._resend(client, job)  # expired in the queue, never reached a parser: not its fault
            return
        if error.code.fault in _LOST and job.attempt == 1:
            log.warning("parse of document %d lost its parser (%s); retrying on a fresh one", job.doc.id, error.code)
            job.attempt = 2
            self._resend(client, job)
            return
        if self._now(job) != self._parsed(job):
            # Gone, or written again while its old content was parsed (a save in progress): its watcher event
            # has already come, so the file is looked at again instead of the failure kept (a file that is gone
            # is then forgotten, one that became a link out of the folder fails with that reason).
            log.info("document %d changed while it was parsed; looking at it again", job.doc.id)
            self.store.requeue(job.doc.id)
            return
        reason = error.message
        if error.code == ErrorCode.DEADLINE_EXCEEDED:
            stalled = f"{self.policy.parse_deadline_s(job.size):.3g} s"
            reason = f"quarantined: its parse made no progress (no page read, no CPU used) for {stalled}, twice"
        elif error.code.fault in _LOST:
            reason = f"quarantined: the parser failed twice on this file ({error.message})"
        elif error.retryable or error.code.fault is Fault.UNAVAILABLE:
            # No parser can take it now (all FAILED, stopping, tokenizer missing): stay pending.
            log.warning("document %d stays pending: %s", job.doc.id, error.code)
            self._parse_retry_at = time.monotonic() + self.PARSE_RETRY_S
            return
        if not self.pages.failed(job.doc.id, job.doc.path, job.read, reason):
            self._fail(job.doc.id, reason)

    def _now(self, job: _Parse) -> tuple[int, int, tuple[int, int]] | None:
        """(size, mtime, identity) of the file at the job's path now, opened and checked as any read is; None
        when it is gone, or no longer a regular file inside a Smart Folder."""
        try:
            st = userfiles.stat_file(job.doc.path, self._inside)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns, userfiles.identity(st)

    @staticmethod
    def _parsed(job: _Parse) -> tuple[int, int, tuple[int, int]]:
        return job.size, job.mtime_ns, job.ident

    def _store(self, job: _Parse, reply: ParseReply) -> None:
        if self.store.document(job.doc.path) is None:
            return  # deleted or moved while it was being parsed
        now = self._now(job)
        if now is None:
            # Gone, or no longer a file of the folder: nothing is written for it; looked at again, it is
            # forgotten, or failed with the reason.
            self.store.requeue(job.doc.id)
            return
        changed_meanwhile = now != self._parsed(job)
        chunks = [dict(c) for c in (*job.parts, *reply.chunks)]
        # The deterministic analysis comes later (analyzer.py): the document is marked due as it is written.
        language = languages.detect(str(c["text"]) for c in chunks)
        with self.vectors.arrival():
            with self.store.tx() as db:
                # Pages written as they were read stay (:mod:`.pages`) when they are all still there.
                start = job.read.written if self.store.written_through(job.doc.id, job.read.written) else 0
                ids = self.store.write_document(
                    db,
                    job.doc.id,
                    job.size,
                    job.mtime_ns,
                    job.sha256,
                    reply.format,
                    reply.title,
                    reply.pages,
                    chunks,
                    language,
                    start,
                )
                # Chunks whose text is unchanged keep their vectors: committed here, added to usearch below.
                self.vectors.arriving = tuple(ids)
            if reused := self.store.vectors(ids):
                self.vectors.add(*units.stack(reused, self.vectors.ndim))
        self._wrote()
        self._journal_dirty = True
        if changed_meanwhile:
            self.store.requeue(job.doc.id)  # a change arrived during the parse: index the newer content

    # ---------------------------------------------------------------------------------------
    # embedding

    def _fill_embeds(self, client: BusClient) -> None:
        if time.monotonic() < self._embed_retry_at:
            return
        if not self._probed:
            # An empty request: its reply names the model and precision the embedder runs now, so an index
            # whose every chunk is embedded still learns that the configuration changed (and re-embeds).
            # Only when vectors exist: without any, the first batch's reply says it, and an embedder that
            # is still loading its model is not kept busy (it answers one job at a time) for nothing.
            # And only when the configuration names other vectors than the index holds: the probe would
            # start an on-demand embedder at every kernel start (~0.7 CPU-s, and its model resident until
            # it idles out) to learn nothing. An embedder that fell back to another precision is still
            # found out by the first batch it is sent. The embedder's turn is taken only for a probe sent:
            # taken for nothing, the llm's next turn would start the embedder only to release it.
            if not len(self.vectors):
                self._probed, self.probe = True, "not needed: no vectors yet"
            elif self.embedded_with == self.configured_vectors():
                self._probed, self.probe = True, "not needed: the index holds the configured vectors"
            elif self.turns.take(EMBEDDER, client):
                self._probed, self.probe = True, "asked: the configuration names other vectors than the index holds"
                self._embeds[client.send(EMBEDDER, EmbedRequest([]), timeout=600).id] = _Embedding([], [])
        size = self.policy.embed_batch
        while len(self._embeds) < self.policy.embed_window:
            if not self._embed_backlog:
                busy = {i for sent in self._embeds.values() for i in sent.ids}
                rows = self.store.unembedded(size * self.EMBED_LOOKAHEAD, busy)
                if not rows:
                    if not self._embeds and self.store.reembedding():
                        self.store.reembedded()
                        log.info("re-embedding done: every chunk has a %s vector", " ".join(self.embedded_with))
                    return
                backlog = [(chunk_id, text, units.title_of(title, first)) for chunk_id, text, title, first in rows]
                self._embed_backlog = sorted(backlog, key=lambda row: len(row[1]), reverse=True)
            if not self.turns.take(EMBEDDER, client):
                return  # the llm's model goes first (the release is on its way; the backlog is kept)
            # Chunks until their units fill the request (a chunk's units go in one request).
            sent, texts = _Embedding([], []), list[str]()
            taken = 0
            for chunk_id, text, title in self._embed_backlog:
                if len(texts) >= size:
                    break
                made = units.units(text, title)
                sent.ids.append(chunk_id)
                sent.counts.append(len(made))
                texts += made
                taken += 1
            self._embed_backlog = self._embed_backlog[taken:]
            env = client.send(EMBEDDER, EmbedRequest(texts), timeout=600)
            self._embeds[env.id] = sent

    def _embedded(self, sent: _Embedding, packet: frames.Packet) -> None:
        ids = sent.ids
        if packet.env.status == "error":
            error = packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error without detail")
            if not ids:
                self._probed = False  # ask again with the next batches
            if error.code.fault in _LOST:
                return  # the chunks stay unembedded and go out again with the next batch
            # The model cannot load (or no embedder runs): documents stay keyword-searchable and
            # are embedded once it can, without anyone asking.
            self.embed_error = error.message
            self._embed_retry_at = time.monotonic() + self.policy.embed_retry_s
            log.warning("embedding unavailable (%s); retrying in %.0f s", error.message, self.policy.embed_retry_s)
            return
        body = packet.body()
        assert isinstance(body, EmbedReply)
        if not self._same_vectors(body) or not ids:
            return  # refused (a fallback precision) or the probe: nothing to store
        if body.count != sum(sent.counts) or not packet.buffers:
            log.error("embed reply holds %d vectors for %d units; dropped", body.count, sum(sent.counts))
            return
        matrix = np.frombuffer(frames.buffer_bytes(packet.buffers[0]), dtype=np.float32).reshape(body.count, body.dim)
        if body.dim != self.vectors.ndim and not self.store.vector_ids():
            self.vectors.reset(body.dim)  # first vectors of a (re)configured model: size the index to it
            with self.store.tx() as db:
                self.store.set_meta(db, "vector_dim", str(body.dim))
        if body.dim != self.vectors.ndim:
            self.embed_error = f"the model makes {body.dim}-d vectors; the index holds {self.vectors.ndim}-d"
            self._embed_retry_at = time.monotonic() + self.policy.embed_retry_s
            return
        self.embed_error = None
        ends = np.cumsum(sent.counts)
        spans = zip(ids, sent.counts, ends, strict=True)
        blobs = {chunk_id: units.pack(matrix[end - n : end]) for chunk_id, n, end in spans}
        with self.vectors.arrival(ids):
            kept = self.store.store_vectors(ids, [blobs[i] for i in ids])
            self._wrote()
            keys, rows = units.stack([(k, blobs[k]) for k in kept], body.dim)
            self.vectors.add(keys, rows, hold_at("vectors"))

    def configured_vectors(self) -> tuple[str, str] | None:
        """(model, precision) of the vectors the configuration asks the embedder for, resolved as the
        embedder resolves them; None when the model directory cannot be found (the embedder will say why)."""
        try:
            name = model_files.model_name(model_files.model_dir(self.policy.embed_model_dir or None))
        except model_files.ModelNotFound:
            return None
        torch = self.policy.embed_backend == "torch"  # torch runs the model's own weights: fp32
        return name, onnx_model.precision_label("fp32" if torch else self.policy.embed_quantize)

    def _same_vectors(self, body: EmbedReply) -> bool:
        """Make the index hold only vectors of the model and precision that made ``body``'s: on a change,
        every stored vector is dropped (the chunks and keyword search stay) and all chunks are embedded again;
        searches compare their query vector's model and precision with what the store records, so vectors of
        two never meet. Returns whether ``body``'s vectors may be stored.

        One change is refused: vectors of the configured precision (``[ingest] embed_quantize``) are not
        dropped for another precision of the same model. That is an embedder that fell back (torch makes fp32
        only, when the int8 copy or ONNX Runtime fails): dropping would re-embed the whole index twice, once
        into the fallback and again once ONNX is back. The new chunks wait (keyword search finds them) and
        the status says why; a precision change the configuration asks for still re-embeds."""
        made = (body.model, body.precision or "fp32")
        if made == self.embedded_with:
            return True
        before = self.embedded_with
        holds = bool(len(self.vectors) or self.store.vector_ids())
        wanted = onnx_model.precision_label(self.policy.embed_quantize)
        if before[1] == wanted != made[1] and before[0] == made[0] and holds:
            self.embed_error = (
                f"the embedder makes {made[1]} vectors, not the {wanted} the index holds and [ingest] embed_quantize"
                " asks for (its status says why): new chunks wait for it, and keyword search finds them"
            )
            self._embed_retry_at = time.monotonic() + self.policy.embed_retry_s
            log.warning("embedder makes %s vectors, the index holds %s: kept; retrying later", made[1], wanted)
            return False
        if before != ("", "") and holds:
            # The usearch index first: a search between the two steps finds no vector (and answers from
            # keyword search), never an old vector beside the new record.
            self.vectors.reset(self.vectors.ndim)
            dropped = self.store.drop_vectors(*made, reembedding=model_files.vectors_key(*before))
            self._embed_backlog = []
            log.info(
                "the embedder now makes %s vectors, the index held %s: %d vectors dropped, every chunk is"
                " embedded again",
                model_files.vectors_key(*made),
                model_files.vectors_key(*before),
                dropped,
            )
        else:
            with self.store.tx() as db:
                self.store.set_meta(db, "embed_model", made[0])
                self.store.set_meta(db, "embed_precision", made[1])
        self.embedded_with = made
        return True

    def _maybe_save(self) -> None:
        now = time.monotonic()
        if now < self._next_save:
            return
        self._next_save = now + self.SAVE_EVERY_S
        self._save_vectors()

    def _save_vectors(self) -> None:
        dead = self.store.dead_vectors()
        self.vectors.remove(dead)
        wrote = self.vectors.dirty
        with writing("saving the vector index", self.vectors.path, self.data_dir):
            self.vectors.save()
        if dead:
            self.store.forget_dead(dead)
        if wrote:
            self._wrote()

    def _reconcile_vectors(self) -> None:
        """Bring the usearch file in line with SQLite after whatever ended the last run (and an index embedded
        by another scheme than :mod:`.units` into the re-embedding that replaces its vectors)."""
        if self.store.get_meta("embed_units") != units.VERSION:
            if self.store.vector_ids():
                self.vectors.reset(self.vectors.ndim)
                held = f"{model_files.vectors_key(*self.embedded_with)} chunk"
                dropped = self.store.drop_vectors(*self.embedded_with, reembedding=held)
                log.info("the index held one vector per chunk: %d dropped, every chunk is embedded again", dropped)
            with self.store.tx() as db:
                self.store.set_meta(db, "embed_units", units.VERSION)
        wanted = np.asarray(self.store.vector_ids(), dtype=np.uint64)
        have = self.vectors.keys()
        extra = np.setdiff1d(have, wanted)
        missing = insert_order(np.setdiff1d(wanted, have))
        self.vectors.remove([int(k) for k in extra])
        if self.vectors.damaged is not None:
            self.vector_rebuild = f"vector index damaged ({self.vectors.damaged}): rebuilding from the database"
        elif len(missing) > STORED_BATCH:  # a crash before the last save (the file is saved every 30 s)
            self.vector_rebuild = f"vector index {len(missing)} chunks behind the database: restoring them"
        # Until a chunk's vectors are back its folder does not read as embedded (a lost file of ~55k unit vectors
        # takes ~10 s to fill again, and a search meanwhile sees only part of the index).
        with self.vectors.arrival():
            for start in range(0, len(missing), STORED_BATCH):
                self.vectors.arriving = tuple(int(k) for k in missing[start:])
                stored = self._stored_units(missing[start : start + STORED_BATCH])
                if stored is not None:
                    self.vectors.add(*stored)
        if len(extra) or len(missing):
            log.info("vector index repaired: %d stale keys removed, %d vectors restored", len(extra), len(missing))
        self._save_vectors()
        self.vector_rebuild = self.vectors.damaged = None

    def _full_graph(self) -> None:
        """The vector index's draft graph, outgrown, replaced by a full one of SQLite's vectors (added in a
        shuffled order, as at a repair) and saved. Run when nothing is left to parse or embed: new work waits
        for it (~55k vectors take a few seconds: docs/tuning.md#vector-search)."""
        started = time.monotonic()
        ids = insert_order(np.asarray(self.store.vector_ids(), dtype=np.uint64))
        read = (self._stored_units(ids[start : start + STORED_BATCH]) for start in range(0, len(ids), STORED_BATCH))
        self.vectors.rebuilt(stored for stored in read if stored is not None)
        took = time.monotonic() - started
        log.info("vector index outgrew exact search: graph rebuilt full, %d vectors in %.1f s", len(self.vectors), took)
        self._save_vectors()

    def _stored_units(self, ids: NDArray[np.uint64]) -> tuple[list[int], NDArray[np.float32]] | None:
        """The unit vectors SQLite holds for the chunks ``ids``, as usearch takes them (None: none has any now)."""
        part = self.store.vectors([int(k) for k in ids])
        return units.stack(part, self.vectors.ndim) if part else None

    def _with_languages(self, rows: list[Any]) -> list[Any]:
        """The rows, each with its document's language: detected and recorded here for documents that have
        none (indexed before languages were, or written without one)."""
        texts: dict[int, list[str]] = {}
        for row in rows:
            if row["language"] is None:
                texts.setdefault(int(row["doc_id"]), []).append(row["text"])
        if not texts:
            return rows
        found = {doc_id: languages.detect(parts) for doc_id, parts in texts.items()}
        self.store.set_languages(found)
        return [{**dict(row), "language": found.get(int(row["doc_id"]), row["language"])} for row in rows]

    def refilling(self, why: str | None) -> None:
        """Before the thread starts: the keyword index is being refilled from SQLite for ``why`` (None: it is not)."""
        self.keyword_rebuild = why
        if why is not None:
            self.replay_total = self.replay_left = self.store.journal_size()

    def rebuild_note(self) -> str | None:
        """What is being refilled from SQLite and how far it is, for the status note (None: nothing)."""
        notes = []
        if self.keyword_rebuild is not None:
            done = max(0, self.replay_total - self.replay_left)  # files indexed meanwhile are journaled too
            notes.append(f"{self.keyword_rebuild}: rebuilding from the database, {done}/{self.replay_total} documents")
        if self.vector_rebuild is not None:
            notes.append(f"{self.vector_rebuild}, {len(self.vectors.arriving)} chunks left")
        return "; ".join(notes) or None

    def _apply_journal(self) -> None:
        if not self._journal_dirty:
            return
        now = time.monotonic()
        if self._inflight and now < self._next_commit:
            return  # more parses are about to land: fold them into one commit
        self._next_commit = now + self.COMMIT_EVERY_S
        applied = int(self.store.get_meta("tantivy_seq", "0"))
        seq, doc_ids = self.store.journal_after(applied, self.REPLAY_SLICE)
        if not doc_ids:
            self._journal_dirty = False
            self.keyword_rebuild = None  # nothing was indexed: the empty index is the whole of it
            return
        try:
            rows = self.store.chunks_for_index(doc_ids)
            rows = self._with_languages(rows)
            with writing("the Tantivy commit", self.bm25.path, self.data_dir):
                self.bm25.replace(doc_ids, rows)
                if hold := hold_at("commit"):
                    hold()
                self.bm25.commit()
        except BaseException:
            # Stays dirty: the journal is replayed into a fresh writer on the next try.
            self.bm25.discard()
            raise
        self.store.journal_applied(seq)
        # More than a slice left: the next slice at once (a refill shows its progress between them).
        self._journal_dirty = bool(self.store.journal_after(seq, 1)[1])
        if self._journal_dirty:
            self._next_commit = time.monotonic()
        if self.keyword_rebuild is not None:
            self.replay_left = self.store.journal_size()
            if not self.replay_left:
                log.info("%s: rebuilt from the database, %d documents", self.keyword_rebuild, self.replay_total)
                self.keyword_rebuild = None
        self._wrote()
