"""Applying the watcher's file events (``changes.request``) to the store: what a created, modified, deleted or
moved path means for the documents the index holds.

An event only records what must happen (a document marked pending, moved, skipped or deleted) in the caller's
transaction; the pipeline does the parsing and embedding later. Events can arrive out of order (a batch re-sent
after the indexer was lost goes after newer ones), so each is checked against the file as it is now: opened
and checked as every read of a user's file is (:mod:`foldermind.workers.userfiles`), so a file swapped for a
link out of every Smart Folder since its event is recorded as skipped with that reason, never queued.
"""

from __future__ import annotations

import os
import sqlite3

from foldermind.workers import userfiles
from foldermind.workers.indexer.storage.store import Store


def apply(store: Store, db: sqlite3.Connection, kind: str, path: str, dest: str | None, max_file_bytes: int) -> int:
    """Apply one event; returns how many documents it touched (0 for a path outside every Smart Folder)."""
    if kind == "moved" and dest:
        target = store.folders.containing(dest)
        if target is None:  # moved out of every Smart Folder
            return apply(store, db, "deleted", path, None, max_file_bytes)
        if _move(store, db, path, dest, target.id):
            return 1
        # A directory moved: every document inside it moves along.
        prefix = path.rstrip("/") + "/"
        moved = sum(
            _move(store, db, old, dest.rstrip("/") + "/" + old[len(prefix) :], target.id)
            for old in store.documents.paths_under(db, path)
        )
        return moved or apply(store, db, "created", dest, None, max_file_bytes)
    if kind == "deleted":
        ids = store.documents.ids_at_or_under(db, path)
        store.documents.delete(db, ids)
        return len(ids)
    folder = store.folders.containing(path)
    if folder is None:
        return 0
    try:
        st = _stat(store, path)
    except userfiles.Outside:
        store.documents.mark_skipped(db, folder.id, path, userfiles.LINK_OUTSIDE)
        return 1
    except OSError:
        return apply(store, db, "deleted", path, None, max_file_bytes)
    doc = store.documents.get(path)
    if st.st_size > max_file_bytes:
        reason = f"file too large ({st.st_size} bytes > {max_file_bytes})"  # as a reconcile says
        store.documents.mark_skipped(db, folder.id, path, reason)
    elif doc is None or (doc.size, doc.mtime_ns) != (st.st_size, st.st_mtime_ns) or doc.status != "indexed":
        store.documents.mark_pending(db, folder.id, path, st.st_size, st.st_mtime_ns)
    return 1


def _move(store: Store, db: sqlite3.Connection, old: str, new: str, folder_id: str) -> bool:
    """Point the document at ``old`` to ``new`` (False if unknown). When the file now at ``new`` is not what
    was indexed, it is queued again: a "modified" applied before the move would otherwise be overwritten by
    the moved document's old chunks."""
    if not store.documents.move(db, old, new, folder_id):
        return False
    doc = store.documents.get(new)
    try:
        st = _stat(store, new)
    except userfiles.Outside:
        store.documents.mark_skipped(db, folder_id, new, userfiles.LINK_OUTSIDE)
        return True
    except OSError:
        return True  # gone again: its delete event follows
    if doc is not None and (doc.size, doc.mtime_ns) != (st.st_size, st.st_mtime_ns):
        store.documents.mark_pending(db, folder_id, new, st.st_size, st.st_mtime_ns)
    return True


def _stat(store: Store, path: str) -> os.stat_result:
    return userfiles.stat_file(path, lambda real: store.folders.containing(real) is not None)
