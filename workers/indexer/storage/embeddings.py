"""The chunks' vectors kept in SQLite (``chunks.vector``, ``dead_vectors``): which chunks wait to be embedded,
storing and dropping vectors, the counts a folder's progress shows, and what the usearch file is rebuilt and
checked from. The model and precision the vectors were made with are in ``meta``.

A chunk's vectors, one per unit (:mod:`foldermind.workers.indexer.ingest.units`), are one blob: :func:`pack`
writes it, :func:`unpack` reads it, :func:`stack` turns blobs into what usearch takes (:mod:`.vectors`)."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.indexer.storage.database import SEARCHABLE_SQL, Table


class Embeddings(Table):
    def model(self) -> tuple[str, str]:
        """(model, precision) of the stored vectors; ("", "") before any. An index made before precisions
        were recorded holds fp32 vectors (the only precision there was)."""
        model = self.database.get_meta("embed_model")
        return (model, self.database.get_meta("embed_precision") or "fp32") if model else ("", "")

    def reembedding(self) -> str:
        """While the index is being embedded again after a change of model or precision, what it held
        before (:func:`~foldermind.workers.embedding.model_files.vectors_key`); empty otherwise."""
        return self.database.get_meta("embed_reembedding")

    def reembedded(self) -> None:
        with self.database.tx() as db:
            self.database.set_meta(db, "embed_reembedding", "")

    def unembedded(self, limit: int, exclude: set[int]) -> list[tuple[int, str, str, str]]:
        """(id, text, its document's title or "", the start of its document's first chunk) of chunks without
        vectors: what :mod:`foldermind.workers.indexer.ingest.units` makes the texts they are embedded as of."""
        rows = self.db.execute(
            "SELECT c.id, c.text, d.title, (SELECT substr(f.text, 1, 1000) FROM chunks f WHERE f.doc_id = c.doc_id "
            "ORDER BY f.ordinal LIMIT 1) FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE c.vector IS NULL AND {SEARCHABLE_SQL} ORDER BY c.id LIMIT ?",
            (limit + len(exclude),),
        )
        found = [(int(r[0]), str(r[1]), str(r[2] or ""), str(r[3] or "")) for r in rows]
        return [row for row in found if row[0] not in exclude][:limit]

    def store(self, ids: list[int], blobs: list[bytes]) -> list[int]:
        """Save vectors of chunks that still exist; returns those ids."""
        kept: list[int] = []
        with self.database.tx() as db:
            for chunk_id, blob in zip(ids, blobs, strict=True):
                if db.execute("UPDATE chunks SET vector = ? WHERE id = ?", (blob, chunk_id)).rowcount:
                    kept.append(chunk_id)
        return kept

    def drop_all(self, model: str, precision: str, reembedding: str) -> int:
        """Forget every stored vector and record that the index now takes vectors of ``model`` at
        ``precision`` and is being embedded again (``embed_reembedding``: what it held), in one transaction;
        the chunks stay (keyword search is untouched). Returns how many vectors were dropped."""
        with self.database.tx() as db:
            dropped = db.execute("UPDATE chunks SET vector = NULL WHERE vector IS NOT NULL").rowcount
            db.execute("DELETE FROM dead_vectors")
            self.database.set_meta(db, "embed_model", model)
            self.database.set_meta(db, "embed_precision", precision)
            self.database.set_meta(db, "embed_reembedding", reembedding)
        return int(dropped)

    def count(self, folder_id: str | None, arriving: Callable[[], tuple[int, ...]]) -> int:
        """How many chunks (of ``folder_id``'s documents, or of any) a semantic search finds: those with a vector,
        less the ones ``arriving`` names (committed here, not yet in the vector index). One count, leaving out
        what arrives before it and after it: a count read before a batch's commit and its arrival read after
        would leave out vectors it never counted (a progress bar going backwards)."""
        return self.chunk_counts(folder_id, arriving)[1]

    def chunk_counts(self, folder_id: str | None, arriving: Callable[[], tuple[int, ...]]) -> tuple[int, int]:
        """(chunks, embedded) of ``folder_id``'s documents (or of any), from one snapshot: embedded as
        :meth:`count` counts it. The folder counts ask both at every ``folders.list`` (several a second while
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
        return int(row[0]), int(row[1]) - (self.count_among(late, folder_id) if late else 0)

    # Driven by the ids (a handful of arriving chunks), not by the folder's every chunk.
    _AMONG = (
        "SELECT COUNT(*) FROM json_each({ids}) a CROSS JOIN chunks c ON c.id = a.value "
        "JOIN documents d ON d.id = c.doc_id WHERE c.vector IS NOT NULL {where}"
    )

    def count_among(self, ids: tuple[int, ...], folder_id: str | None) -> int:
        """How many of the chunks ``ids`` (of ``folder_id``'s documents, or of any) have a vector."""
        if not ids:
            return 0
        where, args = ("AND d.folder_id = ?", (folder_id,)) if folder_id is not None else ("", ())
        return int(self.db.execute(self._AMONG.format(ids="?", where=where), (json.dumps(ids), *args)).fetchone()[0])

    def dead(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM dead_vectors")]

    def forget_dead(self, ids: list[int]) -> None:
        with self.database.tx() as db:
            db.executemany("DELETE FROM dead_vectors WHERE id = ?", [(i,) for i in ids])

    def ids(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM chunks WHERE vector IS NOT NULL")]

    def get(self, ids: list[int]) -> list[tuple[int, bytes]]:
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

    def of_document(self, doc_id: int) -> list[tuple[int, bytes]]:
        rows = self.db.execute(
            "SELECT id, vector FROM chunks WHERE doc_id = ? AND vector IS NOT NULL ORDER BY ordinal", (doc_id,)
        )
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def folder_ids(self, folder_id: str) -> list[int]:
        """Ids of the folder's embedded chunks whose document is indexed, ascending."""
        rows = self.db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE d.folder_id = ? AND {SEARCHABLE_SQL} AND c.vector IS NOT NULL ORDER BY c.id",
            (folder_id,),
        )
        return [int(r[0]) for r in rows]

    def ids_of(self, doc_ids: list[int]) -> list[int]:
        """Ids of the embedded chunks of ``doc_ids``, ascending (one statement: the list goes in as JSON)."""
        rows = self.db.execute(
            "SELECT id FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?)) AND vector IS NOT NULL ORDER BY id",
            (json.dumps(doc_ids),),
        )
        return [int(r[0]) for r in rows]


def pack(matrix: NDArray[np.float32]) -> bytes:
    """A chunk's unit vectors (one row each) as the blob SQLite keeps."""
    return np.ascontiguousarray(matrix, dtype=np.float32).tobytes()


def unpack(blob: bytes, ndim: int) -> NDArray[np.float32] | None:
    """The unit vectors of a blob, one row each; ``None`` for a blob of another dimension (a stale leftover)."""
    if not blob or len(blob) % (ndim * 4):
        return None
    return np.frombuffer(blob, dtype=np.float32).reshape(-1, ndim)


def stack(rows: list[tuple[int, bytes]], ndim: int) -> tuple[list[int], NDArray[np.float32]]:
    """Chunks' blobs as usearch takes them: each unit's key (its chunk's id, repeated) and the matrix of units."""
    keys: list[int] = []
    parts: list[NDArray[np.float32]] = []
    for chunk_id, blob in rows:
        matrix = unpack(blob, ndim)
        if matrix is not None:
            keys += [chunk_id] * len(matrix)
            parts.append(matrix)
    return keys, np.vstack(parts) if parts else np.zeros((0, ndim), dtype=np.float32)
