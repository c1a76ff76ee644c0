"""What each MCP client did: a row per tool call or resource read, in ``<data_dir>/activity.sqlite``.

A row holds the time, the client key's name (``owner`` for the owner's token), the tool (or ``resources/read``),
``ok`` or the error code, the paths of the documents it returned or read, how many, and how long it took; the
call's arguments (queries, questions) only with ``[activity] record_queries = true``. The front door writes
(:class:`ActivityLog`, one writer thread that drains its queue every ``FLUSH_S``, so no call waits on the disk
or wakes a thread) and prunes to ``keep_days`` and
``max_rows``; ``foldermind activity`` reads.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from foldermind.protocol.runtime.config import ActivityPolicy

log = logging.getLogger("foldermind.activity")

FILE = "activity.sqlite"
MAX_PATHS = 100
"""Paths kept per row (a search returns at most 50 results, a chat at most 20 files)."""
PRUNE_EVERY = 500
FLUSH_S = 0.25
"""How often the writer takes what the calls queued: one transaction per batch, and a row is readable within it."""
MAX_QUEUED = 10_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS activity (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    client TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    documents TEXT NOT NULL,
    count INTEGER NOT NULL,
    duration_ms REAL NOT NULL,
    arguments TEXT
);
CREATE INDEX IF NOT EXISTS activity_at ON activity(at);
"""


@dataclass(slots=True)
class Row:
    client: str
    tool: str
    outcome: str
    documents: list[str]
    duration_ms: float
    at: float = field(default_factory=time.time)
    arguments: dict[str, Any] | None = None


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(_SCHEMA)
    return db


class ActivityLog:
    """The front door's writer: :meth:`record` queues (no lock, no wake-up), a thread writes and prunes."""

    def __init__(self, data_dir: Path, policy: ActivityPolicy) -> None:
        self.path = data_dir / FILE
        self.policy = policy
        self._rows: deque[Row] = deque()
        self._written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="activity", daemon=True)
        self._thread.start()

    def record(self, row: Row) -> None:
        if not self.policy.record_queries:
            row.arguments = None
        if len(self._rows) >= MAX_QUEUED:
            log.warning("the activity log falls behind; a row was dropped")
            return
        self._rows.append(row)  # atomic; the writer takes it within FLUSH_S

    def close(self) -> None:
        """Write what is queued, then stop the writer."""
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        db = connect(self.path)
        try:
            stop = False
            while not stop:
                stop = self._stop.wait(FLUSH_S)
                batch: list[Row] = []
                while self._rows:  # what queued up meanwhile goes in one transaction
                    batch.append(self._rows.popleft())
                if batch:
                    try:
                        self._write(db, batch)
                    except sqlite3.Error as exc:
                        log.warning("activity rows not written (%s)", type(exc).__name__)
        finally:
            db.close()

    def _write(self, db: sqlite3.Connection, rows: list[Row]) -> None:
        with db:
            db.executemany(
                "INSERT INTO activity(at, client, tool, outcome, documents, count, duration_ms, arguments)"
                " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.at,
                        r.client,
                        r.tool,
                        r.outcome,
                        json.dumps(r.documents[:MAX_PATHS], ensure_ascii=False),
                        len(r.documents),
                        round(r.duration_ms, 3),
                        json.dumps(r.arguments, ensure_ascii=False) if r.arguments is not None else None,
                    )
                    for r in rows
                ],
            )
        before = self._written // PRUNE_EVERY
        self._written += len(rows)
        if self._written // PRUNE_EVERY != before or self._written == len(rows):
            prune(db, self.policy)


def prune(db: sqlite3.Connection, policy: ActivityPolicy, now: float | None = None) -> None:
    """Rows older than ``keep_days``, then the oldest beyond ``max_rows``."""
    cutoff = (now or time.time()) - policy.keep_days * 86400
    with db:
        db.execute("DELETE FROM activity WHERE at < ?", (cutoff,))
        db.execute(
            "DELETE FROM activity WHERE id <= (SELECT id FROM activity ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (policy.max_rows,),
        )


def read(
    data_dir: Path, client: str | None = None, since: float | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """The latest rows (oldest first), of one client and since a time when given."""
    path = data_dir / FILE
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    try:
        if not _has_table(db):
            return []
        rows = db.execute(
            "SELECT * FROM (SELECT * FROM activity WHERE (? IS NULL OR client = ?) AND (? IS NULL OR at >= ?)"
            " ORDER BY id DESC LIMIT ?) ORDER BY id",
            (client, client, since, since, limit),
        ).fetchall()
    finally:
        db.close()
    out = []
    for r in rows:
        item = dict(r)
        item["documents"] = json.loads(item["documents"])
        item["arguments"] = json.loads(item["arguments"]) if item["arguments"] else None
        out.append(item)
    return out


_AGO = re.compile(r"(\d+)([smhd])")
SINCE_HELP = "an ISO date or time (UTC unless it says), or an age such as 30m, 12h, 7d"


def since_time(raw: str, now: float | None = None) -> float:
    """The moment ``raw`` names (:data:`SINCE_HELP`), as epoch seconds; ValueError when it names none."""
    text = raw.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[ago.group(2)]
        return (time.time() if now is None else now) - timedelta(**{unit: int(ago.group(1))}).total_seconds()
    moment = datetime.fromisoformat(text)  # ValueError when it is no date
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def last_used(data_dir: Path) -> dict[str, float]:
    """When each client last called a tool or read a resource."""
    path = data_dir / FILE
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        if not _has_table(db):
            return {}
        return {str(c): float(t) for c, t in db.execute("SELECT client, MAX(at) FROM activity GROUP BY client")}
    finally:
        db.close()


def _has_table(db: sqlite3.Connection) -> bool:
    """Whether the writer has made the table yet (it makes the file first)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'activity'").fetchone() is not None
