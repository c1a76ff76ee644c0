"""SQLite's journal applied to Tantivy: one commit for everything written since the last one.

Every write to a document's chunks journals its id in the same SQLite transaction; this part replays the
journal into the keyword index by slices and records how far it got (``tantivy_seq``), so a crash between
the two only replays again. A keyword index refilled from SQLite (damaged, or of older fields) is this
same replay from the start, and shows its progress by slices.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foldermind.workers.indexer.storage.keyword import languages
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.storage import writing
from foldermind.workers.indexer.storage.store import Store

log = logging.getLogger("foldermind.indexer.pipeline")


class KeywordJournal:
    COMMIT_EVERY_S = 0.5
    """During bulk indexing, Tantivy commits at most this often (a commit per file would cost more than its
    parse); a lone edit is committed at once."""
    REPLAY_SLICE = 1000
    """Journal rows one Tantivy commit takes."""

    def __init__(self, store: Store, bm25: KeywordIndex, data_dir: Path, hold: Callable[[], None] | None) -> None:
        self.store, self.bm25, self.data_dir, self._hold = store, bm25, data_dir, hold
        self.dirty = True  # replay whatever a crash left unapplied, first thing
        self.next_commit = 0.0
        self.rebuild: str | None = None
        """Why the keyword index is being refilled from SQLite (set before the thread starts), until it is."""
        self.total = self.left = 0
        """Documents the refill journaled, and those it has yet to replay."""

    def touched(self) -> None:
        """SQLite's chunks changed: the next step commits them to Tantivy."""
        self.dirty = True

    def refilling(self, why: str | None) -> None:
        """Before the thread starts: the keyword index is being refilled from SQLite for ``why`` (None: it is not)."""
        self.rebuild = why
        if why is not None:
            self.total = self.left = self.store.journal.size()

    def note(self) -> str | None:
        if self.rebuild is None:
            return None
        done = max(0, self.total - self.left)  # files indexed meanwhile are journaled too
        return f"{self.rebuild}: rebuilding from the database, {done}/{self.total} documents"

    def wait_ms(self) -> int | None:
        """How long the thread may sleep before a commit is due (None: none is)."""
        if not self.dirty:
            return None
        return max(1, int((self.next_commit - time.monotonic()) * 1000) + 1)

    def apply(self, parsing: bool) -> bool:
        """Commit the next slice of the journal; ``parsing``: parses are in flight, whose results a commit
        made a moment later would fold in. Returns whether anything reached Tantivy."""
        if not self.dirty:
            return False
        now = time.monotonic()
        if parsing and now < self.next_commit:
            return False
        self.next_commit = now + self.COMMIT_EVERY_S
        applied = int(self.store.get_meta("tantivy_seq", "0"))
        seq, doc_ids = self.store.journal.after(applied, self.REPLAY_SLICE)
        if not doc_ids:
            self.dirty = False
            self.rebuild = None  # nothing was indexed: the empty index is the whole of it
            return False
        try:
            rows = self._with_languages(self.store.journal.chunks_for_index(doc_ids))
            with writing("the Tantivy commit", self.bm25.path, self.data_dir):
                self.bm25.replace(doc_ids, rows)
                if self._hold is not None:
                    self._hold()
                self.bm25.commit()
        except BaseException:
            # Stays dirty: the journal is replayed into a fresh writer on the next try.
            self.bm25.discard()
            raise
        self.store.journal.applied(seq)
        # More than a slice left: the next slice at once (a refill shows its progress between them).
        self.dirty = bool(self.store.journal.after(seq, 1)[1])
        if self.dirty:
            self.next_commit = time.monotonic()
        if self.rebuild is not None:
            self.left = self.store.journal.size()
            if not self.left:
                log.info("%s: rebuilt from the database, %d documents", self.rebuild, self.total)
                self.rebuild = None
        return True

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
        self.store.documents.set_languages(found)
        return [{**dict(row), "language": found.get(int(row["doc_id"]), row["language"])} for row in rows]
