"""The parse window: pending documents read and sent to the parser pool, ``parse_window`` at a time, in the
folder's order; image files (OCR) in a lane of their own while other files wait (:data:`OCR_LANE`).

A file is read from one descriptor opened and checked by :mod:`foldermind.workers.userfiles` (a link out of
its Smart Folder is refused) and travels with the request: a parser never opens a path itself. A reply is
written in one SQLite transaction, pages ahead of it as they are read (:mod:`.pages`); a failure goes
through :func:`.retry.decide`, and a file that changed while it was parsed is looked at again instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, ErrorInfo
from foldermind.protocol.messages import ChunkInfo, ParsePartial, ParseReply, ParseRequest
from foldermind.protocol.runtime.config import IngestPolicy
from foldermind.workers import userfiles
from foldermind.workers.indexer.ingest.disk import DiskGuard
from foldermind.workers.indexer.ingest.journal import KeywordJournal
from foldermind.workers.indexer.ingest.pages import PagesRead, PageWriter
from foldermind.workers.indexer.ingest.retry import Next, decide
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.keyword import languages
from foldermind.workers.indexer.storage.lifecycle import Document
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from foldermind.workers.ingest_rules import parse_format, read_with_ocr

log = logging.getLogger("foldermind.indexer.pipeline")

PARSER = "parser"
CONTENT_HEADROOM = 0.9
"""A file sent to a parser (its bytes travel with the request) may fill at most this share of the bus's
message limit."""


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

    def parsed(self) -> tuple[int, int, tuple[int, int]]:
        return self.size, self.mtime_ns, self.ident


OCR_LANE = 1
"""Image files (read with OCR) in flight at once while other files wait: one takes a parser for about a minute on
a busy machine, so two in folder order held both parsers of the default pool while text files waited behind them
(docs/benchmarks/ingest.md)."""


class ParseWindow:
    RETRY_S = 5.0
    """How long documents stay pending when no parser can take them, before they are sent again."""

    def __init__(
        self,
        store: Store,
        vectors: VectorIndex,
        policy: IngestPolicy,
        journal: KeywordJournal,
        disk: DiskGuard,
        hold: Callable[[], None] | None,
    ) -> None:
        self.store, self.vectors, self.policy, self.journal, self.disk = store, vectors, policy, journal, disk
        self._hold = hold
        self.pages = PageWriter(store, vectors)
        self.inflight: dict[str, _Parse] = {}
        self._retry_at = 0.0

    def owns(self, cid: str) -> bool:
        return cid in self.inflight

    def fill(self, client: BusClient) -> None:
        room = self.policy.parse_window - len(self.inflight)
        if room <= 0 or time.monotonic() < self._retry_at:
            return
        for doc in self._next(room):
            if room <= 0:
                break
            read = self._read(client, doc)
            if read is None:
                continue
            st, data = read
            digest = hashlib.sha256(data).hexdigest()
            if digest == doc.sha256 and doc.attempts == 0 and self._has_chunks(doc.id):
                self.store.documents.mark_unchanged(doc.id, st.st_size, st.st_mtime_ns)  # touched, not changed
                self.journal.touched()  # Tantivy's mtime field follows the touch
                continue
            job = _Parse(doc, st.st_size, st.st_mtime_ns, digest, 1, userfiles.identity(st))
            self._send(client, job, data)
            room -= 1

    def _next(self, room: int) -> list[Document]:
        """The documents to send next, in the folder's order (by id), none already in flight; while other files
        wait, image files keep to their lane: at most :data:`OCR_LANE` of them in flight, the rest of the window
        the others'. An image waits only for the images before it; when only images wait, they fill the window."""
        busy = {p.doc.id for p in self.inflight.values()}
        text, ocr = (
            [d for d in self.store.documents.pending(room + len(busy), ocr=lane) if d.id not in busy]
            for lane in (False, True)
        )
        if text:
            ocr = ocr[: max(0, OCR_LANE - sum(read_with_ocr(p.doc.path) for p in self.inflight.values()))]
        return sorted(text + ocr, key=lambda d: d.id)[:room]

    def answered(self, client: BusClient, packet: frames.Packet) -> None:
        """A parser's partial, error or final reply to a parse in flight."""
        if packet.env.status == "partial":
            self._partial(packet)
            return
        job = self.inflight.pop(packet.env.cid)
        if packet.env.status == "error":
            error = packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error without detail")
            self._failed(client, job, error, packet.env.src)
            return
        body = packet.body()
        assert isinstance(body, ParseReply)
        self._store(job, body)

    # ---------------------------------------------------------------------------------------
    # reading and sending

    def _inside(self, real: str) -> bool:
        return self.store.folders.containing(real) is not None

    def _read(
        self, client: BusClient, doc: Document, same: tuple[int, int] | None = None
    ) -> tuple[os.stat_result, bytes] | None:
        """The file's stat and bytes, read from one descriptor opened and checked by :mod:`userfiles` (``same``:
        the file a retry must find again); None when there is nothing to send, its document then forgotten,
        failed with the reason, or queued again."""
        limit = min(self.policy.max_file_bytes, int(client.max_bytes * CONTENT_HEADROOM))
        if self._hold is not None:
            self._hold()
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
            self.store.documents.requeue(doc.id)  # another file since the one parsed: looked at afresh
            return None
        except (FileNotFoundError, NotADirectoryError, userfiles.NotRegular):
            self._forget(doc)
            return None
        except OSError as exc:
            self._fail(doc.id, f"unreadable: {exc.strerror or exc}")
            return None
        if len(data) > limit:  # it grew since its fstat: its event follows
            self.store.documents.requeue(doc.id)
            return None
        return st, data

    def _fail(self, doc_id: int, reason: str) -> None:
        self.store.documents.set_failed(doc_id, reason)
        self.journal.touched()  # its chunks leave Tantivy too

    def _forget(self, doc: Document) -> None:
        """The file is gone (or is no longer a regular file) since it was queued: it leaves the index
        instead of staying behind as a failure of a file that does not exist. A document moved
        meanwhile is not touched: it is parsed again at its new path."""
        current = self.store.documents.get(doc.path)
        if current is not None and current.id == doc.id:
            with self.store.tx() as db:
                self.store.documents.delete(db, [doc.id])
            self.journal.touched()

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
        self.store.documents.set_attempts(job.doc.id, job.attempt)
        job.parts.clear()  # a retry's parts start over
        job.read.written = 0
        env = client.send(job.to, request, (content,), timeout=deadline, attempt=job.attempt)
        self.inflight[env.id] = job

    def _resend(self, client: BusClient, job: _Parse, to: str = PARSER) -> None:
        """Send ``job`` again (to the pool, or to one parser by name), with the bytes read again from the same
        file; one that changed since is parsed again from the start instead."""
        read = self._read(client, job.doc, job.ident)
        if read is None:
            return
        if hashlib.sha256(read[1]).hexdigest() != job.sha256:
            log.info("document %d changed before it was sent again; parsing it again", job.doc.id)
            self.store.documents.requeue(job.doc.id)
            return
        job.to = to
        self._send(client, job, read[1])

    # ---------------------------------------------------------------------------------------
    # replies

    def _partial(self, packet: frames.Packet) -> None:
        """Chunks of a parse in flight, ahead of its reply: written at once when they are pages read
        (:mod:`.pages`)."""
        job = self.inflight.get(packet.env.cid)
        body = packet.body()
        if job is None or not isinstance(body, ParsePartial):
            return
        job.parts.extend(body.chunks)
        if body.pages_read is None or not self.pages.may_write(job.doc.id, job.doc.path, job.read):
            return
        if self._now(job) != job.parsed():
            return  # changed since it was read: its event has queued it again, and the newer version wins
        self.pages.write(job.doc.id, job.read, job.parts, body)
        self.disk.wrote()
        self.journal.touched()

    def _failed(self, client: BusClient, job: _Parse, error: ErrorInfo, src: str) -> None:
        named, job.to = job.to != PARSER, PARSER  # whatever happens next goes to the pool
        decision = decide(error, job.attempt, named, self.policy.parse_deadline_s(job.size))
        if decision.next is Next.TO_SOURCE:
            self._resend(client, job, src)
            return
        if decision.next is Next.AGAIN:
            self._resend(client, job)
            return
        if decision.next is Next.FRESH:
            log.warning("parse of document %d lost its parser (%s); retrying on a fresh one", job.doc.id, error.code)
            job.attempt = 2
            self._resend(client, job)
            return
        if self._now(job) != job.parsed():
            # Gone, or written again while its old content was parsed (a save in progress): its watcher event
            # has already come, so the file is looked at again instead of the failure kept (a file that is gone
            # is then forgotten, one that became a link out of the folder fails with that reason).
            log.info("document %d changed while it was parsed; looking at it again", job.doc.id)
            self.store.documents.requeue(job.doc.id)
            return
        if decision.next is Next.WAIT:
            log.warning("document %d stays pending: %s", job.doc.id, error.code)
            self._retry_at = time.monotonic() + self.RETRY_S
            return
        if not self.pages.failed(job.doc.id, job.doc.path, job.read, decision.reason):
            self._fail(job.doc.id, decision.reason)

    def _now(self, job: _Parse) -> tuple[int, int, tuple[int, int]] | None:
        """(size, mtime, identity) of the file at the job's path now, opened and checked as any read is; None
        when it is gone, or no longer a regular file inside a Smart Folder."""
        try:
            st = userfiles.stat_file(job.doc.path, self._inside)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns, userfiles.identity(st)

    def _store(self, job: _Parse, reply: ParseReply) -> None:
        if self.store.documents.get(job.doc.path) is None:
            return  # deleted or moved while it was being parsed
        now = self._now(job)
        if now is None:
            # Gone, or no longer a file of the folder: nothing is written for it; looked at again, it is
            # forgotten, or failed with the reason.
            self.store.documents.requeue(job.doc.id)
            return
        changed_meanwhile = now != job.parsed()
        chunks = [dict(c) for c in (*job.parts, *reply.chunks)]
        # The deterministic analysis comes later (analyzer.py): the document is marked due as it is written.
        language = languages.detect(str(c["text"]) for c in chunks)
        with self.vectors.arrival():
            with self.store.tx() as db:
                # Pages written as they were read stay (:mod:`.pages`) when they are all still there.
                start = job.read.written if self.store.documents.written_through(job.doc.id, job.read.written) else 0
                ids = self.store.documents.write(
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
            if reused := self.store.embeddings.get(ids):
                self.vectors.add(*embeddings.stack(reused, self.vectors.ndim))
        self.disk.wrote()
        self.journal.touched()
        if changed_meanwhile:
            self.store.documents.requeue(job.doc.id)  # a change arrived during the parse: index the newer content
