"""The registered Smart Folders (``folders``): adding one unless it overlaps another, finding, removing, and
what each holds (its documents' counts, its last change, the files no parser reads in its last scan)."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.runtime import folder_names
from foldermind.protocol.runtime.folder_names import Known
from foldermind.workers.indexer.storage.database import STATUS_COUNTS, Table


@dataclass(frozen=True, slots=True)
class Folder:
    id: str
    name: str
    description: str
    path: str
    added_at: float
    last_organized_at: float | None


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


class Folders(Table):
    def add(self, path: str, name: str, description: str, refusal: Callable[[str], str] = lambda path: "") -> Folder:
        """Register ``path`` unless it overlaps a registered folder or ``refusal`` says why not ('' when it may)."""
        with self.database.tx(durable=True) as db:
            for row in db.execute("SELECT id, path FROM folders"):
                if _inside(path, row["path"]) or _inside(row["path"], path):
                    relation = (
                        "already registered"
                        if path == row["path"]
                        else ("inside" if _inside(path, row["path"]) else "around")
                    )
                    raise JobError(ErrorCode.FOLDER_OVERLAP, f"{path} is {relation} the Smart Folder {row['path']}")
            if reason := refusal(path):
                raise JobError(ErrorCode.INVALID_PATH, reason)
            folder = Folder(str(uuid.uuid4()), name or Path(path).name or path, description, path, time.time(), None)
            db.execute(
                "INSERT INTO folders(id, name, description, path, added_at) VALUES(?, ?, ?, ?, ?)",
                (folder.id, folder.name, folder.description, folder.path, folder.added_at),
            )
        return folder

    def all(self) -> list[Folder]:
        rows = self.db.execute("SELECT * FROM folders ORDER BY added_at").fetchall()
        return [
            Folder(r["id"], r["name"], r["description"], r["path"], r["added_at"], r["last_organized_at"]) for r in rows
        ]

    def find(self, id_or_path: str, sees: Callable[[str], bool] | None = None) -> Folder:
        """The folder by its id, its path, or its name when no other folder has that name
        (:func:`~foldermind.protocol.runtime.folder_names.choose`, the command line's rule too); ``sees``: the folder
        ids a client key may see, the only ones its names are looked up among (so a refusal says nothing of the
        others)."""
        folders = self.all()
        try:
            return folders[folder_names.choose([Known(f.id, f.name, f.path) for f in folders], id_or_path, sees=sees)]
        except folder_names.NotOneFolder as exc:
            raise JobError(ErrorCode.UNKNOWN_FOLDER, str(exc)) from None

    def containing(self, path: str) -> Folder | None:
        """The folder ``path`` is in (or is)."""
        for folder in self.all():
            if _inside(path, folder.path):
                return folder
        return None

    def remove(self, folder_id: str) -> list[int]:
        """Delete the folder and its documents; returns the removed document ids (journaled)."""
        with self.database.tx(durable=True) as db:
            doc_ids = [r[0] for r in db.execute("SELECT id FROM documents WHERE folder_id = ?", (folder_id,))]
            db.executemany("INSERT INTO journal(doc_id) VALUES(?)", [(d,) for d in doc_ids])
            db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))
            db.execute(
                "DELETE FROM meta WHERE key IN (?, ?)", (f"unsupported:{folder_id}", f"unsupported_files:{folder_id}")
            )
        return doc_ids

    def progress(self, folder_id: str) -> dict[str, int]:
        db = self.db
        counts = {"files_total": 0, "files_indexed": 0, "files_failed": 0, "files_skipped": 0, "files_pending": 0}
        for status, n in db.execute(
            "SELECT status, COUNT(*) FROM documents WHERE folder_id = ? GROUP BY status", (folder_id,)
        ):
            counts["files_total"] += n
            key = STATUS_COUNTS.get(status)
            if key:
                counts[key] += n
        # Its chunks, and how many of them are embedded, are Embeddings.chunk_counts' (one snapshot for both).
        # Indexed in SQLite, not yet in Tantivy: the journal row goes when the keyword index commits.
        behind = db.execute(
            "SELECT COUNT(DISTINCT j.doc_id) FROM journal j JOIN documents d ON d.id = j.doc_id WHERE d.folder_id = ?",
            (folder_id,),
        ).fetchone()
        counts["files_not_yet_searchable"] = int(behind[0])
        return counts

    def changed_at(self, folder_id: str) -> float | None:
        """When a document of the folder was last recorded, indexed, failed or moved (a deletion lowers the
        count instead)."""
        row = self.db.execute("SELECT MAX(updated_at) FROM documents WHERE folder_id = ?", (folder_id,)).fetchone()
        return None if row[0] is None else float(row[0])

    def set_unsupported(
        self, db: sqlite3.Connection, folder_id: str, counts: Mapping[str, int], files: Sequence[str] = ()
    ) -> None:
        """Keep the folder's last scan's count of files no parser reads, by suffix, and the first of them."""
        self.database.set_meta(db, f"unsupported:{folder_id}", json.dumps(dict(counts), sort_keys=True))
        self.database.set_meta(db, f"unsupported_files:{folder_id}", json.dumps(list(files)))

    def unsupported_files(self, folder_id: str | None = None) -> list[str]:
        """The first files no parser reads, of each folder's last scan (that one folder's with ``folder_id``)."""
        ids = [folder.id for folder in self.all()] if folder_id is None else [folder_id]
        return [str(p) for fid in ids for p in json.loads(self.database.get_meta(f"unsupported_files:{fid}", "[]"))]

    def unsupported(self, folder_id: str | None = None) -> dict[str, int]:
        """The files no parser reads, by suffix, over the registered folders' last scans (that one folder's
        with ``folder_id``)."""
        out: dict[str, int] = {}
        ids = [folder.id for folder in self.all()] if folder_id is None else [folder_id]
        for fid in ids:
            for suffix, n in json.loads(self.database.get_meta(f"unsupported:{fid}", "{}")).items():
                out[suffix] = out.get(suffix, 0) + int(n)
        return dict(sorted(out.items(), key=lambda item: (-item[1], item[0])))
