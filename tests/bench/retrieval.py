"""Retrieval quality on SciFact: nDCG@10 and Recall for each search mode, over the bus and over MCP HTTP.

``python -m tests.bench.search`` runs this with the latency and throughput benches (and writes the
report); ``python -m tests.bench.retrieval [--home DIR] [--docs N] [--queries N] [--no-http] [--json OUT]``
runs it alone and prints its tables. The SciFact abstracts are indexed by a real kernel as files
(:mod:`tests.bench.scifact`; ``--home`` keeps the home and reuses its index), then every judged test
query runs in every mode.

A mode is a :data:`QueryFn`: a query and a number of documents in, document ids out, best first. It asks
for ``2 * n`` results, at most the door's bound (an abstract may be cut into several chunks), and keeps
each document's best rank. The doors:

- the bus: ``search.request`` to the indexer, as ``foldermind search`` asks (top_k up to 200);
- MCP over HTTP: ``tools/call search_documents`` through the real ``mcp`` SDK client with the bearer
  token, one client for the whole run, the configured fusion (top_k up to 50, the tool's bound: so
  Recall@100 cannot be had through it; Recall@50 of the first 50 results is measured instead, and the bus
  is asked the same at the same depth, so that the two doors can be compared result for result).

Beside the configured modes, the fusions are swept over parameters (``sweep``): the keyword and the
semantic ranking are fetched once per query (as deep as the indexer fetches them for that many results)
and fused here with the indexer's own functions (:mod:`foldermind.workers.indexer.search.fusion`), so
``keyword_weight`` and ``rrf_k`` can be compared without restarting the indexer. The sweep's row for the
configured parameters must match the real path's row.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy, load
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.search.search import MAX_TOP_K
from tests.bench.kernels import BenchFailure, say
from tests.bench.markdown import para, table, verdict
from tests.bench.mcpclient import MODES, BlockingClient, front_door, kernel_config
from tests.bench.scifact import SCIFACT_DOCS, Query, doc_id_of, indexed_kernel, judged_queries

QueryFn = Callable[[str, int], list[str]]
"""(query, how many documents) -> document ids, best first."""
Hits = list[tuple[int, str]]
"""(chunk id, document id), best first: one door's results."""
SearchFn = Callable[[str, str, int], Hits]
"""(query, mode, top_k) -> results through one door."""
ChunkList = list[tuple[int, float, str]]
"""(chunk id, score, document id), best first: one side's ranking, for the fusion sweep."""

NDCG_K = 10
RECALL_K = 100
KEYWORD_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
RRF_KS = (10, 20, 40, 60, 100)
CHUNKS_PER_DOC = 2
"""Results asked per document wanted: most abstracts are one or two chunks."""
AIM_NDCG = 0.74  # the aim: hybrid nDCG@10 at least this, and above keyword and semantic alone, over MCP HTTP
BUS, BUS_CAPPED, HTTP = "bus", "bus, top_k <= 50", "MCP HTTP"


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
    label: str  # the mode (and fusion)
    door: str
    ndcg10: float
    recall: float
    recall_k: int
    recall_top_k: int  # how many results the recall was measured on
    ms_per_query: float


def evaluate(label: str, door: str, fn: QueryFn, queries: list[Query], recall_k: int, max_top_k: int) -> Row:
    """Mean nDCG@10 and Recall@``recall_k`` of ``fn`` over ``queries``."""
    started = time.perf_counter()
    n_sum = r_sum = 0.0
    for q in queries:
        n_sum += ndcg(fn(q.text, NDCG_K), q.relevant)
        r_sum += recall(fn(q.text, recall_k), q.relevant, recall_k)
    ms = (time.perf_counter() - started) * 1000 / (2 * len(queries))
    top_k = min(recall_k * CHUNKS_PER_DOC, max_top_k)
    return Row(label, door, n_sum / len(queries), r_sum / len(queries), recall_k, top_k, ms)


# --------------------------------------------------------------------------------------------
# the doors


def bus_search(client: BusClient, fuse: str = "") -> SearchFn:
    """``search.request`` to the indexer, as ``foldermind search`` asks (``fuse`` "": the configured)."""

    def run(query: str, mode: str, top_k: int) -> Hits:
        reply = client.request("indexer", SearchRequest(query, mode, top_k, None, fuse), SearchReply, timeout=60).body
        if reply.mode_used != mode:
            raise BenchFailure(f"{mode} answered as {reply.mode_used}: {reply.note}")
        return [(hit["chunk_id"], doc_id_of(hit["file_path"])) for hit in reply.results]

    return run


def mcp_search(client: BlockingClient) -> SearchFn:
    """``tools/call search_documents`` over HTTP (the configured fusion: the tool has no choice of it)."""

    def run(query: str, mode: str, top_k: int) -> Hits:
        body = client.search(query, mode, top_k)
        return [(hit["chunk_id"], doc_id_of(hit["file_path"])) for hit in body["results"]]

    return run


Log = dict[tuple[str, str, int], Hits]
"""(mode, query, top_k) -> what a door answered, to compare two doors result for result."""


def query_fn(search: SearchFn, mode: str, max_top_k: int = MAX_TOP_K, log: Log | None = None) -> QueryFn:
    def run(query: str, n: int) -> list[str]:
        top_k = min(n * CHUNKS_PER_DOC, max_top_k)
        hits = search(query, mode, top_k)
        if log is not None:
            log[(mode, query, top_k)] = hits
        return best_rank_docs([doc for _, doc in hits], n)

    return run


# --------------------------------------------------------------------------------------------
# the fusion sweep


def side_lists(client: BusClient, query: str, n: int, depth_min: int) -> tuple[ChunkList, ChunkList]:
    """The keyword and the semantic ranking, as deep as hybrid fetches them for ``n`` documents."""
    top_k = min(n * CHUNKS_PER_DOC, MAX_TOP_K)
    depth = min(max(4 * top_k, depth_min), MAX_TOP_K)
    out: list[ChunkList] = []
    for mode in ("keyword", "semantic"):
        reply = client.request("indexer", SearchRequest(query, mode, depth), SearchReply, timeout=60).body
        out.append([(hit["chunk_id"], hit["score"], doc_id_of(hit["file_path"])) for hit in reply.results])
    return out[0], out[1]


Merge = Callable[[fusion.Ranking, fusion.Ranking], fusion.Ranking]


def fused_query(lists: Callable[[str, int], tuple[ChunkList, ChunkList]], merge: Merge) -> QueryFn:
    def run(query: str, n: int) -> list[str]:
        keyword, semantic = lists(query, n)
        doc_of = {chunk: doc for chunk, _, doc in keyword + semantic}
        ranked = merge([(c, s) for c, s, _ in keyword], [(c, s) for c, s, _ in semantic])
        return best_rank_docs([doc_of[c] for c, _ in ranked], n)

    return run


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


@dataclass(slots=True)
class Retrieval:
    queries: int
    policy: SearchPolicy
    http_top_k: int = 0  # search_documents' bound, from its schema (0: HTTP not measured)
    protocol: str = ""  # what the MCP client negotiated
    rows: list[Row] = field(default_factory=list)
    sweep: list[Row] = field(default_factory=list)
    same: dict[str, tuple[int, int]] = field(default_factory=dict)  # mode -> (identical result lists, compared)
    docs_in_50: float = 0.0  # distinct abstracts in the first 50 hybrid results, on average

    @property
    def fusion(self) -> str:
        p = self.policy
        if p.fusion == "weighted":
            return f"weighted, keyword_weight {p.keyword_weight:g}"
        if p.fusion == "blend":
            return f"blend, keyword_weight {p.blend_keyword_weight:g}"
        if p.fusion == "evidence":
            return f"evidence, coverage {p.evidence_coverage:g}"
        return f"rrf, k {p.rrf_k}"

    def row(self, label: str, door: str) -> Row | None:
        return next((r for r in self.rows if r.label == label and r.door == door), None)

    def label(self, mode: str) -> str:
        return f"hybrid, {self.policy.fusion}" if mode == "hybrid" else mode

    def hybrid_aim(self) -> bool | None:
        """nDCG@10: hybrid at least AIM_NDCG and above keyword and semantic, through the HTTP door (the
        bus where HTTP was not measured)."""
        door = HTTP if self.http_top_k else BUS
        keyword, semantic, hybrid = (self.row(self.label(m), door) for m in MODES)
        if hybrid is None or keyword is None or semantic is None:
            return None
        return hybrid.ndcg10 >= AIM_NDCG and hybrid.ndcg10 > max(keyword.ndcg10, semantic.ndcg10)


def measure(
    client: BusClient, http: BlockingClient | None, queries: list[Query], policy: SearchPolicy, sweep: bool
) -> Retrieval:
    """Every mode through the bus (and, with ``http``, through MCP HTTP and the bus at its depth)."""
    out = Retrieval(len(queries), policy)

    def add(row: Row, into: list[Row]) -> None:
        into.append(row)
        say(
            f"  {row.label:<24} {row.door:<17} nDCG@10 {row.ndcg10:.4f}  Recall@{row.recall_k} {row.recall:.4f}"
            f" (top_k {row.recall_top_k})  {row.ms_per_query:6.1f} ms/query"
        )

    # The configured fusion (its Recall@100 is the summary's) and the two others, each at the bus's depth.
    others = [(f"hybrid, {f}", "hybrid", f) for f in fusion.FUSIONS if f != policy.fusion]
    for label, mode, fuse in (
        ("keyword", "keyword", ""),
        ("semantic", "semantic", ""),
        (out.label("hybrid"), "hybrid", ""),
        *others,
    ):
        add(evaluate(label, BUS, query_fn(bus_search(client, fuse), mode), queries, RECALL_K, MAX_TOP_K), out.rows)
    if http is not None:
        out.http_top_k, out.protocol = http.max_top_k(), http.negotiated
        cap, k = out.http_top_k, out.http_top_k  # Recall@50 of the first 50 results
        logs: dict[str, Log] = {BUS_CAPPED: {}, HTTP: {}}
        for mode in MODES:
            for door, search in ((BUS_CAPPED, bus_search(client)), (HTTP, mcp_search(http))):
                fn = query_fn(search, mode, cap, logs[door])
                add(evaluate(out.label(mode), door, fn, queries, k, cap), out.rows)
            keys = [key for key in logs[HTTP] if key[0] == mode]
            out.same[mode] = (sum(logs[HTTP][key] == logs[BUS_CAPPED].get(key) for key in keys), len(keys))
            say(f"  {mode}: HTTP results identical to the bus's for {out.same[mode][0]}/{out.same[mode][1]} calls")
        deep = [hits for (mode, _, top_k), hits in logs[HTTP].items() if mode == "hybrid" and top_k == cap]
        out.docs_in_50 = sum(len({doc for _, doc in hits}) for hits in deep) / len(deep) if deep else 0.0
    if sweep:
        lists = ListCache(client, policy.depth_min)
        for q in queries:  # fetched up front, so the sweep's times are the fusion's alone
            lists(q.text, NDCG_K)
            lists(q.text, RECALL_K)
        for k in RRF_KS:
            add(evaluate(f"rrf k={k}", "sweep", fused_query(lists, rrf_at(k)), queries, RECALL_K, MAX_TOP_K), out.sweep)
        for w in KEYWORD_WEIGHTS:
            fn = fused_query(lists, weighted_at(w))
            add(evaluate(f"weighted w={w:g}", "sweep", fn, queries, RECALL_K, MAX_TOP_K), out.sweep)
    return out


# --------------------------------------------------------------------------------------------
# report


def render(r: Retrieval) -> list[str]:
    """The retrieval section's body: per mode, both doors side by side; then the sweep."""
    cap = r.http_top_k
    other = "hybrid, rrf" if r.policy.fusion == "weighted" else "hybrid, weighted"
    rows = []
    for label in (*(r.label(m) for m in MODES), other):
        bus, capped, over_http = r.row(label, BUS), r.row(label, BUS_CAPPED), r.row(label, HTTP)
        same = r.same.get(label.split(",")[0]) if capped is not None else None
        name = f"{label} (configured)" if label == f"hybrid, {r.policy.fusion}" else label
        if not cap:  # the bus only
            rows.append(
                [name, *(f"{x:.4f}" for x in (bus.ndcg10, bus.recall)), f"{bus.ms_per_query:.1f}"] if bus else []
            )
            continue
        rows.append(
            [
                name,
                *(f"{x.ndcg10:.4f}" if x else "-" for x in (bus, over_http)),
                f"{bus.recall:.4f}" if bus else "-",
                *(f"{x.recall:.4f}" if x else "-" for x in (capped, over_http)),
                f"{same[0]}/{same[1]}" if same else "-",
                *(f"{x.ms_per_query:.1f}" if x else "-" for x in (bus, over_http)),
            ]
        )
    rows = [row for row in rows if row]
    recall_bus = f"Recall@{RECALL_K} bus (top_k {RECALL_K * CHUNKS_PER_DOC})"
    header = ["mode", "nDCG@10 bus", "nDCG@10 HTTP", recall_bus]
    header += [f"Recall@{cap} bus (top_k {cap})", f"Recall@{cap} HTTP (top_k {cap})"]
    header += ["HTTP results = bus results", "ms/query bus", "ms/query HTTP"]
    about = (
        f"{r.queries} judged SciFact queries (`qrels.tsv`), BEIR's nDCG@10 (graded gain, log2 discount) and Recall,"
        " each abstract counted once at its best chunk's rank. Each query asks for twice as many results as"
        f" documents wanted, at most the door's bound. **bus**: `search.request` to the indexer (top_k up to"
        f" {MAX_TOP_K})."
    )
    if not cap:
        header = ["mode", "nDCG@10", recall_bus, "ms/query"]
        about += " MCP HTTP was not measured (`--no-http`)."
    else:
        about += (
            " **HTTP**: `tools/call search_documents` through the `mcp` SDK client with the bearer token"
            f" (negotiated {r.protocol or '-'}), one client for the whole run; its top_k is at most {cap} (the tool's"
            f" bound, read from its input schema), so Recall@{RECALL_K} cannot be measured through it: Recall@{cap}"
            f" of the first {cap} results stands beside the bus's Recall@{RECALL_K} (an abstract can be two results:"
            f" the first {cap} hybrid results hold {r.docs_in_50:.1f} distinct abstracts on average), and the bus is"
            f" asked the same at the same depth. Hybrid over HTTP is the configured fusion ({r.fusion}). *HTTP"
            " results = bus results* counts the calls (both depths, every query) whose results were the same"
            " through both doors, chunk for chunk, in order."
        )
    lines = [
        *para(about),
        "",
        *table(header, rows),
        "",
        f"Aim: hybrid nDCG@10 at least {AIM_NDCG} and above keyword and semantic alone: {verdict(r.hybrid_aim())}.",
    ]
    if r.sweep:
        configured = f"weighted w={r.policy.keyword_weight:g}" if r.policy.fusion == "weighted" else ""
        configured = configured or f"rrf k={r.policy.rrf_k}"
        sweep = [
            [
                f"{row.label}{' (configured)' if row.label == configured else ''}",
                f"{row.ndcg10:.4f}",
                f"{row.recall:.4f}",
                f"{row.ms_per_query:.2f}",
            ]
            for row in r.sweep
        ]
        lines += [
            "",
            "The fusions swept over their parameters: the keyword and the semantic ranking fetched once per query over",
            "the bus (as deep as hybrid fetches them) and fused in the bench with the indexer's own functions",
            "(`workers/indexer/search/fusion.py`); the configured row must equal the bus's row above.",
            "",
            *table(["fusion", "nDCG@10", f"Recall@{RECALL_K}", "ms per query (fusion only)"], sweep),
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.retrieval", description=__doc__.split("\n")[0])
    parser.add_argument("--home", default="", help="keep the kernel's home (and index) here and reuse it")
    parser.add_argument("--docs", type=int, default=SCIFACT_DOCS, help="index only the first N abstracts")
    parser.add_argument("--queries", type=int, default=0, help="run only the first N judged queries")
    parser.add_argument("--no-http", dest="http", action="store_false", help="the bus only")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false", help="no fusion parameter sweep")
    parser.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    try:
        queries = judged_queries(args.docs if args.docs < SCIFACT_DOCS else None)[: args.queries or None]
        home = Path(args.home).resolve() if args.home else None
        with indexed_kernel(home, args.docs, kernel_config()) as (kernel, _), kernel.client("bench") as client:
            policy = load(kernel.home.supervisor_override).search
            if args.http:
                with BlockingClient(*front_door(kernel.root)) as http:
                    result = measure(client, http, queries, policy, args.sweep)
            else:
                result = measure(client, None, queries, policy, args.sweep)
    except (BenchFailure, BusError) as exc:
        say(f"bench failed: {exc}")
        return 1
    print("\n".join(render(result)))
    if args.json:
        rows = [asdict(row) for row in result.rows + result.sweep]
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
