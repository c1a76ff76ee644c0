"""Each document's analysis (``analysis``, ``analysis_due``): what ``get_document_summary`` returns.

Writing a document's chunks drops its analysis and marks a new one due (same transaction,
:class:`.lifecycle.Documents`); the ingest thread writes the deterministic half anew and the LLM worker
enriches it later. Reading it is a plain lookup, by the current path or by the path the file had when it was
analyzed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldermind.workers.indexer.storage.database import Table


@dataclass(frozen=True, slots=True)
class DueDocument:
    """An indexed document whose analysis is due, with what
    :func:`foldermind.workers.indexer.analysis.analyze` takes besides its text."""

    id: int
    path: str
    format: str
    title: str | None
    mtime_ns: int
    language: str | None
    written_at: float
    """When the content was written: the analysis's date (``analyzed_at``), however often it is made."""


def _due_document(r: sqlite3.Row) -> DueDocument:
    return DueDocument(int(r[0]), str(r[1]), r[2] or "", r[3], int(r[4]), r[5], float(r[6]))


def analysis_map(fields: Mapping[str, Any], analyzed_at: float, file_path: str, language: str | None) -> dict[str, Any]:
    """A document's analysis as ``doc.summary`` answers it: the analysed fields and when the content they
    describe was written, where the document is and its language (a stored analysis and one made on the
    spot for a document whose analysis is due have this one shape)."""
    return {**fields, "analyzed_at": analyzed_at, "file_path": file_path, "language": language}


class Analyses(Table):
    _DUE = (
        "SELECT d.id, d.path, d.format, d.title, d.mtime_ns, d.language, q.written_at FROM analysis_due q "
        "JOIN documents d ON d.id = q.doc_id WHERE d.status = 'indexed' "
    )

    def due(self, limit: int) -> list[DueDocument]:
        """Indexed documents whose deterministic analysis is due, in id order."""
        rows = self.db.execute(self._DUE + "ORDER BY q.doc_id LIMIT ?", (limit,))
        return [_due_document(r) for r in rows]

    def due_at(self, path: str) -> DueDocument | None:
        """The indexed document now at ``path`` if its analysis is due."""
        r = self.db.execute(self._DUE + "AND d.path = ?", (path,)).fetchone()
        return _due_document(r) if r else None

    def store(self, done: Sequence[tuple[DueDocument, Mapping[str, Any] | None]]) -> None:
        """Record the analyses of due documents (None: it failed; the document stays without one) in one
        transaction. A document written again since it was read is due again and is left alone."""
        with self.database.tx() as db:
            for doc, fields in done:
                gone = db.execute(
                    "DELETE FROM analysis_due WHERE doc_id = ? AND written_at = ?", (doc.id, doc.written_at)
                ).rowcount
                if gone and fields is not None:
                    self.write(db, doc.id, doc.path, fields, doc.written_at)

    def write(
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
        LLM, oldest first. Pass analyzed_at back to :meth:`enrich` so a re-analysis meanwhile wins."""
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

    def enrich(self, doc_id: int, updates: dict[str, Any], state: int, *, analyzed_at: float | None = None) -> bool:
        """Merge ``updates`` into the document's analysis and set its enrichment ``state`` (1 done, 2 gave
        up; 0 to retry). False, changing nothing, when the row is gone, or when ``analyzed_at`` is given
        and the row no longer has it: the file was re-analyzed meanwhile, the updates describe old content."""
        if state not in (0, 1, 2):
            raise ValueError(f"enrichment state must be 0, 1 or 2, not {state!r}")
        # analyzed_at and file_path are columns that Analyses.get adds, never fields.
        extra = {k: v for k, v in updates.items() if k not in ("analyzed_at", "file_path")}
        with self.database.tx() as db:
            row = db.execute("SELECT fields, analyzed_at FROM analysis WHERE doc_id = ?", (doc_id,)).fetchone()
            if row is None or (analyzed_at is not None and row[1] != analyzed_at):
                return False
            fields: dict[str, Any] = {**json.loads(row[0]), **extra}
            db.execute(
                "UPDATE analysis SET fields = ?, enriched = ?, analyzed_at = ? WHERE doc_id = ?",
                (json.dumps(fields, ensure_ascii=False), state, time.time(), doc_id),
            )
        return True

    def get(self, path: str) -> dict[str, Any] | None:
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
