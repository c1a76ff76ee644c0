"""The documents' lifecycle (``documents``): recorded pending, parsed into chunks (whole, or page by page while
``indexing``), indexed, failed (and tried again when asked) or skipped, moved, touched, deleted; and the reads that
pick the next to parse.

Every write that changes what the keyword index holds appends the document to ``journal`` in the same
transaction (:class:`.journal.Journal` replays it into Tantivy), and a write of new content drops the
document's analysis and marks a new one due (:class:`.analyses.Analyses`). A new chunk whose text an old chunk
of the document had keeps that chunk's vector (``reusable``): a document parsed again is embedded again only
where its text changed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldermind.workers.indexer.storage.database import Table
from foldermind.workers.ingest_rules import read_with_ocr


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


class Documents(Table):
    def in_folder(self, folder_id: str) -> dict[str, Document]:
        rows = self.db.execute(
            "SELECT id, folder_id, path, size, mtime_ns, sha256, status, attempts FROM documents WHERE folder_id = ?",
            (folder_id,),
        )
        return {r["path"]: Document(*r) for r in rows}

    def get(self, path: str) -> Document | None:
        r = self.db.execute(
            "SELECT id, folder_id, path, size, mtime_ns, sha256, status, attempts FROM documents WHERE path = ?",
            (path,),
        ).fetchone()
        return Document(*r) if r else None

    def mark_pending(self, db: sqlite3.Connection, folder_id: str, path: str, size: int, mtime_ns: int) -> None:
        db.execute(
            "INSERT INTO documents(folder_id, path, original_path, size, mtime_ns, status, attempts, updated_at, ocr) "
            "VALUES(?, ?, ?, ?, ?, 'pending', 0, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET status = 'pending', attempts = 0, error = NULL, "
            "updated_at = excluded.updated_at, ocr = excluded.ocr",
            (folder_id, path, path, size, mtime_ns, time.time(), read_with_ocr(path)),
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

    def delete(self, db: sqlite3.Connection, doc_ids: Iterable[int]) -> None:
        ids = [(d,) for d in doc_ids]
        db.executemany("INSERT INTO journal(doc_id) VALUES(?)", ids)
        db.executemany("DELETE FROM documents WHERE id = ?", ids)

    def move(self, db: sqlite3.Connection, old: str, new: str, folder_id: str) -> bool:
        """Point a document at its new path, keeping its chunks and analysis. False if unknown."""
        row = db.execute("SELECT id, folder_id FROM documents WHERE path = ?", (old,)).fetchone()
        if row is None:
            return False
        replaced = [r[0] for r in db.execute("SELECT id FROM documents WHERE path = ?", (new,))]
        self.delete(db, replaced)  # a file moved over another
        db.execute(
            "UPDATE documents SET path = ?, folder_id = ?, updated_at = ?, ocr = ? WHERE id = ?",
            (new, folder_id, time.time(), read_with_ocr(new), row[0]),
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

    def pending(self, limit: int, ocr: bool | None = None) -> list[Document]:
        """The next documents to parse: pending, and ``indexing`` (pages indexed, the rest not yet; the caller
        leaves out those whose parse runs): parsed again from the start, their pages searchable meanwhile.
        ``ocr``: only image files (True), only the others (False), or all (None), each by id."""
        columns = "id, folder_id, path, size, mtime_ns, sha256, status, attempts"
        lane, args = ("", ()) if ocr is None else (" AND ocr = ?", (int(ocr),))
        rows = self.db.execute(
            f"SELECT {columns} FROM documents WHERE status = 'pending'{lane} UNION ALL "
            f"SELECT {columns} FROM documents WHERE status = 'indexing'{lane} ORDER BY id LIMIT ?",
            (*args, *args, limit),
        )
        return [Document(*r) for r in rows]

    def set_failed(self, doc_id: int, error: str) -> None:
        with self.database.tx() as db:
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

    def retry_failed(self, db: sqlite3.Connection, folder_id: str | None) -> int:
        """The failed documents of the folder (of every folder with None) to be parsed again, as a changed file
        is: a file quarantined stays so until its bytes change, which a fixed parser or cause does not do."""
        where, args = ("AND folder_id = ?", (folder_id,)) if folder_id is not None else ("", ())
        cur = db.execute(
            f"UPDATE documents SET status = 'pending', attempts = 0, error = NULL, updated_at = ? "
            f"WHERE status = 'failed' {where}",
            (time.time(), *args),
        )
        return cur.rowcount

    def requeue(self, doc_id: int) -> None:
        self.db.execute("UPDATE documents SET status = 'pending', attempts = 0 WHERE id = ?", (doc_id,))

    def set_attempts(self, doc_id: int, attempts: int) -> None:
        self.db.execute("UPDATE documents SET attempts = ? WHERE id = ?", (attempts, doc_id))

    def mark_unchanged(self, doc_id: int, size: int, mtime_ns: int) -> None:
        """A touched file (new mtime, same bytes): its chunks stay; the journal row has Tantivy read them again,
        since its ``mtime`` field (a date filter inside the keyword query) must follow the file's."""
        with self.database.tx() as db:
            db.execute(
                "UPDATE documents SET status = 'indexed', size = ?, mtime_ns = ? WHERE id = ?", (size, mtime_ns, doc_id)
            )
            db.execute("INSERT INTO journal(doc_id) VALUES(?)", (doc_id,))

    def write(
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
        content's (:mod:`.keyword.languages`); ``None`` leaves it to the Tantivy replay to detect.

        A new chunk whose text an old chunk of the document had keeps that chunk's vector (the same text
        makes the same vector): a file parsed again after an upgrade of the parsers, or edited in one place,
        is embedded again only where its text changed (``Embeddings.get(ids)`` gives the kept ones, for usearch)."""
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
        with self.database.tx() as db:
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

    def state(self, path: str) -> tuple[int, str, str | None] | None:
        """(id, status, error) of the document at ``path``."""
        r = self.db.execute("SELECT id, status, error FROM documents WHERE path = ?", (path,)).fetchone()
        return (int(r[0]), str(r[1]), r[2]) if r else None

    def page(self, folder_id: str | None, after: int, limit: int, statuses: Sequence[str]) -> list[sqlite3.Row]:
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

    def filter_candidates(self, folder_id: str | None) -> list[tuple[int, str, int, str, str]]:
        """(id, path, mtime_ns, status, folder path) of every document, or of one folder's, for a search filter."""
        where, args = ("WHERE d.folder_id = ?", (folder_id,)) if folder_id is not None else ("", ())
        rows = self.db.execute(
            f"SELECT d.id, d.path, d.mtime_ns, d.status, f.path FROM documents d JOIN folders f ON f.id = d.folder_id "
            f"{where}",
            args,
        )
        return [(int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]

    def set_languages(self, languages: Mapping[int, str]) -> None:
        """Record documents' detected languages (doc id -> code)."""
        with self.database.tx() as db:
            db.executemany("UPDATE documents SET language = ? WHERE id = ?", [(v, k) for k, v in languages.items()])
