"""One hybrid ``search_documents`` call, stage by stage, beside the raw cost of each piece, in one run.

``python -m tests.bench.search_path [--home DIR] [--queries N] [--report PATH]``: SciFact indexed as in
``tests.bench.search`` (``--home`` keeps and reuses it). For each query in turn, one after another so that a
shared machine's load falls on all alike:

1. the whole path: the ``mcp`` SDK client over HTTP (stateless), with the indexer's ``query_ms`` from the result,
   and ``tools/list`` on the same session (HTTP, the SDK and the front door, no bus and no index);
2. over the bus from this process (``BusClient`` -> broker -> indexer): the same search with the indexer's stage
   ``timings``, and a search with nothing to look for (``!!!``: the bus hop and the request's checks only);
3. in this process, on the same home's files (SQLite, Tantivy, usearch, the ONNX query model): the indexer's
   ``SearchService.search``, with its stages, and the raw pieces it is made of: the bare encode of the query, a
   bare exact usearch search of the units the indexer asks for, a bare Tantivy search of the query it builds,
   the rescoring's coverage (rows and analyzer), the fusion's arithmetic, the SQLite rows and the snippets.

With ``--exact-home DIR`` (a copy of the same indexed home) a second kernel runs there with every vector search
an exact scan (``exact_search_vectors`` above the index's size), asked the same query over MCP right after the
first, and this process searches exactly too (``SearchService`` over the same file, and the bare scan): the graph
walk against the exact scan, interleaved in one run. The report then adds, over every judged query, how many of
the exact top 10 and top 100 chunks the graph finds and each mode's nDCG@10 both ways.

The report gives each one's median and 95th percentile and what the differences say, with the machine and load.
"""

from __future__ import annotations

import collections
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore
from foldermind.workers.indexer.search import fusion, fusion_evidence
from foldermind.workers.indexer.search import query as operators
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.search.snippets import snippet
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import UNITS_PER_CHUNK, VectorIndex
from tests import mcpclient
from tests.bench import machine
from tests.bench.kernels import REPO, BenchFailure, say
from tests.bench.markdown import table
from tests.bench.mcpclient import kernel_config, search_args
from tests.bench.retrieval import CHUNKS_PER_DOC, NDCG_K, best_rank_docs, ndcg
from tests.bench.scifact import SCIFACT_DOCS, Query, bench_args, doc_id_of, indexed_kernel, judged_queries
from tests.bench.stats import Series

TOP_K = 10
EXACT = 10_000_000
"""``exact_search_vectors`` for the exact side (every search compares the query with every vector)."""
ROWS = (
    ("mcp", "MCP hybrid search_documents, client wall (SDK over HTTP, stateless)"),
    ("mcp.query_ms", "  of which the indexer's query_ms"),
    ("exact.mcp", "the same over MCP to the exact-scan kernel, client wall"),
    ("exact.mcp.query_ms", "  of which the indexer's query_ms"),
    ("tools_list", "MCP tools/list, client wall (HTTP + SDK + front door; no bus, no index)"),
    ("bus", "bus hybrid search, round trip (bench -> broker -> indexer -> back)"),
    ("bus.query_ms", "  of which the indexer's query_ms"),
    ("bus_empty", "bus search of '!!!', round trip (the hop and the request's checks)"),
    ("local", "SearchService.search in this process (no bus)"),
    ("local.embed", "  stage embed (query encode, the encoder's checks)"),
    ("local.keyword", "  stage keyword (Tantivy, hits read)"),
    ("local.vector", "  stage vector (usearch, a chunk at its best unit)"),
    ("local.fuse", "  stage fuse (evidence: weights, rescoring's coverage, repeat penalty)"),
    ("local.rows", "  stage rows (SQLite rows, cuts, snippets)"),
    ("exact", "SearchService.search in this process, every vector search an exact scan"),
    ("exact.vector", "  stage vector"),
    ("raw.encode", "raw: ONNX encode of the query (tokenizer + one forward pass)"),
    ("raw.usearch", "raw: usearch exact search, the units the indexer asks for"),
    ("raw.graph", "raw: usearch graph search (HNSW, expansion_search as configured), the same units"),
    ("raw.tantivy", "raw: Tantivy search of the built query (top 40, with the count)"),
    ("raw.coverage", "raw: the rescoring's coverage of the first 20 (their rows + the terms the keyword index holds)"),
    ("raw.fusion", "raw: the fusion's arithmetic (coverage given)"),
    ("raw.rows", "raw: SQLite rows of the first 28 ranked chunks"),
    ("raw.snippets", "raw: snippets of the 10 hits"),
)
CPU = "@cpu"
"""A row's series of this thread's CPU time (rows measured in this process): on a busy machine the wall clock
counts the time the scheduler gave others, the CPU time the work's own cost."""
MODES = (("keyword", "evidence"), ("semantic", "evidence"), *(("hybrid", f) for f in fusion.FUSIONS))


class Local:
    """The indexer's search pieces opened in this process on the home's files (read only); ``exact``: also a
    search service over the same vectors whose every search is an exact scan."""

    def __init__(self, data: Path, exact: bool = False) -> None:
        self.policy = SearchPolicy(query_cache_size=0)
        self.store = Store(data / "index.sqlite")
        self.bm25 = KeywordIndex(data / "tantivy", proximity=self.policy.keyword_proximity)
        ndim = int(self.store.get_meta("vector_dim", "384"))
        self.vectors = VectorIndex(
            data / "vectors.usearch", ndim, self.policy.expansion_search, self.policy.exact_search_vectors
        )
        self.encoder = QueryEncoder(self.policy, IngestPolicy(), "inproc://none", "bench")
        self.encoder.start()
        deadline = time.monotonic() + 300
        while self.encoder.state == "loading" and time.monotonic() < deadline:
            time.sleep(0.1)
        onnx = getattr(self.encoder, "_onnx", None)
        if self.encoder.state != "ready" or onnx is None:
            raise BenchFailure(f"query model in this process: {self.encoder.state} {self.encoder.backend_note}")
        self.onnx = onnx
        self.service = SearchService(self.store, self.bm25, self.vectors, self.encoder, self.policy)
        self.exact: SearchService | None = None
        if exact:
            scan = VectorIndex(data / "vectors.usearch", ndim, self.policy.expansion_search, EXACT)
            self.exact = SearchService(self.store, self.bm25, scan, self.encoder, self.policy)
        self.depth = max(TOP_K * 4, self.policy.depth_min)

    def close(self) -> None:
        self.encoder.close()
        self.bm25.close()

    def measure(self, query: str, add: Callable[[str, float], None]) -> None:
        services = [("local", self.service)] + ([("exact", self.exact)] if self.exact is not None else [])
        for name, service in services:
            cpu = time.thread_time()
            reply = service.search(SearchRequest(query=query, mode="hybrid", top_k=TOP_K))
            add(f"{name}{CPU}", (time.thread_time() - cpu) * 1000)
            add(name, reply.query_ms)
            for stage, value in (reply.timings or {}).items():
                if name == "local" or stage == "vector":
                    add(f"{name}.{stage}", float(value))
        vector = _timed(add, "raw.encode", lambda: self.onnx.encode([query])[0])
        count = min(self.depth * UNITS_PER_CHUNK, len(self.vectors))
        _timed(add, "raw.usearch", lambda: self.vectors.index.search(vector, count, exact=True))
        if self.exact is not None:
            _timed(add, "raw.graph", lambda: self.vectors.index.search(vector, count))
        searcher = self.bm25.index.searcher()
        built = self.bm25.build_query(operators.parse(query).text, None, languages=self.bm25.languages(searcher))
        if built is not None:
            _timed(add, "raw.tantivy", lambda: searcher.search(built, self.depth, count=True))
        keyword = [(h.chunk_id, h.score) for h in self.bm25.search(query, self.depth)[0]]
        semantic = self.vectors.search(vector, self.depth)
        head = fusion.weighted(keyword, semantic, fusion_evidence.keyword_weight(keyword, self.service.evidence))
        first = [cid for cid, _ in head[: fusion_evidence.RERANK]]
        covers = _timed(add, "raw.coverage", lambda: self.service._coverage(query, {}, first))
        documents = self.service._documents(keyword, semantic)
        penalty = self.policy.evidence_repeat_penalty

        def fuse() -> fusion.Ranking:
            ranked = fusion_evidence.evidence(keyword, semantic, lambda c: covers, self.service.evidence)
            return fusion.spread(ranked, documents, penalty)

        ranked = _timed(add, "raw.fusion", fuse)
        rows = _timed(add, "raw.rows", lambda: self.store.chunks.hits([cid for cid, _ in ranked[: TOP_K * 2 + 8]]))
        texts = [str(rows[cid]["text"]) for cid, _ in ranked[:TOP_K] if cid in rows]
        _timed(add, "raw.snippets", lambda: [snippet(t, query) for t in texts])

    def graph_against_exact(self, queries: list[Query]) -> list[list[str]]:
        """Table rows: the share of the exact scan's top 10 and top 100 chunks the graph finds, and each mode's
        nDCG@10 through the graph and through the exact scan, over ``queries``."""
        assert self.exact is not None
        scan = self.exact.vectors
        rows = []
        for depth in (10, 100):
            shares = []
            for q in queries:
                vector = self.onnx.encode([q.text])[0]
                truth = {c for c, _ in scan.search(vector, depth)}
                shares.append(len(truth & {c for c, _ in self.vectors.search(vector, depth)}) / max(1, len(truth)))
            rows.append(
                [f"exact top {depth} chunks found", f"{statistics.mean(shares):.4f}", "1", f"min {min(shares):.2f}"]
            )
        for mode, fuse in MODES:
            scores = []
            for service in (self.service, self.exact):
                request = partial(SearchRequest, mode=mode, top_k=NDCG_K * CHUNKS_PER_DOC, fusion=fuse)
                total = 0.0
                for q in queries:
                    hits = service.search(request(query=q.text)).results
                    total += ndcg(best_rank_docs([doc_id_of(h["file_path"]) for h in hits], NDCG_K), q.relevant)
                scores.append(total / len(queries))
            label = mode if mode != "hybrid" else f"hybrid {fuse}"
            rows.append([f"nDCG@10 {label}", f"{scores[0]:.4f}", f"{scores[1]:.4f}", f"{scores[0] - scores[1]:+.4f}"])
        return rows


def wait_full_graph(data: Path, timeout: float = 1800) -> None:
    """Until the indexer has put a full graph in place of an outgrown draft (it does at its first idle moment)."""
    ndim = int(Store(data / "index.sqlite").get_meta("vector_dim", "384"))
    vectors = VectorIndex(data / "vectors.usearch", ndim)  # read for its size and marker only
    limit = SearchPolicy().exact_search_vectors
    deadline = time.monotonic() + timeout
    while len(vectors) > limit and vectors.marker.exists():
        if time.monotonic() > deadline:
            raise BenchFailure(f"the indexer has not rebuilt its outgrown draft graph in {timeout:g} s")
        time.sleep(1.0)


def _timed(add: Callable[[str, float], None], name: str, fn: Callable[[], Any]) -> Any:
    cpu, t0 = time.thread_time(), time.perf_counter()
    out = fn()
    add(name, (time.perf_counter() - t0) * 1000)
    add(f"{name}{CPU}", (time.thread_time() - cpu) * 1000)
    return out


async def _rounds(kernel: Any, exact: Any, local: Local, queries: list[str], warmup: int) -> dict[str, Series]:
    found: dict[str, Series] = collections.defaultdict(Series)
    url = str(mcpclient.mcp_info(kernel.root)["url"])
    token = TokenStore(Home.resolve(kernel.root)).load_or_create()
    doors = [("", url, token)]
    if exact is not None:
        doors.append(("exact.", str(mcpclient.mcp_info(exact.root)["url"]), TokenStore(exact.home).load_or_create()))
    bus = kernel.client("bench-path")
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = [(p, await stack.enter_async_context(mcpclient.http_client(u, t))) for p, u, t in doors]
            for n, query in enumerate(queries):
                timed = n >= warmup

                def add(name: str, value: float, timed: bool = timed) -> None:
                    if timed:
                        found[name].add(value)

                for prefix, client in clients:
                    t0 = time.perf_counter()
                    result = await client.call_tool("search_documents", search_args(query, "hybrid", TOP_K))
                    add(f"{prefix}mcp", (time.perf_counter() - t0) * 1000)
                    if result.is_error or result.structured_content is None:
                        raise BenchFailure(f"search_documents: {result.content}")
                    add(f"{prefix}mcp.query_ms", float(result.structured_content["query_ms"]))
                t0 = time.perf_counter()
                await clients[0][1].list_tools()
                add("tools_list", (time.perf_counter() - t0) * 1000)
                for name, text in (("bus", query), ("bus_empty", "!!!")):
                    t0 = time.perf_counter()
                    reply = bus.request("indexer", SearchRequest(query=text, mode="hybrid", top_k=TOP_K), SearchReply)
                    add(name, (time.perf_counter() - t0) * 1000)
                    if name == "bus":
                        add("bus.query_ms", reply.body.query_ms)
                local.measure(query, add)
    finally:
        bus.close()
    return found


def main(argv: list[str] | None = None) -> int:
    options = {"exact-home": "a copy of the indexed home: a second kernel there searches by exact scans only"}
    report = REPO / "docs" / "benchmarks" / "search-path.md"
    args, home, queries = bench_args(__doc__, 140, report, argv, options)
    exact_home = Path(args.exact_home).resolve() if args.exact_home else None
    with contextlib.ExitStack() as stack:
        kernel, index = stack.enter_context(indexed_kernel(home, SCIFACT_DOCS, kernel_config()))
        exact = None
        if exact_home is not None:
            config = kernel_config({"exact_search_vectors": EXACT})
            exact = stack.enter_context(indexed_kernel(exact_home, SCIFACT_DOCS, config))[0]
        say("waiting for the indexer's full graph (an outgrown draft is rebuilt at its first idle moment)")
        wait_full_graph(kernel.root / "data")
        local = stack.enter_context(contextlib.closing(Local(kernel.root / "data", exact is not None)))
        facts = machine.facts(REPO)
        before = os.getloadavg()
        say(f"{len(queries)} queries, each through every stage in turn")
        found = anyio.run(_rounds, kernel, exact, local, queries, args.warmup)
        compared = local.graph_against_exact(judged_queries()) if exact is not None else []
        after = os.getloadavg()
    lines = [
        "# One hybrid search, stage by stage, beside the raw cost of each piece",
        "",
        f"Generated by `python -m tests.bench.search_path`: {len(queries) - args.warmup} SciFact queries after"
        f" {args.warmup} warm-up ones, top_k {TOP_K}, SciFact ({index.files} files, {index.chunks} chunks, "
        f"{len(local.vectors)} unit vectors). Each query goes through every row in turn (see the module's docstring)."
        " CPU: this process's thread, for the rows measured in it.",
        "",
        *machine.facts_table(facts, before, after),
        "",
        *table(
            ["stage", "median ms", "p95 ms", "CPU median ms"],
            [
                [
                    what,
                    f"{s.median:.2f}",
                    f"{s.p95:.2f}",
                    f"{found[name + CPU].median:.2f}" if name + CPU in found else "",
                ]
                for name, what in ROWS
                if (s := found[name]).samples
            ],
            "lrrr",
        ),
        "",
    ]
    if compared:
        lines += [
            f"The graph against the exact scan over all {len(judged_queries())} judged queries:",
            "",
            *table(["", "graph", "exact scan", "difference"], compared, "lrrr"),
            "",
        ]
    Path(args.report).write_text("\n".join(lines))
    say("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
