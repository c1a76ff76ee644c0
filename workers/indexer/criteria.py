"""Criteria Smart Folders: a saved search that lists, counts and scopes like a folder.

A criteria folder is stored as its criteria, never as a list of files: words (``query``), file types, a
modification window and a directory (``within``). Which documents it holds is worked out at each use by
:mod:`.criteria_scope`, from the index as it is at that moment, so a file that is written, moved, deleted or
that ages out of a relative window (``P30D``, :mod:`.filters`) leaves or joins the folder with nothing to
update here. The table sits in the index's SQLite database beside ``folders`` (the indexer is its only
writer, like every table there) but apart from it: a criteria folder has no path, no documents of its own and
nothing for the watcher to watch, and every reader of ``folders`` (the watcher, progress, reconcile) means
path folders.

Validation reuses the search filters' rules (:func:`.filters.parse`): a criteria folder accepts exactly what
a search filter accepts, and a value that would fail a search is refused when the folder is saved.
``within`` must be a registered Smart Folder or a directory inside one (``invalid_path`` otherwise): a
criteria folder never reaches files the index does not hold. Without it the folder spans every registered
folder, including ones registered later.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from wcmatch import glob as wcglob

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import CriteriaAddRequest
from foldermind.workers.indexer.search import filters
from foldermind.workers.indexer.search import query as operators
from foldermind.workers.indexer.storage.keyword.terms import has_searchable_text
from foldermind.workers.indexer.storage.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS criteria_folders (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    query TEXT NOT NULL DEFAULT '',
    file_types TEXT NOT NULL DEFAULT '[]',   -- JSON list of extensions
    modified_after TEXT NOT NULL DEFAULT '', -- as given: a duration is read again at each use
    modified_before TEXT NOT NULL DEFAULT '',
    within TEXT NOT NULL DEFAULT '',          -- an absolute directory; '' = every registered folder
    added_at REAL NOT NULL
);
"""
MAX_NAME = 200
MAX_QUERY = 1000
MAX_DESCRIPTION = 2000


@dataclass(frozen=True, slots=True)
class Criteria:
    id: str
    name: str
    description: str
    query: str
    file_types: tuple[str, ...]
    modified_after: str
    modified_before: str
    within: str
    added_at: float

    def filters(self) -> filters.Filters:
        """The criteria other than the words, as a search filter read now (a duration counts back from now)."""
        glob = wcglob.escape(self.within.rstrip("/")) + "/**" if self.within else None
        # The roots are only asked about an absolute glob, and ``within`` was checked when the folder was saved.
        return filters.parse(list(self.file_types), glob, self.modified_after, self.modified_before, lambda: ["/"])


def validate(body: CriteriaAddRequest, folder_of: Callable[[str], str | None]) -> Criteria:
    """A new criteria folder from a request, or the typed error of its first bad field. ``folder_of(path)``: the
    registered Smart Folder holding ``path``, if any."""
    name = body.name.strip() if isinstance(body.name, str) else ""
    if not name or len(name) > MAX_NAME:
        raise JobError(ErrorCode.BAD_REQUEST, f"a criteria folder needs a name of 1..{MAX_NAME} characters")
    query = body.query.strip() if isinstance(body.query, str) else ""
    if len(query) > MAX_QUERY or (query and not has_searchable_text(operators.parse(query).text)):
        raise JobError(ErrorCode.INVALID_QUERY, f"query must be up to {MAX_QUERY} characters holding a word")
    within = _within(body.within, folder_of)
    wanted = filters.parse(body.file_types, None, body.modified_after, body.modified_before, lambda: [])
    if not (query or within or wanted.active):
        raise JobError(
            ErrorCode.INVALID_FILTER, "a criteria folder needs a criterion: a query, types, a date or a folder"
        )
    saved = Criteria(
        str(uuid.uuid4()),
        name,
        (body.description or "")[:MAX_DESCRIPTION],
        query,
        tuple(sorted(wanted.types)),
        (body.modified_after or "").strip(),
        (body.modified_before or "").strip(),
        within,
        time.time(),
    )
    saved.filters()  # read as it will be at each use: a ``within`` too long for a glob fails now, not later
    return saved


def _within(raw: object, folder_of: Callable[[str], str | None]) -> str:
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str) or "\x00" in raw or not os.path.isabs(raw) or ".." in raw.split(os.sep):
        raise JobError(ErrorCode.INVALID_PATH, f"within must be an absolute folder path: {raw!r}")
    path = os.path.realpath(raw)
    if not os.path.isdir(path):
        raise JobError(ErrorCode.INVALID_PATH, f"within is not a folder: {raw}")
    if folder_of(path) is None:
        raise JobError(ErrorCode.INVALID_PATH, f"within lies in no registered Smart Folder: {raw}")
    return path


class CriteriaTable:
    """The saved criteria folders (the indexer's serving thread reads and writes them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.db.executescript(SCHEMA)

    def add(self, c: Criteria) -> None:
        try:
            with self.store.tx(durable=True) as db:
                db.execute(
                    "INSERT INTO criteria_folders(id, name, description, query, file_types, modified_after, "
                    "modified_before, within, added_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        c.id,
                        c.name,
                        c.description,
                        c.query,
                        json.dumps(list(c.file_types)),
                        c.modified_after,
                        c.modified_before,
                        c.within,
                        c.added_at,
                    ),
                )
        except sqlite3.IntegrityError as exc:  # the name's UNIQUE: checked by SQLite, so two adds cannot race
            raise JobError(ErrorCode.FOLDER_OVERLAP, f"a criteria folder named {c.name!r} exists") from exc

    def all(self) -> list[Criteria]:
        rows = self.store.db.execute("SELECT * FROM criteria_folders ORDER BY added_at").fetchall()
        return [
            Criteria(
                r["id"],
                r["name"],
                r["description"],
                r["query"],
                tuple(json.loads(r["file_types"])),
                r["modified_after"],
                r["modified_before"],
                r["within"],
                r["added_at"],
            )
            for r in rows
        ]

    def find(self, id_or_name: str) -> Criteria | None:
        return next((c for c in self.all() if id_or_name in (c.id, c.name)), None)

    def within(self, folder: str) -> list[Criteria]:
        """The criteria folders whose ``within`` lies in the directory ``folder``."""
        prefix = folder.rstrip("/") + "/"
        return [c for c in self.all() if c.within and (c.within == folder or c.within.startswith(prefix))]

    def remove(self, ids: list[str]) -> None:
        with self.store.tx(durable=True) as db:
            db.executemany("DELETE FROM criteria_folders WHERE id = ?", [(i,) for i in ids])
