"""Load: concurrent MCP clients while the watcher indexes new files.

``python -m tests.bench.load [--minutes M] [--clients 8] [--home DIR] [--report PATH]`` from the repository
root (``make load``). A real kernel (default process map; the front door on an OS-assigned port) indexes
the first ``--docs`` SciFact abstracts as files (:mod:`tests.bench.scifact`; ``--home DIR`` keeps that home
and a later run reuses its index). Then:

1. idle: hybrid ``search_documents`` one call at a time over MCP HTTP, nothing else asked of the kernel;
2. load, for ``--minutes``: ``--clients`` real ``mcp`` SDK clients over HTTP, each its own MCP session
   (the ``legacy`` initialize handshake: an ``Mcp-Session-Id``, so each has its own rate-limit bucket),
   calling a mix of tools (:data:`MIX`) with a think time between calls, while a writer adds a new SciFact
   abstract to the Smart Folder every ``--write-every`` seconds, so the watcher, parsers, embedder and
   indexer work at the same time;
3. drain: the writer stops; every file it wrote must get indexed and embedded.

Recorded: calls, errors (typed tool errors and transport failures) and latency per tool, search latency
under load against idle, chat latency, the files indexed during the run and their lag, worker restarts,
ERROR lines in the home's logs, and the RSS of the kernel and of every worker (psutil, by name) at the start
and the end of the load, with the growth checked against :func:`rss_bound`. The report (markdown) goes to
``--report`` (default docs/reliability-load.md). ``tests/test_load.py`` runs a short variant of the same
:func:`run`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sqlite3
import sys
import threading
import time
import tomllib
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp.client import Client

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError, JobError
from foldermind.protocol.messages import DescribeReply, DescribeRequest, ReadDocumentReply, ReadDocumentRequest
from tests.bench import machine
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.markdown import ms, para, table, verdict
from tests.bench.mcpclient import Wire, front_door, http_client
from tests.bench.scifact import SCIFACT_DOCS, Index, _lines, file_name, indexed_kernel, scifact_queries
from tests.bench.stats import Series
from tests.bench.transports import REPO
from tests.config import Config, merge
from tests.config import render as render_config

REPORT = REPO / "docs" / "reliability-load.md"
PROTOCOL = "legacy"  # an Mcp-Session-Id per client: "each its own session", each its own rate bucket
NEW_DIR = "load-new"  # the writer's sub-folder of the Smart Folder; removed before and after a run
MARK = "loadmark"  # each written file carries a unique word: its text proves it is the file read back
WARM_FILES = 4  # written and indexed before the load starts (first-use allocations of the pipeline)
CALL_TIMEOUT_S = 120.0  # a call still unanswered by then is a failure (the longest deadline is chat's 60 s)
SEARCH = "search_documents"
CHAT = "chat_with_documents"
MIX: dict[str, float] = {
    SEARCH: 0.60,
    "read_document": 0.12,
    "get_document_summary": 0.10,
    "find_similar": 0.05,
    "list_smart_folders": 0.04,
    "index_status": 0.04,
    CHAT: 0.05,
}
"""Each call's tool is drawn with these weights. A chat drawn while ``chats_in_flight`` chats are already
running becomes a search (the llm serves one generation at a time; more queued chats would only wait), and
tools that need a file (read, summary, similar) take one from the client's own earlier search results."""


def rss_bound(start_bytes: int) -> int:
    """The growth of a process's RSS from the start of the load to its end that counts as a failure: 64 MiB
    or a quarter of its RSS at the start, whichever is more. Every one-time allocation (models, the
    first search, the first chat, the first embedding batch) happens before the start, in the idle and
    warm-up phases; what the load adds per call or per file (sessions, caches, index segments) must stay
    small and bounded, and a leak of even a few KiB per call over thousands of calls crosses it."""
    return max(64 * 2**20, start_bytes // 4)


@dataclass(slots=True)
class Plan:
    minutes: float = 5.0
    clients: int = 8
    docs: int = 1000  # seed corpus: the first N SciFact abstracts
    home: Path | None = None
    write_every_s: float = 2.0
    think_s: float = 1.2  # mean pause between a client's calls (uniform in [0.25, 1.75] x this)
    idle_queries: int = 96
    warmup_queries: int = 8
    chats_in_flight: int = 2
    rate_per_minute: int = 0  # 0: the product's default (60 per session)
    analysis: bool = True  # the model's background summaries, as a user gets them (the product default)
    drain_timeout_s: float = 600.0
    seed: int = 6
    search: dict[str, Any] = field(default_factory=dict)  # more [search] keys
    extra_config: Config = field(default_factory=dict)  # more of the home's override, over the rest (reported)


@dataclass(slots=True)
class ToolStats:
    calls: int = 0
    errors: int = 0
    codes: Counter[str] = field(default_factory=Counter)  # error code or exception type -> count
    not_yet: int = 0  # typed "not yet" answers: find_similar on a file written during the load, not embedded yet
    latency: Series = field(default_factory=Series)  # ms, successful calls


@dataclass(slots=True)
class Proc:
    pid: int
    rss: int


@dataclass(slots=True)
class Written:
    path: Path
    marker: str
    at: float  # time.time() when written


@dataclass(slots=True)
class Results:
    plan: Plan
    machine: dict[str, str] = field(default_factory=dict)
    index: Index | None = None
    config: Config = field(default_factory=dict)
    idle: Series = field(default_factory=Series)  # hybrid search, ms end to end
    idle_query_ms: Series = field(default_factory=Series)  # the indexer's own query_ms, same calls
    idle_errors: int = 0
    load_query_ms: Series = field(default_factory=Series)
    tools: dict[str, ToolStats] = field(default_factory=dict)
    chat_busy: int = 0  # chats drawn while chats_in_flight were running (made searches instead)
    grounded: int = 0
    load_s: float = 0.0
    http_requests: int = 0
    sessions: int = 0
    written: list[Written] = field(default_factory=list)
    indexed: int = 0  # of the written files, read back from the index with their marker
    not_indexed: list[str] = field(default_factory=list)
    lag_s: Series = field(default_factory=Series)  # written -> indexed (the row's updated_at), s
    drain_s: float = 0.0
    embedded: tuple[int, int] = (0, 0)  # chunks embedded / chunks at the end
    rss: dict[str, dict[str, Proc]] = field(default_factory=dict)  # moment -> process -> pid, rss
    rss_peak: dict[str, int] = field(default_factory=dict)  # process -> highest RSS sampled in the load
    restarts: dict[str, tuple[int, int]] = field(default_factory=dict)  # worker -> restarts at start, end
    end_states: dict[str, str] = field(default_factory=dict)  # worker -> the kernel's state for it at load end
    log_errors: list[str] = field(default_factory=list)  # ERROR / Traceback lines logged during the load
    other_cores: float = 0.0  # CPU kept busy by processes outside the kernel and this bench, mean
    elapsed_s: float = 0.0
    failures: list[str] = field(default_factory=list)  # the run could not do something it should

    @property
    def errors(self) -> int:
        return sum(t.errors for t in self.tools.values())

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tools.values())

    def growth(self) -> dict[str, tuple[int, int, int]]:
        """process -> (RSS at the start of the load, growth to its end, bound); same pid at both ends only."""
        start, end = self.rss.get("load start", {}), self.rss.get("load end", {})
        return {
            name: (p.rss, end[name].rss - p.rss, rss_bound(p.rss))
            for name, p in start.items()
            if name in end and end[name].pid == p.pid
        }

    def over_bound(self) -> list[str]:
        out = [f"{n}: +{mib(g)} MiB > {mib(b)} MiB" for n, (_, g, b) in self.growth().items() if g > b]
        start, end = self.rss.get("load start", {}), self.rss.get("load end", {})
        out += [
            f"{n}: pid {p.pid} -> {end[n].pid} (restarted)"
            for n, p in start.items()
            if n in end and end[n].pid != p.pid
        ]
        # An on-demand worker comes and goes: the embedder leaves when the llm's turn comes (released), and
        # starts again for the next file. Gone is a fault only if the kernel does not say so.
        out += [
            f"{n}: gone by the end ({self.end_states.get(n, 'not listed')})"
            for n in start
            if n not in end and self.end_states.get(n) not in ON_DEMAND_STATES
        ]
        return out

    def restarted(self) -> dict[str, int]:
        return {n: b - a for n, (a, b) in self.restarts.items() if b > a}


ON_DEMAND_STATES = frozenset({"IDLE", "EXITED", "STARTING", "RUNNING", "STOPPING"})
"""The kernel's states of a worker that left on its own or was released, or is starting again for new work."""


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def kernel_config(plan: Plan) -> Config:
    """The home's override: the front door on an OS-assigned port; the query-vector cache off (the load
    cycles through SciFact's queries, and a cache would answer repeats without the encode that a new
    question costs); the rate limit and background analysis as the plan says."""
    rate = {"rate_per_minute": plan.rate_per_minute} if plan.rate_per_minute else {}
    return merge(
        {"mcp": {"port": 0, **rate}},
        # The model loaded at start and kept: a chat's time is a chat's, not a load's.
        {"llm": {"analysis": plan.analysis, "load": "at_start", "idle_unload_s": 0}},
        {"search": {"query_cache_size": 0, **plan.search}},
        plan.extra_config,
    )


# --------------------------------------------------------------------------------------------
# the processes


def processes(kernel: Kernel, client: BusClient) -> dict[str, psutil.Process]:
    return kernel.processes(client)


def rss_snapshot(procs: dict[str, psutil.Process]) -> dict[str, Proc]:
    out = {}
    for name, p in procs.items():
        with contextlib.suppress(psutil.Error):
            out[name] = Proc(p.pid, p.memory_info().rss)
    return out


def restarts(kernel: Kernel, client: BusClient) -> dict[str, int]:
    return {w["name"]: int(w["restarts"]) for w in kernel.status(client).workers}


class Sampler(threading.Thread):
    """The RSS of every process every ``every_s``, keeping each one's peak; and the CPU the rest of the
    machine used meanwhile (other engineers' work on a shared machine)."""

    def __init__(self, procs: dict[str, psutil.Process], every_s: float = 2.0) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.procs, self.every_s = procs, every_s
        self.peak: dict[str, int] = {}
        self.stopping = threading.Event()
        self.other_cores = 0.0

    def run(self) -> None:
        ours = {**self.procs, "bench": psutil.Process()}
        cpu0 = {n: _cpu(p) for n, p in ours.items()}
        busy0, t0 = _machine_busy(), time.monotonic()
        while not self.stopping.wait(self.every_s):
            for name, proc in rss_snapshot(self.procs).items():
                self.peak[name] = max(self.peak.get(name, 0), proc.rss)
        wall = time.monotonic() - t0
        spent = sum(_cpu(p) - cpu0[n] for n, p in ours.items())
        self.other_cores = max(0.0, (_machine_busy() - busy0 - spent) / wall) if wall > 0 else 0.0


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return float(t.user + t.system)
    except psutil.Error:
        return 0.0


def _machine_busy() -> float:
    t = psutil.cpu_times()
    return float(sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq")))


def wait_llm_ready(client: BusClient, timeout: float = 600.0) -> None:
    give_up = time.monotonic() + timeout
    while True:
        with contextlib.suppress(BusError):
            details = client.request("llm", DescribeRequest(), DescribeReply, timeout=10).body.details
            if details.get("state") == "ready":
                return
            if details.get("state") == "failed":
                raise BenchFailure(f"the llm did not load: {details.get('reason')}")
        if time.monotonic() > give_up:
            raise BenchFailure(f"the llm is not ready after {timeout:g} s")
        time.sleep(0.5)


def log_offsets(log_dir: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in log_dir.glob("*.log")}


def new_log_errors(log_dir: Path, before: dict[Path, int], limit: int = 40) -> list[str]:
    """ERROR and Traceback lines the workers logged since ``before`` (the logs never hold document text or
    queries at info and above, so they can be quoted)."""
    out = []
    for path in sorted(log_dir.glob("*.log")):
        with open(path, "rb") as fh:
            fh.seek(before.get(path, 0))
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip()
                if " ERROR " in line or line.startswith("Traceback"):
                    out.append(f"{path.stem}: {line[:300]}")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


# --------------------------------------------------------------------------------------------
# the writer: new files in the Smart Folder while the clients call


def new_texts(seed_docs: int) -> Iterator[tuple[str, str]]:
    """(doc id, text) of abstracts outside the seed corpus (from the end of SciFact); with all of SciFact
    seeded, the same abstracts again (each new file still carries its own marker)."""
    docs = list(_lines("corpus.jsonl"))
    pool = docs[seed_docs:][::-1] or docs
    while True:
        for doc in pool:
            yield str(doc["_id"]), f"{doc.get('title', '').strip()}\n\n{doc.get('text', '').strip()}\n"


class Writer(threading.Thread):
    """A new .txt file every ``every_s`` in ``folder``, written to a temporary name and renamed in (as an
    editor saves), until stopped."""

    def __init__(self, folder: Path, every_s: float, seed_docs: int, run_id: str, prefix: str) -> None:
        super().__init__(name="writer", daemon=True)
        self.folder, self.every_s, self.run_id, self.prefix = folder, every_s, run_id, prefix
        self.texts = new_texts(seed_docs)
        self.written: list[Written] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.write_one()
                self.stopping.wait(self.every_s)
        except BaseException as exc:
            self.error = exc

    def write_one(self) -> None:
        n = len(self.written)
        doc_id, text = next(self.texts)
        marker = f"{MARK}{self.run_id}x{n}"
        path = self.folder / f"{self.prefix}-{n:04d}-{file_name(doc_id)}"
        tmp = self.folder / f".{path.name}.part"  # hidden: the watcher never indexes it
        tmp.write_text(f"{marker}\n\n{text}", encoding="utf-8")
        os.replace(tmp, path)
        self.written.append(Written(path, marker, time.time()))


def clear_new_files(kernel: Kernel, client: BusClient, corpus: Path, timeout: float = 300) -> None:
    """Remove an earlier run's written files (a kept home) and wait until the index has let them go."""
    new = corpus / NEW_DIR
    if new.exists():
        shutil.rmtree(new)
    give_up = time.monotonic() + timeout
    while True:
        db = sqlite3.connect(f"file:{kernel.db_path}?mode=ro", uri=True, timeout=10)
        try:
            left = db.execute("SELECT count(*) FROM documents WHERE path LIKE ?", (f"{new}/%",)).fetchone()[0]
        finally:
            db.close()
        f = kernel.folder(client)
        if not left and f is not None and f["state"] == "ready":
            return
        if time.monotonic() > give_up:
            raise BenchFailure(f"the index still holds {left} removed files after {timeout:g} s")
        time.sleep(0.5)


def indexed_rows(db_path: Path, paths: list[Path]) -> dict[str, sqlite3.Row]:
    """The index's rows of ``paths`` (read-only; the indexer writes in WAL mode, readers never block it)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    try:
        marks = ",".join("?" * len(paths))
        rows = db.execute(
            f"SELECT path, status, error, updated_at FROM documents WHERE path IN ({marks})", [str(p) for p in paths]
        )
        return {r["path"]: r for r in rows}
    finally:
        db.close()


def settle(kernel: Kernel, client: BusClient, paths: list[Path], timeout: float) -> str:
    """Wait until every one of ``paths`` has settled in the index (indexed, failed or skipped) and every
    chunk of the folder is embedded; returns what is still missing after ``timeout`` ("" when nothing)."""
    t0 = time.monotonic()
    while True:
        rows = indexed_rows(kernel.db_path, paths) if paths else {}
        done = [r for r in rows.values() if r["status"] in ("indexed", "failed", "skipped")]
        f = kernel.folder(client)
        embedded = f is not None and f["chunks_embedded"] >= f["chunks"] and f["state"] == "ready"
        if len(done) == len(paths) and embedded:
            return ""
        if time.monotonic() - t0 > timeout:
            return f"{len(done)}/{len(paths)} written files settled after {timeout:g} s ({f})"
        time.sleep(0.5)


def drain(kernel: Kernel, client: BusClient, written: list[Written], out: Results, timeout: float) -> None:
    """Wait until every written file is indexed and every chunk embedded, then read each one back over the
    bus (``doc.read``, as read_document does) and find its marker in the text."""
    t0 = time.monotonic()
    paths = [w.path for w in written]
    missing = settle(kernel, client, paths, timeout)
    if missing:
        out.failures.append(f"drain: {missing}")
    rows = indexed_rows(kernel.db_path, paths) if paths else {}
    f = kernel.folder(client)
    out.drain_s = time.monotonic() - t0
    if f is not None:
        out.embedded = (int(f["chunks_embedded"]), int(f["chunks"]))
    for w in written:
        row = rows.get(str(w.path))
        why = ""
        try:
            reply = client.request("indexer", ReadDocumentRequest(path=str(w.path)), ReadDocumentReply, timeout=30).body
            ok = w.marker in reply.text
        except JobError as exc:
            ok, reply = False, None
            why = exc.code
        if ok:
            out.indexed += 1
            if row is not None:
                out.lag_s.add(float(row["updated_at"]) - w.at)
        else:
            state = f"{row['status']} ({row['error']})" if row is not None else "no row"
            out.not_indexed.append(
                f"{w.path.name}: {state}" + (f", read: {why}" if reply is None else ", marker missing")
            )


# --------------------------------------------------------------------------------------------
# the clients


class Shared:
    """What the clients share: the queries in turn, the chat slots, and the results."""

    def __init__(self, out: Results, queries: list[str], chats_in_flight: int) -> None:
        self.out = out
        self.queries = queries
        self.next_query = 0
        self.chat_slots = chats_in_flight
        self.chats_running = 0

    def query(self) -> str:
        q = self.queries[self.next_query % len(self.queries)]
        self.next_query += 1
        return q

    def stats(self, tool: str) -> ToolStats:
        return self.out.tools.setdefault(tool, ToolStats())


def error_of(result: Any) -> str:
    """A tool error's code (its JSON body), or a short description when it has none."""
    try:
        body = json.loads(result.content[0].text)
        return str(body.get("code") or "no code")
    except (ValueError, AttributeError, IndexError, TypeError):
        return "untyped error"


class LoadClient:
    """One MCP client session: draws a tool, calls it, records the outcome, pauses, until the deadline."""

    def __init__(self, number: int, shared: Shared, rng: random.Random, think_s: float, first: str = "") -> None:
        self.number, self.shared, self.rng, self.think_s = number, shared, rng, think_s
        self.first = first
        self.seen: list[dict[str, Any]] = []  # recent search results: the files the other tools ask about
        self.wire = Wire()
        self.chat_session: str | None = None

    def draw(self) -> str:
        if self.first:
            tool, self.first = self.first, ""
        else:
            tool = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if tool == CHAT:
            if self.shared.chats_running >= self.shared.chat_slots:
                self.shared.out.chat_busy += 1
                return SEARCH
            return CHAT
        if tool in ("read_document", "get_document_summary", "find_similar") and not self.seen:
            return SEARCH
        return tool

    def args(self, tool: str) -> dict[str, Any]:
        if tool == SEARCH:
            return {"query": self.shared.query(), "mode": "hybrid", "top_k": 10}
        if tool == CHAT:
            # Every other chat continues the client's conversation, as a user asking a follow-up.
            args: dict[str, Any] = {"query": self.shared.query()}
            if self.chat_session and self.rng.random() < 0.5:
                args["session_id"] = self.chat_session
            return args
        if tool in ("list_smart_folders", "index_status"):
            return {}
        hit = self.rng.choice(self.seen)
        if tool == "read_document":
            loc = hit["location"]
            return {"file_path": hit["file_path"], "start_line": loc["line_start"], "end_line": loc["line_end"] + 5}
        if tool == "find_similar":
            return {"file_path": hit["file_path"], "top_k": 5}
        return {"file_path": hit["file_path"]}

    async def call(self, client: Client, tool: str, args: dict[str, Any], stats: ToolStats) -> dict[str, Any] | None:
        """One call; its structured result, or None when it failed (recorded)."""
        stats.calls += 1
        t0 = time.perf_counter()
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool(tool, args)
        except Exception as exc:  # a transport failure, a JSON-RPC error (a 429), a timeout: all errors
            stats.errors += 1
            stats.codes[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
            return None
        elapsed = (time.perf_counter() - t0) * 1000
        if result.is_error and tool == "find_similar" and error_of(result) == "NOT_EMBEDDED":
            stats.not_yet += 1  # the file is searchable by keyword, its vectors are still being made: no fault
            return None
        if result.is_error or result.structured_content is None:
            stats.errors += 1
            stats.codes[error_of(result)] += 1
            return None
        stats.latency.add(elapsed)
        return dict(result.structured_content)

    async def one(self, client: Client) -> None:
        tool = self.draw()
        shared = self.shared
        stats = shared.stats(tool)
        args = self.args(tool)
        if tool == CHAT:
            shared.chats_running += 1
        try:
            body = await self.call(client, tool, args, stats)
        finally:
            if tool == CHAT:
                shared.chats_running -= 1
        if body is None:
            return
        if tool == SEARCH:
            shared.out.load_query_ms.add(float(body["query_ms"]))
            self.seen = (self.seen + list(body["results"]))[-30:]
        elif tool == CHAT:
            self.chat_session = body["session_id"]
            shared.out.grounded += bool(body["grounded"])

    async def loop(self, client: Client, deadline: float) -> None:
        # Start at different moments, as independent users would.
        await anyio.sleep(self.rng.uniform(0, self.think_s))
        while time.monotonic() < deadline:
            await self.one(client)
            await anyio.sleep(self.think_s * self.rng.uniform(0.25, 1.75))


async def idle_searches(clients: list[Client], shared: Shared, out: Results, warmup: int, n: int) -> None:
    """Hybrid searches one at a time, over the clients' sessions in turn (one session alone would run into
    its rate limit): the idle figure the load is compared with."""
    for i in range(warmup + n):
        client = clients[i % len(clients)]
        t0 = time.perf_counter()
        try:
            result = await client.call_tool(SEARCH, {"query": shared.query(), "mode": "hybrid", "top_k": 10})
        except Exception:
            out.idle_errors += 1
            continue
        elapsed = (time.perf_counter() - t0) * 1000
        body = result.structured_content
        if result.is_error or not body:
            out.idle_errors += 1
        elif i >= warmup:
            out.idle.add(elapsed)
            out.idle_query_ms.add(float(body["query_ms"]))


async def warm_up(clients: list[Client], loaders: list[LoadClient], shared: Shared) -> None:
    """One call of every tool (and one chat) before the RSS at the start is taken: first-use allocations
    are not growth under load."""
    client, loader = clients[0], loaders[0]
    body = await client.call_tool(SEARCH, {"query": shared.query(), "mode": "hybrid", "top_k": 10})
    if body.is_error or not body.structured_content:
        raise BenchFailure(f"warm-up search failed: {error_of(body)}")
    loader.seen = list(body.structured_content["results"])
    for tool in MIX:
        if tool == SEARCH:
            continue
        result = await client.call_tool(tool, loader.args(tool))
        if result.is_error:  # reported, and the load goes on: what it does next is the figure
            shared.out.failures.append(f"warm-up {tool} failed: {error_of(result)}")
    loader.seen = []


def phases(plan: Plan, url: str, token: str, out: Results, on_load_start: Any, on_load_end: Any) -> None:
    """Open the clients (each its own session), then idle, warm-up, and the load."""
    rng = random.Random(plan.seed)
    queries = scifact_queries()
    rng.shuffle(queries)
    shared = Shared(out, queries, plan.chats_in_flight)
    loaders = [
        LoadClient(i, shared, random.Random(plan.seed * 1000 + i), plan.think_s, CHAT if i == 0 else "")
        for i in range(plan.clients)
    ]

    async def go() -> None:
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(http_client(url, token, PROTOCOL, ld.wire)) for ld in loaders]
            say(f"idle: {plan.idle_queries} hybrid searches one at a time (after {plan.warmup_queries} warm-up)")
            await idle_searches(clients, shared, out, plan.warmup_queries, plan.idle_queries)
            say(f"  idle hybrid median {out.idle.median:.1f} ms, p95 {out.idle.p95:.1f} ms")
            await warm_up(clients, loaders, shared)
            sent = sum(sum(ld.wire.requests.values()) for ld in loaders)
            on_load_start()
            t0 = time.monotonic()
            deadline = t0 + plan.minutes * 60
            say(f"load: {plan.clients} clients for {plan.minutes:g} min")
            async with anyio.create_task_group() as tg:
                for client, loader in zip(clients, loaders, strict=True):
                    tg.start_soon(loader.loop, client, deadline)
            out.load_s = time.monotonic() - t0
            on_load_end()
            out.http_requests = sum(sum(ld.wire.requests.values()) for ld in loaders) - sent
            out.sessions = len({ld.wire.session_id for ld in loaders if ld.wire.session_id})

    anyio.run(go)


# --------------------------------------------------------------------------------------------
# the run


def run(plan: Plan) -> Results:
    """The whole run; what went wrong is in ``failures`` (and the errors per tool), never raised."""
    out = Results(plan)
    out.config = kernel_config(plan)
    t0 = time.monotonic()
    try:
        _run(plan, out)
    except (BenchFailure, BusError, OSError) as exc:
        traceback.print_exc()
        out.failures.append(f"{type(exc).__name__}: {exc}")
    except BaseExceptionGroup as group:  # from the clients' task groups: name the causes, not the nesting
        for exc in leaves(group):
            say("".join(traceback.format_exception(exc)))
            out.failures.append(f"{type(exc).__name__}: {exc}")
    out.elapsed_s = time.monotonic() - t0
    return out


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def _run(plan: Plan, out: Results) -> None:
    with indexed_kernel(plan.home, plan.docs, out.config) as (kernel, index), kernel.client("load") as client:
        out.index = index
        corpus = kernel.root / f"scifact-{plan.docs}"
        clear_new_files(kernel, client, corpus)
        say("waiting for the llm's model")
        wait_llm_ready(client)
        procs = processes(kernel, client)
        out.rss["ready"] = rss_snapshot(procs)
        url, token = front_door(kernel.root)
        new = corpus / NEW_DIR
        new.mkdir()
        writer = Writer(new, plan.write_every_s, plan.docs, f"{int(time.time()) % 100000}", prefix="new")
        sampler = Sampler(procs)
        logs: dict[Path, int] = {}
        before: dict[str, int] = {}

        def load_start() -> None:
            # Taken again: a worker replaced since "ready" (a warm-up chat past its deadline) has a new pid.
            procs.clear()
            procs.update(processes(kernel, client))
            out.rss["load start"] = rss_snapshot(procs)
            before.update(restarts(kernel, client))
            logs.update(log_offsets(kernel.home.log_dir))
            sampler.start()
            writer.start()

        def load_end() -> None:
            out.rss["load end"] = rss_snapshot(procs)
            out.end_states.update({w["name"]: str(w["state"]) for w in kernel.status(client).workers})
            writer.stopping.set()
            sampler.stopping.set()

        # The pipeline's first-use allocations (the parsers' libraries, the embedder's first batches) fall
        # before the start, like the model's: a few files are written and indexed first.
        say(f"warm-up: {WARM_FILES} files through the pipeline")
        warm = Writer(new, 0, plan.docs + 500, writer.run_id + "w", prefix="warm")
        for _ in range(WARM_FILES):
            warm.write_one()
        if missing := settle(kernel, client, [w.path for w in warm.written], plan.drain_timeout_s):
            out.failures.append(f"warm-up files: {missing}")

        def ready_again() -> None:
            # A warm-up chat past its deadline gets the llm replaced: the load starts with the model loaded.
            wait_llm_ready(client)

        try:
            phases(plan, url, token, out, lambda: (ready_again(), load_start()), load_end)
        finally:
            writer.stopping.set()
            sampler.stopping.set()
            if writer.is_alive():
                writer.join(10)
            if sampler.is_alive():
                sampler.join(10)
        if writer.error is not None:
            out.failures.append(f"writer: {type(writer.error).__name__}: {writer.error}")
        out.written = writer.written
        out.rss_peak = sampler.peak
        out.other_cores = sampler.other_cores
        say(f"drain: {len(writer.written)} written files to index")
        drain(kernel, client, writer.written, out, plan.drain_timeout_s)
        out.rss["after drain"] = rss_snapshot(processes(kernel, client))
        after = restarts(kernel, client)
        out.restarts = {n: (before.get(n, 0), after.get(n, 0)) for n in after}
        out.log_errors = new_log_errors(kernel.home.log_dir, logs)
        if plan.home is not None:  # a kept home is left as it was found
            clear_new_files(kernel, client, corpus)
        if out.failures or out.errors or out.not_indexed or out.restarted():
            kernel.keep = True  # its logs say why


# --------------------------------------------------------------------------------------------
# the report


ANALYSIS_ON = "on (the product default: summaries run when the ingest queue is idle)"


def _how(index: Index) -> str:
    return "reused from --home" if index.reused else f"indexed and embedded in {index.seconds:.0f} s"


def _three(s: Series) -> str:
    return f"{ms(s.median)} / {ms(s.p95)} / {ms(s.p99)}"


def summary_rows(r: Results) -> list[list[str]]:
    rows = []
    codes = Counter[str]()
    for t in r.tools.values():
        codes.update(t.codes)
    beside = ", ".join(f"{c} x{n}" for c, n in codes.most_common(4)) or "-"
    rows.append(
        [
            f"errors under load ({r.plan.clients} clients)",
            f"{r.errors} of {r.calls:,} calls",
            beside,
            "0",
            verdict(r.errors == 0 and r.calls > 0),
        ]
    )
    search = r.tools.get(SEARCH, ToolStats()).latency
    rows.append(
        [
            "hybrid search, median / p95 / p99: idle -> load",
            f"{_three(r.idle)} -> {_three(search)} ms",
            f"indexer query_ms median {ms(r.idle_query_ms.median)} -> {ms(r.load_query_ms.median)} ms",
            "figure",
            verdict(None),
        ]
    )
    chat = r.tools.get(CHAT, ToolStats())
    rows.append(
        [
            "chat_with_documents, median / p95",
            f"{ms(chat.latency.median)} / {ms(chat.latency.p95)} ms",
            f"{chat.calls} chats, {r.grounded} grounded",
            "figure",
            verdict(None),
        ]
    )
    n = len(r.written)
    rows.append(
        [
            "files written during the load, indexed",
            f"{r.indexed} / {n}",
            f"lag median {r.lag_s.median:.1f} s, max {max(r.lag_s.samples, default=float('nan')):.1f} s",
            "all",
            verdict(n > 0 and r.indexed == n),
        ]
    )
    restarted = r.restarted()
    rows.append(
        [
            "worker restarts during the run",
            str(sum(restarted.values())),
            ", ".join(f"{k} x{v}" for k, v in restarted.items()) or "-",
            "0",
            verdict(not restarted and bool(r.restarts)),
        ]
    )
    growth = r.growth()
    worst = max(growth.items(), key=lambda kv: kv[1][1], default=None)
    over = r.over_bound()
    rows.append(
        [
            "RSS growth, start -> end of the load, largest",
            f"{worst[0]} +{mib(worst[1][1])} MiB" if worst else "-",
            f"{len(growth)} processes; over the bound: {', '.join(over) or 'none'}",
            "each < max(64 MiB, 25% of its start)",
            verdict(bool(growth) and not over),
        ]
    )
    return rows


def render(r: Results) -> str:
    p = r.plan
    m = r.machine
    lines = [
        "# Load: concurrent MCP clients while new files are indexed",
        "",
        "Generated by `python -m tests.bench.load` (`make load`). A real kernel (default process",
        "map) serves the MCP front door on 127.0.0.1 with its bearer token; the clients are the `mcp` SDK's own",
        "`Client` over streamable HTTP (httpx2), all in the bench process, each with its own MCP session; the",
        "model is the real SmolLM2-135M-Instruct. Times are wall-clock ms end to end at the client unless a",
        "column says otherwise. `tests/test_load.py` runs a short variant of the same code in CI.",
        "",
        "## Summary",
        "",
        *table(["figure", "measured", "beside it", "aim / bound", "verdict"], summary_rows(r), "llllc"),
        "",
    ]
    about = (
        f"Machine: {m.get('CPU', '?')}, {m.get('cores', '?')}, {m.get('RAM', '?')}; run {m.get('date (UTC)', '?')}"
        f" UTC, foldermind {m.get('foldermind', '?')}."
    )
    if r.other_cores > 0.05:
        about += (
            f" The machine was shared: processes outside the kernel and this bench kept {r.other_cores:.2f} cores"
            " busy on average during the load, so the latencies are noisier and higher than on a quiet machine."
        )
    lines += [*para(about), ""]
    if r.failures:
        lines += ["**The run had failures** (see Failures at the end).", ""]
    lines += ["## Conditions", ""]
    rate = f"{p.rate_per_minute} (raised for the run)" if p.rate_per_minute else "60, the product default"
    think = f"{p.think_s * 0.25:.2f}-{p.think_s * 1.75:.2f} s (mean {p.think_s:g} s)"
    mix = ", ".join(f"`{k}` {v:.0%}" for k, v in MIX.items())
    cond = (
        f"Seed corpus: the first {p.docs:,} SciFact abstracts as .txt files"
        + (f" ({r.index.files:,} files, {r.index.chunks:,} chunks; {_how(r.index)})." if r.index else ".")
        + f" {p.clients} clients, each its own session (the `legacy` initialize handshake and an `Mcp-Session-Id`:"
        f" {r.sessions} distinct sessions seen), for {p.minutes:g} min ({r.load_s:.0f} s until the last call"
        f" returned). Each client draws its next tool with the weights {mix}; a tool that needs a file (read,"
        " summary, similar) takes one from that client's own earlier search results (read: the hit's lines and"
        f" 5 more); a chat drawn while {p.chats_in_flight} chats are already running becomes a search"
        f" ({r.chat_busy} times), because the llm serves one generation at a time and a queued chat only waits;"
        " half of a client's chats continue its earlier conversation (`session_id`). Client 0 starts with a chat."
        f" Between calls each client pauses {think}: with the front door's rate limit per session at {rate}"
        f" requests/minute, a client stays under it ({r.http_requests:,} HTTP requests in all for"
        f" {r.calls:,} calls). Searches are hybrid, top_k 10, SciFact's queries in turn (shuffled), the"
        " query-vector cache off (`[search] query_cache_size = 0`) so every search encodes its query."
        f" Meanwhile a writer adds one new abstract (from outside the seed, with a unique marker word) to the"
        f" Smart Folder every {p.write_every_s:g} s (written to a hidden name, then renamed in)."
        f" The model's background analysis is {ANALYSIS_ON if p.analysis else 'off'}."
        f" Before anything is measured, {WARM_FILES} files are written and indexed (the pipeline's first use)."
        " Idle: the same hybrid searches one at a time over the same sessions in turn, before the load, nothing"
        f" else asked ({p.idle_queries} measured after {p.warmup_queries} warm-up). Then one call of every tool,"
        " a chat included, so that first-use allocations fall before the RSS at the start of the load."
        " Home override (`config/supervisor.toml`): "
        + "; ".join(f"`{ln}`" for ln in render_config(r.config).splitlines() if ln)
        + "."
    )
    lines += [*para(cond), ""]
    lines += ["## Calls per tool under load", ""]
    rows = []
    for tool in MIX:
        t = r.tools.get(tool)
        if t is None:
            continue
        codes = ", ".join(f"{c} x{n}" for c, n in t.codes.most_common()) or "-"
        lat = t.latency
        rows.append(
            [
                f"`{tool}`",
                f"{t.calls:,}",
                str(t.errors),
                ms(lat.median),
                ms(lat.p95),
                ms(lat.p99),
                ms(max(lat.samples, default=float("nan"))),
                codes,
            ]
        )
    lines += [
        *table(["tool", "calls", "errors", "median", "p95", "p99", "max", "errors by code"], rows, "lrrrrrrl"),
        "",
    ]
    lines += ["## Search latency: idle against load", ""]
    s = r.tools.get(SEARCH, ToolStats()).latency
    lines += table(
        ["hybrid search_documents", "n", "median", "p95", "p99", "indexer query_ms median", "p95"],
        [
            [
                "idle, one call at a time",
                str(len(r.idle.samples)),
                ms(r.idle.median),
                ms(r.idle.p95),
                ms(r.idle.p99),
                ms(r.idle_query_ms.median),
                ms(r.idle_query_ms.p95),
            ],
            [
                f"under load, {p.clients} clients + writer",
                str(len(s.samples)),
                ms(s.median),
                ms(s.p95),
                ms(s.p99),
                ms(r.load_query_ms.median),
                ms(r.load_query_ms.p95),
            ],
        ],
    )
    lines += [
        "",
        *para(
            "End to end at the client (the SDK call); `query_ms` is the indexer's own time for the search in the"
            " result (query embedding, Tantivy, usearch, fusion, rows), so the rest is the front door, the bus and"
            " waiting for a core. On 2 cores the load's chats, embedding and parsing compete with every search."
        ),
        "",
    ]
    lines += ["## Files indexed during the load", ""]
    lines += para(
        f"{len(r.written)} files written, {r.indexed} read back from the index over the bus (`doc.read`, what"
        " read_document asks) with their own marker word in the text. Lag from the write to the row's"
        f" `indexed` update: median {r.lag_s.median:.1f} s, p95 {r.lag_s.p95:.1f} s, max"
        f" {max(r.lag_s.samples, default=float('nan')):.1f} s. After the load, {r.drain_s:.0f} s until every"
        f" written file was indexed and every chunk embedded ({r.embedded[0]:,}/{r.embedded[1]:,} chunks embedded)."
    )
    if r.not_indexed:
        lines += ["", "Not indexed:", *(f"- {x}" for x in r.not_indexed[:20])]
    lines += ["", "## Memory (RSS) of every process", ""]
    moments = [k for k in ("ready", "load start", "load end", "after drain") if k in r.rss]
    names = list(r.rss.get("load start", r.rss.get("ready", {})))
    growth = r.growth()
    rows = []
    for name in names:
        row = [name, str(r.rss.get("load start", {}).get(name, Proc(0, 0)).pid)]
        row += [mib(r.rss[k][name].rss) if name in r.rss[k] else "-" for k in moments]
        row.append(mib(r.rss_peak[name]) if name in r.rss_peak else "-")
        if name in growth:
            _, g, b = growth[name]
            row += [f"{'+' if g >= 0 else ''}{mib(g)}", mib(b), verdict(g <= b)]
        else:
            row += ["-", "-", verdict(False)]
        rows.append(row)
    header = ["process", "pid", *(f"{k} MiB" for k in moments), "peak in load MiB", "growth MiB", "bound MiB", ""]
    lines += [*table(header, rows, "lr" + "r" * (len(moments) + 3) + "c"), ""]
    lines += para(
        "RSS by psutil. `ready`: the seed indexed, the model loaded; `load start`: after the idle searches and one"
        " call of every tool; `load end`: when the last client call returned; `after drain`: every written file"
        " indexed and embedded. The bound (growth from the start of the load to its end) is max(64 MiB, 25% of"
        " the process's RSS at the start): the load's one-time allocations happen before the start, so growth"
        " beyond that would be per-call or per-file memory that is never given back. A restarted worker (another"
        " pid at the end) fails its row."
    )
    restarted = r.restarted()
    lines += [
        "",
        "## Worker restarts and logged errors",
        "",
        f"Restarts during the run: {', '.join(f'{k} x{v}' for k, v in restarted.items()) or 'none'}."
        f" ERROR / Traceback lines in the home's logs during the load and drain: {len(r.log_errors)}.",
    ]
    if r.log_errors:
        lines += ["", "```", *r.log_errors, "```"]
    lines += ["", "## Machine", "", *table(["", ""], [[k, v] for k, v in r.machine.items()], "ll"), ""]
    if r.failures:
        lines += ["## Failures", "", *(f"- {f}" for f in r.failures), ""]
    lines += [f"Run took {r.elapsed_s / 60:.1f} min.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.load", description=doc.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="length of the load (default 5)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent MCP clients (default 8)")
    parser.add_argument("--home", default="", help="keep the kernel's home (and its index) here and reuse it")
    parser.add_argument(
        "--report", default=str(REPORT), help=f"where to write the report (default {REPORT.relative_to(REPO)})"
    )
    parser.add_argument("--docs", type=int, default=1000, help=f"seed abstracts (default 1000, at most {SCIFACT_DOCS})")
    parser.add_argument("--write-every", type=float, default=2.0, help="seconds between new files (default 2)")
    parser.add_argument("--think", type=float, default=1.2, help="mean pause between a client's calls, s (default 1.2)")
    parser.add_argument("--idle-queries", type=int, default=96, help="idle searches measured (default 96)")
    parser.add_argument("--chats-in-flight", type=int, default=2, help="most chats running at once (default 2)")
    parser.add_argument(
        "--rate", type=int, default=0, help="[mcp] rate_per_minute for the run (default: the product's 60)"
    )
    parser.add_argument(
        "--no-analysis", dest="analysis", action="store_false", help="the model's background summaries off"
    )
    parser.add_argument(
        "--config", default="", help="more TOML for the home's override (e.g. '[bus]\\nheartbeat_liveness = 10')"
    )
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    args = parser.parse_args(argv)
    try:
        extra_config = tomllib.loads(args.config.replace("\\n", "\n"))
    except tomllib.TOMLDecodeError as exc:
        parser.error(f"--config: {exc}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the workers inherit it: nothing is downloaded
    plan = Plan(
        minutes=args.minutes,
        clients=args.clients,
        docs=min(args.docs, SCIFACT_DOCS),
        home=Path(args.home).resolve() if args.home else None,
        write_every_s=args.write_every,
        think_s=args.think,
        idle_queries=args.idle_queries,
        chats_in_flight=args.chats_in_flight,
        rate_per_minute=args.rate,
        analysis=args.analysis,
        extra_config=extra_config,
    )
    facts = machine.facts(REPO)
    machine.versions(facts, *machine.MCP_STACK)
    results = run(plan)
    results.machine = facts
    text = render(results)
    print(text)
    if not args.no_write:
        Path(args.report).write_text(text, encoding="utf-8")
        say(f"wrote {args.report}")
    ok = not (results.failures or results.errors or results.not_indexed or results.over_bound() or results.restarted())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
