"""MCP over streamable HTTP: search latency per mode, and throughput under concurrent clients (issue 4).

``python -m tests.bench.mcp_http [--docs N] [--queries N] [--no-write]`` from the repository root. A real
kernel (default process map) in a throw-away home, its ``[mcp]`` on an OS-assigned port with the rate limit
raised, indexes and embeds the first N SciFact abstracts (``../shared/eval/scifact``, or
``$FOLDERMIND_SCIFACT``) written as ``.txt`` files. Beside the product's front door the kernel runs a
what-if one (``--no-what-if`` drops it): ``[workers.frontdoor_nodelay] module = "tests.bench.mcp_http"``,
the same worker with TCP_NODELAY on its connections and timestamps around its hops (``WORKER`` at the end
of this module). Then, each phase after waiting for a quiet machine:

1. latency: one session of the real ``mcp`` SDK client over HTTP with the bearer token per front door and
   protocol (``auto``: the SDK's default negotiation, which lands on the stateless 2026-07-28 revision;
   ``legacy``: the initialize handshake and an ``Mcp-Session-Id``) calls ``search_documents`` in each mode
   (keyword, semantic, hybrid): a warm-up, then the SciFact queries one after another; beside each call
   the indexer's own ``query_ms`` from the result, and ``tools/list`` (HTTP + MCP with no bus hop and no
   index work). In the same rounds: the same searches straight over the bus (``BusClient`` -> broker ->
   indexer) with the indexer's per-stage ``timings``, and the bare model encode of each query in this
   process (the indexer's model directory, one torch thread; two threads and batches for comparison).
   Everything takes the same queries in turn, a chunk at a time, so a burst of load elsewhere on a shared
   machine falls on all alike;
2. throughput: 1 client, then C concurrent clients (each its own MCP client and HTTP connection; legacy
   clients each their own session) calling hybrid search back to back, S seconds per row in windows taken
   in turn with the other rows;
3. py-spy samples the product's front door, the kernel (broker), the indexer and this process during a
   sequential hybrid run: CPU per search by process and layer (``--profile 0`` skips it).

The report is printed and written to ``docs/benchmarks-mcp.md`` (unless ``--no-write``); progress goes to
stderr. ``--home DIR`` keeps the home (and its index) in DIR and reuses it on the next run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

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
    StatusReply,
    StatusRequest,
)
from tests import mcpclient as mc
from tests.bench import machine
from tests.bench.cpu import CpuProbe

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "benchmarks-mcp.md"
SCIFACT_ENV = "FOLDERMIND_SCIFACT"
SCIFACT_DOCS = 5183

MODES = ("keyword", "semantic", "hybrid")
PROTOCOLS = ("auto", "legacy")
TOP_K = 10
AIM_MEDIAN_MS = 25.0  # hybrid, end to end over MCP HTTP (issue 4)
AIM_P95_MS = 60.0
PEER = "docsonar: 53-56 ms median for hybrid over MCP HTTP"
CONFIG = "[mcp]\nport = 0\nrate_per_minute = 1000000\n"
NODELAY_WORKER = "frontdoor_nodelay"
NODELAY_CONFIG = f'[workers.{NODELAY_WORKER}]\nmodule = "tests.bench.mcp_http"\n'
"""The what-if front door, beside the product's: the same worker with TCP_NODELAY on its connections and
timestamps around its hops (``WORKER`` at the end of this module)."""
INDEX_TIMEOUT_S = 3600.0
TORCH_THREADS = 1  # what the indexer's query encoder uses (workers/indexer/encoder.py)
PROFILE_RATE = 250  # py-spy samples per second
GIL_SAMPLED = ("bench", "frontdoor", "kernel")
"""Sampled only while a thread holds the GIL (``--gil``): their work is Python, and on a loaded machine a
thread that is runnable but waits for a core would otherwise count as busy. The indexer is sampled whole:
torch runs without the GIL."""


class BenchFailure(Exception):
    """The run cannot go on; the message says why."""


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def scifact_dir() -> Path:
    return Path(os.environ.get(SCIFACT_ENV) or REPO.parent / "shared" / "eval" / "scifact")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


# --------------------------------------------------------------------------------------------
# statistics


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p95 of 100 samples is the 95th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


@dataclass(slots=True)
class Series:
    """Latency samples in ms."""

    samples: list[float] = field(default_factory=list)

    def add(self, ms: float) -> None:
        self.samples.append(ms)

    @property
    def median(self) -> float:
        return med(self.samples)

    @property
    def p95(self) -> float:
        return pct(self.samples, 0.95)

    @property
    def p99(self) -> float:
        return pct(self.samples, 0.99)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else math.nan


# --------------------------------------------------------------------------------------------
# corpus and queries


def write_corpus(dest: Path, limit: int) -> int:
    """One ``<_id>.txt`` per abstract (title, blank line, text), as the ingestion bench writes them."""
    source = scifact_dir() / "corpus.jsonl"
    if not source.is_file():
        raise BenchFailure(f"no SciFact corpus at {source} (set {SCIFACT_ENV})")
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(source, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            if n >= limit:
                break
            doc = json.loads(line)
            name = re.sub(r"[^\w.-]", "_", str(doc["_id"])) + ".txt"
            path = dest / name
            text = f"{doc.get('title', '').strip()}\n\n{doc.get('text', '').strip()}\n"
            if not path.exists() or path.read_text("utf-8") != text:
                path.write_text(text, "utf-8")
            n += 1
    return n


def scifact_queries() -> list[str]:
    path = scifact_dir() / "queries.jsonl"
    if not path.is_file():
        raise BenchFailure(f"no SciFact queries at {path} (set {SCIFACT_ENV})")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


# --------------------------------------------------------------------------------------------
# the kernel


class Kernel:
    """``foldermind start`` / ``stop`` in ``root``; ``stop()`` also kills what is left of its tree (by pid)."""

    def __init__(self, root: Path, config: str) -> None:
        self.root = root
        self.home = Home.resolve(root)
        self.home.ensure()
        self.configure(config)
        self.kernel_pid = 0
        self.pids: set[int] = set()
        self.running = False

    def configure(self, config: str) -> None:
        """The home's supervisor.toml override (read at the next start)."""
        self.home.supervisor_override.write_text(config, encoding="utf-8")

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # The repository on PYTHONPATH: the what-if front door is this module, imported by a worker.
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return subprocess.run(
            [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(self.root), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": path},
        )

    def client(self, name: str) -> BusClient:
        return BusClient(self.home.bus_endpoint, name=name)

    def start(self, timeout: float = 90.0) -> None:
        self.running = True
        out = self.cli("start")
        if out.returncode != 0:
            raise BenchFailure(f"foldermind start exited {out.returncode}:\n{out.stdout}{out.stderr}")
        self.kernel_pid = int(self.home.pid_file.read_text().strip())
        self.pids.add(self.kernel_pid)
        give_up = time.monotonic() + timeout
        with self.client("bench-start") as client:
            while True:
                states: dict[str, str] = {}
                with contextlib.suppress(BusError):
                    st = self.status(client)
                    states = {w["name"]: w["state"] for w in st.workers}
                    self.pids.update(w["pid"] for w in st.workers if w["pid"])
                if states and all(s == "RUNNING" for s in states.values()):
                    return
                if time.monotonic() > give_up:
                    raise BenchFailure(f"workers not all RUNNING after {timeout:g} s: {states}")
                time.sleep(0.1)

    def status(self, client: BusClient) -> StatusReply:
        return client.request("kernel", StatusRequest(), StatusReply, timeout=10).body

    def describe(self, client: BusClient, worker: str) -> dict[str, Any]:
        return dict(client.request(worker, DescribeRequest(), DescribeReply, timeout=30).body.details)

    def processes(self, client: BusClient) -> dict[str, psutil.Process]:
        """The kernel (the broker runs in it) and every worker, by name."""
        st = self.status(client)
        procs = {"kernel": psutil.Process(self.kernel_pid)}
        for w in st.workers:
            if w["pid"]:
                self.pids.add(w["pid"])
                procs[w["name"]] = psutil.Process(w["pid"])
        return procs

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        procs: list[psutil.Process] = []
        if self.kernel_pid > 0:
            with contextlib.suppress(psutil.Error):
                self.pids.update(p.pid for p in psutil.Process(self.kernel_pid).children(recursive=True))
        for pid in sorted(p for p in self.pids if p > 1 and p != os.getpid()):
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        try:
            out = self.cli("stop", timeout=90)
            if out.returncode != 0:
                say(f"foldermind stop exited {out.returncode}: {out.stderr.strip()}")
        except subprocess.TimeoutExpired as exc:
            say(f"foldermind stop timed out: {exc}")
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                if proc.is_running():
                    proc.kill()
                    say(f"killed leftover pid {proc.pid}")


@dataclass(slots=True)
class Index:
    files: int = 0
    chunks: int = 0
    embedded: int = 0
    seconds: float = 0.0
    reused: bool = False
    encoder: dict[str, Any] = field(default_factory=dict)


def index_corpus(kernel: Kernel, corpus: Path, files: int) -> Index:
    """Register ``corpus`` (unless this home already has it) and wait until every file is embedded."""
    out = Index()
    with kernel.client("bench-index") as client:
        folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=10).body.folders
        out.reused = any(Path(f["path"]) == corpus for f in folders)
        t0 = time.monotonic()
        if not out.reused:
            added = kernel.cli("folders", "add", str(corpus))
            if added.returncode != 0:
                raise BenchFailure(f"folders add exited {added.returncode}: {added.stdout}{added.stderr}")
        last_say = 0.0
        while True:
            folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=30).body.folders
            f = next((x for x in folders if Path(x["path"]) == corpus), None)
            now = time.monotonic() - t0
            if f is not None:
                done = f["files_indexed"] + f["files_failed"]
                if (
                    f["files_total"] >= files
                    and done >= files
                    and f["state"] == "ready"
                    and f["chunks"]
                    and f["chunks_embedded"] >= f["chunks"]
                ):
                    out.files, out.chunks, out.embedded = f["files_indexed"], f["chunks"], f["chunks_embedded"]
                    out.seconds = now
                    break
                if now - last_say >= 15:
                    last_say = now
                    say(
                        f"  {now:5.0f} s: {done}/{f['files_total']} files, "
                        f"{f['chunks_embedded']}/{f['chunks']} embedded"
                    )
            if now > INDEX_TIMEOUT_S:
                raise BenchFailure(f"not indexed after {INDEX_TIMEOUT_S:g} s: {f}")
            time.sleep(1.0)
        give_up = time.monotonic() + 180
        while True:
            out.encoder = dict(kernel.describe(client, "indexer").get("query_encoder") or {})
            if out.encoder.get("state") in ("ready", "failed", "off"):
                break
            if time.monotonic() > give_up:
                raise BenchFailure(f"the indexer's query model is not ready: {out.encoder}")
            time.sleep(0.5)
    return out


# --------------------------------------------------------------------------------------------
# the front doors, and the MCP client


@dataclass(slots=True)
class Door:
    """One front door worker of the kernel: the product's, or the what-if one beside it."""

    label: str
    worker: str
    url: str
    procs: dict[str, psutil.Process]  # "bench", "frontdoor" (this door's process), "kernel", "indexer"
    spans: Spans | None = None


Spans = Callable[[], dict[str, list[float]]]
"""The instrumented front door's span lists (``bench_spans`` in its describe details)."""


def _search_args(query: str, mode: str) -> dict[str, Any]:
    return {"query": query, "mode": mode, "top_k": TOP_K}


@dataclass(slots=True)
class Wire:
    """What one client put on the wire: HTTP requests by method, and the session id it was given."""

    requests: Counter[str] = field(default_factory=Counter)
    session_id: str = ""
    sent_at: float = 0.0  # perf_counter when the last request was handed to httpx (its request hook)
    answered_at: float = 0.0  # when the last response's headers arrived (its response hook)


@contextlib.asynccontextmanager
async def http_client(url: str, token: str, mode: str, wire: Wire) -> AsyncIterator[Client]:
    """tests/mcpclient.py's ``http_client``, with hooks that count requests and note the session id."""

    async def on_request(request: httpx2.Request) -> None:
        wire.sent_at = time.perf_counter()
        wire.requests[request.method] += 1

    async def on_response(response: httpx2.Response) -> None:
        wire.answered_at = time.perf_counter()
        sid = response.headers.get("mcp-session-id")
        if sid:
            wire.session_id = sid

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30.0),
            event_hooks={"request": [on_request], "response": [on_response]},
        ) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


# --------------------------------------------------------------------------------------------
# 1. latency: one session per door and protocol, the rounds interleaved


@dataclass(slots=True)
class McpLatency:
    door: str
    protocol: str
    negotiated: str = ""
    session_id: bool = False
    http_per_call: float = 0.0  # HTTP requests per search call
    e2e: dict[str, Series] = field(default_factory=dict)  # mode -> end to end
    query_ms: dict[str, Series] = field(default_factory=dict)  # mode -> the indexer's query_ms, same calls
    outside: dict[str, Series] = field(default_factory=dict)  # mode -> e2e - query_ms, per call
    tools_list: Series = field(default_factory=Series)
    errors: int = 0
    other_cores: float = 0.0
    cpu_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> process -> CPU ms per call
    hops: dict[str, dict[str, Series]] = field(default_factory=dict)  # mode -> hop -> ms, per call


HOPS = (
    ("client_pre", "client: SDK and httpx until the request is sent"),
    ("wire", "HTTP on the wire and in uvicorn (parse, write), both ways"),
    ("sdk_server", "guard + Starlette + MCP SDK server (JSON-RPC, arguments, dispatch, response)"),
    ("build", "tool result: hits -> SearchOutput -> JSON (tools.py)"),
    ("thread_hop", "thread hop: anyio.to_thread.run_sync there and back (frontdoor/bus.py)"),
    ("bus", "bus: BusClient -> broker -> indexer and back, minus the indexer's time"),
    ("indexer", "indexer: query_ms (encode, Tantivy, usearch, fusion, rows)"),
    ("client_post", "client: after the response headers (body, JSON, pydantic, output-schema check)"),
    ("wire_and_client_post", "SSE (legacy): HTTP on the wire + uvicorn + the client after the request left"),
)


class Session:
    """One MCP client session on one door, open for the whole latency phase; ``chunk`` measures a few
    searches one after another and adds them to ``out``. With the door's ``spans`` (the instrumented
    front door), each call is also cut into the hops of ``HOPS``."""

    def __init__(self, door: Door, protocol: str, token: str) -> None:
        self.door, self.protocol, self.token = door, protocol, token
        self.out = McpLatency(door.label, protocol)
        self.wire = Wire()
        self.client: Client | None = None
        self.probes: dict[str, CpuProbe] = {}
        self.calls = 0
        self.requests = 0

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        self.client = await stack.enter_async_context(http_client(self.door.url, self.token, self.protocol, self.wire))
        self.out.negotiated = self.client.protocol_version

    async def warm(self, mode: str, queries: list[str]) -> None:
        assert self.client is not None
        for q in queries:
            await self.client.call_tool("search_documents", _search_args(q, mode))

    async def chunk(self, mode: str, queries: list[str]) -> None:
        assert self.client is not None
        out, wire, spans = self.out, self.wire, self.door.spans
        e2e, qms = out.e2e.setdefault(mode, Series()), out.query_ms.setdefault(mode, Series())
        outside, hops = out.outside.setdefault(mode, Series()), out.hops.setdefault(mode, {})
        per_call: list[tuple[float, float, float, float] | None] = []  # (pre, sent -> headers, post, query_ms)
        before = {k: len(v) for k, v in spans().items()} if spans else {}
        sent = sum(wire.requests.values())
        probe = self.probes.setdefault(mode, CpuProbe(self.door.procs))
        probe.start()
        for q in queries:
            t0 = time.perf_counter()
            result = await self.client.call_tool("search_documents", _search_args(q, mode))
            t1 = time.perf_counter()
            body = result.structured_content
            if result.is_error or not body or body.get("mode_used") != mode:
                out.errors += 1
                per_call.append(None)
                continue
            q_ms = float(body["query_ms"])
            e2e.add((t1 - t0) * 1000)
            qms.add(q_ms)
            outside.add((t1 - t0) * 1000 - q_ms)
            pre, server, post = wire.sent_at - t0, wire.answered_at - wire.sent_at, t1 - wire.answered_at
            per_call.append((pre * 1000, server * 1000, post * 1000, q_ms))
        probe.stop()
        self.calls += len(queries)
        self.requests += sum(wire.requests.values()) - sent
        server_spans = {k: v[before.get(k, 0) :] for k, v in spans().items()} if spans else {}

        def hop(key: str) -> Series:
            return hops.setdefault(key, Series())

        for i, call in enumerate(per_call):
            if call is None:
                continue
            pre, server, post, q_ms = call
            hop("client_pre").add(pre)
            hop("until_headers").add(server)
            hop("after_headers").add(post)
            try:
                asgi, bus_call = server_spans["asgi"][i], server_spans["bus_call"][i]
                bus_sync, build = server_spans["bus_sync"][i], server_spans["build"][i]
            except (KeyError, IndexError):
                continue
            if self.protocol == "legacy":
                # SSE: the headers leave before the result, so the wire and the client's share after the
                # request left cannot be told apart.
                hop("wire_and_client_post").add(server + post - asgi)
            else:
                hop("wire").add(server - asgi)
                hop("client_post").add(post)
            hop("sdk_server").add(asgi - bus_call - build)
            hop("build").add(build)
            hop("thread_hop").add(bus_call - bus_sync)
            hop("bus").add(bus_sync - q_ms)
            hop("indexer").add(q_ms)

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


# --------------------------------------------------------------------------------------------
# 2. the same searches over the bus


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
            ms = (time.perf_counter() - t0) * 1000
            rt.add(ms)
            qms.add(reply.query_ms)
            outside.add(ms - reply.query_ms)
            for stage, v in (reply.timings or {}).items():
                stages.setdefault(stage, Series()).add(float(v))
        probe.stop()
        out.other_cores = max(out.other_cores, probe.other_cores)


# --------------------------------------------------------------------------------------------
# 3. the bare encode


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
    """The indexer's model in this process; ``chunk`` times each way of ``ENCODE_WAYS`` on a few queries."""

    def __init__(self) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        t0 = time.perf_counter()
        import torch
        from sentence_transformers import SentenceTransformer

        from foldermind.workers.embedder import model_name
        from foldermind.workers.model_files import model_dir

        self.torch = torch
        torch.set_num_threads(TORCH_THREADS)
        path = model_dir()
        self.model = SentenceTransformer(str(path), device="cpu")
        self.model.eval()
        self.name = model_name(path)
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


def latency_rounds(
    doors: list[Door],
    protocols: list[str],
    token: str,
    queries: list[str],
    warmup: int,
    rounds: int,
    bus: BusSearches,
    encoder: BareEncoder | None,
) -> list[McpLatency]:
    """Every session, the bus and the bare encode take the same queries in turn, a chunk at a time, so
    that a burst of load elsewhere on the machine falls on all of them alike."""
    warm, measured = queries[:warmup], queries[warmup:]
    size = math.ceil(len(measured) / rounds)
    chunks = [measured[i : i + size] for i in range(0, len(measured), size)]
    sessions = [Session(door, protocol, token) for door in doors for protocol in protocols]

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
                f"  {m.door:11} {m.protocol:6} {mode:8} median {e.median:6.1f} ms  p95 {e.p95:6.1f} ms  "
                f"(indexer {m.query_ms[mode].median:.1f} ms)"
            )
        say(f"  {m.door:11} {m.protocol:6} tools/list median {m.tools_list.median:.1f} ms")
    for mode in MODES:
        say(f"  bus {mode:8} median {bus.out.rt[mode].median:6.1f} ms (indexer {bus.out.query_ms[mode].median:.1f} ms)")
    return out


# --------------------------------------------------------------------------------------------
# 4. throughput


@dataclass(slots=True)
class Throughput:
    door: str
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
    door: Door, token: str, out: Throughput, probe: CpuProbe, seconds: float, queries: list[str], offset: int
) -> None:
    """``out.clients`` clients, each its own MCP client and HTTP connection (legacy: its own session),
    as tasks of one event loop, calling hybrid search back to back; calls completed inside the window
    count. ``probe`` is started and stopped around the window."""
    window: dict[str, float] = {}
    sessions: set[str] = set()

    async def one(i: int, connected: list[int], ready: anyio.Event, finished: anyio.Event) -> None:
        wire = Wire()
        async with http_client(door.url, token, out.protocol, wire) as client:
            for q in queries[:2]:
                await client.call_tool("search_documents", _search_args(q, "hybrid"))
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
                result = await client.call_tool("search_documents", _search_args(q, "hybrid"))
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
    doors: list[Door], protocols: list[str], token: str, clients: int, seconds: float, rounds: int, queries: list[str]
) -> list[Throughput]:
    """Each (door, protocol, 1 or ``clients`` clients) gets ``seconds`` in all, as ``rounds`` windows taken
    in turn with the others."""
    configs = [(door, protocol, n) for door in doors for protocol in protocols for n in (1, clients)]
    outs = {id(c): Throughput(c[0].label, c[1], c[2]) for c in configs}
    probes = {id(c): CpuProbe(c[0].procs) for c in configs}
    for r in range(rounds):
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        for c in order:
            throughput_window(c[0], token, outs[id(c)], probes[id(c)], seconds / rounds, queries, r * 17)
        say(f"  round {r + 1}/{rounds} done")
    results = []
    for c in configs:
        out, probe = outs[id(c)], probes[id(c)]
        out.seconds = probe.wall_s
        out.cpu_ms = {k: v * 1000 / max(out.done, 1) for k, v in probe.spent.items()}
        out.other_cores = probe.other_cores
        results.append(out)
        say(
            f"  {out.door:11} {out.protocol:6} {out.clients} client{'s' if out.clients > 1 else ' '}: "
            f"{out.per_s:6.1f} q/s, median {out.latency.median:.1f} ms, p95 {out.latency.p95:.1f} ms "
            f"(other load {out.other_cores:.2f} cores)"
        )
    return results


# --------------------------------------------------------------------------------------------
# 5. profile (py-spy)

# Layers, per process: a sample counts for the layer of the innermost frame (leaf first) that names one of
# its paths (py-spy prints paths relative to site-packages, the stdlib or the repository).
LAYERS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "bench": [
        ("jsonschema (the client checks structuredContent)", ("(jsonschema/", "(referencing/", "(rpds/")),
        ("pydantic", ("(pydantic/", "(pydantic_core/")),
        ("MCP SDK client", ("(mcp/", "(mcp_types/")),
        ("httpx2 / httpcore / h11", ("(httpx2/", "(httpcore", "(h11/")),
        ("json", ("(json/",)),
        ("anyio", ("(anyio/",)),
        ("asyncio event loop, sockets", ("(asyncio/", "(selectors.py", "(socket.py", "(ssl.py")),
        ("the bench's own loop", ("(tests/bench/",)),
    ],
    "frontdoor": [
        ("bus call: BusClient, msgpack, zmq", ("(workers/frontdoor/bus.py", "(protocol/", "(zmq/", "(msgpack")),
        (
            "thread hop (anyio.to_thread: queue, wake-ups)",
            ("Condition.notify (threading.py", "Condition.wait (threading.py", "(queue.py", "_write_to_self ("),
        ),
        ("tool handler (tools.py, output model)", ("(workers/frontdoor/tools.py", "(workers/frontdoor/schemas.py")),
        ("json", ("(json/",)),
        ("pydantic", ("(pydantic/", "(pydantic_core/")),
        ("jsonschema", ("(jsonschema/", "(referencing/")),
        ("MCP SDK server (transport, dispatch, tool manager)", ("(mcp/", "(mcp_types/")),
        ("guard (size, token, Origin, rate)", ("(workers/frontdoor/guard.py",)),
        ("starlette / sse-starlette", ("(starlette/", "(sse_starlette/")),
        ("uvicorn + h11 (HTTP parse and write)", ("(uvicorn/", "(h11/")),
        ("anyio (task groups, streams, thread hop)", ("(anyio/",)),
        ("asyncio event loop, sockets", ("(asyncio/", "(selectors.py", "(socket.py")),
        ("worker base (main thread)", ("(workers/base.py",)),
    ],
    "kernel": [
        ("zmq", ("(zmq/",)),
        ("frames, msgpack", ("(protocol/", "(msgpack")),
        ("broker", ("(kernel/broker.py",)),
        ("supervisor", ("(kernel/supervisor.py", "(kernel/kernel.py")),
    ],
    "indexer": [
        (
            "query encode (torch, transformers)",
            ("(torch/", "(transformers/", "(sentence_transformers/", "(tokenizers/", "(workers/indexer/encoder.py"),
        ),
        ("keyword (Tantivy)", ("(workers/indexer/bm25.py", "(tantivy/")),
        ("vector (usearch)", ("(usearch/", "(workers/indexer/vectors.py", "(workers/indexer/scoped.py")),
        ("rows and snippets (SQLite)", ("(workers/indexer/store.py", "(workers/indexer/snippets.py", "(sqlite3/")),
        ("fusion", ("(workers/indexer/fusion.py",)),
        ("search.py (the rest)", ("(workers/indexer/search.py",)),
        ("bus: zmq, msgpack, frames, dispatch", ("(zmq/", "(msgpack", "(protocol/", "(workers/base.py")),
        ("the indexer's other work", ("(workers/indexer/",)),
    ],
}
THREADS = {
    "frontdoor": {"frontdoor-http": "HTTP event loop", "AnyIO worker thread": "bus-call threads (anyio)"},
    "indexer": {},
}


@dataclass(slots=True)
class Profile:
    queries: int
    seconds: float
    rate: int
    by_layer: dict[str, list[tuple[str, float]]]  # process -> (layer, CPU ms per query)
    by_thread: dict[str, list[tuple[str, float]]]  # process -> (thread, CPU ms per query)
    cpu_ms: dict[str, float]  # process -> CPU ms per query (psutil)
    e2e: Series
    error: str = ""


def _read_raw(path: Path) -> list[tuple[str, list[str], int]]:
    """py-spy's raw output (``--threads``): (thread name, frames root first, samples)."""
    stacks: list[tuple[str, list[str], int]] = []
    if not path.is_file():
        return stacks
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not (stack and count.isdigit()):
            continue
        frames = stack.split(";")
        thread = ""
        if frames and frames[0].startswith("thread ("):
            thread = frames.pop(0).partition("): ")[2]
        stacks.append((thread, frames, int(count)))
    return stacks


def _layer(process: str, frames: list[str]) -> str:
    for frame in reversed(frames):
        for what, needles in LAYERS.get(process, []):
            if any(n in frame for n in needles):
                return what
    return "other"


def profile(
    url: str, token: str, protocol: str, seconds: float, queries: list[str], procs: dict[str, psutil.Process]
) -> Profile:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    targets = {name: p for name, p in procs.items() if name in ("frontdoor", "kernel", "indexer")}
    targets["bench"] = psutil.Process()
    tmp = Path(tempfile.mkdtemp(prefix="fmb-spy-"))
    spies: dict[str, subprocess.Popen[bytes]] = {}
    e2e = Series()
    probe = CpuProbe(targets)
    error = ""
    if not Path(pyspy).exists():
        return Profile(0, 0, PROFILE_RATE, {}, {}, {}, e2e, error="py-spy is not installed")
    try:
        for name, p in targets.items():
            spies[name] = subprocess.Popen(
                [
                    pyspy,
                    "record",
                    "--pid",
                    str(p.pid),
                    "--rate",
                    str(PROFILE_RATE),
                    "--format",
                    "raw",
                    "--nonblocking",
                    *(["--gil"] if name in GIL_SAMPLED else []),
                    "--threads",
                    "--duration",
                    str(int(seconds + 30)),
                    "--output",
                    str(tmp / f"{name}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        time.sleep(2.0)  # py-spy attaches

        async def go() -> None:
            async with http_client(url, token, protocol, Wire()) as client:
                for q in queries[:5]:
                    await client.call_tool("search_documents", _search_args(q, "hybrid"))
                probe.start()
                end = time.perf_counter() + seconds
                k = 0
                while time.perf_counter() < end:
                    t0 = time.perf_counter()
                    await client.call_tool("search_documents", _search_args(queries[k % len(queries)], "hybrid"))
                    e2e.add((time.perf_counter() - t0) * 1000)
                    k += 1
                probe.stop()

        anyio.run(go)
    finally:
        for spy in spies.values():
            with contextlib.suppress(ProcessLookupError):
                spy.send_signal(2)  # SIGINT: py-spy writes what it has and exits
        for name, spy in spies.items():
            try:
                _, err = spy.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
            if not (tmp / f"{name}.txt").is_file():
                error += f"py-spy {name}: {err.decode(errors='replace').strip()[-300:]}; "
    n = max(len(e2e.samples), 1)
    # Samples span the attach time and the warm-up too: scale every process's samples to its measured CPU.
    cpu_ms = {k: v * 1000 / n for k, v in probe.spent.items()}
    by_layer: dict[str, list[tuple[str, float]]] = {}
    by_thread: dict[str, list[tuple[str, float]]] = {}
    for name in targets:
        stacks = _read_raw(tmp / f"{name}.txt")
        total = sum(c for _, _, c in stacks)
        if not total:
            continue
        scale = cpu_ms.get(name, 0.0) / total
        layers: Counter[str] = Counter()
        threads: Counter[str] = Counter()
        for thread, frames, count in stacks:
            layers[_layer(name, frames)] += count
            threads[THREADS.get(name, {}).get(thread, "main and other threads")] += count
        by_layer[name] = [(k, v * scale) for k, v in layers.most_common()]
        by_thread[name] = [(k, v * scale) for k, v in threads.most_common()]
    shutil.rmtree(tmp, ignore_errors=True)
    return Profile(len(e2e.samples), probe.wall_s, PROFILE_RATE, by_layer, by_thread, cpu_ms, e2e, error)


# --------------------------------------------------------------------------------------------
# report


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    docs: int
    queries: int
    warmup: int
    index: Index | None = None
    mcp: list[McpLatency] = field(default_factory=list)
    bus: BusLatency | None = None
    encode: Encode | None = None
    throughput: list[Throughput] = field(default_factory=list)
    profile: Profile | None = None
    nodelay_mcp: list[McpLatency] = field(default_factory=list)
    nodelay_throughput: list[Throughput] = field(default_factory=list)
    quiet: list[tuple[str, float, float]] = field(default_factory=list)  # (phase, CPU % before it, s waited)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)


def _ms(x: float) -> str:
    if math.isnan(x):
        return "-"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _table(header: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**MISS**"


def _proto_label(m: McpLatency) -> str:
    if m.protocol == "auto":
        return f"auto ({m.negotiated or '?'}, stateless)"
    return f"legacy ({m.negotiated or '?'}, session)"


PROCS = ("bench", "frontdoor", "kernel", "indexer")
NODELAY_NOTE = [
    "`workers/frontdoor/http.py: bind()` creates the listening socket as `socket.socket(family, SOCK_STREAM)`, so",
    "its `proto` is 0; asyncio sets TCP_NODELAY on an accepted connection only when `sock.proto == IPPROTO_TCP`",
    "(`asyncio.base_events._set_nodelay`), so the front door's connections keep Nagle's algorithm on. A response",
    "written in two pieces (headers, then the body) then waits for the client's delayed ACK (40 ms on Linux)",
    "before its body leaves. The what-if door is a second front door worker in the same kernel,",
    f'`[workers.{NODELAY_WORKER}] module = "tests.bench.mcp_http"` on its own port: the product\'s front door',
    "with its listening socket re-wrapped by `socket.socket(fileno=sock.detach())`, so that its `proto` reads",
    "IPPROTO_TCP and asyncio sets TCP_NODELAY, and with timestamps around its hops (a few `perf_counter` calls",
    "per request) for the per-hop table. Its sessions took their turns in the same rounds as the product's.",
]


def _latency_table(runs: list[McpLatency]) -> list[str]:
    rows = []
    for m in runs:
        for mode in MODES:
            if mode not in m.e2e:
                continue
            e, q, o = m.e2e[mode], m.query_ms[mode], m.outside[mode]
            h = m.hops.get(mode, {})
            view = [_ms(h[k].median) if k in h else "-" for k in ("until_headers", "after_headers")]
            rows.append(
                [
                    _proto_label(m),
                    mode,
                    *(_ms(x) for x in (e.median, e.p95, e.p99, q.median, q.p95, o.median, o.p95)),
                    *view,
                ]
            )
        t = m.tools_list
        rows.append([_proto_label(m), "tools/list", _ms(t.median), _ms(t.p95), _ms(t.p99), *["-"] * 6])
    header = ["protocol", "mode", "median", "p95", "p99", "indexer median", "indexer p95", "outside median"]
    lines = _table([*header, "outside p95", "sent -> headers in", "headers in -> result"], rows)
    cpu_rows = [
        [_proto_label(m), mode, *(_ms(spent.get(p, math.nan)) for p in PROCS)]
        for m in runs
        for mode, spent in m.cpu_ms.items()
    ]
    if cpu_rows:
        lines += [
            "",
            "CPU time per search (ms) of each process in the same runs (psutil; `bench` is the client):",
            "",
            *_table(["protocol", "mode", "client (bench)", "frontdoor", "kernel (broker)", "indexer"], cpu_rows),
        ]
    if any(len(m.hops.get(mode, {})) > 3 for m in runs for mode in MODES):
        cols = [(m, mode) for m in runs for mode in ("keyword", "hybrid") if len(m.hops.get(mode, {})) > 3]
        hop_rows = [
            [what, *(_ms(m.hops[mode][key].median) if key in m.hops[mode] else "-" for m, mode in cols)]
            for key, what in HOPS
        ]
        hop_rows.append(["end to end (for reference)", *(_ms(m.e2e[mode].median) for m, mode in cols)])
        lines += [
            "",
            "Each call cut into its hops (medians of the per-call spans, ms; they need not add up to the median",
            "end to end exactly). Client side from the httpx request and response hooks in the bench; server",
            "side from timestamps the instrumented front door takes around the guard (the whole ASGI request),",
            "`Bus.call` (with the thread hop), `Bus.call_sync` (inside the thread) and the result building:",
            "",
            *_table(["hop", *(f"{m.protocol} {mode}" for m, mode in cols)], [*hop_rows]),
        ]
    per_call = ", ".join(f"{m.protocol} {m.http_per_call:.2f}" for m in runs)
    sessions = ", ".join(f"{m.protocol} {'yes' if m.session_id else 'no'}" for m in runs)
    other = max(m.other_cores for m in runs)
    lines += [
        "",
        f"HTTP requests per search call: {per_call}. Mcp-Session-Id issued: {sessions}. Other load on the machine",
        f"during these runs: up to {other:.2f} cores.",
    ]
    return lines


def _throughput_table(runs: list[tuple[str, Throughput]]) -> list[str]:
    rows = [
        [
            door,
            t.protocol,
            str(t.clients),
            str(t.sessions) if t.protocol == "legacy" else "-",
            f"{t.seconds:.0f}",
            f"{t.per_s:.1f}",
            _ms(t.latency.median),
            _ms(t.latency.p95),
            _ms(t.latency.p99),
            str(t.errors),
            *(_ms(t.cpu_ms.get(p, math.nan)) for p in PROCS),
            f"{t.other_cores:.2f}",
        ]
        for door, t in runs
    ]
    header = ["front door", "protocol", "clients", "sessions", "s", "queries/s", "median", "p95", "p99", "errors"]
    header += ["CPU client", "CPU frontdoor", "CPU kernel", "CPU indexer", "other load (cores)"]
    return _table(header, rows, "ll" + "r" * (len(header) - 2))


def _aim_lines(label: str, runs: list[McpLatency]) -> list[str]:
    lines = []
    for m in runs:
        if "hybrid" in m.e2e:
            s = m.e2e["hybrid"]
            lines.append(
                f"- {label}, {_proto_label(m)}: median {_ms(s.median)} ms {_verdict(s.median < AIM_MEDIAN_MS)}, "
                f"p95 {_ms(s.p95)} ms {_verdict(s.p95 < AIM_P95_MS)}"
            )
    return lines


def render(r: Results) -> str:
    lines = [
        "# MCP over HTTP: search latency and throughput",
        "",
        "Generated by `python -m tests.bench.mcp_http` (issue 4). A real kernel (default process map) serves the MCP",
        "front door on 127.0.0.1 with its bearer token; the client is the `mcp` SDK's own `Client` over streamable",
        "HTTP (httpx2) in the bench process, calling `search_documents`. The rate limit is raised for the run.",
        f"Queries are the SciFact queries (`queries.jsonl`), top_k = {TOP_K}. Times are wall-clock ms unless a",
        "column says CPU.",
        "",
        "## Machine",
        "",
        *_table(["", ""], [[k, v] for k, v in r.machine.items()], "ll"),
        "",
    ]
    if r.quiet:
        waits = "; ".join(f"{phase} {load:.0f}% (waited {waited:.0f} s)" for phase, load, waited in r.quiet)
        lines += [
            "Before each phase the bench waits (at most `--quiet-wait` s) for the machine to fall under 10% CPU;",
            f"CPU in use when each began: {waits}. The machine is shared: the `other load` figures below are the",
            "cores that processes outside the bench and its kernel kept busy during each measurement.",
            "",
        ]
    if r.index is not None:
        ix = r.index
        how = "reused from an earlier run (`--home`)" if ix.reused else f"indexed and embedded in {ix.seconds:.0f} s"
        enc = ix.encoder
        lines += [
            f"Corpus: the first {r.docs:,} SciFact abstracts as .txt files ({ix.files:,} files, {ix.chunks:,} chunks, "
            f"{ix.embedded:,} embedded; {how}). The indexer's query encoder: {enc.get('policy', '?')}, "
            f"{enc.get('state', '?')} ({enc.get('model') or '?'}).",
            "",
        ]
    aim = _aim_lines("product", r.mcp) + _aim_lines("with TCP_NODELAY (what-if)", r.nodelay_mcp)
    if aim:
        lines += [
            "## Aim",
            "",
            f"Hybrid search end to end over MCP HTTP: median under {AIM_MEDIAN_MS:g} ms and p95 under "
            f"{AIM_P95_MS:g} ms on this machine (the peer, {PEER}).",
            "",
            *aim,
            "",
        ]
    if r.mcp:
        lines += [
            "## 1. Latency, one client session, searches one after another",
            "",
            f"{r.queries} queries per mode after a warm-up of {r.warmup}, one session per front door and protocol,",
            "the sessions, the bus searches and the bare encode taking the same queries in turn, a chunk at a time",
            "(rounds), so that load elsewhere on the machine falls on all alike. `auto` is the SDK's default",
            "negotiation, `legacy` the initialize handshake with a session. `indexer` is the `query_ms`",
            "the indexer reports in the same result; `outside` is, per call, the end-to-end time minus that (HTTP",
            "both ways, the guard, the SDK on both sides, the front door's thread hop and both bus hops through the",
            "broker). `tools/list` is an MCP round trip with no bus hop and no index work. The last two columns",
            "split each call as the client sees it: from handing the request to httpx until the response headers",
            "arrive, and from then until `call_tool` returns (reading the body, parsing, validating).",
            "",
            *_latency_table(r.mcp),
            "",
        ]
    if r.nodelay_mcp:
        lines += [
            "## 2. The same with TCP_NODELAY on the front door's connections (what-if)",
            "",
            *NODELAY_NOTE,
            "",
            *_latency_table(r.nodelay_mcp),
            "",
        ]
    if r.bus is not None:
        b = r.bus
        rows = []
        for mode in MODES:
            if mode not in b.rt:
                continue
            st = b.stages.get(mode, {})
            rows.append(
                [
                    mode,
                    *(_ms(x) for x in (b.rt[mode].median, b.rt[mode].p95, b.query_ms[mode].median)),
                    _ms(b.outside[mode].median),
                    *(_ms(st[s].median) if s in st else "-" for s in ("embed", "keyword", "vector", "fuse", "rows")),
                ]
            )
        header = ["mode", "bus median", "bus p95", "indexer query_ms", "bus hops (rt - query_ms)"]
        lines += [
            "## 3. The same searches straight over the bus",
            "",
            '`BusClient.request("indexer", search.request)` from the bench process: bench -> broker -> indexer and',
            "back, no HTTP and no MCP. Stage times are the indexer's own `timings` (medians; `embed` is the query",
            "encode, `keyword` Tantivy BM25, `vector` usearch, `fuse` the fusion, `rows` SQLite rows and snippets).",
            "",
            *_table([*header, "embed", "keyword", "vector", "fuse", "rows"], rows),
            "",
            f"Other load on the machine during these runs: up to {b.other_cores:.2f} cores.",
            "",
        ]
    if r.encode is not None:
        e = r.encode
        lines += [
            "## 4. Bare model encode of one query",
            "",
            "`SentenceTransformer.encode([query])` in the bench process, in turn with the searches (the kernel idle",
            "meanwhile), the indexer's model",
            f"({e.model}), {e.threads} torch thread as in the indexer's query encoder: median {_ms(e.series.median)} "
            f"ms, p95 {_ms(e.series.p95)} ms over {len(e.series.samples)} queries (model load {e.load_s:.1f} s).",
            "For comparison, other ways to run the same model (medians per `encode` call):",
            "",
            *_table(
                ["how", "median ms per call", "p95", "ms per query"],
                [
                    [how, _ms(x.median), _ms(x.p95), _ms(x.median / int(how.split()[0]))]
                    for how, x in [(f"1 query per call, {e.threads} torch thread", e.series), *e.other]
                ],
            ),
            "",
        ]
    ladder = _ladder(r)
    if ladder:
        lines += ["## Where the time of one hybrid search goes (medians)", "", *ladder, ""]
    if r.throughput or r.nodelay_throughput:
        runs = [(t.door, t) for t in [*r.throughput, *r.nodelay_throughput]]
        lines += [
            "## 5. Throughput: concurrent clients, hybrid",
            "",
            "Each client is its own `mcp` `Client` with its own HTTP connection (legacy: its own session), all as",
            "tasks of one event loop in the bench process, calling search_documents (hybrid) back to back; queries/s",
            "counts the calls completed inside the windows. Each row's time is split into windows taken in turn",
            "with the other rows'. CPU columns are CPU ms per search, by process (psutil).",
            "",
            *_throughput_table(runs),
            "",
        ]
    if r.profile is not None:
        p = r.profile
        lines += ["## 6. Profile (py-spy), sequential hybrid searches", ""]
        if p.error:
            lines += [f"Profile incomplete: {p.error}", ""]
        lines += [
            f"{p.queries} hybrid searches in {p.seconds:.0f} s (median {_ms(p.e2e.median)} ms while sampled at "
            f"{p.rate} Hz, non-blocking), one session, the product's front door. py-spy sees CPU only: a wait such",
            "as Nagle's is invisible to it. Each process's samples are scaled to its measured CPU per search; a",
            "sample counts for the layer of the innermost frame on its stack that belongs to one.",
            "",
        ]
        for name in PROCS:
            if name not in p.by_layer:
                continue
            lines += [f"**{name}** ({_ms(p.cpu_ms.get(name, math.nan))} ms CPU per search):", ""]
            lines += _table(["layer (innermost frame)", "CPU ms"], [[k, f"{v:.2f}"] for k, v in p.by_layer[name]])
            if len(p.by_thread.get(name, [])) > 1:
                split = ", ".join(f"{k} {v:.2f}" for k, v in p.by_thread[name])
                lines += ["", f"By thread: {split}."]
            lines.append("")
    if r.errors:
        lines += ["## Errors", "", *(f"- {e}" for e in r.errors), ""]
    lines += [f"Run took {r.elapsed_s / 60:.1f} min.", ""]
    return "\n".join(lines)


def _ladder(r: Results) -> list[str]:
    """Medians, from the inside out: what each layer adds to hybrid search."""
    if r.bus is None or "hybrid" not in r.bus.rt:
        return []
    b = r.bus
    st = b.stages.get("hybrid", {})
    rows: list[list[str]] = []
    if r.encode is not None:
        rows.append(["bare encode of the query (bench process)", _ms(r.encode.series.median), ""])
    for s in ("embed", "keyword", "vector", "fuse", "rows"):
        if s in st:
            rows.append([f"indexer stage `{s}`", _ms(st[s].median), ""])
    rows.append(["indexer `query_ms` (the whole search)", _ms(b.query_ms["hybrid"].median), ""])
    rows.append(
        [
            "bus round trip from the bench (bench -> broker -> indexer)",
            _ms(b.rt["hybrid"].median),
            f"+{_ms(b.outside['hybrid'].median)} over query_ms",
        ]
    )
    for door, runs in (("product", r.mcp), ("TCP_NODELAY", r.nodelay_mcp)):
        for m in runs:
            if "hybrid" in m.e2e:
                extra = m.e2e["hybrid"].median - b.rt["hybrid"].median
                rows.append(
                    [
                        f"MCP over HTTP, {door}, {_proto_label(m)}",
                        _ms(m.e2e["hybrid"].median),
                        f"+{_ms(extra)} over the bus round trip (tools/list alone: {_ms(m.tools_list.median)})",
                    ]
                )
    return _table(["layer", "median ms", "adds"], rows, "lrl")


# --------------------------------------------------------------------------------------------
# main


@contextlib.contextmanager
def step(results: Results, name: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        traceback.print_exc()
        results.errors.append(f"{name}: {type(exc).__name__}: {exc}")


def door_url(kernel: Kernel, client: BusClient, worker: str, timeout: float = 30.0) -> str:
    give_up = time.monotonic() + timeout
    while True:
        details = kernel.describe(client, worker)
        if details.get("state") == "running" and details.get("url"):
            return str(details["url"])
        if time.monotonic() > give_up:
            raise BenchFailure(f"{worker} is not serving: {details}")
        time.sleep(0.2)


def run(args: argparse.Namespace, results: Results, progress: Callable[[str], None]) -> None:
    queries = scifact_queries()
    need = args.warmup + args.queries
    if len(queries) < need:
        raise BenchFailure(f"{need} queries asked for, the SciFact file has {len(queries)}")
    run_queries = queries[:need]
    root = Path(args.home).resolve() if args.home else Path(tempfile.mkdtemp(prefix="fmm-"))
    kernel = Kernel(root, CONFIG + (NODELAY_CONFIG if args.what_if else ""))
    corpus = root / f"scifact-{args.docs}"

    def quiet(phase: str) -> None:
        load, waited = machine.wait_for_quiet(max_s=args.quiet_wait)
        results.quiet.append((phase, load, waited))

    try:
        written = write_corpus(corpus, args.docs)
        results.docs = written
        progress(f"corpus: {written} abstracts in {corpus}")
        token = mc.token_of(root)  # made before the start, so that two front doors never race to make it
        kernel.start()
        progress("indexing (all of SciFact takes ~5 min on a quiet machine here)")
        results.index = index_corpus(kernel, corpus, written)
        ix = results.index
        progress(f"  {ix.files} files, {ix.chunks} chunks embedded in {ix.seconds:.0f} s; encoder {ix.encoder}")
        with kernel.client("bench") as client:
            procs = kernel.processes(client)
            core = {"bench": psutil.Process(), "kernel": procs["kernel"], "indexer": procs["indexer"]}
            doors = [
                Door(
                    "product",
                    "frontdoor",
                    door_url(kernel, client, "frontdoor"),
                    {**core, "frontdoor": procs["frontdoor"]},
                )
            ]
            if args.what_if:

                def spans() -> dict[str, list[float]]:
                    return dict(kernel.describe(client, NODELAY_WORKER).get("bench_spans") or {})

                url = door_url(kernel, client, NODELAY_WORKER)
                doors.append(
                    Door("TCP_NODELAY", NODELAY_WORKER, url, {**core, "frontdoor": procs[NODELAY_WORKER]}, spans)
                )
            progress("loading the model in this process for the bare encode")
            encoder = BareEncoder()
            quiet("latency")
            progress(
                f"latency: {len(doors)} front door(s) x {len(args.protocols)} protocols, bus and bare encode, "
                f"{args.rounds} rounds"
            )
            bus = BusSearches(client, core)
            with step(results, "latency"):
                runs = latency_rounds(doors, args.protocols, token, run_queries, args.warmup, args.rounds, bus, encoder)
                results.mcp = [m for m in runs if m.door == "product"]
                results.nodelay_mcp = [m for m in runs if m.door != "product"]
                results.bus = bus.out
                results.encode = encoder.result()
            if args.throughput_seconds > 0:
                quiet("throughput")
                progress(
                    f"throughput: 1 and {args.clients} clients, {args.throughput_seconds:g} s each, "
                    f"in {args.rounds} rounds"
                )
                with step(results, "throughput"):
                    tp = throughput_rounds(
                        doors, args.protocols, token, args.clients, args.throughput_seconds, args.rounds, queries
                    )
                    results.throughput = [t for t in tp if t.door == "product"]
                    results.nodelay_throughput = [t for t in tp if t.door != "product"]
            if args.profile > 0:
                quiet("profile")
                progress(f"py-spy profile, {args.profile:g} s of sequential hybrid queries on the product's front door")
                with step(results, "profile"):
                    results.profile = profile(
                        doors[0].url, token, args.protocols[0], args.profile, queries, doors[0].procs
                    )
    finally:
        kernel.stop()
        if not args.home:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.mcp_http", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--docs", type=int, default=SCIFACT_DOCS, help=f"SciFact abstracts to index (default all {SCIFACT_DOCS})"
    )
    parser.add_argument("--queries", type=int, default=100, help="measured queries per mode (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up queries per mode (default 10)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for throughput (default 8)")
    parser.add_argument(
        "--throughput-seconds", type=float, default=25.0, help="each throughput window (default 25; 0 skips)"
    )
    parser.add_argument("--profile", type=float, default=20.0, help="seconds of py-spy profiling (default 20; 0 skips)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="auto,legacy (default both)")
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="wait at most this for a quiet machine")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--no-what-if",
        dest="what_if",
        action="store_false",
        help="no second front door with TCP_NODELAY on its connections",
    )
    parser.add_argument("--home", default="", help="keep the kernel's home (and index) here and reuse it")
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {REPORT}")
    args = parser.parse_args(argv)
    args.protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if bad := [p for p in args.protocols if p not in PROTOCOLS]:
        parser.error(f"unknown protocol {bad}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    t0 = time.monotonic()
    facts = machine.facts(REPO)
    facts["mcp / uvicorn / httpx2"] = f"{_version('mcp')} / {_version('uvicorn')} / {_version('httpx2')}"
    facts["torch / sentence-transformers"] = f"{_version('torch')} / {_version('sentence-transformers')}"
    results = Results(machine=facts, docs=args.docs, queries=args.queries, warmup=args.warmup)
    try:
        run(args, results, say)
    except BenchFailure as exc:
        results.errors.append(str(exc))
        say(f"bench failed: {exc}")
    results.elapsed_s = time.monotonic() - t0
    text = render(results)
    print(text)
    if not args.no_write:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text, encoding="utf-8")
        say(f"wrote {REPORT.relative_to(REPO)}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------------------------
# the what-if front door (``[workers.frontdoor] module = "tests.bench.mcp_http"``)


def __getattr__(name: str) -> Any:
    """``WORKER``: the product's front door with TCP_NODELAY on its connections and timestamps around its
    hops, built only when a worker process asks for it (so importing this bench does not import the server)."""
    if name == "WORKER":
        return _nodelay_frontdoor()
    raise AttributeError(name)


_SPANS: dict[str, list[float]] = defaultdict(list)
_LAST_BUS_CALL_END = [0.0]


def _instrument_frontdoor() -> None:
    """Timestamps around the front door's hops, in this (front door) process only: the ASGI app as the guard
    sees it, ``Bus.call`` (with the thread hop), ``Bus.call_sync`` (in the thread) and the result building
    (from ``Bus.call``'s return to ``Tools.ok``'s; one request at a time, as the latency runs make them)."""
    from foldermind.workers.frontdoor import bus, guard, tools

    guard_call, bus_call, bus_sync, tools_ok = guard.Guard.__call__, bus.Bus.call, bus.Bus.call_sync, tools.Tools.ok

    async def timed_guard(self: Any, scope: Any, receive: Any, send: Any) -> None:
        t0 = time.perf_counter()
        try:
            await guard_call(self, scope, receive, send)
        finally:
            if scope["type"] == "http" and scope.get("method") == "POST":
                _SPANS["asgi"].append((time.perf_counter() - t0) * 1000)

    async def timed_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await bus_call(self, *args, **kwargs)
        finally:
            _LAST_BUS_CALL_END[0] = time.perf_counter()
            _SPANS["bus_call"].append((_LAST_BUS_CALL_END[0] - t0) * 1000)

    def timed_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return bus_sync(self, *args, **kwargs)
        finally:
            _SPANS["bus_sync"].append((time.perf_counter() - t0) * 1000)

    def timed_ok(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return tools_ok(self, *args, **kwargs)
        finally:
            _SPANS["build"].append((time.perf_counter() - _LAST_BUS_CALL_END[0]) * 1000)

    setattr(guard.Guard, "__call__", timed_guard)  # noqa: B010
    setattr(bus.Bus, "call", timed_call)  # noqa: B010
    setattr(bus.Bus, "call_sync", timed_sync)  # noqa: B010
    setattr(tools.Tools, "ok", timed_ok)  # noqa: B010


def _nodelay_frontdoor() -> type:
    import socket

    import foldermind.workers.frontdoor as fd

    class NoDelayFrontdoor(fd.FrontdoorWorker):
        def setup(self) -> None:
            product_bind = fd.http.bind

            def bind(host: str, port: int) -> socket.socket:
                # The same listening socket, re-wrapped: Python then asks the OS for its protocol
                # (IPPROTO_TCP instead of the 0 it was created with), which is what asyncio checks before
                # it sets TCP_NODELAY on each accepted connection.
                return socket.socket(fileno=product_bind(host, port).detach())

            setattr(fd, "bind", bind)  # the name FrontdoorWorker.setup() calls  # noqa: B010
            _instrument_frontdoor()
            super().setup()

        def details(self) -> dict[str, Any]:
            return {**super().details(), "bench_spans": {k: list(v) for k, v in _SPANS.items()}}

    return NoDelayFrontdoor
