"""The SQLite database, the indexer's source of truth: its schema and migrations, one connection per thread,
write transactions, and the ``meta`` table of small settings.

The Tantivy index and the usearch file are derived from this database and repaired from it after a crash:
every document write is one SQLite transaction that also appends to ``journal``; the journal is replayed into
Tantivy until a Tantivy commit covers it (``meta.tantivy_seq``), and the usearch keys are compared with the
chunks that have vectors. So a crash anywhere loses nothing and indexes nothing twice.

The statements over each part of the schema are grouped by idea beside this module (:class:`Table`):
folders, documents, chunks, embeddings, analyses, the journal and the census; :class:`.store.Store` holds
one of each.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from foldermind.workers.ingest_rules import read_with_ocr

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
    ocr INTEGER NOT NULL DEFAULT 0,           -- 1: an image file, read with OCR (ingest_rules.read_with_ocr)
    language TEXT                             -- detected (languages.py); NULL: not yet, the Tantivy replay does
);
CREATE INDEX IF NOT EXISTS documents_folder ON documents(folder_id, status);
-- The next files to parse (Documents.pending, at every turn of the ingest thread): without it each look scans
-- the whole table (docs/tuning.md#keyword-index).
CREATE INDEX IF NOT EXISTS documents_pending ON documents(id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS documents_indexing ON documents(id) WHERE status = 'indexing';
-- A folder's last change (Folders.changed_at, at every folders.list) in one seek, not a read of each document's row.
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
-- counts (Embeddings.count) are asked several times a second while a folder is indexed.
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
while its parse goes on, :mod:`foldermind.workers.indexer.ingest.pages`). Skipped (too large, a name that cannot be
indexed, a link out of the folder) is counted apart from failed (a parser could not read it); each has its reason."""
SEARCHABLE = ("indexed", "indexing", "failed")
"""The statuses whose documents' chunks searches find: a failed document holds chunks only when its parse failed
after pages of it were indexed (:mod:`foldermind.workers.indexer.ingest.pages`), and keeps those."""
SEARCHABLE_SQL = f"d.status IN {SEARCHABLE!r}"
"""A document ``d`` of the searchable statuses, as SQL."""


def migrate(db: sqlite3.Connection) -> None:
    """Bring a database made by an older version up to :data:`SCHEMA` (CREATE IF NOT EXISTS leaves existing
    tables as they were), inside the caller's write transaction: re-checked under the write lock, two openers
    never add a column twice."""
    columns = {str(r["name"]) for r in db.execute("PRAGMA table_info(analysis)")}
    if "enriched" not in columns:
        db.execute("ALTER TABLE analysis ADD COLUMN enriched INTEGER NOT NULL DEFAULT 0")
    if "ocr_confidence" not in {str(r["name"]) for r in db.execute("PRAGMA table_info(chunks)")}:
        db.execute("ALTER TABLE chunks ADD COLUMN ocr_confidence REAL")
    documents = {str(r["name"]) for r in db.execute("PRAGMA table_info(documents)")}
    if "language" not in documents:
        db.execute("ALTER TABLE documents ADD COLUMN language TEXT")
    if "ocr" not in documents:
        db.execute("ALTER TABLE documents ADD COLUMN ocr INTEGER NOT NULL DEFAULT 0")
        images = [(r[0],) for r in db.execute("SELECT id, path FROM documents") if read_with_ocr(r[1])]
        db.executemany("UPDATE documents SET ocr = 1 WHERE id = ?", images)
    # Here, not in SCHEMA: on an old database the columns they cover do not exist before this.
    db.execute("CREATE INDEX IF NOT EXISTS analysis_enrich ON analysis(enriched, analyzed_at)")
    # The next files to parse of each lane (Documents.pending: image files have one of their own, parses.py).
    db.execute("CREATE INDEX IF NOT EXISTS documents_pending_lane ON documents(ocr, id) WHERE status = 'pending'")


class Database:
    """One connection per thread (SQLite connections are not shared across threads), and one that only
    watches for commits (:meth:`change_token`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._watch: sqlite3.Connection | None = None
        self._watch_lock = threading.Lock()
        self.db.executescript(SCHEMA)  # (executescript commits by itself)
        with self.tx() as db:
            migrate(db)

    @property
    def db(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=True)
            conn.row_factory = sqlite3.Row
            # Before WAL, and only when it differs: setting it on a file that has it writes a page (a disk-full
            # restart then fails to open); a new file takes it, an old one once compact() vacuums it.
            if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA journal_size_limit={FREE_MIN_BYTES}")  # a WAL grown by a big write shrinks back
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

    def change_token(self) -> int:
        """Changes whenever anything is committed, and means the same on every thread: the watching
        connection's ``data_version``, which moves with every commit of another connection (it never writes,
        and every write goes through a thread's own connection). Per-thread connections' counters would not
        compare across the threads of searches answered side by side."""
        with self._watch_lock:
            if self._watch is None:
                self._watch = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            return int(self._watch.execute("PRAGMA data_version").fetchone()[0])

    def get_meta(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = ?", (key, value, value)
        )

    def compact(self) -> bool:
        """Give the file's free pages back to the disk once they are over :data:`FREE_SHARE` of it and
        :data:`FREE_MIN_BYTES`: SQLite keeps a deleted document's pages for reuse, so the file never shrank.
        A file made before ``auto_vacuum=INCREMENTAL`` is converted by one ``VACUUM`` (a full rewrite, once);
        after that ``incremental_vacuum`` frees the pages. Then the WAL is checkpointed and truncated. Readers
        (searches) go on meanwhile under WAL; writers wait. True when it compacted."""
        db = self.db
        free, pages, size = (int(db.execute(f"PRAGMA {p}").fetchone()[0]) for p in FREE_PRAGMAS)
        if free * size < FREE_MIN_BYTES or free < pages * FREE_SHARE:
            return False
        if int(db.execute("PRAGMA auto_vacuum").fetchone()[0]) != INCREMENTAL:
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("VACUUM")
        else:
            db.executescript("PRAGMA incremental_vacuum")  # execute() would free one page: a page a step
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True


FREE_SHARE = 0.25
"""The share of the database file's pages that may sit free before :meth:`Database.compact` frees them."""
FREE_MIN_BYTES = 4 << 20
"""Free pages under this many bytes are left alone, however large their share of a small file."""
FREE_PRAGMAS = ("freelist_count", "page_count", "page_size")
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


class Table:
    """The statements over one part of the schema, run on the database's connection of the calling thread;
    a write method that takes ``db`` runs inside the caller's transaction (:meth:`Database.tx`)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    @property
    def db(self) -> sqlite3.Connection:
        return self.database.db
