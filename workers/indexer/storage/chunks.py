"""Reads of the stored chunks (``chunks``): where they sit in their document (``read_document``, OCR notes,
quotes' places) and the rows a search's hits are shown from."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from dataclasses import dataclass

from foldermind.workers.indexer.storage.database import SEARCHABLE_SQL, Table


@dataclass(frozen=True, slots=True)
class ChunkPos:
    """Where a stored chunk sits in its document's extracted text."""

    ordinal: int
    text: str
    char_start: int
    line_start: int
    line_end: int


class Chunks(Table):
    def count(self, doc_id: int) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", (doc_id,)).fetchone()[0])

    def last_line(self, doc_id: int) -> int:
        # The last chunk ends last (chunks are in document order): one index lookup, no scan.
        row = self.db.execute(
            "SELECT line_end FROM chunks WHERE doc_id = ? ORDER BY ordinal DESC LIMIT 1", (doc_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def line_end(self, doc_id: int, ordinal: int) -> int:
        row = self.db.execute(
            "SELECT line_end FROM chunks WHERE doc_id = ? AND ordinal = ?", (doc_id, ordinal)
        ).fetchone()
        return int(row[0]) if row else 0

    def from_ordinal(self, doc_id: int, ordinal: int) -> Generator[ChunkPos, None, None]:
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

    def place(self, chunk_id: int) -> tuple[int, int] | None:
        """(document id, ordinal) of a chunk that exists now."""
        row = self.db.execute("SELECT doc_id, ordinal FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def file(self, chunk_id: int) -> str | None:
        """The path of the document holding a chunk that exists now."""
        row = self.db.execute(
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?", (chunk_id,)
        ).fetchone()
        return str(row[0]) if row else None

    def lines(self, doc_id: int, first: int, last: int) -> tuple[int, int, int, int] | None:
        """(first ordinal, last ordinal, first line, last line) of the document's chunks ``first..last``."""
        row = self.db.execute(
            "SELECT MIN(ordinal), MAX(ordinal), MIN(line_start), MAX(line_end) FROM chunks "
            "WHERE doc_id = ? AND ordinal BETWEEN ? AND ?",
            (doc_id, first, last),
        ).fetchone()
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]), int(row[2]), int(row[3]))

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
                f"WHERE c.id IN ({marks}) AND {SEARCHABLE_SQL}",
                part,
            )
            out.update((int(r["id"]), r) for r in rows)
        return out
