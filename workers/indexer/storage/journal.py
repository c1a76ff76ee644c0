"""The journal of documents whose keyword-index entries are out of date (``journal``), replayed into Tantivy
until a Tantivy commit covers it (``meta.tantivy_seq``): what to replay, the chunks it reads, and the census
the keyword index is checked against at start."""

from __future__ import annotations

import sqlite3

from foldermind.workers.indexer.storage.database import SEARCHABLE_SQL, Table


class Journal(Table):
    def after(self, seq: int, limit: int = -1) -> tuple[int, list[int]]:
        """The last seq of (at most ``limit``, -1: all) journal rows after ``seq``, and their documents."""
        rows = self.db.execute(
            "SELECT seq, doc_id FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()
        if not rows:
            return seq, []
        return int(rows[-1][0]), sorted({int(r[1]) for r in rows})

    def size(self) -> int:
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
            f" WHERE {SEARCHABLE_SQL} AND d.id NOT IN (SELECT doc_id FROM journal)"
        ).fetchone()
        return journaled, int(row[0]), int(row[1])

    def applied(self, seq: int) -> None:
        with self.database.tx() as db:
            self.database.set_meta(db, "tantivy_seq", str(seq))
            db.execute("DELETE FROM journal WHERE seq <= ?", (seq,))

    def rebuild_keyword_index(self, version: int) -> int:
        """Journal every indexed document for a Tantivy index of fields ``version`` (the caller has emptied
        the old one) and record the version, in one transaction; returns how many documents."""
        with self.database.tx() as db:
            n = db.execute(f"INSERT INTO journal(doc_id) SELECT id FROM documents d WHERE {SEARCHABLE_SQL}").rowcount
            self.database.set_meta(db, "tantivy_schema", str(version))
        return n

    def chunks_for_index(self, doc_ids: list[int]) -> list[sqlite3.Row]:
        out: list[sqlite3.Row] = []
        for start in range(0, len(doc_ids), 500):
            part = doc_ids[start : start + 500]
            marks = ",".join("?" * len(part))
            out.extend(
                self.db.execute(
                    "SELECT c.id, c.doc_id, c.text, c.heading, d.folder_id, d.language, d.path, d.title, d.mtime_ns "
                    f"FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.doc_id IN ({marks})"
                    f" AND {SEARCHABLE_SQL}",
                    part,
                )
            )
        return out
