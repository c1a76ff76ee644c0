"""Retrieval quality on SciFact: nDCG@10 and Recall@100 for each search mode and fusion.

``python -m tests.bench.retrieval [--keep] [--reuse HOME] [--limit N] [--json OUT]`` from the
repository root. The 5,183 SciFact abstracts (``../shared/eval/scifact/``, or ``$FOLDERMIND_SCIFACT``;
BEIR format: ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``) are written out as one ``.txt``
file each (title, blank line, text) and indexed by a real kernel in a throw-away home, exactly as
the ingestion bench does (its helpers are reused). Then the 150 test queries run in every mode.

A mode is a :data:`QueryFn`: a query and a number of documents in, document ids out, best first.
The bus modes ask the indexer (``search.request``) for ``2 * n`` chunks and keep each document's
best rank (an abstract may be cut into several chunks), so anything that can answer a query, for
example the MCP front door over HTTP, can be measured the same way by passing its own function to
:func:`evaluate`.

Beside the configured modes, the fusions are swept over parameters: the keyword and the semantic
ranking are fetched once per query (as deep as the indexer fetches them for that many results)
and fused here with the indexer's own functions (:mod:`foldermind.workers.indexer.fusion`), so
``keyword_weight`` and ``rrf_k`` can be compared without restarting the indexer. The sweep's row for
the configured parameters must match the real path's row; the report shows both.

``--reuse HOME`` skips writing and indexing: it starts a kernel on a home kept by ``--keep``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from foldermind.kernel.config import load
from foldermind.kernel.home import Home
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderListReply,
    FolderListRequest,
    SearchReply,
    SearchRequest,
)
from foldermind.workers.indexer import fusion
from foldermind.workers.indexer.search import MAX_TOP_K
from tests.bench.ingest import BenchFailure, Kernel, index_folder, say, scifact_dir, write_corpus

QueryFn = Callable[[str, int], list[str]]
"""(query, how many documents) -> document ids, best first."""
ChunkList = list[tuple[int, float, str]]
"""(chunk id, score, document id), best first: one side's ranking, for the fusion sweep."""

NDCG_K = 10
RECALL_K = 100
KEYWORD_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
RRF_KS = (10, 20, 40, 60, 100)
CHUNKS_PER_DOC = 2
"""Chunks asked per document wanted: most abstracts are one or two chunks."""


# --------------------------------------------------------------------------------------------
# SciFact


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    text: str
    relevant: dict[str, int]  # doc id -> grade


def load_queries() -> list[Query]:
    root = scifact_dir()
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries: list[Query] = []
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                q = json.loads(line)
                if str(q["_id"]) in qrels:
                    queries.append(Query(str(q["_id"]), q["text"], qrels[str(q["_id"])]))
    if not queries:
        raise BenchFailure(f"no SciFact queries with judgements under {root}")
    return queries


def doc_id_of(path: str) -> str:
    """``write_corpus`` names each file after its abstract's id."""
    return Path(path).stem


# --------------------------------------------------------------------------------------------
# metrics


def ndcg(ranked: list[str], relevant: dict[str, int], k: int = NDCG_K) -> float:
    """BEIR's nDCG@k: gain = grade, discount log2(rank + 1), ideal from the judged documents."""
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: list[str], relevant: dict[str, int], k: int = RECALL_K) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def best_rank_docs(doc_ids: list[str], n: int) -> list[str]:
    """Chunk-level document ids -> each document once, at its best rank, the first ``n``."""
    return list(dict.fromkeys(doc_ids))[:n]


@dataclass(slots=True)
class Row:
    label: str
    ndcg10: float
    recall100: float
    ms_per_query: float
    how: str


def evaluate(label: str, fn: QueryFn, queries: list[Query], how: str = "") -> Row:
    """Mean nDCG@10 and Recall@100 of ``fn`` over ``queries``."""
    started = time.perf_counter()
    n_sum = r_sum = 0.0
    for q in queries:
        n_sum += ndcg(fn(q.text, NDCG_K), q.relevant)
        r_sum += recall(fn(q.text, RECALL_K), q.relevant)
    ms = (time.perf_counter() - started) * 1000 / (2 * len(queries))
    return Row(label, n_sum / len(queries), r_sum / len(queries), ms, how)


# --------------------------------------------------------------------------------------------
# query functions over the bus


def bus_query(client: BusClient, mode: str, fuse: str = "") -> QueryFn:
    """A mode as ``foldermind search`` runs it: ``search.request`` to the indexer."""

    def run(query: str, n: int) -> list[str]:
        top_k = min(n * CHUNKS_PER_DOC, MAX_TOP_K)
        reply = client.request("indexer", SearchRequest(query, mode, top_k, None, fuse), SearchReply, timeout=60)
        if reply.body.mode_used != mode:
            raise BenchFailure(f"{mode} answered as {reply.body.mode_used}: {reply.body.note}")
        return best_rank_docs([doc_id_of(hit["file_path"]) for hit in reply.body.results], n)

    return run


def side_lists(client: BusClient, query: str, n: int, depth_min: int) -> tuple[ChunkList, ChunkList]:
    """The keyword and the semantic ranking, as deep as hybrid fetches them for ``n`` documents."""
    top_k = min(n * CHUNKS_PER_DOC, MAX_TOP_K)
    depth = min(max(4 * top_k, depth_min), MAX_TOP_K)
    out: list[ChunkList] = []
    for mode in ("keyword", "semantic"):
        reply = client.request("indexer", SearchRequest(query, mode, depth), SearchReply, timeout=60).body
        out.append([(hit["chunk_id"], hit["score"], doc_id_of(hit["file_path"])) for hit in reply.results])
    return out[0], out[1]


def fused_query(
    lists: Callable[[str, int], tuple[ChunkList, ChunkList]],
    merge: Merge,
) -> QueryFn:
    def run(query: str, n: int) -> list[str]:
        keyword, semantic = lists(query, n)
        doc_of = {chunk: doc for chunk, _, doc in keyword + semantic}
        ranked = merge([(c, s) for c, s, _ in keyword], [(c, s) for c, s, _ in semantic])
        return best_rank_docs([doc_of[c] for c, _ in ranked], n)

    return run


Merge = Callable[[fusion.Ranking, fusion.Ranking], fusion.Ranking]


def rrf_at(k: int) -> Merge:
    return lambda keyword, semantic: fusion.rrf([keyword, semantic], k)


def weighted_at(keyword_weight: float) -> Merge:
    return lambda keyword, semantic: fusion.weighted(keyword, semantic, keyword_weight)


class ListCache:
    """Each query's two side lists, fetched once for all the fusion parameters swept."""

    def __init__(self, client: BusClient, depth_min: int) -> None:
        self.client, self.depth_min = client, depth_min
        self.cache: dict[tuple[str, int], tuple[ChunkList, ChunkList]] = {}

    def __call__(self, query: str, n: int) -> tuple[ChunkList, ChunkList]:
        key = (query, n)
        if key not in self.cache:
            self.cache[key] = side_lists(self.client, query, n, self.depth_min)
        return self.cache[key]


# --------------------------------------------------------------------------------------------
# the run


class ReusedKernel(Kernel):
    """A kernel on a home a previous ``--keep`` run left, with SciFact already indexed."""

    def __init__(self, root: Path) -> None:
        super().__init__("scifact (reused)")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root, self.home = root, Home.resolve(root)
        self.policy = load(self.home.supervisor_override).ingest
        self.keep = True


def wait_query_model(kernel: Kernel, client: BusClient, timeout: float = 120.0) -> str:
    """The indexer's own query model state once it is no longer loading."""
    give_up = time.monotonic() + timeout
    while True:
        details = client.request("indexer", DescribeRequest(), DescribeReply, timeout=30).body.details
        state = str(details.get("query_encoder", {}).get("state", "?"))
        if state != "loading" or time.monotonic() > give_up:
            return state
        time.sleep(0.5)


def written_ids(limit: int) -> set[str]:
    """The ids of the abstracts ``write_corpus(..., limit)`` writes (the first ``limit``)."""
    ids: set[str] = set()
    with open(scifact_dir() / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and len(ids) < limit:
                ids.add(doc_id_of(str(json.loads(line)["_id"]) + ".txt"))
    return ids


def run(args: argparse.Namespace) -> list[Row]:
    queries = load_queries()
    if args.limit:  # a partial corpus: only the queries whose every relevant abstract is in it
        present = written_ids(args.limit)
        queries = [q for q in queries if set(q.relevant) <= present]
    if args.queries:
        queries = queries[: args.queries]
    kernel: Kernel = ReusedKernel(Path(args.reuse)) if args.reuse else Kernel("scifact")
    kernel.keep = kernel.keep or args.keep
    rows: list[Row] = []
    try:
        kernel.start()
        if not args.reuse:
            corpus = kernel.root / "scifact"
            corpus.mkdir()
            files = write_corpus(corpus, args.limit)
            say(f"indexing {files} abstracts in {corpus}")
            ingest = index_folder(kernel, corpus, files, embed=True)
            embedded = ingest.embedded_s or 0.0
            say(f"  {ingest.chunks} chunks: keyword-indexed in {ingest.keyword_s:.0f} s, embedded in {embedded:.0f} s")
        with kernel.client("bench-retrieval") as client:
            folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=10).body.folders
            if not folders or folders[0]["chunks_embedded"] < folders[0]["chunks"]:
                raise BenchFailure(f"the index is not fully embedded: {folders}")
            say(f"query model: {wait_query_model(kernel, client)}")
            policy = load(kernel.home.supervisor_override).search
            say(f"{len(queries)} queries, {folders[0]['files_indexed']} documents, {folders[0]['chunks']} chunks")
            for label, mode, fuse in (
                ("keyword", "keyword", ""),
                ("semantic", "semantic", ""),
                ("hybrid, rrf", "hybrid", "rrf"),
                ("hybrid, weighted", "hybrid", "weighted"),
            ):
                rows.append(evaluate(label, bus_query(client, mode, fuse), queries, "search.request"))
                say(_line(rows[-1]))
            lists = ListCache(client, policy.depth_min)
            for q in queries:  # fetched up front, so the sweep's times are the fusion's alone
                lists(q.text, NDCG_K)
                lists(q.text, RECALL_K)
            for k in RRF_KS:
                fn = fused_query(lists, rrf_at(k))
                rows.append(evaluate(f"hybrid, rrf k={k}", fn, queries, "sweep"))
                say(_line(rows[-1]))
            for w in KEYWORD_WEIGHTS:
                fn = fused_query(lists, weighted_at(w))
                rows.append(evaluate(f"hybrid, weighted w={w:g}", fn, queries, "sweep"))
                say(_line(rows[-1]))
            say(f"configured: fusion={policy.fusion}, rrf_k={policy.rrf_k}, keyword_weight={policy.keyword_weight}")
            best = max((r for r in rows if r.how == "search.request" and r.label.startswith("hybrid")), key=_key)
            say(f"best configured hybrid by nDCG@10: {best.label}")
    except BusError as exc:
        raise BenchFailure(f"the bus failed: {exc}") from exc
    finally:
        kernel.stop()
        if kernel.keep:
            say(f"home kept: {kernel.root} (--reuse {kernel.root})")
        kernel.cleanup()
    return rows


def _key(row: Row) -> float:
    return row.ndcg10


def _line(row: Row) -> str:
    return (
        f"  {row.label:<26} nDCG@10 {row.ndcg10:.4f}  Recall@100 {row.recall100:.4f}  {row.ms_per_query:6.1f} ms/query"
    )


def report(rows: list[Row]) -> str:
    out = [
        "| mode | nDCG@10 | Recall@100 | ms per query (sweep: fusion only) | measured through |",
        "|---|---:|---:|---:|---|",
    ]
    out += [f"| {r.label} | {r.ndcg10:.4f} | {r.recall100:.4f} | {r.ms_per_query:.1f} | {r.how} |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.retrieval", description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the home (for --reuse)")
    parser.add_argument("--reuse", metavar="HOME", help="a home kept by --keep: skip writing and indexing")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N abstracts")
    parser.add_argument("--queries", type=int, default=0, help="run only the first N queries")
    parser.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    try:
        rows = run(args)
    except BenchFailure as exc:
        say(f"bench failed: {exc}")
        return 1
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
