"""The indexes checked against SQLite at start, and a damaged SQLite file told apart from other failures.

SQLite is the source of truth; the Tantivy folder and the usearch file are derived from it. At start the keyword
index is opened and its chunks counted and their ids summed against SQLite's indexed chunks (documents the journal
has yet to apply, and those waiting to be parsed, left out on both sides). One that does not open (a garbled
``meta.json``, a segment file missing or cut short) or disagrees (the folder removed, segments from another state)
is emptied and every indexed document journaled again, so the ingest thread's replay refills it; searches find
what it has replayed so far and the status note counts the documents left. The usearch file is compared key by
key with the chunks that have vectors by the ingest thread (:meth:`.ingest.upkeep.VectorUpkeep.reconcile`).

A damaged database (a bad header: "file is not a database"; overwritten pages: "database disk image is
malformed") cannot be rebuilt from anything, so it is named, with its fix (``foldermind repair``), once: the
indexer stops writing and answers every request with ``database_damaged``.
"""

from __future__ import annotations

import functools
import logging
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.framework.base import Handler, Request, Result
from foldermind.workers.indexer.storage.keyword.bm25 import SCHEMA_VERSION, KeywordIndex
from foldermind.workers.indexer.storage.storage import causes
from foldermind.workers.indexer.storage.store import Store

log = logging.getLogger("foldermind.indexer")

_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_DAMAGE_WORDS = ("database disk image is malformed", "file is not a database")


def is_database_damage(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is SQLite finding its file damaged, not busy or full."""
    for seen in causes(exc):
        if isinstance(seen, sqlite3.DatabaseError):
            code = getattr(seen, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
                return True
            if any(words in str(seen) for words in _DAMAGE_WORDS):
                return True
    return False


def damage_message(path: Path, exc: BaseException) -> str:
    """The one line a user reads for a damaged database: what, where, and the fix."""
    return f"database damaged ({exc}): stop foldermind and run `foldermind repair` (it keeps {path} aside)"


class Damage:
    """Whether the database at ``path`` was found damaged (at start, by a request or by the ingest thread, which
    share this): :attr:`line` says so, with the fix, once found; it is logged once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.line: str | None = None

    def found(self, exc: BaseException, then: str) -> str:
        """Record the damage ``exc`` shows (the first one only), logging it with what ``then`` happens."""
        if self.line is None:
            self.line = damage_message(self.path, exc)
            log.error("%s; %s", self.line, then)
        return self.line

    def guard(self, handler: Handler) -> Handler:
        """``handler``, answering ``database_damaged`` once the database is found damaged (not ``internal``,
        and one log line, not a traceback per request)."""

        @functools.wraps(handler)
        def guarded(req: Request[Any]) -> Result:
            if self.line is not None:
                raise JobError(ErrorCode.DATABASE_DAMAGED, self.line)
            try:
                return handler(req)
            except Exception as exc:
                if not is_database_damage(exc):
                    raise
                raise JobError(ErrorCode.DATABASE_DAMAGED, self.found(exc, "nothing more is written")) from None

        return guarded


def outdated_keyword_index(store: Store, path: Path) -> bool:
    """A Tantivy index of other fields (an older :data:`~.bm25.SCHEMA_VERSION`, or none yet) is emptied and built
    again from SQLite by the ingest thread's journal replay; searches find what it has replayed so far. A crash
    before the journal is written leaves the old version recorded: the next start empties it again. Returns
    whether documents are to be replayed."""
    if store.get_meta("tantivy_schema") == str(SCHEMA_VERSION):
        return False
    shutil.rmtree(path, ignore_errors=True)
    n = store.journal.rebuild_keyword_index(SCHEMA_VERSION)
    if n:
        log.info("the keyword index is built again from %d documents: this version's fields differ", n)
    return n > 0


def _why_unopened(exc: BaseException) -> str:
    """Tantivy's long error, as the few words a status line has room for."""
    text = str(exc)
    if "meta.json" in text or "Meta file" in text:
        return "its meta.json is unreadable"
    if "FileDoesNotExist" in text:
        return "a segment file is missing"
    if "magic" in text or "corrupt" in text.lower():
        return "a segment file is damaged"
    return f"it does not open ({type(exc).__name__})"


def disagreement(bm25: KeywordIndex, store: Store) -> str | None:
    """How the keyword index differs from what SQLite says it holds, or None when they agree."""
    journaled, want_count, want_sum = store.journal.keyword_census()
    have_count, have_sum = bm25.census(journaled)
    if have_count != want_count:
        return f"it holds {have_count} chunks, the database {want_count}"
    if not math.isclose(have_sum, want_sum, rel_tol=1e-12, abs_tol=0.5):
        return f"its {have_count} chunk ids are not the database's"
    return None


def open_keyword_index(path: Path, store: Store, policy: SearchPolicy) -> tuple[KeywordIndex, str | None]:
    """The keyword index at ``path``, checked against ``store``; rebuilt from it (emptied, every indexed document
    journaled) when it does not open or disagrees. Returns the index and why it is being rebuilt (None: it is
    sound)."""
    bm25: KeywordIndex | None = None
    try:
        bm25 = KeywordIndex(path, proximity=policy.keyword_proximity)
        why = disagreement(bm25, store)
    except (ValueError, OSError, RuntimeError) as exc:  # what tantivy raises for a file it cannot read
        log.warning("keyword index unreadable (%s)", str(exc)[:300])
        why = _why_unopened(exc)
    if why is None and bm25 is not None:
        return bm25, None
    if bm25 is not None:
        bm25.close()
        del bm25
    log.warning("keyword index damaged (%s): rebuilding from the database", why)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:  # a file (or a link) where the folder should be
        path.unlink(missing_ok=True)
    fresh = KeywordIndex(path, proximity=policy.keyword_proximity)
    n = store.journal.rebuild_keyword_index(SCHEMA_VERSION)
    log.info("keyword index: %d documents to replay from the database", n)
    return fresh, f"keyword index damaged ({why})"
