"""Hybrid search over MCP, two builds side by side: an older commit's code and this tree's, asked in turn.

``python -m tests.bench.paired_kernels --old COMMIT --homes A B [--passes 4] [--queries 120] [--warmup 30]
[--settle 20] [--call search|list] [--port N]`` from the repository root, ``FOLDERMIND_SCIFACT`` set. ``A`` and ``B``
are copies of one indexed SciFact home (:func:`tests.bench.scifact.indexed_kernel` builds one). ``COMMIT``'s files are
written to a temporary directory (``git archive``) and its kernel runs them through ``PYTHONPATH`` (the
``foldermind`` names point there; the packages installed in this venv serve both). Each pass starts both kernels,
waits ``--settle`` seconds (a start checks the folder), warms each up, then asks each SciFact claim of both in turn
(the ``mcp`` SDK client, stateless, top 10), the order alternating claim by claim; the homes swap between passes,
and which kernel starts first between pairs of passes (4 passes cover every order).
Printed per pass and over all pairs: both medians, the median of the per-claim ratios (new / old) and differences,
of ``query_ms`` and of the time outside the indexer, each front door's CPU per call over the pass (psutil; both over
the same pass), and how many results (structured and text, less ``query_ms``) were identical. ``--call list`` asks
``tools/list`` instead and compares the tool lists. On a shared machine only the paired figures of one run compare
(docs/benchmarks/search-path.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp.client import Client
from mcp.types import TextContent

from tests import mcpclient
from tests.bench.kernels import Kernel, say
from tests.bench.mcpclient import front_door, http_client, kernel_config, search_args
from tests.bench.scifact import scifact_queries
from tests.bench.transports import REPO
from tests.config import merge

Pair = tuple[float, float]
"""(client wall ms, the indexer's query_ms) of one call."""


@contextlib.contextmanager
def old_code(commit: str) -> Iterator[Path]:
    """A directory whose ``foldermind`` package holds ``commit``'s code, for ``PYTHONPATH``."""
    with tempfile.TemporaryDirectory(prefix="fm-paired-") as tmp:
        tree, pkg = Path(tmp) / "tree", Path(tmp) / "pkg" / "foldermind"
        tree.mkdir()
        pkg.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        for part in ("kernel", "workers", "protocol"):
            (pkg / part).symlink_to(tree / part)
        yield pkg.parent


def start(home: Path, pythonpath: str | None, port: int = 0) -> Kernel:
    """A kernel on ``home`` running ``pythonpath``'s code (None: this tree's); ``port``: its front door's, the
    console's the next (0: OS-assigned)."""
    before = os.environ.pop("PYTHONPATH", None)
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        ports = {"mcp": {"port": port}, "console": {"port": port + 1 if port else 0}}
        kernel = Kernel("old" if pythonpath else "new", merge(kernel_config(), ports), home)
        kernel.start()
    finally:
        os.environ.pop("PYTHONPATH", None)
        if before is not None:
            os.environ["PYTHONPATH"] = before
    return kernel


async def call(client: Client, q: str, what: str) -> tuple[dict[str, Any], float]:
    """One call's result (less ``query_ms``: structured and text) and its ``query_ms``."""
    if what == "list":
        tools = await client.list_tools()
        return tools.model_dump(mode="json"), 0.0
    result = await client.call_tool("search_documents", search_args(q, "hybrid"))
    body = dict(result.structured_content or {})
    took = float(body.pop("query_ms", 0.0))
    texts = [json.loads(c.text) for c in result.content if isinstance(c, TextContent)]
    for t in texts:
        t.pop("query_ms", None)
    return {"structured": body, "text": texts, "error": result.is_error}, took


async def ask(
    urls: dict[str, tuple[str, str]], queries: list[str], warmup: int, what: str, cpu: dict[str, psutil.Process]
) -> tuple[dict[str, list[Pair]], int, dict[str, float]]:
    out: dict[str, list[Pair]] = {"old": [], "new": []}
    same = 0
    async with http_client(*urls["old"], "auto") as old, http_client(*urls["new"], "auto") as new:
        clients = {"old": old, "new": new}
        for q in queries[:warmup]:
            for client in clients.values():
                await call(client, q, what)
        before = {who: _cpu(p) for who, p in cpu.items()}
        for i, q in enumerate(queries[warmup:]):
            got = {}
            for who in ("old", "new") if i % 2 == 0 else ("new", "old"):
                t0 = time.perf_counter()
                body, took = await call(clients[who], q, what)
                out[who].append(((time.perf_counter() - t0) * 1000, took))
                got[who] = body
            same += got["old"] == got["new"]
        n = max(1, len(queries) - warmup)
        per_call = {who: (_cpu(p) - before[who]) * 1000 / n for who, p in cpu.items()}
    return out, same, per_call


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def line(label: str, old: list[Pair], new: list[Pair]) -> str:
    pairs = list(zip(old, new, strict=True))

    def paired(f: int | None) -> float:
        def part(p: Pair) -> float:
            return p[0] - p[1] if f is None else p[f]

        ratios = [part(b) / part(a) for a, b in pairs if part(a) > 0]
        return statistics.median(ratios) if ratios else float("nan")  # tools/list has no query_ms

    diff = statistics.median(b[0] - a[0] for a, b in pairs)
    faster = sum(b[0] < a[0] for a, b in pairs)
    return (
        f"{label}: old {statistics.median(p[0] for p in old):.2f} ms, new {statistics.median(p[0] for p in new):.2f} "
        f"ms; paired {paired(0):.3f} ({diff:+.2f} ms), new faster {faster}/{len(pairs)}; query_ms "
        f"{statistics.median(p[1] for p in old):.2f} -> {statistics.median(p[1] for p in new):.2f} paired "
        f"{paired(1):.3f}; outside the indexer paired {paired(None):.3f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit to compare this tree with (e.g. main)")
    ap.add_argument("--homes", nargs=2, type=Path, required=True, help="two copies of one indexed SciFact home")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--port", type=int, default=0, help="the old kernel's front door (console +1), the new +2, +3")
    ap.add_argument("--queries", type=int, default=120, help="claims asked of both per pass, after the warm-up")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--settle", type=float, default=20.0, help="seconds after both kernels started")
    ap.add_argument("--call", choices=("search", "list"), default="search", help="hybrid search or tools/list")
    args = ap.parse_args()
    queries = scifact_queries()[: args.warmup + args.queries]
    every: dict[str, list[Pair]] = {"old": [], "new": []}
    cpu_sum: dict[str, float] = {"old": 0.0, "new": 0.0}
    with old_code(args.old) as code:
        for n in range(args.passes):
            homes = args.homes if n % 2 == 0 else args.homes[::-1]
            # Which kernel starts first alternates too (every other pair of passes): at load 15-20 the one started
            # second read slower even when both ran the same code (docs/benchmarks/search-path.md, s52-lat).
            first = "old" if n % 4 < 2 else "new"
            kernels: dict[str, Kernel] = {}
            for who in (first, "new" if first == "old" else "old"):
                home, code_path = (homes[0], str(code)) if who == "old" else (homes[1], None)
                port = args.port + (2 if who == "new" else 0) if args.port else 0
                kernels[who] = start(home, code_path, port)
            try:
                time.sleep(args.settle)
                urls = {who: front_door(k.root) for who, k in kernels.items()}
                load = os.getloadavg()[0]
                doors = {who: psutil.Process(int(mcpclient.mcp_info(k.root)["pid"])) for who, k in kernels.items()}
                got, same, cpu = anyio.run(ask, urls, queries, args.warmup, args.call, doors)
            finally:
                for kernel in kernels.values():
                    kernel.stop()
            when = time.strftime("%H:%M:%S", time.gmtime())
            swapped = (", homes swapped" if n % 2 else "") + f", {first} started first"
            say(line(f"pass {n + 1} ({when} UTC, load {load:.1f}{swapped})", got["old"], got["new"]))
            say(f"  results identical (less query_ms): {same}/{len(got['old'])}")
            ratio = cpu["new"] / cpu["old"]
            say(f"  front door CPU per call: old {cpu['old']:.2f} ms, new {cpu['new']:.2f} ms ({ratio:.3f})")
            for who in every:
                every[who] += got[who]
                cpu_sum[who] += cpu[who]
    say(line(f"all {len(every['old'])} pairs", every["old"], every["new"]))
    say(f"front door CPU per call, pooled: {cpu_sum['new'] / cpu_sum['old']:.3f} (new / old)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
