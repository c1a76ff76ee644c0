"""Search over MCP HTTP on SciFact: retrieval quality, latency and throughput, in one run.

``python -m tests.bench.search [--home DIR] [--docs N] [--queries N] [--no-write] ...`` from the repository
root. A real kernel (default process map; the front door on an OS-assigned port, the rate limit raised)
indexes and embeds the first N SciFact abstracts written as ``.txt`` files (:mod:`tests.bench.scifact`),
then, each phase after waiting for a quiet machine:

1. retrieval quality (:mod:`tests.bench.retrieval`): nDCG@10 and Recall per mode over the bus and over MCP
   HTTP (``search_documents``), the HTTP results compared with the bus's, and the fusion sweep;
2. latency (:mod:`tests.bench.mcp_http`): per mode and protocol, end to end over HTTP with the bearer
   token, beside the indexer's own times (query embedding, Tantivy, usearch) from the same rounds;
3. throughput: 1 and 8 concurrent clients (distinct sessions with ``legacy``), hybrid;
4. a py-spy profile of sequential hybrid searches (:mod:`tests.bench.spy`; ``--profile 0`` skips it).

The report, ``## Summary`` first, is printed and written to ``docs/benchmarks/mcp.md`` (unless
``--no-write``; the file's other sections, written by other benches or by hand, are kept where they were:
:func:`~tests.bench.markdown.merged`), and that Summary is copied into ``docs/benchmarks/README.md`` under "Search and
MCP". ``--home
DIR`` keeps the home (and its index) in DIR, and a later run reuses it instead of indexing for ~11 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from foldermind.protocol.errors import BusError
from foldermind.protocol.runtime.config import load
from tests.bench import machine, run_all, spy
from tests.bench.kernels import BenchFailure, say
from tests.bench.markdown import merged, ms, para, table, verdict
from tests.bench.mcp_http import (
    BareEncoder,
    BusSearches,
    Latency,
    McpLatency,
    Throughput,
    latency_rounds,
    render_latency,
    render_throughput,
    throughput_rounds,
)
from tests.bench.mcpclient import MODES, PROTOCOLS, BlockingClient, front_door, kernel_config, settings
from tests.bench.retrieval import AIM_NDCG, BUS, HTTP, RECALL_K, Retrieval, measure
from tests.bench.retrieval import render as render_retrieval
from tests.bench.scifact import SCIFACT_DOCS, Index, indexed_kernel, judged_queries, scifact_queries
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks" / "mcp.md"
AIM_MEDIAN_MS = 20.0  # hybrid, end to end over MCP HTTP with auth, at SciFact size, with or without a filter
AIM_P95_MS = 40.0
PEER = "docsonar: 53-56 ms median for hybrid over MCP HTTP"
MODE_STAGES = {"keyword": ("keyword",), "semantic": ("embed", "vector"), "hybrid": ("embed", "keyword", "vector")}


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    docs: int
    index: Index | None = None
    retrieval: Retrieval | None = None
    latency: Latency | None = None
    throughput: list[Throughput] = field(default_factory=list)
    clients: int = 8
    profile: spy.Profile | None = None
    search: dict[str, object] = field(default_factory=dict)  # the [search] policy the kernel ran with
    overrides: list[str] = field(default_factory=list)  # --search and --ingest KEY=VALUE
    quiet: list[tuple[str, float, float]] = field(default_factory=list)  # (phase, CPU % before it, s waited)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def step(results: Results, name: str, procs: dict[str, psutil.Process]) -> Iterator[None]:
    """Record a failed phase and go on with the next (what was measured is still reported); name the
    processes that died meanwhile (a worker the supervisor restarted: its log says why)."""
    try:
        yield
    except Exception as exc:
        traceback.print_exc()
        gone = [f"{k} (pid {p.pid})" for k, p in procs.items() if not p.is_running()]
        why = f" (gone meanwhile: {', '.join(gone)}; see the home's logs)" if gone else ""
        results.errors.append(f"{name}: {type(exc).__name__}: {exc}{why}")


def run(args: argparse.Namespace, results: Results) -> None:
    queries = scifact_queries()
    need = args.warmup + args.queries
    if len(queries) < need:
        raise BenchFailure(f"{need} queries asked for, the SciFact file has {len(queries)}")
    judged = judged_queries(args.docs if args.docs < SCIFACT_DOCS else None)[: args.retrieval_queries or None]
    home = Path(args.home).resolve() if args.home else None

    def quiet(phase: str) -> None:
        load_pct, waited = machine.wait_for_quiet(max_s=args.quiet_wait)
        results.quiet.append((phase, load_pct, waited))

    config = kernel_config(settings(args.search), ingest=settings(args.ingest))
    with indexed_kernel(home, args.docs, config) as (kernel, index), kernel.client("bench") as client:
        results.search = load(kernel.home.supervisor_override).search.model_dump()
        results.index = index
        url, token = front_door(kernel.root)
        workers = kernel.processes(client)
        procs = {"bench": psutil.Process(), **{k: workers[k] for k in ("kernel", "frontdoor", "indexer")}}
        if args.retrieval:
            quiet("retrieval")
            say(f"retrieval: {len(judged)} judged queries, bus and MCP HTTP")
            with step(results, "retrieval", procs), BlockingClient(url, token, args.protocols[0]) as http:
                policy = load(kernel.home.supervisor_override).search
                results.retrieval = measure(client, http, judged, policy, args.sweep)
        encoder = None
        if args.bare_encode:
            say("loading the model in this process for the bare encode")
            encoder = BareEncoder()
        quiet("latency")
        say(
            f"latency: protocols {', '.join(args.protocols)}, the bus{' and bare encode' if encoder else ''}, "
            f"{args.rounds} rounds"
        )
        with step(results, "latency", procs):
            bus = BusSearches(client, procs)
            run_queries = queries[:need]
            results.latency = latency_rounds(
                url, token, args.protocols, run_queries, args.warmup, args.rounds, bus, encoder
            )
        del encoder
        if args.throughput_seconds > 0:
            quiet("throughput")
            say(f"throughput: 1 and {args.clients} clients, {args.throughput_seconds:g} s each, {args.rounds} rounds")
            with step(results, "throughput", procs):
                results.throughput = throughput_rounds(
                    url, token, procs, args.protocols, args.clients, args.throughput_seconds, args.rounds, queries
                )
        if args.profile > 0:
            quiet("profile")
            say(f"py-spy profile, {args.profile:g} s of sequential hybrid queries")
            with step(results, "profile", procs):
                results.profile = spy.profile(url, token, args.protocols[0], args.profile, queries, procs)
        kernel.keep = kernel.keep or bool(results.errors)  # a throw-away home's logs, for the errors


# --------------------------------------------------------------------------------------------
# the report


def _stages(lat: Latency, m: McpLatency, mode: str) -> str:
    """The indexer's ``query_ms`` of these calls, and its stages from the bus searches of the same rounds."""
    st = lat.bus.stages.get(mode, {})
    parts = ", ".join(f"{s} {ms(st[s].median)}" for s in MODE_STAGES[mode] if s in st)
    return f"indexer {ms(m.query_ms[mode].median)}: {parts}"


def _latency_rows(lat: Latency) -> list[list[str]]:
    """Every mode for the first protocol (the SDK's default), hybrid for the others."""
    rows = []
    for i, m in enumerate(lat.mcp):
        for mode in MODES if i == 0 else ("hybrid",):
            e = m.e2e.get(mode)
            if e is None:
                continue
            hybrid = mode == "hybrid"
            aim = f"<= {AIM_MEDIAN_MS:g} / <= {AIM_P95_MS:g} ms" if hybrid else "-"
            ok = f"{verdict(e.median <= AIM_MEDIAN_MS)} / {verdict(e.p95 <= AIM_P95_MS)}" if hybrid else verdict(None)
            label = f"latency, {mode}, {m.label}: median / p95"
            rows.append([label, f"{ms(e.median)} / {ms(e.p95)} ms", _stages(lat, m, mode), aim, ok])
    return rows


def _throughput_rows(runs: list[Throughput], clients: int) -> list[list[str]]:
    rows = []
    for protocol in dict.fromkeys(t.protocol for t in runs):
        one = next((t for t in runs if t.protocol == protocol and t.clients == 1), None)
        many = next((t for t in runs if t.protocol == protocol and t.clients == clients), None)
        if one is None or many is None:
            continue
        sessions = many.sessions if protocol == "legacy" else 0
        ok = many.errors == 0 and many.done > 0 and (protocol != "legacy" or sessions == clients)
        beside = f"p95 {ms(one.latency.p95)} -> {ms(many.latency.p95)} ms; {many.errors} errors"
        beside += f"; {sessions} distinct sessions" if protocol == "legacy" else "; stateless, no sessions"
        aim = f"{clients} concurrent clients served, no errors" + (
            ", distinct sessions" if protocol == "legacy" else ""
        )
        label = f"throughput, hybrid, {protocol}: 1 -> {clients} clients"
        rows.append([label, f"{one.per_s:.1f} -> {many.per_s:.1f} q/s", beside, aim, verdict(ok)])
    return rows


def _retrieval_rows(r: Retrieval) -> list[list[str]]:
    door = HTTP if r.http_top_k else BUS
    keyword, semantic, hybrid = (r.row(r.label(m), door) for m in MODES)
    rows = []
    if hybrid and keyword and semantic:
        rows.append(
            [
                f"nDCG@10, hybrid ({r.fusion}), {'over MCP HTTP' if door == HTTP else 'over the bus'}",
                f"{hybrid.ndcg10:.4f}",
                f"keyword {keyword.ndcg10:.4f}, semantic {semantic.ndcg10:.4f}",
                f">= {AIM_NDCG} and above both",
                verdict(r.hybrid_aim()),
            ]
        )
    bus, over_http = r.row(r.label("hybrid"), BUS), r.row(r.label("hybrid"), HTTP)
    if bus:
        beside = ""
        if over_http:
            beside = f"Recall@{over_http.recall_k} over HTTP {over_http.recall:.4f} (top_k {over_http.recall_top_k})"
        rows.append([f"Recall@{RECALL_K}, hybrid", f"{bus.recall:.4f} (bus)", beside, "-", verdict(None)])
    if r.same:
        same, calls = sum(s for s, _ in r.same.values()), sum(n for _, n in r.same.values())
        rows.append(
            [
                "HTTP results = bus results (same depth, all modes)",
                f"{same}/{calls} calls",
                "the same ranking through the MCP door",
                "all identical",
                verdict(same == calls),
            ]
        )
    return rows


def render_summary(r: Results) -> list[str]:
    rows: list[list[str]] = []
    if r.retrieval is not None:
        rows += _retrieval_rows(r.retrieval)
    if r.latency is not None:
        rows += _latency_rows(r.latency)
    if r.throughput:
        rows += _throughput_rows(r.throughput, r.clients)
    m = r.machine
    about = (
        f"Machine: {m.get('CPU', '?')}, {m.get('cores', '?')}, {m.get('RAM', '?')}, {m.get('OS', '?')}; run"
        f" {m.get('date (UTC)', '?')} UTC, foldermind {m.get('foldermind', '?')}."
    )
    if r.index is not None:
        enc = r.index.encoder
        about += f" Corpus: {r.index.files:,} SciFact abstracts, {r.index.chunks:,} chunks. Query model:"
        about += f" {enc.get('model') or '?'} on {enc.get('backend') or 'torch'}"
        about += ", query-vector cache off." if "cache" in enc else "."
    if r.latency is not None:
        about += (
            f" Latency is end to end through the `mcp` SDK client over HTTP with the bearer token,"
            f" {r.latency.queries} queries per mode after a warm-up of {r.latency.warmup}; `indexer` is the"
            " median `query_ms` the indexer reported in those results, then its stage medians (`embed` the query"
            " embedding, `keyword` Tantivy, `vector` usearch) from the bus searches of the same rounds."
        )
    about += (
        f" No throughput figure is set: the aim here is that {r.clients} concurrent clients are served"
        f" without an error. The peer: {PEER}."
    )
    others = [o for phase in ("latency", "throughput") for o in _other_load(r, phase)]
    if others:
        about += f" The machine is shared: other load during the runs up to {max(others):.2f} cores."
    lines = [*table(["figure", "measured", "beside it", "aim", "verdict"], rows, "llllc"), "", *para(about)]
    if r.errors:
        lines.append(f"**The run had errors** (see the end of the report): {len(r.errors)}.")
    return lines


def _other_load(r: Results, phase: str) -> list[float]:
    if phase == "latency" and r.latency is not None:
        return [m.other_cores for m in r.latency.mcp] + [r.latency.bus.other_cores]
    if phase == "throughput":
        return [t.other_cores for t in r.throughput]
    return []


def _encoder(enc: dict[str, object]) -> str:
    text = f"{enc.get('policy', '?')}, {enc.get('state', '?')} ({enc.get('model') or '?'}"
    if enc.get("backend"):
        text += f", backend {enc['backend']}, {enc.get('threads', '?')} thread(s)"
    if enc.get("backend_note"):
        text += f": {enc['backend_note']}"
    text += ")"
    if "cache" in enc:
        text += "; its query-vector cache is off for the run (`[search] query_cache_size = 0`): every search"
        text += " encodes its query, where a repeated one would skip that"
    return text


def render(r: Results) -> str:
    lines = [
        "# Search over MCP HTTP: retrieval quality, latency, throughput (SciFact)",
        "",
        "Generated by `python -m tests.bench.search` (`make bench` runs it after the ingestion bench).",
        "A real kernel (default process map) indexes SciFact as files and serves the MCP front door on 127.0.0.1",
        "with its bearer token; the client is the `mcp` SDK's own `Client` over streamable HTTP (httpx2) in the",
        "bench process, calling `search_documents`. The rate limit is raised for the run. Times are wall-clock",
        "ms unless a column says CPU.",
        "",
        "## Summary",
        "",
        *render_summary(r),
        "",
        "## Machine",
        "",
        *table(["", ""], [[k, v] for k, v in r.machine.items()], "ll"),
        "",
    ]
    setup = ""
    if r.quiet:
        waits = "; ".join(f"{phase} {cpu:.0f}% (waited {waited:.0f} s)" for phase, cpu, waited in r.quiet)
        setup += (
            "Before each phase the bench waits (at most `--quiet-wait` s) for the machine to fall under 10% CPU;"
            f" CPU in use when each began: {waits}. The `other load` figures are the cores that processes outside"
            " the bench and its kernel kept busy during each measurement."
        )
    if r.index is not None:
        ix = r.index
        how = "reused from an earlier run (`--home`)" if ix.reused else f"indexed and embedded in {ix.seconds:.0f} s"
        setup += (
            f" Corpus: the first {r.docs:,} SciFact abstracts as .txt files ({ix.files:,} files, {ix.chunks:,}"
            f" chunks, {ix.embedded:,} embedded; {how}). The indexer's query encoder: {_encoder(ix.encoder)}."
        )
    if r.search:
        setup += " The run's `[search]` settings: " + ", ".join(f"`{k} = {v!r}`" for k, v in r.search.items())
        if r.overrides:
            setup += "; set for this run only (`--search`, `--ingest`): " + ", ".join(f"`{o}`" for o in r.overrides)
        setup += "."
    lines += [*para(setup.strip()), ""] if setup else []
    if r.retrieval is not None:
        lines += ["## 1. Retrieval quality", "", *render_retrieval(r.retrieval), ""]
    if r.latency is not None:
        lines += ["## 2. Latency, one client session, searches one after another", "", *render_latency(r.latency), ""]
    if r.throughput:
        lines += ["## 3. Throughput: concurrent clients, hybrid", "", *render_throughput(r.throughput), ""]
    if r.profile is not None:
        lines += ["## 4. Profile (py-spy), sequential hybrid searches", "", *spy.render(r.profile)]
    if r.errors:
        lines += ["## Errors", "", *(f"- {e}" for e in r.errors), ""]
    lines += [f"Run took {r.elapsed_s / 60:.1f} min.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default="", help="keep the kernel's home (and index) here and reuse it")
    parser.add_argument(
        "--docs", type=int, default=SCIFACT_DOCS, help=f"abstracts to index (default all {SCIFACT_DOCS})"
    )
    parser.add_argument("--queries", type=int, default=100, help="latency: measured queries per mode (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="latency: warm-up queries per mode (default 10)")
    parser.add_argument("--retrieval-queries", type=int, default=0, help="retrieval: the first N judged (0: all)")
    parser.add_argument("--no-retrieval", dest="retrieval", action="store_false", help="skip retrieval quality")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false", help="no fusion parameter sweep")
    parser.add_argument("--bare-encode", action="store_true", help="also time the bare model encode in-process")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for throughput (default 8)")
    parser.add_argument("--throughput-seconds", type=float, default=25.0, help="per throughput row (0 skips)")
    parser.add_argument("--profile", type=float, default=20.0, help="seconds of py-spy profiling (default 20; 0 skips)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="auto,legacy (default both)")
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="wait at most this for a quiet machine")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='a [search] setting for the run, VALUE in TOML (e.g. query_backend="torch"); repeatable',
    )
    parser.add_argument(
        "--ingest",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [ingest] setting for the run, VALUE in TOML (e.g. chunk_overlap_tokens=0); repeatable",
    )
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {REPORT}")
    args = parser.parse_args(argv)
    if bad := [kv for kv in args.search + args.ingest if "=" not in kv]:
        parser.error(f"--search and --ingest take KEY=VALUE: {bad}")
    args.protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not args.protocols or not set(args.protocols) <= set(PROTOCOLS):
        parser.error(f"--protocols: one or more of {', '.join(PROTOCOLS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the workers inherit it: nothing is downloaded

    t0 = time.monotonic()
    facts = machine.facts(REPO)
    machine.versions(facts, *machine.MCP_STACK)
    machine.versions(facts, "torch", "onnxruntime", "tantivy", "usearch")
    results = Results(machine=facts, docs=args.docs, clients=args.clients, overrides=args.search + args.ingest)
    try:
        run(args, results)
    except (BenchFailure, BusError) as exc:
        results.errors.append(f"{type(exc).__name__}: {exc}")
        say(f"bench failed: {exc}")
    results.elapsed_s = time.monotonic() - t0
    text = render(results)
    print(text)
    if not args.no_write:
        REPORT.write_text(merged(REPORT, text), encoding="utf-8")  # other benches' sections kept
        run_all.refresh_tail()
        say(f"wrote {REPORT.relative_to(REPO)} and its Summary into {run_all.REPORT.relative_to(REPO)}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
