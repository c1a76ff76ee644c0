"""SQLite, the indexer's source of truth: folders, documents, chunks (with their vectors) and a
journal of document changes not yet applied to the Tantivy index.

The Tantivy index and the usearch file are derived from this database and repaired from it after
a crash: every document write is one SQLite transaction that also appends to ``journal``; the
journal is replayed into Tantivy until a Tantivy commit covers it (``meta.tantivy_seq``), and the
usearch keys are compared with the chunks that have vectors. So a crash anywhere loses nothing and
indexes nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foldermind.protocol.errors import ErrorCode, JobError

SCHEMA = """
CREATE TABLE IF NOT EXISTS folders (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL UNIQUE,
    added_at REAL NOT NULL,
    last_organized_at REAL
);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    folder_id TEXT NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
    path TEXT NOT NULL UNIQUE,
    original_path TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    sha256 TEXT,
    status TEXT NOT NULL DEFAULT 'pending',   -- pending | indexing | indexed | failed | skipped
    error TEXT,                               -- why failed or skipped; for indexing, how far it has got
    attempts INTEGER NOT NULL DEFAULT 0,
    format TEXT,
    title TEXT,
    pages INTEGER,
    chunks INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    language TEXT                             -- detected (languages.py); NULL: not yet, the Tantivy replay does
);
CREATE INDEX IF NOT EXISTS documents_folder ON documents(folder_id, status);
-- The next files to parse (Store.pending, at every turn of the ingest thread): without it each look scans
-- the whole table (docs/tuning.md#keyword-index).
CREATE INDEX IF NOT EXISTS documents_pending ON documents(id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS documents_indexing ON documents(id) WHERE status = 'indexing';
-- A folder's last change (Store.changed_at, at every folders.list) in one seek, not a read of each document's row.
CREATE INDEX IF NOT EXISTS documents_folder_updated ON documents(folder_id, updated_at);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,     -- never reused: also the Tantivy and usearch key
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    heading TEXT,
    page_start INTEGER,
    page_end INTEGER,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    vector BLOB,
    ocr_confidence REAL                       -- read with OCR from a page image: its mean confidence
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_unembedded ON chunks(id) WHERE vector IS NULL;
-- A folder's unembedded chunks, counted without reading a chunk's row (its vectors make it ~8 KB): the folder
-- counts (Store.embedded) are asked several times a second while a folder is indexed.
CREATE INDEX IF NOT EXISTS chunks_unembedded_doc ON chunks(doc_id) WHERE vector IS NULL;
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- The document analysis (summary, category, keywords, ...) that get_document_summary returns. Writing a
-- document's chunks drops it (same transaction); the ingest thread writes the deterministic half anew
-- (analysis_due), and the LLM worker enriches it later. Reading it is a plain lookup, by the current path
-- or by the path the file had when it was analyzed.
CREATE TABLE IF NOT EXISTS analysis (
    doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    analyzed_path TEXT NOT NULL,
    analyzed_at REAL NOT NULL,
    fields TEXT NOT NULL,                     -- JSON object
    enriched INTEGER NOT NULL DEFAULT 0       -- LLM enrichment: 0 waiting, 1 done, 2 gave up
);
CREATE INDEX IF NOT EXISTS analysis_path ON analysis(analyzed_path);
-- Documents written since their last deterministic analysis: the ingest thread analyses them once nothing is
-- left to parse or embed (search first), and get_document_summary analyses one on the spot meanwhile. Either
-- way the analysis is dated when its content was written (a move keeps it).
CREATE TABLE IF NOT EXISTS analysis_due (
    doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    written_at REAL NOT NULL
);
-- The vectors of a document's chunks that pages read since replaced, while it is indexed page by page (pages.py):
-- a later page with the same text takes its vector back. Emptied when the document is written whole or fails.
CREATE TABLE IF NOT EXISTS reusable (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (doc_id, text)
);
-- Vectors to take out of the usearch file (their chunks are gone); emptied once a save covers it.
-- A trigger, so cascaded deletes (a document or folder removed) are caught too.
CREATE TABLE IF NOT EXISTS dead_vectors (id INTEGER PRIMARY KEY);
CREATE TRIGGER IF NOT EXISTS chunks_dead AFTER DELETE ON chunks WHEN OLD.vector IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO dead_vectors(id) VALUES (OLD.id);
END;
"""


STATUS_COUNTS = {
    "indexed": "files_indexed",
    "failed": "files_failed",
    "skipped": "files_skipped",
    "pending": "files_pending",
    "indexing": "files_pending",
}
"""Which count a document's status adds to (``indexing``: a long document whose pages read so far are searchable
while its parse goes on, :mod:`.pages`). Skipped (too large, a name that cannot be indexed, a link out of
the folder) is counted apart from failed (a parser could not read it); each has its reason."""
SEARCHABLE = ("indexed", "indexing", "failed")
"""The statuses whose documents' chunks searches find: a failed document holds chunks only when its parse failed
after pages of it were indexed (:mod:`.pages`), and keeps those."""
_SEARCHABLE = f"d.status IN {SEARCHABLE!r}"


@dataclass(frozen=True, slots=True)
class Folder:
    id: str
    name: str
    description: str
    path: str
    added_at: float
    last_organized_at: float | None


@dataclass(frozen=True, slots=True)
class Document:
    id: int
    folder_id: str
    path: str
    size: int
    mtime_ns: int
    sha256: str | None
    status: str
    attempts: int


@dataclass(frozen=True, slots=True)
class DueDocument:
    """An indexed document whose analysis is due, with what :func:`.analysis.analyze` takes besides its text."""

    id: int
    path: str
    format: str
    title: str | None
    mtime_ns: int
    language: str | None
    folder_name: str
    written_at: float
    """When the content was written: the analysis's date (``analyzed_at``), however often it is made."""


@dataclass(frozen=True, slots=True)
class ChunkPos:
    """Where a stored chunk sits in its document's extracted text."""

    ordinal: int
    text: str
    char_start: int
    line_start: int
    line_end: int


def _due_document(r: sqlite3.Row) -> DueDocument:
    return DueDocument(int(r[0]), str(r[1]), r[2] or "", r[3], int(r[4]), r[5], str(r[6]), float(r[7]))


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def analysis_map(fields: Mapping[str, Any], analyzed_at: float, file_path: str, language: str | None) -> dict[str, Any]:
    """A document's analysis as ``doc.summary`` answers it: the analysed fields and when the content they
    describe was written, where the document is and its language (a stored analysis and one made on the
    spot for a document whose analysis is due have this one shape)."""
    return {**fields, "analyzed_at": analyzed_at, "file_path": file_path, "language": language}


class Store:
    """One connection per thread (SQLite connections are not shared across threads), and one that only
    watches for commits (:meth:`change_token`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._watch: sqlite3.Connection | None = None
        self._watch_lock = threading.Lock()
        self.db.executescript(SCHEMA)  # (executescript commits by itself)
        self._migrate()

    def _migrate(self) -> None:
        """Bring a database made by an older version up to :data:`SCHEMA` (CREATE IF NOT EXISTS
        leaves existing tables as they were)."""
        with self.tx() as db:  # re-checked under the write lock: two openers never add a column twice
            columns = {str(r["name"]) for r in db.execute("PRAGMA table_info(analysis)")}
            if "enriched" not in columns:
                db.execute("ALTER TABLE analysis ADD COLUMN enriched INTEGER NOT NULL DEFAULT 0")
            if "ocr_confidence" not in {str(r["name"]) for r in db.execute("PRAGMA table_info(chunks)")}:
                db.execute("ALTER TABLE chunks ADD COLUMN ocr_confidence REAL")
            if "language" not in {str(r["name"]) for r in db.execute("PRAGMA table_info(documents)")}:
                db.execute("ALTER TABLE documents ADD COLUMN language TEXT")
            # Here, not in SCHEMA: on an old database the column it covers does not exist before this.
            db.execute("CREATE INDEX IF NOT EXISTS analysis_enrich ON analysis(enriched, analyzed_at)")

    @property
    def db(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=True)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def tx(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction. ``durable``: its commit is on disk when this returns (synchronous=FULL for it),
        for what a command reports done; under NORMAL a power cut takes back the commits since the last
        checkpoint (tests/test_powercut_fs.py), which the pipeline redoes but a user's command is not."""
        db = self.db
        if durable:
            db.execute("PRAGMA synchronous=FULL")
        try:
            with self._tx(db) as conn:
                yield conn
        finally:
            if durable:
                db.execute("PRAGMA synchronous=NORMAL")

    @contextmanager
    def _tx(self, db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            # SQLite rolls back by itself on some errors (SQLITE_FULL among them): a second ROLLBACK
            # would raise and hide the real error. A failed COMMIT must not leave the transaction open,
            # or every later BEGIN on this connection fails.
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    # ---------------------------------------------------------------------------------------
    # meta

    def get_meta(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = ?", (key, value, value)
        )

    def embedded_with(self) -> tuple[str, str]:
        """(model, precision) of the stored vectors; ("", "") before any. An index made before precisions
        were recorded holds fp32 vectors (the only precision there was)."""
        model = self.get_meta("embed_model")
        return (model, self.get_meta("embed_precision") or "fp32") if model else ("", "")

    def reembedding(self) -> str:
        """While the index is being embedded again after a change of model or precision, what it held
        before (:func:`~foldermind.workers.embedding.model_files.vectors_key`); empty otherwise."""
        return self.get_meta("embed_reembedding")

    def reembedded(self) -> None:
        with self.tx() as db:
            self.set_meta(db, "embed_reembedding", "")

    def set_unsupported(
        self, db: sqlite3.Connection, folder_id: str, counts: Mapping[str, int], files: Sequence[str] = ()
    ) -> None:
        """Keep the folder's last scan's count of files no parser reads, by suffix, and the first of them."""
        self.set_meta(db, f"unsupported:{folder_id}", json.dumps(dict(counts), sort_keys=True))
        self.set_meta(db, f"unsupported_files:{folder_id}", json.dumps(list(files)))

    def unsupported_files(self, folder_id: str | None = None) -> list[str]:
        """The first files no parser reads, of each folder's last scan (that one folder's with ``folder_id``)."""
        ids = [folder.id for folder in self.folders()] if folder_id is None else [folder_id]
        return [str(p) for fid in ids for p in json.loads(self.get_meta(f"unsupported_files:{fid}", "[]"))]

    def unsupported(self, folder_id: str | None = None) -> dict[str, int]:
        """The files no parser reads, by suffix, over the registered folders' last scans (that one folder's
        with ``folder_id``)."""
        out: dict[str, int] = {}
        ids = [folder.id for folder in self.folders()] if folder_id is None else [folder_id]
        for fid in ids:
            for suffix, n in json.loads(self.get_meta(f"unsupported:{fid}", "{}")).items():
                out[suffix] = out.get(suffix, 0) + int(n)
        return dict(sorted(out.items(), key=lambda item: (-item[1], item[0])))

    # ---------------------------------------------------------------------------------------
    # folders

    def add_folder(
        self, path: str, name: str, description: str, refusal: Callable[[str], str] = lambda path: ""
    ) -> Folder:
        """Register ``path`` unless it overlaps a registered folder or ``refusal`` says why not ('' when it may)."""
        with self.tx(durable=True) as db:
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

    def folders(self) -> list[Folder]:
        rows = self.db.execute("SELECT * FROM folders ORDER BY added_at").fetchall()
        return [
            Folder(r["id"], r["name"], r["description"], r["path"], r["added_at"], r["last_organized_at"]) for r in rows
        ]

    def find_folder(self, id_or_path: str) -> Folder:
        for folder in self.folders():
            if id_or_path in (folder.id, folder.path) or id_or_path.rstrip("/") == folder.path:
                return folder
        raise JobError(ErrorCode.UNKNOWN_FOLDER, f"no Smart Folder {id_or_path!r}")

    def folder_for_path(self, path: str) -> Folder | None:
        for folder in self.folders():
            if _inside(path, folder.path):
                return folder
        return None

    def remove_folder(self, folder_id: str) -> list[int]:
        """Delete the folder and its documents; returns the removed document ids (journaled)."""
        with self.tx(durable=True) as db:
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
        # Its chunks, and how many of them are embedded, are :meth:`chunk_counts`' (one snapshot for both).
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

    def document_page(
        self, folder_id: str | None, after: int, limit: int, statuses: Sequence[str]
    ) -> list[sqlite3.Row]:
        """Documents with an id above ``after`` (with one of ``statuses``, when given), in id order (keyset paging:
        a page stays right while others are added or deleted)."""
        where = ["id > ?"]
        args: list[Any] = [after]
        if folder_id is not None:
            where.append("folder_id = ?")
            args.append(folder_id)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args.extend(statuses)
        return self.db.execute(
            "SELECT id, path, folder_id, status, size, mtime_ns, title, format, error FROM documents "
            f"WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
            (*args, limit),
        ).fetchall()

    # ---------------------------------------------------------------------------------------
    # documents

    def documents_in(self, folder_id: str) -> dict[str, Document]:
        rows = self.db.execute(
            "SELECT id, folder_id, path, size, mtime_ns, sha256, status, attempts FROM documents WHERE folder_id = ?",
            (folder_id,),
        )
        return {r["path"]: Document(*r) for r in rows}

    def document(self, path: str) -> Document | None:
        r = self.db.execute(
            "SELECT id, folder_id, path, size, mtime_ns, sha256, status, attempts FROM documents WHERE path = ?",
            (path,),
        ).fetchone()
        return Document(*r) if r else None

    def mark_pending(self, db: sqlite3.Connection, folder_id: str, path: str, size: int, mtime_ns: int) -> None:
        db.execute(
            "INSERT INTO documents(folder_id, path, original_path, size, mtime_ns, status, attempts, updated_at) "
            "VALUES(?, ?, ?, ?, ?, 'pending', 0, ?) "
            "ON CONFLICT(path) DO UPDATE SET status = 'pending', attempts = 0, error = NULL, "
            "updated_at = excluded.updated_at",
            (folder_id, path, path, size, mtime_ns, time.time()),
        )

    def mark_skipped(self, db: sqlite3.Connection, folder_id: str, path: str, reason: str) -> None:
        row = db.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if row:
            db.execute("DELETE FROM chunks WHERE doc_id = ?", (row[0],))
            db.execute("DELETE FROM analysis WHERE doc_id = ?", (row[0],))  # it described content no longer indexed
            db.execute("DELETE FROM analysis_due WHERE doc_id = ?", (row[0],))
            db.execute("INSERT INTO journal(doc_id) VALUES(?)", (row[0],))
        db.execute(
            "INSERT INTO documents(folder_id, path, original_path, status, error, chunks, updated_at) "
            "VALUES(?, ?, ?, 'skipped', ?, 0, ?) "
            "ON CONFLICT(path) DO UPDATE SET status = 'skipped', error = excluded.error, chunks = 0, "
            "sha256 = NULL, format = NULL, "
            "updated_at = excluded.updated_at",
            (folder_id, path, path, reason, time.time()),
        )

    def delete_documents(self, db: sqlite3.Connection, doc_ids: Iterable[int]) -> None:
        ids = [(d,) for d in doc_ids]
        db.executemany("INSERT INTO journal(doc_id) VALUES(?)", ids)
        db.executemany("DELETE FROM documents WHERE id = ?", ids)

    def move_document(self, db: sqlite3.Connection, old: str, new: str, folder_id: str) -> bool:
        """Point a document at its new path, keeping its chunks and analysis. False if unknown."""
        row = db.execute("SELECT id, folder_id FROM documents WHERE path = ?", (old,)).fetchone()
        if row is None:
            return False
        replaced = [r[0] for r in db.execute("SELECT id FROM documents WHERE path = ?", (new,))]
        self.delete_documents(db, replaced)  # a file moved over another
        db.execute(
            "UPDATE documents SET path = ?, folder_id = ?, updated_at = ? WHERE id = ?",
            (new, folder_id, time.time(), row[0]),
        )
        if os.path.splitext(old)[1].lower() != os.path.splitext(new)[1].lower():
            # The same bytes under another extension are another format (notes.txt -> notes.md): the
            # chunks were cut by the old format's parser, so it is parsed again. sha256 is cleared, or
            # the pipeline would take the unchanged bytes for a touch and keep the old chunks.
            db.execute("UPDATE documents SET status = 'pending', attempts = 0, sha256 = NULL WHERE id = ?", (row[0],))
        if row[1] != folder_id:
            db.execute("INSERT INTO journal(doc_id) VALUES(?)", (row[0],))  # its folder field changed
            now = time.time()
            db.execute("UPDATE folders SET last_organized_at = ? WHERE id IN (?, ?)", (now, row[1], folder_id))
        return True

    def paths_under(self, db: sqlite3.Connection, folder: str) -> list[str]:
        """The documents' paths inside the directory ``folder`` (not ``folder`` itself)."""
        prefix = folder.rstrip("/") + "/"
        return [
            r[0] for r in db.execute("SELECT path FROM documents WHERE substr(path, 1, ?) = ?", (len(prefix), prefix))
        ]

    def ids_at_or_under(self, db: sqlite3.Connection, path: str) -> list[int]:
        """The documents at ``path``, or inside it when it is a directory."""
        prefix = path.rstrip("/") + "/"
        rows = db.execute(
            "SELECT id FROM documents WHERE path = ? OR substr(path, 1, ?) = ?", (path, len(prefix), prefix)
        )
        return [r[0] for r in rows]

    def pending(self, limit: int) -> list[Document]:
        """The next documents to parse: pending, and ``indexing`` (pages indexed, the rest not yet; the caller
        leaves out those whose parse runs): parsed again from the start, their pages searchable meanwhile."""
        columns = "id, folder_id, path, size, mtime_ns, sha256, status, attempts"
        rows = self.db.execute(
            f"SELECT {columns} FROM documents WHERE status = 'pending' UNION ALL "
            f"SELECT {columns} FROM documents WHERE status = 'indexing' ORDER BY id LIMIT ?",
            (limit,),
        )
        return [Document(*r) for r in rows]

    def set_failed(self, doc_id: int, error: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            # A file that now fails (edited into something unreadable, grown too large) must not keep
            # serving the analysis of its earlier content: FILE_NOT_ANALYZED, and index_status says why.
            db.execute("DELETE FROM analysis WHERE doc_id = ?", (doc_id,))
            db.execute("DELETE FROM analysis_due WHERE doc_id = ?", (doc_id,))
            db.execute("DELETE FROM reusable WHERE doc_id = ?", (doc_id,))
            db.execute("INSERT INTO journal(doc_id) VALUES(?)", (doc_id,))
            db.execute(
                "UPDATE documents SET status = 'failed', error = ?, chunks = 0, sha256 = NULL, format = NULL, "
                "updated_at = ? WHERE id = ?",
                (error, time.time(), doc_id),
            )

    def reparse_all(self, db: sqlite3.Connection) -> int:
        """Every document to be parsed again (its chunks stay searchable until new ones replace them)."""
        cur = db.execute("UPDATE documents SET status = 'pending', attempts = 0, sha256 = NULL, error = NULL")
        return cur.rowcount

    def requeue(self, doc_id: int) -> None:
        self.db.execute("UPDATE documents SET status = 'pending', attempts = 0 WHERE id = ?", (doc_id,))

    def set_attempts(self, doc_id: int, attempts: int) -> None:
        self.db.execute("UPDATE documents SET attempts = ? WHERE id = ?", (attempts, doc_id))

    def mark_unchanged(self, doc_id: int, size: int, mtime_ns: int) -> None:
        """A touched file (new mtime, same bytes): its chunks stay; the journal row has Tantivy read them again,
        since its ``mtime`` field (a date filter inside the keyword query) must follow the file's."""
        with self.tx() as db:
            db.execute(
                "UPDATE documents SET status = 'indexed', size = ?, mtime_ns = ? WHERE id = ?", (size, mtime_ns, doc_id)
            )
            db.execute("INSERT INTO journal(doc_id) VALUES(?)", (doc_id,))

    def write_document(
        self,
        db: sqlite3.Connection,
        doc_id: int,
        size: int,
        mtime_ns: int,
        sha256: str,
        fmt: str,
        title: str | None,
        pages: int | None,
        chunks: list[dict[str, Any]],
        language: str | None = None,
        start: int = 0,
    ) -> list[int]:
        """Replace a document's chunks from ordinal ``start`` on (those before it were written page by page, by
        :meth:`write_pages`, and are kept); returns the new chunk ids. Journaled for Tantivy. ``language``: the
        content's (:mod:`.languages`); ``None`` leaves it to the Tantivy replay to detect.

        A new chunk whose text an old chunk of the document had keeps that chunk's vector (the same text
        makes the same vector): a file parsed again after an upgrade of the parsers, or edited in one place,
        is embedded again only where its text changed (``vectors(ids)`` gives the kept ones, for usearch)."""
        ids = self._replace_chunks(db, doc_id, start, chunks[start:], hold=False)
        now = time.time()
        db.execute(
            "UPDATE documents SET status = 'indexed', error = NULL, size = ?, mtime_ns = ?, sha256 = ?, format = ?, "
            "title = ?, pages = ?, chunks = ?, updated_at = ?, language = ? WHERE id = ?",
            (size, mtime_ns, sha256, fmt, title, pages, len(chunks), now, language, doc_id),
        )
        db.execute("INSERT INTO journal(doc_id) VALUES(?)", (doc_id,))
        # The analysis of the earlier content no longer describes it: a new one is due.
        db.execute("DELETE FROM analysis WHERE doc_id = ?", (doc_id,))
        db.execute("INSERT OR REPLACE INTO analysis_due(doc_id, written_at) VALUES(?, ?)", (doc_id, now))
        return ids

    def write_pages(
        self,
        db: sqlite3.Connection,
        doc_id: int,
        start: int,
        chunks: list[dict[str, Any]],
        title: str | None,
        note: str,
    ) -> list[int]:
        """The chunks of pages read so far of a document still being parsed, from ordinal ``start`` on (any it
        held from there on go); it is ``indexing``, with ``note`` saying how far. Returns the new chunk ids."""
        ids = self._replace_chunks(db, doc_id, start, chunks, hold=True)
        db.execute(
            "UPDATE documents SET status = 'indexing', error = ?, title = ?, chunks = ?, updated_at = ? WHERE id = ?",
            (note, title, start + len(chunks), time.time(), doc_id),
        )
        db.execute("INSERT INTO journal(doc_id) VALUES(?)", (doc_id,))
        return ids

    def written_through(self, doc_id: int, start: int) -> bool:
        """Whether the document holds its chunks 0..``start``-1, which :meth:`write_pages` wrote."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM chunks WHERE doc_id = ? AND ordinal < ?", (doc_id, start)
        ).fetchone()
        return int(row[0]) == start

    def failed_with_pages(self, doc_id: int, error: str) -> None:
        """A document whose parse failed after pages of it were indexed: failed with ``error``, and the chunks of
        those pages stay searchable (nothing is journaled: the keyword index holds them already)."""
        with self.tx() as db:
            db.execute("DELETE FROM reusable WHERE doc_id = ?", (doc_id,))
            db.execute(
                "UPDATE documents SET status = 'failed', error = ?, sha256 = NULL, format = NULL, updated_at = ? "
                "WHERE id = ?",
                (error, time.time(), doc_id),
            )

    def _replace_chunks(
        self, db: sqlite3.Connection, doc_id: int, start: int, chunks: list[dict[str, Any]], hold: bool
    ) -> list[int]:
        """The document's chunks from ordinal ``start`` on replaced by ``chunks``, each taking the vector of a
        chunk with its text that it replaced; with ``hold`` those vectors are kept for later pages too."""
        db.execute(
            "INSERT OR IGNORE INTO reusable(doc_id, text, vector) SELECT doc_id, text, vector FROM chunks "
            "WHERE doc_id = ? AND ordinal >= ? AND vector IS NOT NULL",
            (doc_id, start),
        )
        db.execute("DELETE FROM chunks WHERE doc_id = ? AND ordinal >= ?", (doc_id, start))
        ids: list[int] = []
        for c in chunks:
            cur = db.execute(
                "INSERT INTO chunks(doc_id, ordinal, text, tokens, heading, page_start, page_end, line_start, "
                "line_end, char_start, char_end, ocr_confidence, vector) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "(SELECT vector FROM reusable WHERE doc_id = ? AND text = ?))",
                (
                    doc_id,
                    c["ordinal"],
                    c["text"],
                    c["tokens"],
                    c.get("heading"),
                    c.get("page_start"),
                    c.get("page_end"),
                    c["line_start"],
                    c["line_end"],
                    c["char_start"],
                    c["char_end"],
                    c.get("ocr_confidence"),
                    doc_id,
                    c["text"],
                ),
            )
            ids.append(int(cur.lastrowid or 0))
        if not hold:
            db.execute("DELETE FROM reusable WHERE doc_id = ?", (doc_id,))
        return ids

    # ---------------------------------------------------------------------------------------
    # analysis (get_document_summary)

    _DUE = (
        "SELECT d.id, d.path, d.format, d.title, d.mtime_ns, d.language, f.name, q.written_at FROM analysis_due q "
        "JOIN documents d ON d.id = q.doc_id JOIN folders f ON f.id = d.folder_id WHERE d.status = 'indexed' "
    )

    def analysis_due(self, limit: int) -> list[DueDocument]:
        """Indexed documents whose deterministic analysis is due, in id order."""
        rows = self.db.execute(self._DUE + "ORDER BY q.doc_id LIMIT ?", (limit,))
        return [_due_document(r) for r in rows]

    def due_at(self, path: str) -> DueDocument | None:
        """The indexed document now at ``path`` if its analysis is due."""
        r = self.db.execute(self._DUE + "AND d.path = ?", (path,)).fetchone()
        return _due_document(r) if r else None

    def store_analyses(self, done: Sequence[tuple[DueDocument, Mapping[str, Any] | None]]) -> None:
        """Record the analyses of due documents (None: it failed; the document stays without one) in one
        transaction. A document written again since it was read is due again and is left alone."""
        with self.tx() as db:
            for doc, fields in done:
                gone = db.execute(
                    "DELETE FROM analysis_due WHERE doc_id = ? AND written_at = ?", (doc.id, doc.written_at)
                ).rowcount
                if gone and fields is not None:
                    self.write_analysis(db, doc.id, doc.path, fields, doc.written_at)

    def write_analysis(
        self, db: sqlite3.Connection, doc_id: int, path: str, fields: Mapping[str, Any], analyzed_at: float
    ) -> None:
        """Store a fresh deterministic analysis of the document now at ``path``, waiting for the LLM."""
        db.execute(
            "INSERT INTO analysis(doc_id, analyzed_path, analyzed_at, fields, enriched) VALUES(?, ?, ?, ?, 0) "
            "ON CONFLICT(doc_id) DO UPDATE SET analyzed_path = excluded.analyzed_path, "
            "analyzed_at = excluded.analyzed_at, fields = excluded.fields, enriched = 0",
            (doc_id, path, analyzed_at, json.dumps(fields, ensure_ascii=False)),
        )

    def pending_enrichment(self, limit: int) -> list[tuple[int, str, dict[str, Any], float]]:
        """(doc_id, current path, fields, analyzed_at) of indexed documents whose analysis waits for the
        LLM, oldest first. Pass analyzed_at back to :meth:`enrich_analysis` so a re-analysis meanwhile wins."""
        rows = self.db.execute(
            "SELECT a.doc_id, d.path, a.fields, a.analyzed_at FROM analysis a JOIN documents d ON d.id = a.doc_id "
            "WHERE a.enriched = 0 AND d.status = 'indexed' ORDER BY a.analyzed_at, a.doc_id LIMIT ?",
            (limit,),
        )
        return [(int(r[0]), str(r[1]), json.loads(r[2]), float(r[3])) for r in rows]

    def enrichment_counts(self) -> tuple[int, int]:
        """(done, waiting): indexed documents whose analysis the LLM has written (or gave up on), and those
        still waiting for it."""
        row = self.db.execute(
            "SELECT COUNT(CASE WHEN a.enriched != 0 THEN 1 END), COUNT(CASE WHEN a.enriched = 0 THEN 1 END) "
            "FROM analysis a JOIN documents d ON d.id = a.doc_id WHERE d.status = 'indexed'"
        ).fetchone()
        return int(row[0]), int(row[1])

    def enrich_analysis(
        self, doc_id: int, updates: dict[str, Any], state: int, *, analyzed_at: float | None = None
    ) -> bool:
        """Merge ``updates`` into the document's analysis and set its enrichment ``state`` (1 done, 2 gave
        up; 0 to retry). False, changing nothing, when the row is gone, or when ``analyzed_at`` is given
        and the row no longer has it: the file was re-analyzed meanwhile, the updates describe old content."""
        if state not in (0, 1, 2):
            raise ValueError(f"enrichment state must be 0, 1 or 2, not {state!r}")
        # analyzed_at and file_path are columns that Store.analysis adds, never fields.
        extra = {k: v for k, v in updates.items() if k not in ("analyzed_at", "file_path")}
        with self.tx() as db:
            row = db.execute("SELECT fields, analyzed_at FROM analysis WHERE doc_id = ?", (doc_id,)).fetchone()
            if row is None or (analyzed_at is not None and row[1] != analyzed_at):
                return False
            fields: dict[str, Any] = {**json.loads(row[0]), **extra}
            db.execute(
                "UPDATE analysis SET fields = ?, enriched = ?, analyzed_at = ? WHERE doc_id = ?",
                (json.dumps(fields, ensure_ascii=False), state, time.time(), doc_id),
            )
        return True

    # ---------------------------------------------------------------------------------------
    # journal (Tantivy replay)

    def journal_after(self, seq: int, limit: int = -1) -> tuple[int, list[int]]:
        """The last seq of (at most ``limit``, -1: all) journal rows after ``seq``, and their documents."""
        rows = self.db.execute(
            "SELECT seq, doc_id FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()
        if not rows:
            return seq, []
        return int(rows[-1][0]), sorted({int(r[1]) for r in rows})

    def journal_size(self) -> int:
        """Documents the keyword index has yet to take from the journal."""
        return int(self.db.execute("SELECT COUNT(DISTINCT doc_id) FROM journal").fetchone()[0])

    def keyword_census(self) -> tuple[list[int], int, int]:
        """What the keyword index must hold, apart from the documents the journal has yet to apply and those
        waiting to be parsed (again: their old chunks may or may not be there): (those documents' ids, the count
        and the sum of the ids of the indexed documents' chunks)."""
        journaled = [
            int(r[0])
            for r in self.db.execute(
                "SELECT doc_id FROM journal UNION SELECT id FROM documents WHERE status = 'pending' ORDER BY 1"
            )
        ]
        row = self.db.execute(
            "SELECT COUNT(c.id), COALESCE(SUM(c.id), 0) FROM chunks c JOIN documents d ON d.id = c.doc_id"
            f" WHERE {_SEARCHABLE} AND d.id NOT IN (SELECT doc_id FROM journal)"
        ).fetchone()
        return journaled, int(row[0]), int(row[1])

    def journal_applied(self, seq: int) -> None:
        with self.tx() as db:
            self.set_meta(db, "tantivy_seq", str(seq))
            db.execute("DELETE FROM journal WHERE seq <= ?", (seq,))

    def rebuild_keyword_index(self, version: int) -> int:
        """Journal every indexed document for a Tantivy index of fields ``version`` (the caller has emptied
        the old one) and record the version, in one transaction; returns how many documents."""
        with self.tx() as db:
            n = db.execute(f"INSERT INTO journal(doc_id) SELECT id FROM documents d WHERE {_SEARCHABLE}").rowcount
            self.set_meta(db, "tantivy_schema", str(version))
        return n

    def set_languages(self, languages: Mapping[int, str]) -> None:
        """Record documents' detected languages (doc id -> code)."""
        with self.tx() as db:
            db.executemany("UPDATE documents SET language = ? WHERE id = ?", [(v, k) for k, v in languages.items()])

    def chunks_for_index(self, doc_ids: list[int]) -> list[sqlite3.Row]:
        out: list[sqlite3.Row] = []
        for start in range(0, len(doc_ids), 500):
            part = doc_ids[start : start + 500]
            marks = ",".join("?" * len(part))
            out.extend(
                self.db.execute(
                    "SELECT c.id, c.doc_id, c.text, c.heading, d.folder_id, d.language, d.path, d.title, d.mtime_ns "
                    f"FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.doc_id IN ({marks})"
                    f" AND {_SEARCHABLE}",
                    part,
                )
            )
        return out

    # ---------------------------------------------------------------------------------------
    # search support

    def documents_of(self, chunk_ids: list[int]) -> dict[int, int]:
        """chunk id -> document id, for the chunks that still exist."""
        out: dict[int, int] = {}
        for start in range(0, len(chunk_ids), 500):
            part = chunk_ids[start : start + 500]
            marks = ",".join("?" * len(part))
            out.update(self.db.execute(f"SELECT id, doc_id FROM chunks WHERE id IN ({marks})", part).fetchall())
        return out

    def hits(self, chunk_ids: list[int]) -> dict[int, sqlite3.Row]:
        """Chunk rows with their document and folder, for ids that still exist."""
        out: dict[int, sqlite3.Row] = {}
        for start in range(0, len(chunk_ids), 500):
            part = chunk_ids[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self.db.execute(
                f"SELECT c.id, c.text, c.heading, c.page_start, c.page_end, c.line_start, c.line_end, c.ordinal, "
                f"c.ocr_confidence, c.doc_id, d.path, d.mtime_ns, d.language, f.name AS folder_name, f.id AS folder_id "
                f"FROM chunks c JOIN documents d ON d.id = c.doc_id JOIN folders f ON f.id = d.folder_id "
                f"WHERE c.id IN ({marks}) AND {_SEARCHABLE}",
                part,
            )
            out.update((int(r["id"]), r) for r in rows)
        return out

    # ---------------------------------------------------------------------------------------
    # vectors

    def unembedded(self, limit: int, exclude: set[int]) -> list[tuple[int, str, str, str]]:
        """(id, text, its document's title or "", the start of its document's first chunk) of chunks without
        vectors: what :mod:`.units` makes the texts they are embedded as of."""
        rows = self.db.execute(
            "SELECT c.id, c.text, d.title, (SELECT substr(f.text, 1, 1000) FROM chunks f WHERE f.doc_id = c.doc_id "
            "ORDER BY f.ordinal LIMIT 1) FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE c.vector IS NULL AND {_SEARCHABLE} ORDER BY c.id LIMIT ?",
            (limit + len(exclude),),
        )
        found = [(int(r[0]), str(r[1]), str(r[2] or ""), str(r[3] or "")) for r in rows]
        return [row for row in found if row[0] not in exclude][:limit]

    def store_vectors(self, ids: list[int], blobs: list[bytes]) -> list[int]:
        """Save vectors of chunks that still exist; returns those ids."""
        kept: list[int] = []
        with self.tx() as db:
            for chunk_id, blob in zip(ids, blobs, strict=True):
                if db.execute("UPDATE chunks SET vector = ? WHERE id = ?", (blob, chunk_id)).rowcount:
                    kept.append(chunk_id)
        return kept

    def drop_vectors(self, model: str, precision: str, reembedding: str) -> int:
        """Forget every stored vector and record that the index now takes vectors of ``model`` at
        ``precision`` and is being embedded again (``embed_reembedding``: what it held), in one transaction;
        the chunks stay (keyword search is untouched). Returns how many vectors were dropped."""
        with self.tx() as db:
            dropped = db.execute("UPDATE chunks SET vector = NULL WHERE vector IS NOT NULL").rowcount
            db.execute("DELETE FROM dead_vectors")
            self.set_meta(db, "embed_model", model)
            self.set_meta(db, "embed_precision", precision)
            self.set_meta(db, "embed_reembedding", reembedding)
        return int(dropped)

    def embedded(self, folder_id: str | None, arriving: Callable[[], tuple[int, ...]]) -> int:
        """How many chunks (of ``folder_id``'s documents, or of any) a semantic search finds: those with a vector,
        less the ones ``arriving`` names (committed here, not yet in the vector index). One count, leaving out
        what arrives before it and after it: a count read before a batch's commit and its arrival read after
        would leave out vectors it never counted (a progress bar going backwards)."""
        return self.chunk_counts(folder_id, arriving)[1]

    def chunk_counts(self, folder_id: str | None, arriving: Callable[[], tuple[int, ...]]) -> tuple[int, int]:
        """(chunks, embedded) of ``folder_id``'s documents (or of any), from one snapshot: embedded as
        :meth:`embedded` counts it. The folder counts ask both at every ``folders.list`` (several a second while
        a folder is indexed), so the chunks are counted once for the two."""
        before = arriving()
        where = "AND d.folder_id = :folder" if folder_id is not None else ""
        # One statement, so one snapshot: every chunk, less the unembedded ones and the arriving ones that have a
        # vector. Both counts read only indexes (chunks_doc, chunks_unembedded_doc); a test of each chunk's vector
        # would read every chunk's row, its vectors included (docs/tuning.md#keyword-index). The arriving
        # ones are looked up by id, and only when there are some (most counts find none).
        among = f"({self._AMONG.format(ids=':ids', where=where)})" if before else "0"
        row = self.db.execute(
            f"SELECT total, total - unembedded - {among} FROM "
            f"(SELECT (SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE 1 {where}) AS total, "
            "(SELECT COUNT(*) FROM chunks c INDEXED BY chunks_unembedded_doc JOIN documents d ON d.id = c.doc_id "
            f"WHERE c.vector IS NULL {where}) AS unembedded)",
            {"folder": folder_id, "ids": json.dumps(before)},
        ).fetchone()
        late = tuple(set(arriving()) - set(before))  # committed during the count, maybe counted
        return int(row[0]), int(row[1]) - (self.embedded_among(late, folder_id) if late else 0)

    # Driven by the ids (a handful of arriving chunks), not by the folder's every chunk.
    _AMONG = (
        "SELECT COUNT(*) FROM json_each({ids}) a CROSS JOIN chunks c ON c.id = a.value "
        "JOIN documents d ON d.id = c.doc_id WHERE c.vector IS NOT NULL {where}"
    )

    def embedded_among(self, ids: tuple[int, ...], folder_id: str | None) -> int:
        """How many of the chunks ``ids`` (of ``folder_id``'s documents, or of any) have a vector."""
        if not ids:
            return 0
        where, args = ("AND d.folder_id = ?", (folder_id,)) if folder_id is not None else ("", ())
        return int(self.db.execute(self._AMONG.format(ids="?", where=where), (json.dumps(ids), *args)).fetchone()[0])

    def dead_vectors(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM dead_vectors")]

    def forget_dead(self, ids: list[int]) -> None:
        with self.tx() as db:
            db.executemany("DELETE FROM dead_vectors WHERE id = ?", [(i,) for i in ids])

    def vector_ids(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM chunks WHERE vector IS NOT NULL")]

    def vectors(self, ids: list[int]) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            out.extend(
                (int(r[0]), bytes(r[1]))
                for r in self.db.execute(
                    f"SELECT id, vector FROM chunks WHERE id IN ({marks}) AND vector IS NOT NULL", part
                )
            )
        return out

    # ---------------------------------------------------------------------------------------
    # reads for read_document, find_similar, get_document_summary and index_status

    def document_state(self, path: str) -> tuple[int, str, str | None] | None:
        """(id, status, error) of the document at ``path``."""
        r = self.db.execute("SELECT id, status, error FROM documents WHERE path = ?", (path,)).fetchone()
        return (int(r[0]), str(r[1]), r[2]) if r else None

    def chunk_count(self, doc_id: int) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", (doc_id,)).fetchone()[0])

    def last_line(self, doc_id: int) -> int:
        # The last chunk ends last (chunks are in document order): one index lookup, no scan.
        row = self.db.execute(
            "SELECT line_end FROM chunks WHERE doc_id = ? ORDER BY ordinal DESC LIMIT 1", (doc_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def chunk_line_end(self, doc_id: int, ordinal: int) -> int:
        row = self.db.execute(
            "SELECT line_end FROM chunks WHERE doc_id = ? AND ordinal = ?", (doc_id, ordinal)
        ).fetchone()
        return int(row[0]) if row else 0

    def chunks_from(self, doc_id: int, ordinal: int) -> Generator[ChunkPos, None, None]:
        """The document's chunks from ``ordinal`` on, in order (lazily: a reader stops early)."""
        cur = self.db.execute(
            "SELECT ordinal, text, char_start, line_start, line_end FROM chunks "
            "WHERE doc_id = ? AND ordinal >= ? ORDER BY ordinal",
            (doc_id, ordinal),
        )
        for r in cur:
            yield ChunkPos(int(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]))

    def ocr_pages(self, doc_id: int, start: int, end: int) -> list[tuple[int | None, int, int, float]]:
        """(page, first line, last line, mean confidence) of each page of the document whose text was read
        with OCR and that has a chunk in lines ``start..end``, in page order."""
        rows = self.db.execute(
            "SELECT page_start, MIN(line_start), MAX(line_end), AVG(ocr_confidence) FROM chunks "
            "WHERE doc_id = ? AND ocr_confidence IS NOT NULL AND line_end >= ? AND line_start <= ? "
            "GROUP BY page_start ORDER BY MIN(line_start)",
            (doc_id, start, end),
        )
        return [(r[0], int(r[1]), int(r[2]), float(r[3])) for r in rows]

    def doc_vectors(self, doc_id: int) -> list[tuple[int, bytes]]:
        rows = self.db.execute(
            "SELECT id, vector FROM chunks WHERE doc_id = ? AND vector IS NOT NULL ORDER BY ordinal", (doc_id,)
        )
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def folder_vector_ids(self, folder_id: str) -> list[int]:
        """Ids of the folder's embedded chunks whose document is indexed, ascending."""
        rows = self.db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE d.folder_id = ? AND {_SEARCHABLE} AND c.vector IS NOT NULL ORDER BY c.id",
            (folder_id,),
        )
        return [int(r[0]) for r in rows]

    def filter_candidates(self, folder_id: str | None) -> list[tuple[int, str, int, str, str]]:
        """(id, path, mtime_ns, status, folder path) of every document, or of one folder's, for a search filter."""
        where, args = ("WHERE d.folder_id = ?", (folder_id,)) if folder_id is not None else ("", ())
        rows = self.db.execute(
            f"SELECT d.id, d.path, d.mtime_ns, d.status, f.path FROM documents d JOIN folders f ON f.id = d.folder_id "
            f"{where}",
            args,
        )
        return [(int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]

    def vector_ids_of(self, doc_ids: list[int]) -> list[int]:
        """Ids of the embedded chunks of ``doc_ids``, ascending (one statement: the list goes in as JSON)."""
        rows = self.db.execute(
            "SELECT id FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?)) AND vector IS NOT NULL ORDER BY id",
            (json.dumps(doc_ids),),
        )
        return [int(r[0]) for r in rows]

    def chunk_place(self, chunk_id: int) -> tuple[int, int] | None:
        """(document id, ordinal) of a chunk that exists now."""
        row = self.db.execute("SELECT doc_id, ordinal FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def chunk_file(self, chunk_id: int) -> str | None:
        """The path of the document holding a chunk that exists now."""
        row = self.db.execute(
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?", (chunk_id,)
        ).fetchone()
        return str(row[0]) if row else None

    def chunk_lines(self, doc_id: int, first: int, last: int) -> tuple[int, int, int, int] | None:
        """(first ordinal, last ordinal, first line, last line) of the document's chunks ``first..last``."""
        row = self.db.execute(
            "SELECT MIN(ordinal), MAX(ordinal), MIN(line_start), MAX(line_end) FROM chunks "
            "WHERE doc_id = ? AND ordinal BETWEEN ? AND ?",
            (doc_id, first, last),
        ).fetchone()
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def change_token(self) -> int:
        """Changes whenever anything is committed, and means the same on every thread: the watching
        connection's ``data_version``, which moves with every commit of another connection (it never writes,
        and every write goes through a thread's own connection). Per-thread connections' counters would not
        compare across the threads of searches answered side by side."""
        with self._watch_lock:
            if self._watch is None:
                self._watch = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            return int(self._watch.execute("PRAGMA data_version").fetchone()[0])

    def totals(self) -> dict[str, int]:
        counts = {"files_total": 0, "files_indexed": 0, "files_failed": 0, "files_skipped": 0, "files_pending": 0}
        for status, n in self.db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"):
            counts["files_total"] += n
            key = STATUS_COUNTS.get(status)
            if key:
                counts[key] += n
        counts["chunks"] = int(self.db.execute("SELECT COUNT(id) FROM chunks").fetchone()[0])  # embedded: embedded()
        return counts

    # Documents ``:ids`` outside the folders ``:besides`` (JSON lists): a client key's criteria folders' own.
    _AMONG_IDS = (
        "SELECT d.* FROM json_each(:ids) j JOIN documents d ON d.id = j.value "
        "WHERE d.folder_id NOT IN (SELECT value FROM json_each(:besides))"
    )

    def totals_among(self, ids: Iterable[int], besides: Iterable[str], arriving: tuple[int, ...]) -> dict[str, int]:
        """:meth:`totals` with ``chunks_embedded`` (as :meth:`embedded` counts it) over documents ``ids`` outside
        the folders ``besides``, in one statement (one snapshot)."""
        args = {"ids": json.dumps(sorted(ids)), "besides": json.dumps(sorted(besides)), "late": json.dumps(arriving)}
        counts = {"files_total": 0, "files_indexed": 0, "files_failed": 0, "files_skipped": 0, "files_pending": 0}
        chunks = embedded = 0
        rows = self.db.execute(
            f"WITH picked AS ({self._AMONG_IDS}) SELECT status, COUNT(*), 0 FROM picked GROUP BY status UNION ALL "
            "SELECT NULL, COUNT(c.id), COALESCE(SUM(c.vector IS NOT NULL AND c.id NOT IN "
            "(SELECT value FROM json_each(:late))), 0) FROM picked p JOIN chunks c ON c.doc_id = p.id",
            args,
        )
        for status, n, with_vector in rows:
            if status is None:
                chunks, embedded = int(n), int(with_vector)
                continue
            counts["files_total"] += n
            if key := STATUS_COUNTS.get(status):
                counts[key] += n
        return {**counts, "chunks": chunks, "chunks_embedded": embedded}

    def failures_among(
        self, limit: int, ids: Iterable[int], besides: Iterable[str], statuses: tuple[str, ...]
    ) -> list[sqlite3.Row]:
        """:meth:`recent_failures` among documents ``ids`` outside the folders ``besides``."""
        return self.db.execute(
            f"SELECT path, folder_id, status, COALESCE(error, '') AS error FROM ({self._AMONG_IDS}) "
            "WHERE status IN (SELECT value FROM json_each(:statuses)) ORDER BY updated_at DESC, id DESC LIMIT :limit",
            {
                "ids": json.dumps(sorted(ids)),
                "besides": json.dumps(sorted(besides)),
                "statuses": json.dumps(statuses),
                "limit": limit,
            },
        ).fetchall()

    def recent_failures(
        self, limit: int, folder_id: str | None = None, statuses: tuple[str, ...] = ("failed", "skipped")
    ) -> list[sqlite3.Row]:
        """Documents with one of ``statuses`` and their reasons, most recently changed first."""
        return self.db.execute(
            "SELECT path, folder_id, status, COALESCE(error, '') AS error FROM documents "
            "WHERE status IN (SELECT value FROM json_each(?)) AND (? IS NULL OR folder_id = ?) "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (json.dumps(statuses), folder_id, folder_id, limit),
        ).fetchall()

    def analysis(self, path: str) -> dict[str, Any] | None:
        """The cached analysis of the document now at ``path``, else of the one analyzed at ``path``, with the
        document's detected language."""
        row = self.db.execute(
            "SELECT a.fields, a.analyzed_at, d.path, d.language FROM analysis a JOIN documents d ON d.id = a.doc_id "
            "WHERE d.path = ? OR a.analyzed_path = ? ORDER BY d.path = ? DESC, a.analyzed_at DESC LIMIT 1",
            (path, path, path),
        ).fetchone()
        if row is None:
            return None
        return analysis_map(json.loads(row[0]), row[1], row[2], row[3])
