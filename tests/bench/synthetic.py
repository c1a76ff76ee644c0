"""A synthetic corpus for the single-box ceiling (:mod:`tests.bench.ceiling`), written through the indexer's
own storage code, so the files on disk are exactly what the product writes and serves.

Text: sentences of the SciFact abstracts (real scientific prose nobody on the project wrote) drawn at random
and recombined into chunks of 110-160 words, about what the parser's chunker cuts at its default 256 tokens
(SciFact's own chunks hold 190-230 tokens in 745-870 characters). Sentences of every abstract that a judged
SciFact query names as relevant are left out, so the distractors never repeat a relevant abstract's text.
A document has a geometric number of chunks (mean 10, at most 40), one paragraph a chunk; its file is
written under the synthetic folder (``NNN/syn-NNNNNNN.txt``, a thousand a directory), so the rows' size,
mtime and sha256 are the file's and ``read_document`` reads it.

Vectors: random unit vectors (float32, the model's 384 dimensions), recorded as made by the model and
precision the index already holds (the real SciFact subset's), so the indexer takes them as current and
never embeds them again. ``[ingest] embed_quantize = "int8"`` is the model's precision only: every vector is
stored as float32 in SQLite and as half floats in the usearch file (``dtype="f16"`` in :mod:`.vectors`) whatever it is.

The writes are the ingest thread's: ``Documents.mark_pending`` + ``Documents.write`` (chunks journaled for
Tantivy) in one transaction per batch of documents (the pipeline makes one per document: batching changes
the commit count, not the rows), ``Embeddings.store``, the journal applied to ``KeywordIndex`` exactly as
``KeywordJournal.apply`` does (one commit per ~50k chunks), then ``VectorIndex.add`` (one thread, as the
pipeline adds) and ``VectorIndex.save`` (every 100k chunks and at the end). Not written: the per-document
analysis (``get_document_summary``'s row, ~1 KB a document against ~25 KB of chunks and vectors), so SQLite
is a few percent smaller than a parsed folder's. Growing is resumable: the next document number is the
folder's document count, and what a run cut short left half-done (chunks without vectors, vectors not in the
usearch file, journal entries not in Tantivy) is finished first.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.messages import EXTRACTION
from foldermind.workers.indexer.storage.folders import Folder
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

FOLDER_NAME = "synthetic"
WORDS = (110, 160)
CHUNKS_P = 0.1  # a document's chunks: geometric, mean 1 / p = 10
MAX_CHUNKS = 40
TOKENS_PER_WORD = 1.6
"""``chunks.tokens`` is stored, read by nothing that searches: estimated from SciFact's chunks (~1.6 model
tokens a word of biomedical prose) instead of running the tokenizer a million times."""
DOCS_PER_BATCH = 500
COMMIT_CHUNKS = 50_000
SAVE_CHUNKS = 100_000
"""The usearch file is saved this often while growing: a run cut short loses at most these inserts (the next
run adds them again from SQLite, at the same ~1-5 ms an insert)."""
PER_DIR = 1000
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def judged_docs(scifact: Path) -> set[str]:
    with open(scifact / "qrels.tsv", encoding="utf-8") as fh:
        return {row["corpus-id"] for row in csv.DictReader(fh, delimiter="\t")}


def sentences(scifact: Path) -> list[str]:
    """Sentences of 4-60 words of every SciFact abstract no judged query names."""
    skip = judged_docs(scifact)
    out: list[str] = []
    with open(scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            if str(doc["_id"]) in skip:
                continue
            out.extend(s for s in _SENTENCE.split(doc["text"].strip()) if 4 <= len(s.split()) <= 60)
    return out


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> NDArray[np.float32]:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


@dataclass(slots=True)
class Timings:
    """Wall-clock seconds of one growth step, by part."""

    chunks: int = 0
    docs: int = 0
    text_s: float = 0.0  # sentences drawn, files written and hashed
    sqlite_s: float = 0.0  # documents, chunks and vectors rows
    tantivy_s: float = 0.0  # the journal applied, commits, merges waited for
    usearch_s: float = 0.0  # HNSW inserts and the save
    repaired: int = 0  # vectors a cut-short run had left out, put back first
    total_s: float = 0.0
    notes: list[str] = field(default_factory=list)


class Synthetic:
    """``Synthetic(data_dir, folder, scifact).grow(chunks)``: add documents to the index in ``data_dir`` (the
    home's data folder) until the synthetic folder holds at least ``chunks`` chunks. The index must already
    hold vectors of a model (the real subset's): their model and precision are what these are recorded as."""

    def __init__(self, data_dir: Path, folder: Path, scifact: Path, seed: int = 19) -> None:
        self.seed = seed
        self.store = Store(data_dir / "index.sqlite")
        if self.store.get_meta("extraction") != str(EXTRACTION):
            raise ValueError(f"{data_dir} was not indexed by this version's indexer (extraction {EXTRACTION})")
        self.model = self.store.embeddings.model()
        if not self.model[0]:
            raise ValueError(f"{data_dir} holds no vectors yet: index the real subset first")
        self.dim = int(self.store.get_meta("vector_dim", "384"))
        self.bm25 = KeywordIndex(data_dir / "tantivy")
        self.vectors = VectorIndex(data_dir / "vectors.usearch", self.dim)
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = self._folder(str(folder.resolve()))
        self.pool = sentences(scifact)

    def _folder(self, path: str) -> Folder:
        for f in self.store.folders.all():
            if f.path == path:
                return f
        return self.store.folders.add(path, FOLDER_NAME, "a synthetic corpus for the single-box ceiling bench")

    def counts(self) -> tuple[int, int]:
        """(documents, chunks) of the synthetic folder."""
        row = self.store.db.execute(
            "SELECT COUNT(DISTINCT d.id), COUNT(c.id) FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id "
            "WHERE d.folder_id = ?",
            (self.folder.id,),
        ).fetchone()
        return int(row[0]), int(row[1])

    def close(self) -> None:
        self.bm25.close()
        self.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ---------------------------------------------------------------------------------------

    def grow(
        self, chunks: int, say: Callable[[str], None] | None = None, stop: threading.Event | None = None
    ) -> Timings:
        """Add documents until the folder holds ``chunks`` chunks, or ``stop`` is set (then the index is left
        consistent at a batch's end: Tantivy committed, the usearch file saved)."""
        t = Timings()
        t0 = time.monotonic()
        t.repaired = self._repair(t)
        docs, have = self.counts()
        since_commit = since_save = 0
        while have < chunks and not (stop is not None and stop.is_set()):
            batch = self._documents(docs, DOCS_PER_BATCH, t)
            ids = self._write(batch, t)
            matrix = unit_vectors(np.random.default_rng([self.seed, docs]), len(ids), self.dim)
            s = time.monotonic()
            self.store.embeddings.store(ids, [row.tobytes() for row in matrix])
            t.sqlite_s += time.monotonic() - s
            since_commit += len(ids)
            if since_commit >= COMMIT_CHUNKS:
                self._apply_journal(t)
                since_commit = 0
            s = time.monotonic()
            self.vectors.add(ids, matrix)
            since_save += len(ids)
            if since_save >= SAVE_CHUNKS:
                self.vectors.save()
                since_save = 0
            t.usearch_s += time.monotonic() - s
            docs += len(batch)
            have += len(ids)
            t.docs += len(batch)
            t.chunks += len(ids)
            if say is not None:
                say(f"  {have:,} synthetic chunks ({time.monotonic() - t0:.0f} s)")
        if have < chunks:
            t.notes.append(f"stopped at {have:,} chunks, before the {chunks:,} asked")
        self._apply_journal(t)
        s = time.monotonic()
        self.bm25.close()  # waits for Tantivy's merges: part of the build
        t.tantivy_s += time.monotonic() - s
        s = time.monotonic()
        self.vectors.save()
        t.usearch_s += time.monotonic() - s
        self.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        t.total_s = time.monotonic() - t0
        return t

    def _documents(self, first: int, n: int, t: Timings) -> list[tuple[Path, list[str]]]:
        """``n`` documents from number ``first`` on: (path, chunk texts), each file written."""
        s = time.monotonic()
        out = []
        root = Path(self.folder.path)
        for number in range(first, first + n):
            rng = np.random.default_rng([self.seed, number])
            chunks = [self._chunk(rng) for _ in range(min(int(rng.geometric(CHUNKS_P)), MAX_CHUNKS))]
            path = root / f"{number // PER_DIR:04d}" / f"syn-{number:07d}.txt"
            path.parent.mkdir(exist_ok=True)
            path.write_text("\n\n".join(chunks) + "\n", encoding="utf-8")
            out.append((path, chunks))
        t.text_s += time.monotonic() - s
        return out

    def _chunk(self, rng: np.random.Generator) -> str:
        target = int(rng.integers(WORDS[0], WORDS[1] + 1))
        parts: list[str] = []
        words = 0
        while words < target:
            sentence = self.pool[int(rng.integers(len(self.pool)))]
            parts.append(sentence)
            words += len(sentence.split())
        return " ".join(parts)

    def _write(self, batch: list[tuple[Path, list[str]]], t: Timings) -> list[int]:
        """The documents and their chunks in one transaction; returns the new chunk ids in order."""
        s = time.monotonic()
        rows = []
        for path, chunks in batch:
            data = path.read_bytes()
            st = path.stat()
            rows.append((str(path), st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest(), _chunk_rows(chunks)))
        t.text_s += time.monotonic() - s
        s = time.monotonic()
        ids: list[int] = []
        with self.store.tx() as db:
            for path_s, size, mtime_ns, digest, chunk_rows in rows:
                self.store.documents.mark_pending(db, self.folder.id, path_s, size, mtime_ns)
                doc_id = int(db.execute("SELECT id FROM documents WHERE path = ?", (path_s,)).fetchone()[0])
                ids += self.store.documents.write(db, doc_id, size, mtime_ns, digest, "txt", None, None, chunk_rows)
        t.sqlite_s += time.monotonic() - s
        return ids

    def _apply_journal(self, t: Timings) -> None:
        """``Pipeline._apply_journal``: the journal since the last Tantivy commit, replayed and committed."""
        s = time.monotonic()
        applied = int(self.store.get_meta("tantivy_seq", "0"))
        seq, doc_ids = self.store.journal.after(applied)
        if doc_ids:
            self.bm25.replace(doc_ids, self.store.journal.chunks_for_index(doc_ids))
            self.bm25.commit()
            self.store.journal.applied(seq)
        t.tantivy_s += time.monotonic() - s

    def _repair(self, t: Timings) -> int:
        """Finish what a run cut short: synthetic chunks without a vector get one (seeded by the chunk id), and
        vectors SQLite holds but the usearch file lacks are added (``Pipeline._reconcile_vectors``' rule)."""
        bare = [
            int(r[0])
            for r in self.store.db.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.folder_id = ? AND c.vector IS NULL",
                (self.folder.id,),
            )
        ]
        if bare:
            blobs = [unit_vectors(np.random.default_rng([self.seed, -1, i]), 1, self.dim)[0].tobytes() for i in bare]
            self.store.embeddings.store(bare, blobs)
        self._apply_journal(t)
        wanted = np.asarray(self.store.embeddings.ids(), dtype=np.uint64)
        missing = np.setdiff1d(wanted, self.vectors.keys())
        for start in range(0, len(missing), 2000):
            part = self.store.embeddings.get([int(k) for k in missing[start : start + 2000]])
            if part:
                matrix = np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in part])
                self.vectors.add([k for k, _ in part], matrix)
        if len(missing):
            self.vectors.save()
            t.notes.append(f"{len(missing):,} vectors of a cut-short run added to the usearch file first")
        return len(missing) + len(bare)


def _chunk_rows(chunks: list[str]) -> list[dict[str, object]]:
    """The parser's chunk fields for a plain-text file of one paragraph a chunk, a blank line between."""
    rows: list[dict[str, object]] = []
    char = 0
    for i, text in enumerate(chunks):
        line = 1 + 2 * i
        rows.append(
            {
                "ordinal": i,
                "text": text,
                "tokens": int(len(text.split()) * TOKENS_PER_WORD),
                "heading": None,
                "page_start": None,
                "page_end": None,
                "line_start": line,
                "line_end": line,
                "char_start": char,
                "char_end": char + len(text),
            }
        )
        char += len(text) + 2
    return rows


def dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def disk(data_dir: Path) -> dict[str, int]:
    """The index's bytes on disk: SQLite (with its WAL), Tantivy and the usearch file."""
    sqlite = sum(dir_bytes(p) for p in data_dir.glob("index.sqlite*"))
    return {
        "sqlite": sqlite,
        "tantivy": dir_bytes(data_dir / "tantivy"),
        "usearch": dir_bytes(data_dir / "vectors.usearch") if (data_dir / "vectors.usearch").exists() else 0,
    }


def tantivy_segments(data_dir: Path) -> int:
    meta = data_dir / "tantivy" / "meta.json"
    return len(json.loads(meta.read_text())["segments"]) if meta.exists() else 0


def corpus_bytes(folder: Path) -> int:
    return dir_bytes(folder) if folder.exists() else 0
