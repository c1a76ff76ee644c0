"""What a criteria Smart Folder costs inside the indexer, at SciFact size, without the model or the parsers.

``FOLDERMIND_SCIFACT=DIR python -m tests.bench.criteria_cost [--rounds N]``: the 5,183 SciFact abstracts are
written straight into a fresh index (SQLite, Tantivy; chunks of ~120 words; each chunk given a random unit
vector, as :mod:`tests.bench.filter_cost` does, since the cost of the vector side does not depend on what the
vectors mean), dated 2020-2025 by position and given the suffixes txt, pdf, docx and md in turn. For each
criteria folder it reports: the documents it holds; its resolution after a commit (the filter read in SQLite
and the keyword match read from Tantivy: what the first listing or search after any change pays); the same
when cached (every later use until the next commit); and a hybrid search scoped to it beside the same search
unscoped, median of the SciFact queries (the indexer's ``query_ms``, the query vector random).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from foldermind.protocol.messages import CriteriaAddRequest, SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer import criteria
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from tests.bench.filter_cost import NDIM, FixedEncoder, pct
from tests.bench.scifact import scifact_dir, scifact_queries

SUFFIXES = (".txt", ".pdf", ".docx", ".md")
WORDS = 120
FOLDERS: dict[str, dict[str, object]] = {
    "common words": {"query": "cell protein"},
    "rare word": {"query": "telomerase"},
    "words, types, a window": {"query": "cancer tumor", "file_types": ["pdf", "docx"], "modified_after": "2023-01-01"},
    "types and a window only": {"file_types": ["txt"], "modified_after": "2022-01-01"},
    "relative window, exclusion": {"query": "gene -mouse", "modified_after": "P1000D"},
}


def build(work: Path) -> SearchService:
    store = Store(work / "index.sqlite")
    root = "/bench/scifact"
    folder = store.folders.add(root, "scifact", "")
    with open(scifact_dir() / "corpus.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    start, span = 1577836800, 6 * 365 * 86400  # 2020-01-01, six years
    with store.tx() as db:
        for i, row in enumerate(rows):
            path = f"{root}/{row['_id']}{SUFFIXES[i % len(SUFFIXES)]}"
            mtime = (start + span * i // len(rows)) * 10**9
            store.documents.mark_pending(db, folder.id, path, 1, mtime)
            doc = db.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()[0]
            words = f"{row.get('title', '')}\n\n{row['text']}".split()
            chunks = [
                {
                    "ordinal": n,
                    "text": " ".join(words[k : k + WORDS]),
                    "tokens": WORDS,
                    "line_start": 1,
                    "line_end": 1,
                    "char_start": 0,
                    "char_end": 0,
                }
                for n, k in enumerate(range(0, max(len(words), 1), WORDS))
            ]
            store.documents.write(db, doc, 1, mtime, str(i), "txt", None, None, chunks)
    ids = [int(r[0]) for r in store.db.execute("SELECT id FROM chunks ORDER BY id")]
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((len(ids), NDIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    with store.tx() as db:
        db.executemany(
            "UPDATE chunks SET vector = ? WHERE id = ?", [(m.tobytes(), i) for i, m in zip(ids, matrix, strict=True)]
        )
    vectors = VectorIndex(work / "vectors.usearch", NDIM)
    vectors.add(ids, matrix)
    bm25 = KeywordIndex(work / "tantivy")
    docs = [int(r[0]) for r in store.db.execute("SELECT id FROM documents")]
    bm25.replace(docs, store.journal.chunks_for_index(docs))
    bm25.commit()
    return SearchService(store, bm25, vectors, FixedEncoder(), SearchPolicy())  # type: ignore[arg-type]


def _stages(timings: dict[str, list[float]]) -> str:
    return " ".join(f"{k[0]}{statistics.median(v):.1f}" for k, v in timings.items() if k != "fuse")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20, help="resolutions timed per folder, cold and cached each")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fmcc-"))
    try:
        t0 = time.perf_counter()
        service = build(work)
        totals = service.store.census.totals()
        print(
            f"built in {time.perf_counter() - t0:.1f} s: {totals['files_indexed']} documents, {totals['chunks']} chunks"
        )
        saved = {}
        for name, spec in FOLDERS.items():
            c = criteria.validate(CriteriaAddRequest(name, **spec), lambda path: "scifact")  # type: ignore[arg-type]
            service.criteria.add(c)
            saved[name] = c
        queries = scifact_queries()[: args.queries]
        for q in queries[:10]:
            service.search(SearchRequest(q, "hybrid", 10))
        load = os.getloadavg()
        print(
            "| criteria folder | documents | resolved after a commit, median ms | p95 | cached, median ms "
            "| hybrid scoped, median ms | p95 | unscoped, median ms | scoped by stage | unscoped by stage |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for name, c in saved.items():
            cold: list[float] = []
            warm: list[float] = []
            for _ in range(args.rounds):
                with service.store.tx() as db:  # a commit: every cache is read again, as after an indexed change
                    service.store.set_meta(db, "bench", str(time.time()))
                t = time.perf_counter()
                held = service.criteria_scopes.admitted(c)
                cold.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                service.criteria_scopes.admitted(c)
                warm.append((time.perf_counter() - t) * 1000)
            scoped: list[float] = []
            plain: list[float] = []
            stages: dict[str | None, dict[str, list[float]]] = {c.id: {}, None: {}}
            for i, q in enumerate(queries):
                pair = [(c.id, scoped), (None, plain)]
                for folder, out in pair if i % 2 == 0 else pair[::-1]:
                    reply = service.search(SearchRequest(q, "hybrid", 10, folder))
                    out.append(reply.query_ms)
                    for stage, ms in reply.timings.items():
                        stages[folder].setdefault(stage, []).append(ms)
            print(
                f"| {name} | {len(held.docs):,} | {statistics.median(cold):.1f} | {pct(cold, 0.95):.1f} | "
                f"{statistics.median(warm):.3f} | {statistics.median(scoped):.1f} | {pct(scoped, 0.95):.1f} | "
                f"{statistics.median(plain):.1f} | {_stages(stages[c.id])} | {_stages(stages[None])} |"
            )
        print(f"load average {load} before, {os.getloadavg()} after")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
