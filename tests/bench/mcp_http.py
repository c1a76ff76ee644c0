"""MCP over streamable HTTP: search latency per mode, and throughput under concurrent clients.

Run by ``python -m tests.bench.search`` (the entry point: it starts the kernel, with the front door on an
OS-assigned port and the rate limit raised, on an indexed SciFact). Here:

1. latency (:func:`latency_rounds`): one session of the real ``mcp`` SDK client over HTTP with the bearer
   token per protocol (``auto``: the SDK's default negotiation, which lands on the stateless 2026-07-28
   revision; ``legacy``: the initialize handshake and an ``Mcp-Session-Id``) calls ``search_documents`` in
   each mode (keyword, semantic, hybrid): a warm-up, then the SciFact queries one after another; beside
   each call the indexer's own ``query_ms`` from the result and the client's own timestamps (request
   handed to httpx, response headers in, result returned), and ``tools/list`` (HTTP + MCP with no bus hop
   and no index work). In the same rounds: the same searches straight over the bus (``BusClient`` ->
   broker -> indexer) with the indexer's per-stage ``timings`` (query embedding, Tantivy, usearch, fusion,
   rows), and optionally the bare model encode of each query in this process. Everything takes the same
   queries in turn, a chunk at a time, so a burst of load elsewhere on a shared machine falls on all alike;
2. throughput (:func:`throughput_rounds`): 1 client, then C concurrent clients (each its own MCP client
   and HTTP connection; legacy clients each their own session) calling hybrid search back to back, S
   seconds per row in windows taken in turn with the other rows.

:func:`render` gives the report's sections for both.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import anyio
import psutil
from mcp.client import Client

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from tests.bench.cpu import CpuProbe
from tests.bench.kernels import say
from tests.bench.markdown import ms, table
from tests.bench.mcpclient import MODES, Wire, http_client, search_args
from tests.bench.stats import Series

TOP_K = 10
STAGES = ("embed", "keyword", "vector", "fuse", "rows")
"""The indexer's search ``timings``: query embedding, Tantivy BM25, usearch, fusion, SQLite rows."""
TORCH_THREADS = 1  # what the indexer's query encoder uses (workers/indexer/search/encoder.py)
PROCS = ("bench", "frontdoor", "kernel", "indexer")


def _search(query: str, mode: str) -> dict[str, object]:
    return search_args(query, mode, TOP_K)


def proto_label(protocol: str, negotiated: str) -> str:
    return f"{protocol} ({negotiated or '?'}, {'stateless' if protocol == 'auto' else 'session'})"


# --------------------------------------------------------------------------------------------
# 1. latency: one session per protocol, the rounds interleaved


@dataclass(slots=True)
class McpLatency:
    protocol: str
    negotiated: str = ""
    session_id: bool = False
    http_per_call: float = 0.0  # HTTP requests per search call
    e2e: dict[str, Series] = field(default_factory=dict)  # mode -> end to end
    query_ms: dict[str, Series] = field(default_factory=dict)  # mode -> the indexer's query_ms, same calls
    outside: dict[str, Series] = field(default_factory=dict)  # mode -> e2e - query_ms, per call
    before_send: dict[str, Series] = field(default_factory=dict)  # mode -> call_tool until httpx sends
    until_headers: dict[str, Series] = field(default_factory=dict)  # mode -> sent until the headers are in
    after_headers: dict[str, Series] = field(default_factory=dict)  # mode -> headers in until the result
    tools_list: Series = field(default_factory=Series)
    errors: int = 0
    other_cores: float = 0.0
    cpu_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> process -> CPU ms per call

    @property
    def label(self) -> str:
        return proto_label(self.protocol, self.negotiated)


class Session:
    """One MCP client session, open for the whole latency phase; ``chunk`` measures a few searches one
    after another and adds them to ``out``."""

    def __init__(self, url: str, protocol: str, token: str, procs: dict[str, psutil.Process]) -> None:
        self.url, self.protocol, self.token, self.procs = url, protocol, token, procs
        self.out = McpLatency(protocol)
        self.wire = Wire()
        self.client: Client | None = None
        self.probes: dict[str, CpuProbe] = {}
        self.calls = 0
        self.requests = 0

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        self.client = await stack.enter_async_context(http_client(self.url, self.token, self.protocol, self.wire))
        self.out.negotiated = self.client.protocol_version

    async def warm(self, mode: str, queries: list[str]) -> None:
        assert self.client is not None
        for q in queries:
            await self.client.call_tool("search_documents", _search(q, mode))

    async def chunk(self, mode: str, queries: list[str]) -> None:
        assert self.client is not None
        out, wire = self.out, self.wire
        series = [d.setdefault(mode, Series()) for d in (out.e2e, out.query_ms, out.outside)]
        series += [d.setdefault(mode, Series()) for d in (out.before_send, out.until_headers, out.after_headers)]
        e2e, qms, outside, before_send, until_headers, after_headers = series
        sent = sum(wire.requests.values())
        probe = self.probes.setdefault(mode, CpuProbe(self.procs))
        probe.start()
        for q in queries:
            t0 = time.perf_counter()
            result = await self.client.call_tool("search_documents", _search(q, mode))
            t1 = time.perf_counter()
            body = result.structured_content
            if result.is_error or not body or body.get("mode_used") != mode:
                out.errors += 1
                continue
            q_ms = float(body["query_ms"])
            e2e.add((t1 - t0) * 1000)
            qms.add(q_ms)
            outside.add((t1 - t0) * 1000 - q_ms)
            before_send.add((wire.sent_at - t0) * 1000)
            until_headers.add((wire.answered_at - wire.sent_at) * 1000)
            after_headers.add((t1 - wire.answered_at) * 1000)
        probe.stop()
        self.calls += len(queries)
        self.requests += sum(wire.requests.values()) - sent

    async def tools_list(self, n: int, timed: bool = True) -> None:
        assert self.client is not None
        for _ in range(n):
            t0 = time.perf_counter()
            await self.client.list_tools(cache_mode="bypass")
            if timed:
                self.out.tools_list.add((time.perf_counter() - t0) * 1000)

    def finish(self) -> McpLatency:
        out = self.out
        out.session_id = bool(self.wire.session_id)
        out.http_per_call = self.requests / self.calls if self.calls else 0.0
        for mode, probe in self.probes.items():
            n = max(len(out.e2e[mode].samples), 1)
            out.cpu_ms[mode] = {k: v * 1000 / n for k, v in probe.spent.items()}
            out.other_cores = max(out.other_cores, probe.other_cores)
        return out


# the same searches over the bus


@dataclass(slots=True)
class BusLatency:
    rt: dict[str, Series] = field(default_factory=dict)
    query_ms: dict[str, Series] = field(default_factory=dict)
    outside: dict[str, Series] = field(default_factory=dict)
    stages: dict[str, dict[str, Series]] = field(default_factory=dict)  # mode -> stage -> ms
    other_cores: float = 0.0


class BusSearches:
    """``search.request`` to the indexer from this process, in chunks like the MCP sessions."""

    def __init__(self, client: BusClient, procs: dict[str, psutil.Process]) -> None:
        self.client, self.procs = client, procs
        self.out = BusLatency()
        self.probes: dict[str, CpuProbe] = {}

    def search(self, query: str, mode: str) -> SearchReply:
        request = SearchRequest(query=query, mode=mode, top_k=TOP_K)
        return self.client.request("indexer", request, SearchReply, timeout=30).body

    def chunk(self, mode: str, queries: list[str]) -> None:
        out = self.out
        rt, qms = out.rt.setdefault(mode, Series()), out.query_ms.setdefault(mode, Series())
        outside, stages = out.outside.setdefault(mode, Series()), out.stages.setdefault(mode, {})
        probe = self.probes.setdefault(mode, CpuProbe(self.procs))
        probe.start()
        for q in queries:
            t0 = time.perf_counter()
            reply = self.search(q, mode)
            elapsed = (time.perf_counter() - t0) * 1000
            rt.add(elapsed)
            qms.add(reply.query_ms)
            outside.add(elapsed - reply.query_ms)
            for stage, v in (reply.timings or {}).items():
                stages.setdefault(stage, Series()).add(float(v))
        probe.stop()
        out.other_cores = max(out.other_cores, probe.other_cores)


# the bare encode (optional)


@dataclass(slots=True)
class Encode:
    series: Series  # one query per call, TORCH_THREADS threads (the indexer's query encoder)
    threads: int
    load_s: float
    model: str
    other: list[tuple[str, Series]] = field(default_factory=list)  # (how, ms per call): for comparison


BATCH = 8  # as many queries as the throughput run's clients keep in flight
ENCODE_WAYS = ((TORCH_THREADS, 1), (2, 1), (1, BATCH), (2, BATCH))  # (torch threads, queries per call)


def _encode_label(threads: int, batch: int) -> str:
    return f"{batch} quer{'y' if batch == 1 else 'ies'} per call, {threads} torch thread{'s' if threads > 1 else ''}"


class BareEncoder:
    """The indexer's model through sentence-transformers (torch) in this process; ``chunk`` times each way
    of ``ENCODE_WAYS`` on a few queries."""

    def __init__(self) -> None:
        t0 = time.perf_counter()
        import torch

        from foldermind.workers.embedding import model_files

        self.torch = torch
        path = model_files.model_dir()
        self.model, _ = model_files.load_model(path, TORCH_THREADS)  # as the workers load it
        self.name = model_files.model_name(path)
        self.load_s = time.perf_counter() - t0
        self.series = {way: Series() for way in ENCODE_WAYS}

    def encode(self, texts: list[str]) -> None:
        with self.torch.inference_mode():
            self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def chunk(self, queries: list[str], timed: bool = True) -> None:
        for threads, batch in ENCODE_WAYS:
            self.torch.set_num_threads(threads)
            for i in range(len(queries)):
                texts = [queries[(i + j) % len(queries)] for j in range(batch)]
                t0 = time.perf_counter()
                self.encode(texts)
                if timed:
                    self.series[(threads, batch)].add((time.perf_counter() - t0) * 1000)
        self.torch.set_num_threads(TORCH_THREADS)
        time.sleep(0.2)  # OpenMP's idle threads stop spinning before the next measurement

    def result(self) -> Encode:
        first, *rest = ENCODE_WAYS
        other = [(_encode_label(*way), self.series[way]) for way in rest]
        return Encode(self.series[first], first[0], self.load_s, self.name, other)


@dataclass(slots=True)
class Latency:
    queries: int
    warmup: int
    mcp: list[McpLatency]
    bus: BusLatency
    encode: Encode | None = None


def latency_rounds(
    url: str,
    token: str,
    protocols: list[str],
    queries: list[str],
    warmup: int,
    rounds: int,
    bus: BusSearches,
    encoder: BareEncoder | None,
) -> Latency:
    """Every session, the bus and the bare encode take the same queries in turn, a chunk at a time, so
    that a burst of load elsewhere on the machine falls on all of them alike."""
    warm, measured = queries[:warmup], queries[warmup:]
    size = math.ceil(len(measured) / rounds)
    chunks = [measured[i : i + size] for i in range(0, len(measured), size)]
    sessions = [Session(url, protocol, token, bus.procs) for protocol in protocols]

    async def go() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for s in sessions:
                await s.open(stack)
            for mode in MODES:
                for s in sessions:
                    await s.warm(mode, warm)
                for q in warm:
                    bus.search(q, mode)
            for s in sessions:
                await s.tools_list(len(warm), timed=False)
            if encoder is not None:
                encoder.chunk(warm, timed=False)
            for r, chunk in enumerate(chunks):
                order = sessions if r % 2 == 0 else sessions[::-1]
                for mode in MODES:
                    for s in order:
                        await s.chunk(mode, chunk)
                    bus.chunk(mode, chunk)
                for s in order:
                    await s.tools_list(len(chunk))
                if encoder is not None:
                    encoder.chunk(chunk)
                say(f"  round {r + 1}/{len(chunks)} done")

    anyio.run(go)
    out = [s.finish() for s in sessions]
    for m in out:
        for mode in MODES:
            e = m.e2e[mode]
            say(
                f"  {m.protocol:6} {mode:8} median {e.median:6.1f} ms  p95 {e.p95:6.1f} ms  "
                f"(indexer {m.query_ms[mode].median:.1f} ms)"
            )
        say(f"  {m.protocol:6} tools/list median {m.tools_list.median:.1f} ms")
    for mode in MODES:
        say(f"  bus {mode:8} median {bus.out.rt[mode].median:6.1f} ms (indexer {bus.out.query_ms[mode].median:.1f} ms)")
    return Latency(len(measured), len(warm), out, bus.out, encoder.result() if encoder else None)


# --------------------------------------------------------------------------------------------
# 2. throughput


@dataclass(slots=True)
class Throughput:
    protocol: str
    clients: int
    seconds: float = 0.0
    done: int = 0
    latency: Series = field(default_factory=Series)
    errors: int = 0
    cpu_ms: dict[str, float] = field(default_factory=dict)  # process -> CPU ms per query
    other_cores: float = 0.0
    sessions: int = 0

    @property
    def per_s(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0


def throughput_window(
    url: str, token: str, out: Throughput, probe: CpuProbe, seconds: float, queries: list[str], offset: int
) -> None:
    """``out.clients`` clients, each its own MCP client and HTTP connection (legacy: its own session),
    as tasks of one event loop, calling hybrid search back to back; calls completed inside the window
    count. ``probe`` is started and stopped around the window."""
    window: dict[str, float] = {}
    sessions: set[str] = set()

    async def one(i: int, connected: list[int], ready: anyio.Event, finished: anyio.Event) -> None:
        wire = Wire()
        async with http_client(url, token, out.protocol, wire) as client:
            for q in queries[:2]:
                await client.call_tool("search_documents", _search(q, "hybrid"))
            if wire.session_id:
                sessions.add(wire.session_id)
            connected[0] += 1
            if connected[0] == out.clients:
                ready.set()
            await ready.wait()
            k = offset + i * 13
            while not finished.is_set():
                q = queries[k % len(queries)]
                k += 1
                t0 = time.perf_counter()
                result = await client.call_tool("search_documents", _search(q, "hybrid"))
                t1 = time.perf_counter()
                if t1 > window["end"]:
                    break  # finished after the window: not counted
                if result.is_error:
                    out.errors += 1
                else:
                    out.done += 1
                    out.latency.add((t1 - t0) * 1000)

    async def clock(ready: anyio.Event, finished: anyio.Event) -> None:
        await ready.wait()
        window["end"] = time.perf_counter() + seconds
        probe.start()
        await anyio.sleep(seconds)
        probe.stop()
        finished.set()

    async def go() -> None:
        ready, finished = anyio.Event(), anyio.Event()
        connected = [0]
        async with anyio.create_task_group() as tg:
            tg.start_soon(clock, ready, finished)
            for i in range(out.clients):
                tg.start_soon(one, i, connected, ready, finished)

    anyio.run(go)
    out.sessions = max(out.sessions, len(sessions))


def throughput_rounds(
    url: str,
    token: str,
    procs: dict[str, psutil.Process],
    protocols: list[str],
    clients: int,
    seconds: float,
    rounds: int,
    queries: list[str],
) -> list[Throughput]:
    """Each (protocol, 1 or ``clients`` clients) gets ``seconds`` in all, as ``rounds`` windows taken in
    turn with the others."""
    configs = [(protocol, n) for protocol in protocols for n in (1, clients)]
    outs = {c: Throughput(*c) for c in configs}
    probes = {c: CpuProbe(procs) for c in configs}
    for r in range(rounds):
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        for c in order:
            throughput_window(url, token, outs[c], probes[c], seconds / rounds, queries, r * 17)
        say(f"  round {r + 1}/{rounds} done")
    results = []
    for c in configs:
        out, probe = outs[c], probes[c]
        out.seconds = probe.wall_s
        out.cpu_ms = {k: v * 1000 / max(out.done, 1) for k, v in probe.spent.items()}
        out.other_cores = probe.other_cores
        results.append(out)
        say(
            f"  {out.protocol:6} {out.clients} client{'s' if out.clients > 1 else ' '}: "
            f"{out.per_s:6.1f} q/s, median {out.latency.median:.1f} ms, p95 {out.latency.p95:.1f} ms "
            f"(other load {out.other_cores:.2f} cores)"
        )
    return results


# --------------------------------------------------------------------------------------------
# report


def _latency_table(runs: list[McpLatency]) -> list[str]:
    rows = []
    for m in runs:
        for mode in MODES:
            if mode not in m.e2e:
                continue
            e, q, o = m.e2e[mode], m.query_ms[mode], m.outside[mode]
            split = (m.until_headers[mode].median, m.after_headers[mode].median)
            rows.append([m.label, mode, *(ms(x) for x in (e.median, e.p95, e.p99, q.median, q.p95, o.median, o.p95))])
            rows[-1] += [ms(x) for x in split]
        t = m.tools_list
        rows.append([m.label, "tools/list", ms(t.median), ms(t.p95), ms(t.p99), *["-"] * 6])
    header = ["protocol", "mode", "median", "p95", "p99", "indexer median", "indexer p95", "outside median"]
    lines = table([*header, "outside p95", "sent -> headers in", "headers in -> result"], rows)
    cpu_rows = [
        [m.label, mode, *(ms(spent.get(p, math.nan)) for p in PROCS)] for m in runs for mode, spent in m.cpu_ms.items()
    ]
    per_call = ", ".join(f"{m.protocol} {m.http_per_call:.2f}" for m in runs)
    sessions = ", ".join(f"{m.protocol} {'yes' if m.session_id else 'no'}" for m in runs)
    other = max(m.other_cores for m in runs)
    errors = sum(m.errors for m in runs)
    return [
        *lines,
        "",
        "CPU time per search (ms) of each process in the same runs (psutil; `bench` is the client):",
        "",
        *table(["protocol", "mode", "client (bench)", "frontdoor", "kernel (broker)", "indexer"], cpu_rows),
        "",
        f"HTTP requests per search call: {per_call}. Mcp-Session-Id issued: {sessions}. Failed calls: {errors}.",
        f"Other load on the machine during these runs: up to {other:.2f} cores.",
    ]


def _bus_table(b: BusLatency) -> list[str]:
    rows = []
    for mode in MODES:
        st = b.stages.get(mode, {})
        rows.append(
            [
                mode,
                *(ms(x) for x in (b.rt[mode].median, b.rt[mode].p95, b.query_ms[mode].median, b.outside[mode].median)),
                *(ms(st[s].median) if s in st else "-" for s in STAGES),
            ]
        )
    header = ["mode", "bus median", "bus p95", "indexer query_ms", "bus hops (rt - query_ms)", *STAGES]
    return table(header, rows)


def _ladder(lat: Latency) -> list[str]:
    """Medians, from the inside out: what each layer adds to hybrid search."""
    b = lat.bus
    st = b.stages.get("hybrid", {})
    rows: list[list[str]] = []
    if lat.encode is not None:
        rows.append(["bare encode of the query (bench process, torch)", ms(lat.encode.series.median), ""])
    rows += [[f"indexer stage `{s}`", ms(st[s].median), ""] for s in STAGES if s in st]
    rows.append(["indexer `query_ms` (the whole search)", ms(b.query_ms["hybrid"].median), ""])
    bus_rt = b.rt["hybrid"].median
    rows.append(
        ["bus round trip from the bench (bench -> broker -> indexer)", ms(bus_rt), f"+{ms(b.outside['hybrid'].median)}"]
    )
    for m in lat.mcp:
        e2e = m.e2e["hybrid"].median
        rows.append([f"MCP over HTTP, {m.label}", ms(e2e), f"+{ms(e2e - bus_rt)} over the bus round trip"])
        parts = (m.before_send["hybrid"].median, m.until_headers["hybrid"].median, m.after_headers["hybrid"].median)
        rows.append(
            [
                "of which: client before send / sent -> headers in / headers in -> result",
                " / ".join(ms(x) for x in parts),
                f"tools/list alone: {ms(m.tools_list.median)}",
            ]
        )
    return table(["layer", "median ms", "adds"], rows, "lrl")


def _throughput_table(runs: list[Throughput]) -> list[str]:
    rows = [
        [
            t.protocol,
            str(t.clients),
            str(t.sessions) if t.protocol == "legacy" else "-",
            f"{t.seconds:.0f}",
            f"{t.per_s:.1f}",
            *(ms(x) for x in (t.latency.median, t.latency.p95, t.latency.p99)),
            str(t.errors),
            *(ms(t.cpu_ms.get(p, math.nan)) for p in PROCS),
            f"{t.other_cores:.2f}",
        ]
        for t in runs
    ]
    header = ["protocol", "clients", "sessions", "s", "queries/s", "median", "p95", "p99", "errors"]
    header += ["CPU client", "CPU frontdoor", "CPU kernel", "CPU indexer", "other load (cores)"]
    return table(header, rows, "l" + "r" * (len(header) - 1))


def render_latency(lat: Latency) -> list[str]:
    lines = [
        f"{lat.queries} queries per mode after a warm-up of {lat.warmup}, one session per protocol, the sessions, the",
        "bus searches (and the bare encode, when asked for) taking the same queries in turn, a chunk at a time",
        "(rounds), so that load elsewhere on the machine falls on all alike. `auto` is the SDK's default",
        "negotiation, `legacy` the initialize handshake with a session. `indexer` is the `query_ms` the indexer",
        "reports in the same result; `outside` is, per call, the end-to-end time minus that (HTTP both ways, the",
        "guard, the SDK on both sides, the front door's thread hop and both bus hops through the broker).",
        "`tools/list` is an MCP round trip with no bus hop and no index work. The last two columns split each call",
        "as the client sees it (httpx's request and response hooks): from handing the request to httpx until the",
        "response headers arrive, and from then until `call_tool` returns (reading the body, parsing, validating;",
        "with `legacy` the result comes as an SSE event after the headers, so the server's time falls there too).",
        "",
        *_latency_table(lat.mcp),
        "",
        "### The same searches straight over the bus",
        "",
        '`BusClient.request("indexer", search.request)` from the bench process, in the same rounds: bench ->',
        "broker -> indexer and back, no HTTP and no MCP. Stage times are the indexer's own `timings` (medians;",
        "`embed` is the query embedding, `keyword` Tantivy BM25, `vector` usearch, `fuse` the fusion, `rows`",
        "SQLite rows and snippets).",
        "",
        *_bus_table(lat.bus),
        "",
        f"Other load on the machine during these runs: up to {lat.bus.other_cores:.2f} cores.",
        "",
    ]
    if lat.encode is not None:
        e = lat.encode
        ways = [(f"1 query per call, {e.threads} torch thread", e.series), *e.other]
        lines += [
            "### Bare model encode of one query",
            "",
            "`SentenceTransformer.encode([query])` (torch) in the bench process, in turn with the searches (the",
            f"kernel idle meanwhile), the indexer's model ({e.model}), {e.threads} torch thread: median "
            f"{ms(e.series.median)} ms, p95 {ms(e.series.p95)} ms over {len(e.series.samples)} queries (model load "
            f"{e.load_s:.1f} s). Other ways to run the same model (medians per `encode` call):",
            "",
            *table(
                ["how", "median ms per call", "p95", "ms per query"],
                [[how, ms(x.median), ms(x.p95), ms(x.median / int(how.split()[0]))] for how, x in ways],
            ),
            "",
        ]
    return [*lines, "### Where the time of one hybrid search goes (medians)", "", *_ladder(lat)]


def render_throughput(runs: list[Throughput]) -> list[str]:
    return [
        "Each client is its own `mcp` `Client` with its own HTTP connection (legacy: its own session), all as",
        "tasks of one event loop in the bench process, calling search_documents (hybrid) back to back; queries/s",
        "counts the calls completed inside the windows. Each row's time is split into windows taken in turn",
        "with the other rows'. CPU columns are CPU ms per search, by process (psutil).",
        "",
        *_throughput_table(runs),
    ]
