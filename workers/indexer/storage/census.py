"""The index's counts by document status (``index.status``) and its documents that failed or were skipped,
over the whole index or over the documents a scoped client key sees."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from foldermind.workers.indexer.storage.database import STATUS_COUNTS, Table


class Census(Table):
    def totals(self) -> dict[str, int]:
        counts = {"files_total": 0, "files_indexed": 0, "files_failed": 0, "files_skipped": 0, "files_pending": 0}
        for status, n in self.db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"):
            counts["files_total"] += n
            key = STATUS_COUNTS.get(status)
            if key:
                counts[key] += n
        counts["chunks"] = int(
            self.db.execute("SELECT COUNT(id) FROM chunks").fetchone()[0]
        )  # embedded: Embeddings.count
        return counts

    # Documents ``:ids`` outside the folders ``:besides`` (JSON lists): a client key's criteria folders' own.
    _AMONG_IDS = (
        "SELECT d.* FROM json_each(:ids) j JOIN documents d ON d.id = j.value "
        "WHERE d.folder_id NOT IN (SELECT value FROM json_each(:besides))"
    )

    def totals_among(self, ids: Iterable[int], besides: Iterable[str], arriving: tuple[int, ...]) -> dict[str, int]:
        """:meth:`totals` with ``chunks_embedded`` (as :meth:`.embeddings.Embeddings.count` counts it) over
        documents ``ids`` outside the folders ``besides``, in one statement (one snapshot)."""
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
