"""What a ``foldermind`` command costs to start (docs/benchmarks/cli.md): each command a user types, the stdio
bridge's help and the two commands the console's Clients page has the kernel run, every one a new process as the
kernel's errand starts it (``python -m foldermind.kernel.cli --home HOME ...``), beside the raw cost of a Python
process (``python -c pass``) and of importing click alone, in the same run, on this (shared) machine.

With ``--before REV`` the same commands also run the command line of commit REV (its code extracted to a temporary
folder put first on PYTHONPATH, the rest of the install shared), alternated with this tree's, each against its own
kernel (the front door and the console), so both sides meet the same load; the Clients page is timed on both.

Usage: python -m tests.bench.cli_startup [--reps N] [--before REV] [--report PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from io import BytesIO
from pathlib import Path

from foldermind.protocol.client import BusClient
from tests.bench import machine
from tests.bench.console import CONFIG, _get, _sign_in
from tests.bench.kernels import BenchKernel
from tests.config import merge
from tests.helpers import only_workers

REPO = Path(__file__).resolve().parents[2]

COMMANDS: list[tuple[str, list[str]]] = [
    ("--version", ["--version"]),
    ("status", ["status"]),
    ("mcp --help", ["mcp", "--help"]),
    ("config snippet --json", ["config", "snippet", "--json"]),
    ("doctor --json", ["doctor", "--json"]),
    ("summary FILE", ["summary", "{root}/outside-every-folder.txt"]),
]
"""The commands timed: (label, arguments after ``--home HOME``; ``{root}`` is the kernel's root). ``summary`` asks
for a file outside every folder: the indexer's typed answer (INVALID_PATH, exit 1) after the same way there as a
stored analysis takes, without indexing a folder first."""

RAW: list[tuple[str, list[str]]] = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ('python -c "import click"', [sys.executable, "-c", "import click"]),
]

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
    }
)
BRIDGE = "mcp: the stdio bridge started, its initialize answered"

PAGES = [("GET /clients (the kernel runs config snippet --json)", "clients"), ("GET /clients/doctor", "clients/doctor")]


def bridge_initialize(argv: list[str], env: dict[str, str]) -> float:
    """ms from starting ``foldermind mcp`` (as an MCP client spawns it) to its answer to ``initialize``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE.encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = _ms(t0)
    proc.stdin.close()
    proc.wait(timeout=60)
    assert json.loads(line)["id"] == 1, line
    return took


@contextmanager
def tree_at(rev: str) -> Iterator[Path]:
    """A folder whose ``foldermind`` package is commit ``rev``'s kernel, protocol and workers (for PYTHONPATH)."""
    with tempfile.TemporaryDirectory(prefix="fm-before-") as tmp:
        blob = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev, "kernel", "protocol", "workers"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=BytesIO(blob)) as tar:
            tar.extractall(Path(tmp) / "foldermind", filter="data")
        yield Path(tmp)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def _children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _row(name: str, values: list[float], cpu: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    spent = f"{statistics.median(cpu) * 1000:.0f} ms" if cpu else "-"
    return f"| {name} | {statistics.median(values):.0f} ms | {p95:.0f} ms | {spent} | {len(values)} |"


def run(reps: int, before: str | None) -> list[str]:
    facts = machine.facts(REPO)
    config = merge(CONFIG, only_workers("frontdoor", "console", "indexer"))
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # the command's own CPU seconds: a figure the machine's load moves less
    with ExitStack() as stack:
        sides: dict[str, tuple[BenchKernel, dict[str, str], tuple[str, str]]] = {}
        for side, path in [("this tree", None), *([(f"before ({before})", before)] if before else [])]:
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = str(stack.enter_context(tree_at(path)))
            saved = os.environ.copy()
            os.environ.update(env)  # the kernel (and so its errands) runs that side's code
            try:
                k = stack.enter_context(BenchKernel(config, side))
            finally:
                os.environ.clear()
                os.environ.update(saved)
            bus = BusClient(k.home.bus_endpoint, name="bench-cli")
            sides[side] = (k, env, _sign_in(bus))
            bus.close()
        for i in range(reps):
            for label, argv in RAW:
                t0 = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=True, timeout=120)
                times.setdefault(label, []).append(_ms(t0))
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for label, args in COMMANDS:
                for side in order:
                    k, env, _ = sides[side]
                    given = [a.format(root=k.root) for a in args]
                    argv = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root), *given]
                    t0, c0 = time.perf_counter(), _children_cpu()
                    done = subprocess.run(argv, capture_output=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
                    times.setdefault(f"{label} [{side}]", []).append(_ms(t0))
                    cpu.setdefault(f"{label} [{side}]", []).append(_children_cpu() - c0)
                    if args[0] == "summary":  # the indexer's typed refusal, whichever way it was asked
                        assert done.returncode == 1 and b"INVALID_PATH" in done.stderr, (argv, done.stderr)
                        continue
                    assert done.returncode in (0, 3), (argv, done.returncode, done.stderr)  # 3: a finding in doctor
            for side in order:
                k, env, _ = sides[side]
                argv = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root), "mcp"]
                times.setdefault(f"{BRIDGE} [{side}]", []).append(bridge_initialize(argv, env))
            for label, path in PAGES:
                for side in order:
                    _, _, (base, cookie) = sides[side]
                    t0 = time.perf_counter()
                    assert _get(base + path, cookie)[0] == 200
                    times.setdefault(f"{label} [{side}]", []).append(_ms(t0))
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# Benchmarks: the command line's start-up",
        "",
        "Made by `python -m tests.bench.cli_startup` (tests/bench/cli_startup.py). Each command is a new process, as",
        "the kernel starts one for the console's Clients page (`python -m foldermind.kernel.cli --home HOME ...`),",
        "against a kernel running the front door, the console and the indexer; the sides alternate in every round.",
        "",
        "| | |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in facts.items()),
        f"| load average after | {load_after} |",
        "",
        "| what | median | p95 | CPU (median) | n |",
        "|---|---|---|---|---|",
        *(_row(name, values, cpu.get(name, [])) for name, values in times.items()),
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--before", default=None, help="A commit whose command line runs alternated with this one.")
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "benchmarks" / "cli.md")
    args = parser.parse_args()
    lines = run(args.reps, args.before)
    args.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
