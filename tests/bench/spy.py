"""py-spy on the search path: CPU per hybrid search over MCP HTTP, by process and by layer.

py-spy samples the front door, the kernel (broker), the indexer and this process (the client) during a
sequential hybrid run on one session; each process's samples are scaled to its measured CPU per search
(psutil), and a sample counts for the layer of the innermost frame on its stack that belongs to one. Run
by ``python -m tests.bench.search`` (``--profile 0`` skips it).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil

from tests.bench.cpu import CpuProbe
from tests.bench.markdown import ms, table
from tests.bench.mcpclient import http_client, search_args
from tests.bench.stats import Series

PROFILE_RATE = 250  # py-spy samples per second
GIL_SAMPLED = ("bench", "frontdoor", "kernel")
"""Sampled only while a thread holds the GIL (``--gil``): their work is Python, and on a loaded machine a
thread that is runnable but waits for a core would otherwise count as busy. The indexer is sampled whole:
its model runs without the GIL."""
PROCS = ("bench", "frontdoor", "kernel", "indexer")

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
        ("bus call: BusClient, msgpack, zmq", ("(workers/framework/asyncbus.py", "(protocol/", "(zmq/", "(msgpack")),
        (
            "thread hop (anyio.to_thread: queue, wake-ups)",
            ("Condition.notify (threading.py", "Condition.wait (threading.py", "(queue.py", "_write_to_self ("),
        ),
        (
            "tool handler (tools.py, output model)",
            ("(workers/frontdoor/tools.py", "(workers/frontdoor/server.py", "(workers/frontdoor/schemas.py"),
        ),
        ("json", ("(json/",)),
        ("pydantic", ("(pydantic/", "(pydantic_core/")),
        ("jsonschema", ("(jsonschema/", "(referencing/")),
        ("MCP SDK server (transport, dispatch, tool manager)", ("(mcp/", "(mcp_types/")),
        ("guard (size, token, Origin, rate)", ("(workers/frontdoor/guard.py",)),
        ("starlette / sse-starlette", ("(starlette/", "(sse_starlette/")),
        ("uvicorn + h11 (HTTP parse and write)", ("(uvicorn/", "(h11/")),
        ("anyio (task groups, streams, thread hop)", ("(anyio/",)),
        ("asyncio event loop, sockets", ("(asyncio/", "(selectors.py", "(socket.py")),
        (
            "worker base (main thread)",
            ("(workers/framework/base.py", "(workers/framework/runner.py", "(workers/framework/heartbeat.py"),
        ),
    ],
    "kernel": [
        ("zmq", ("(zmq/",)),
        ("frames, msgpack", ("(protocol/", "(msgpack")),
        ("broker", ("(kernel/bus/",)),
        ("supervisor", ("(kernel/supervisor.py", "(kernel/kernel.py")),
    ],
    "indexer": [
        (
            "query encode (the model runtime, tokenizer)",
            (
                "(torch/",
                "(onnxruntime/",
                "(transformers/",
                "(sentence_transformers/",
                "(tokenizers/",
                "(workers/indexer/search/encoder.py",
            ),
        ),
        ("keyword (Tantivy)", ("(workers/indexer/storage/keyword/bm25.py", "(tantivy/")),
        ("vector (usearch)", ("(usearch/", "(workers/indexer/storage/vectors.py", "(workers/indexer/search/scoped.py")),
        (
            "rows and snippets (SQLite)",
            ("(workers/indexer/storage/store.py", "(workers/indexer/search/snippets.py", "(sqlite3/"),
        ),
        ("fusion", ("(workers/indexer/search/fusion.py",)),
        ("search.py (the rest)", ("(workers/indexer/search/search.py",)),
        ("bus: zmq, msgpack, frames, dispatch", ("(zmq/", "(msgpack", "(protocol/", "(workers/framework/base.py")),
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
            async with http_client(url, token, protocol) as client:
                for q in queries[:5]:
                    await client.call_tool("search_documents", search_args(q, "hybrid"))
                probe.start()
                end = time.perf_counter() + seconds
                k = 0
                while time.perf_counter() < end:
                    t0 = time.perf_counter()
                    await client.call_tool("search_documents", search_args(queries[k % len(queries)], "hybrid"))
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


def render(p: Profile) -> list[str]:
    lines = [f"Profile incomplete: {p.error}", ""] if p.error else []
    lines += [
        f"{p.queries} hybrid searches in {p.seconds:.0f} s (median {ms(p.e2e.median)} ms while sampled at {p.rate} Hz,",
        "non-blocking), one session. py-spy sees CPU only: a wait (a delayed ACK, a lock) is invisible to it. Each",
        "process's samples are scaled to its measured CPU per search; a sample counts for the layer of the",
        "innermost frame on its stack that belongs to one.",
        "",
    ]
    for name in PROCS:
        if name not in p.by_layer:
            continue
        lines += [f"**{name}** ({ms(p.cpu_ms.get(name, math.nan))} ms CPU per search):", ""]
        lines += table(["layer (innermost frame)", "CPU ms"], [[k, f"{v:.2f}"] for k, v in p.by_layer[name]])
        if len(p.by_thread.get(name, [])) > 1:
            lines += ["", "By thread: " + ", ".join(f"{k} {v:.2f}" for k, v in p.by_thread[name]) + "."]
        lines.append("")
    return lines
