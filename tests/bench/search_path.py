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

The report gives each one's median and 95th percentile and what the differences say, with the machine and load.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
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
from foldermind.workers.indexer.storage.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import UNITS_PER_CHUNK, VectorIndex
from tests import mcpclient
from tests.bench import machine
from tests.bench.kernels import REPO, BenchFailure, say
from tests.bench.markdown import table
from tests.bench.mcpclient import kernel_config, search_args
from tests.bench.scifact import SCIFACT_DOCS, bench_args, indexed_kernel
from tests.bench.stats import Series

TOP_K = 10
ROWS = (
    ("mcp", "MCP hybrid search_documents, client wall (SDK over HTTP, stateless)"),
    ("mcp.query_ms", "  of which the indexer's query_ms"),
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
    ("raw.encode", "raw: ONNX encode of the query (tokenizer + one forward pass)"),
    ("raw.usearch", "raw: usearch exact search, the units the indexer asks for"),
    ("raw.tantivy", "raw: Tantivy search of the built query (top 40, with the count)"),
    ("raw.coverage", "raw: the rescoring's coverage of the first 20 (their rows + analyzer)"),
    ("raw.fusion", "raw: the fusion's arithmetic (coverage given)"),
    ("raw.rows", "raw: SQLite rows of the first 28 ranked chunks"),
    ("raw.snippets", "raw: snippets of the 10 hits"),
)


class Local:
    """The indexer's search pieces opened in this process on the home's files (read only)."""

    def __init__(self, data: Path) -> None:
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
        self.depth = max(TOP_K * 4, self.policy.depth_min)

    def close(self) -> None:
        self.encoder.close()
        self.bm25.close()

    def measure(self, query: str, add: Callable[[str, float], None]) -> None:
        reply = self.service.search(SearchRequest(query=query, mode="hybrid", top_k=TOP_K))
        add("local", reply.query_ms)
        for stage, value in (reply.timings or {}).items():
            add(f"local.{stage}", float(value))
        vector = _timed(add, "raw.encode", lambda: self.onnx.encode([query])[0])
        count = min(self.depth * UNITS_PER_CHUNK, len(self.vectors))
        _timed(add, "raw.usearch", lambda: self.vectors.index.search(vector, count, exact=True))
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


def _timed(add: Callable[[str, float], None], name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = fn()
    add(name, (time.perf_counter() - t0) * 1000)
    return out


async def _rounds(kernel: Any, local: Local, queries: list[str], warmup: int) -> dict[str, Series]:
    found: dict[str, Series] = {name: Series() for name, _ in ROWS}
    url = str(mcpclient.mcp_info(kernel.root)["url"])
    token = TokenStore(Home.resolve(kernel.root)).load_or_create()
    bus = kernel.client("bench-path")
    try:
        async with mcpclient.http_client(url, token) as client:
            for n, query in enumerate(queries):
                timed = n >= warmup

                def add(name: str, value: float, timed: bool = timed) -> None:
                    if timed:
                        found[name].add(value)

                t0 = time.perf_counter()
                result = await client.call_tool("search_documents", search_args(query, "hybrid", TOP_K))
                add("mcp", (time.perf_counter() - t0) * 1000)
                if result.is_error or result.structured_content is None:
                    raise BenchFailure(f"search_documents: {result.content}")
                add("mcp.query_ms", float(result.structured_content["query_ms"]))
                t0 = time.perf_counter()
                await client.list_tools()
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
    args, home, queries = bench_args(__doc__, 140, REPO / "docs" / "benchmarks" / "search-path.md", argv)
    with indexed_kernel(home, SCIFACT_DOCS, kernel_config()) as (kernel, index):
        local = Local(kernel.root / "data")
        try:
            facts = machine.facts(REPO)
            before = os.getloadavg()
            say(f"{len(queries)} queries, each through every stage in turn")
            found = anyio.run(_rounds, kernel, local, queries, args.warmup)
            after = os.getloadavg()
        finally:
            local.close()
    lines = [
        "# One hybrid search, stage by stage, beside the raw cost of each piece",
        "",
        f"Generated by `python -m tests.bench.search_path`: {len(queries) - args.warmup} SciFact queries after"
        f" {args.warmup} warm-up ones, top_k {TOP_K}, SciFact ({index.files} files, {index.chunks} chunks, "
        f"{len(local.vectors)} unit vectors). Each query goes through every row in turn (see the module's docstring).",
        "",
        *machine.facts_table(facts, before, after),
        "",
        *table(
            ["stage", "median ms", "p95 ms"],
            [[what, f"{s.median:.2f}", f"{s.p95:.2f}"] for name, what in ROWS if (s := found[name]).samples],
            "lrr",
        ),
        "",
    ]
    Path(args.report).write_text("\n".join(lines))
    say("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
