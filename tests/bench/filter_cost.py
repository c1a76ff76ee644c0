"""What a search filter costs inside the indexer, at SciFact size, without the model.

``python -m tests.bench.filter_cost --db PATH [--queries N]``: PATH is the ``index.sqlite`` of a home that has
indexed SciFact (``python -m tests.bench.filters --home DIR`` makes one; its files are dated 2020-2025 by
position). The database is copied (the home is left alone); every chunk of the copy is given a random unit
vector, Tantivy and usearch are built from the copy, and :class:`SearchService` answers hybrid searches for
the SciFact queries with and without each filter. The query vector is random too (the same for a query with
every filter), so the semantic ranking means nothing here but its cost is the real one: the encoder is the
only part left out, and it costs the same with and without a filter. Reported: the indexer's own time
(``query_ms``) and the keyword and vector stages, median and p95, beside the unfiltered search of the same
queries in the same rounds; and each filter's first search (its resolution in SQLite and its vectors read).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.messages import SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search import filters
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from tests.bench.filters import FILTERS
from tests.bench.scifact import scifact_queries

NDIM = 384


class FixedEncoder:
    """Stands in for the query model: a random unit vector per query (the bench measures what follows it)."""

    state = "ready"
    backend = "random"
    backend_note = ""

    def __init__(self) -> None:
        self.vectors: dict[str, NDArray[np.float32]] = {}
        self.rng = np.random.default_rng(7)

    def encode(self, query: str, ndim: int, index_model: str | None) -> tuple[NDArray[np.float32] | None, str]:
        if query not in self.vectors:
            v = self.rng.standard_normal(ndim).astype(np.float32)
            self.vectors[query] = v / np.linalg.norm(v)
        return self.vectors[query], ""


def build(db: Path, work: Path) -> SearchService:
    copy = work / "index.sqlite"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    store = Store(copy)
    rng = np.random.default_rng(1)
    ids = [int(r[0]) for r in store.db.execute("SELECT id FROM chunks ORDER BY id")]
    matrix = rng.standard_normal((len(ids), NDIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    with store.tx() as tx:
        rows = [(m.tobytes(), i) for i, m in zip(ids, matrix, strict=True)]
        tx.executemany("UPDATE chunks SET vector = ? WHERE id = ?", rows)
    vectors = VectorIndex(work / "vectors.usearch", NDIM)
    vectors.add(ids, matrix)
    bm25 = KeywordIndex(work / "tantivy")
    doc_ids = [int(r[0]) for r in store.db.execute("SELECT id FROM documents WHERE status = 'indexed'")]
    bm25.replace(doc_ids, store.journal.chunks_for_index(doc_ids))
    bm25.commit()
    return SearchService(store, bm25, vectors, FixedEncoder(), SearchPolicy())  # type: ignore[arg-type]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fmfc-"))
    try:
        t0 = time.perf_counter()
        service = build(args.db, work)
        chunks = len(service.vectors)
        print(f"built in {time.perf_counter() - t0:.1f} s: {chunks} chunks")
        queries = scifact_queries()[: args.queries]
        first: dict[str, float] = {}
        for q in queries[:10]:
            service.search(SearchRequest(q, "hybrid", 10))
        for name, spec in FILTERS.items():
            first[name] = service.search(SearchRequest(queries[0], "hybrid", 10, **spec)).query_ms
        stages: dict[str, dict[str, list[float]]] = {n: {"all": [], "keyword": [], "vector": []} for n in FILTERS}
        results: dict[str, list[int]] = {n: [] for n in FILTERS}
        load = os.getloadavg()
        for i, q in enumerate(queries):
            order = list(FILTERS.items()) if i % 2 == 0 else list(FILTERS.items())[::-1]
            for name, spec in order:
                reply = service.search(SearchRequest(q, "hybrid", 10, **spec))
                stages[name]["all"].append(reply.query_ms)
                stages[name]["keyword"].append(reply.timings["keyword"])
                stages[name]["vector"].append(reply.timings["vector"])
                results[name].append(len(reply.results))
        after = os.getloadavg()
        print(f"{len(queries)} queries, {chunks} chunks; load average {load} before, {after} after")
        print(
            "| filter | documents | indexer median ms | p95 | keyword median | vector median | first search ms "
            "| results |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, spec in FILTERS.items():
            s = stages[name]
            wanted = filters.parse(
                spec.get("file_types"),
                spec.get("path_glob"),
                spec.get("modified_after"),
                spec.get("modified_before"),
                list,
            )
            admitted = (
                len(service.filters.admitted(wanted, None).docs)
                if wanted.active
                else service.store.census.totals()["files_indexed"]
            )
            print(
                f"| {name} | {admitted:,} | {statistics.median(s['all']):.1f} | {pct(s['all'], 0.95):.1f} | "
                f"{statistics.median(s['keyword']):.2f} | {statistics.median(s['vector']):.2f} | {first[name]:.1f} | "
                f"{statistics.mean(results[name]):.1f} |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
