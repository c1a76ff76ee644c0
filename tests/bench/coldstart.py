"""Cold start: from ``foldermind start`` to the first keyword answer and to semantic search, and a
``foldermind search`` from a terminal, each beside the raw cost of the same step in the same run.

    python -m tests.bench.coldstart [--docs 500] [--starts 3] [--searches 10] [--home DIR]

A home indexes the first ``--docs`` SciFact abstracts once (the model cache is shared, so the checked ONNX
export is there, as on any machine after the first start), then the tree is stopped and started
``--starts`` times. From the moment ``foldermind start`` is typed: when the command returns (it waits for the
front door's URL, to print it), when each worker first shows RUNNING (``ctl.status`` polled every 20 ms from
a thread of its own), when a keyword search is first answered with results and when a hybrid search is first
answered semantically (``mode_used`` hybrid, no degradation note); every probe asks from the moment the
command is typed, as a client already configured would. Beside them, the raw cost of a worker's start: a
bare interpreter importing each worker's module (``python -c "import foldermind.workers.indexer"``). Then
``foldermind search`` runs ``--searches`` times as a terminal would, beside a bare ``python -c pass`` and
``python -c "import foldermind.kernel.cli"`` (interpreter start and the command line's imports, the floor
of any command).
Prints a markdown section for docs/benchmarks/onnx.md (the cold start of a tree whose export is cached).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import SearchReply, SearchRequest, StatusReply, StatusRequest
from foldermind.protocol.runtime.config import PROCESS_MAP
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.machine import facts
from tests.bench.scifact import index_corpus, write_corpus
from tests.helpers import MODEL_CACHE

QUERY = "vitamin D deficiency and bone fractures"
POLL_S = 0.02


def first_answer(kernel: Kernel, mode: str, t0: float, give_up_s: float = 120.0) -> float:
    """Seconds from ``t0`` until a ``mode`` search is answered with results (hybrid: answered semantically)."""
    with kernel.client("bench-cold") as client:
        while time.monotonic() - t0 < give_up_s:
            try:
                reply = client.request("indexer", SearchRequest(QUERY, mode, 5), SearchReply, timeout=1).body
                if reply.results and (mode == "keyword" or (reply.mode_used == "hybrid" and not reply.note)):
                    return time.monotonic() - t0
            except BusError:
                pass
            time.sleep(POLL_S)
    raise BenchFailure(f"no {mode} answer within {give_up_s:g} s")


class ReadyTimes(threading.Thread):
    """Polls ``ctl.status`` every 20 ms until every worker is RUNNING: seconds from ``t0`` to the kernel's first
    answer and to each worker's first RUNNING (``ready``)."""

    def __init__(self, kernel: Kernel, t0: float, give_up_s: float = 120.0) -> None:
        super().__init__(daemon=True)
        self.kernel, self.t0, self.give_up_s = kernel, t0, give_up_s
        self.ready: dict[str, float] = {}

    def run(self) -> None:
        with self.kernel.client("bench-ready") as client:
            while time.monotonic() - self.t0 < self.give_up_s:
                try:
                    workers = client.request("kernel", StatusRequest(), StatusReply, timeout=1).body.workers
                    self.ready.setdefault("kernel (answers ctl.status)", time.monotonic() - self.t0)
                except BusError:
                    workers = []
                now = time.monotonic() - self.t0
                for w in workers:
                    if w["state"] == "RUNNING":
                        self.ready.setdefault(w["name"], now)
                # An on-demand worker stays IDLE until a request needs it: not waited for.
                if workers and all(w["name"] in self.ready or w["state"] == "IDLE" for w in workers):
                    return
                time.sleep(POLL_S)


def cold_start(kernel: Kernel) -> tuple[float, float, float, dict[str, float], dict[str, float]]:
    """One start: seconds from typing ``foldermind start`` until the command returned, a keyword answer, a
    semantic answer, each worker's first RUNNING, and the CPU seconds each process had used by then. The
    probes ask from the first moment (a client can ask before the command has returned: the command waits
    for the front door's URL to print it)."""
    t0 = time.monotonic()
    returned: list[float] = []

    def start() -> None:
        kernel.start(until_running=False)
        returned.append(time.monotonic() - t0)

    command = threading.Thread(target=start, daemon=True)
    command.start()
    ready = ReadyTimes(kernel, t0)
    ready.start()
    keyword_s = first_answer(kernel, "keyword", t0)
    semantic_s = first_answer(kernel, "hybrid", t0)
    command.join(120)
    ready.join(120)
    if not returned:
        raise BenchFailure("foldermind start did not return")
    kernel.wait_running()
    with kernel.client("bench-cpu") as client:
        cpu = {name: seconds for name, (_, seconds) in kernel.cpu_by_worker(client).items()}
    return returned[0], keyword_s, semantic_s, ready.ready, cpu


def ready_label(name: str) -> str:
    return name if name.startswith("kernel") else f"{name} RUNNING"


def wall(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        out.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise BenchFailure(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
    return out


def median_ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--home", default="")
    args = parser.parse_args()
    machine = facts(Path(__file__).resolve().parents[2])
    # No summaries: the llm would be writing them after every start, on the CPU the start is measured on.
    config = {"ingest": {"model_cache_dir": MODEL_CACHE}, "llm": {"analysis": False}}
    kernel = Kernel("coldstart", config, Path(args.home) if args.home else None)
    starts: list[tuple[float, float, float, dict[str, float], dict[str, float]]] = []
    try:
        corpus = kernel.root / f"scifact-{args.docs}"
        written = write_corpus(corpus, args.docs)
        kernel.start()
        index = index_corpus(kernel, corpus, written)
        say(f"{index.files} files, {index.chunks} chunks; the query model {index.encoder.get('backend')}")
        kernel.stop()
        for n in range(args.starts):
            starts.append(cold_start(kernel))
            start_s, kw, sem, ready, cpu = starts[-1]
            say(f"start {n + 1}: start {start_s:.2f} s, keyword {kw:.2f} s, semantic {sem:.2f} s; RUNNING {ready}")
            say(f"  CPU-s: {', '.join(f'{name} {seconds:.2f}' for name, seconds in cpu.items())}")
            kernel.stop()
        # The raw cost beside a worker's start: an interpreter importing its module, nothing else running.
        raw = {
            name: wall([sys.executable, "-c", f"import {spec.module}"], args.starts)
            for name, spec in PROCESS_MAP.items()
        }
        kernel.start()
        exe = str(Path(sys.executable).with_name("foldermind"))
        search = wall([exe, "--home", str(kernel.root), "search", QUERY, "--mode", "keyword"], args.searches)
        hybrid = wall([exe, "--home", str(kernel.root), "search", QUERY], args.searches)
        bare = wall([sys.executable, "-c", "pass"], args.searches)
        imports = wall([sys.executable, "-c", "import foldermind.kernel.cli"], args.searches)
        helped = wall([exe, "--help"], args.searches)
    finally:
        kernel.stop()
        kernel.cleanup()

    def row(label: str, xs: list[float]) -> str:
        return f"| {label} | {statistics.median(xs):.2f} s | {', '.join(f'{x:.2f}' for x in xs)} |"

    names = sorted({name for s in starts for name in s[3]}, key=lambda n: statistics.median(s[3][n] for s in starts))
    lines = [
        "## Cold start and a search from a terminal",
        "",
        f"Machine: {machine['CPU']}, {machine['cores']}; {machine['date (UTC)']} UTC; foldermind"
        f" {machine['foldermind']}; load average before the run {machine['load average before the run']}."
        f" `python -m tests.bench.coldstart --docs {args.docs}`: {args.docs} SciFact abstracts indexed, the model"
        " cache holding the checked ONNX export, the default process map.",
        "",
        "| from typing `foldermind start` | median | each start |",
        "|---|---:|---|",
        row("`start` returns (the kernel answers; the front door's URL shown)", [s[0] for s in starts]),
        row("first keyword search answered", [s[1] for s in starts]),
        row("first hybrid search answered semantically", [s[2] for s in starts]),
        *(row(ready_label(name), [s[3][name] for s in starts if name in s[3]]) for name in names),
        "",
        "CPU seconds each process had used once the hybrid search was answered and every worker RUNNING, median"
        f" of the starts (the tree's total {statistics.median(sum(s[4].values()) for s in starts):.1f} CPU-s on"
        f" {machine['cores'].split(',')[0]} cores):"
        + ";".join(f" {name} {statistics.median(s[4].get(name, 0.0) for s in starts):.2f}" for name in starts[0][4])
        + ".",
        "",
        f"The raw cost beside it: a bare interpreter importing a worker's module, median of {args.starts}:"
        + ";".join(f" {name} {statistics.median(xs):.2f} s" for name, xs in raw.items())
        + ".",
        "",
        f"A command from a terminal, wall time, median of {args.searches} (ms):",
        "",
        "| command | ms |",
        "|---|---:|",
        f"| `python -c pass` (the interpreter alone) | {median_ms(bare)} |",
        f"| `python -c 'import foldermind.kernel.cli'` | {median_ms(imports)} |",
        f"| `foldermind --help` | {median_ms(helped)} |",
        f"| `foldermind search ... --mode keyword` | {median_ms(search)} |",
        f"| `foldermind search ...` (hybrid) | {median_ms(hybrid)} |",
    ]
    print("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
