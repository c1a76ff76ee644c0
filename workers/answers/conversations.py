"""A conversation's turns kept in the home's ``data/conversations.sqlite``, so a follow-up keeps its subject after its
front door (or console) restarts or is killed.

The process that answers owns its conversations, as the front door owns its activity table and the console its
sign-ins: one row per conversation, keyed as :class:`.engine.Sessions` keys it (``mcp:<client key>:<id>``,
``console::<id>``), with its latest turns (question and answer, at most :data:`.engine.HISTORY_TURNS`) and the
wall-clock time of its last turn. A turn is written before its answer is returned (WAL, ``synchronous=NORMAL``: a
process killed -9 loses nothing it committed), read back when a process meets a conversation it does not hold. A
conversation ends ``[llm] session_ttl_s`` after its last turn, counted across restarts, and is deleted (its text
overwritten) at the next turn or start; beyond ``max_sessions`` a prefix's oldest go. The file is private to the
user (0600), like the index it quotes. A store that cannot be opened or written leaves conversations in memory only,
with a warning that names the error, never a question or an answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from foldermind.protocol.messages import ChatTurn
from foldermind.protocol.runtime.private_sqlite import open_private

log = logging.getLogger("foldermind.answers")

FILE = "conversations.sqlite"
WARN_EVERY_S = 60.0
"""A store failing on every turn is one warning a minute."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    prefix TEXT NOT NULL,
    used REAL NOT NULL,
    turns TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_used ON conversations(prefix, used);
"""


class Conversations:
    """The turns of one caller kind's conversations (``prefix``) in SQLite at ``path``; None keeps nothing."""

    def __init__(
        self,
        path: Path | None,
        prefix: str,
        ttl_s: float,
        max_kept: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.prefix, self.ttl_s, self.max_kept, self.clock = prefix, ttl_s, max_kept, clock
        self._lock = threading.Lock()
        self._warned = -WARN_EVERY_S
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = self._open(path)

    def _open(self, path: Path) -> sqlite3.Connection | None:
        try:
            db = open_private(path)
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA secure_delete=ON")  # an ended conversation's text is overwritten, not left in free pages
            db.executescript(_SCHEMA)
            db.execute("DELETE FROM conversations WHERE prefix = ? AND used < ?", (self.prefix, self._cutoff()))
        except (OSError, sqlite3.Error) as exc:
            log.warning("conversations kept in memory only: %s cannot be used (%s)", path, type(exc).__name__)
            return None
        return db

    def load(self, key: str) -> list[ChatTurn]:
        """The turns of the live conversation ``key`` (none when it is unknown or ended)."""
        rows = self._run(("SELECT turns FROM conversations WHERE key = ? AND used >= ?", (key, self._cutoff())))
        try:
            turns = json.loads(str(rows[0][0])) if rows else []
            return [{"question": str(t["question"]), "answer": str(t["answer"])} for t in turns]
        except (ValueError, TypeError, KeyError):
            return []

    def save(self, key: str, turns: list[ChatTurn]) -> None:
        """Keep ``turns`` as the conversation's and end those past their time or beyond the bound: one transaction."""
        self._run(
            (
                "INSERT INTO conversations (key, prefix, used, turns) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET used = excluded.used, turns = excluded.turns",
                (key, self.prefix, self.clock(), json.dumps(turns, ensure_ascii=False)),
            ),
            ("DELETE FROM conversations WHERE prefix = ? AND used < ?", (self.prefix, self._cutoff())),
            (  # older than the max_kept-th latest, found by walking the index (NOT IN sorts the whole prefix)
                "DELETE FROM conversations WHERE prefix = ? AND used <"
                " (SELECT used FROM conversations WHERE prefix = ? ORDER BY used DESC LIMIT 1 OFFSET ?)",
                (self.prefix, self.prefix, self.max_kept - 1),
            ),
        )

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None

    def _cutoff(self) -> float:
        return self.clock() - self.ttl_s

    def _run(self, *statements: tuple[str, tuple[object, ...]]) -> list[tuple[object, ...]]:
        """One statement's rows, or several statements in one transaction; a failure is no rows and a warning (at
        most one a minute), and the next call tries again."""
        with self._lock:
            if self._db is None:
                return []
            try:
                if len(statements) == 1:
                    return self._db.execute(*statements[0]).fetchall()
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for sql, args in statements:
                        self._db.execute(sql, args)
                    self._db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise
                return []
            except sqlite3.Error as exc:
                now = time.monotonic()
                if now - self._warned >= WARN_EVERY_S:
                    self._warned = now
                    log.warning("a conversation's turns were not read or kept (%s)", type(exc).__name__)
                return []
