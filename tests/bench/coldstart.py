"""Cold start: from ``foldermind start`` to the first keyword answer and to semantic search, and a
``foldermind search`` from a terminal, each beside the raw cost of the same step in the same run.

    python -m tests.bench.coldstart [--docs 500] [--starts 3] [--searches 10] [--home DIR]

A home indexes the first ``--docs`` SciFact abstracts once (the model cache is shared, so the checked ONNX
export is there, as on any machine after the first start), then the tree is stopped and started
``--starts`` times: after each ``foldermind start`` returns, a keyword search is asked every 20 ms until one
is answered with results, then a hybrid search until it is answered semantically (``mode_used`` hybrid,
no degradation note). Beside it: the time ``foldermind start`` itself took. Then ``foldermind search`` runs
``--searches`` times as a terminal would, beside a bare ``python -c pass`` and ``python -c "import
foldermind.kernel.cli"`` (interpreter start and the command line's imports, the floor of any command).
Prints a markdown section for docs/benchmarks-ingest.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import SearchReply, SearchRequest
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.machine import facts
from tests.bench.scifact import index_corpus, write_corpus
from tests.helpers import MODEL_CACHE

QUERY = "vitamin D deficiency and bone fractures"
POLL_S = 0.02


def first_answer(kernel: Kernel, mode: str, give_up_s: float = 120.0) -> float:
    """Seconds until a ``mode`` search is answered with results (hybrid: answered semantically)."""
    t0 = time.monotonic()
    with kernel.client("bench-cold") as client:
        while time.monotonic() - t0 < give_up_s:
            try:
                reply = client.request("indexer", SearchRequest(QUERY, mode, 5), SearchReply, timeout=5).body
                if reply.results and (mode == "keyword" or (reply.mode_used == "hybrid" and not reply.note)):
                    return time.monotonic() - t0
            except BusError:
                pass
            time.sleep(POLL_S)
    raise BenchFailure(f"no {mode} answer within {give_up_s:g} s")


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
    config = f'[ingest]\nmodel_cache_dir = "{MODEL_CACHE}"\n[llm]\nanalysis = false\n'
    kernel = Kernel("coldstart", config, Path(args.home) if args.home else None)
    starts: list[tuple[float, float, float]] = []
    try:
        corpus = kernel.root / f"scifact-{args.docs}"
        written = write_corpus(corpus, args.docs)
        kernel.start()
        index = index_corpus(kernel, corpus, written)
        say(f"{index.files} files, {index.chunks} chunks; the query model {index.encoder.get('backend')}")
        kernel.stop()
        for n in range(args.starts):
            t0 = time.monotonic()
            kernel.start()
            start_s = time.monotonic() - t0
            keyword_s = first_answer(kernel, "keyword")
            semantic_s = keyword_s + first_answer(kernel, "hybrid")
            starts.append((start_s, start_s + keyword_s, start_s + semantic_s))
            kw, sem = start_s + keyword_s, start_s + semantic_s
            say(f"start {n + 1}: start {start_s:.2f} s, keyword {kw:.2f} s, semantic {sem:.2f} s")
            if n + 1 < args.starts:
                kernel.stop()
        exe = str(Path(sys.executable).with_name("foldermind"))
        search = wall([exe, "--home", str(kernel.root), "search", QUERY, "--mode", "keyword"], args.searches)
        hybrid = wall([exe, "--home", str(kernel.root), "search", QUERY], args.searches)
        bare = wall([sys.executable, "-c", "pass"], args.searches)
        imports = wall([sys.executable, "-c", "import foldermind.kernel.cli"], args.searches)
        helped = wall([exe, "--help"], args.searches)
    finally:
        kernel.stop()
        kernel.cleanup()
    lines = [
        "## Cold start and a search from a terminal",
        "",
        f"Machine: {machine['CPU']}, {machine['cores']}; {machine['date (UTC)']} UTC; foldermind"
        f" {machine['foldermind']}; load average before the run {machine['load average before the run']}."
        f" `python -m tests.bench.coldstart --docs {args.docs}`: {args.docs} SciFact abstracts indexed, the model"
        " cache holding the checked ONNX export.",
        "",
        "| from `foldermind start` | median | each |",
        "|---|---:|---|",
        f"| `start` returns (every worker RUNNING) | {statistics.median(s[0] for s in starts):.2f} s"
        f" | {', '.join(f'{s[0]:.2f}' for s in starts)} |",
        f"| first keyword search answered | {statistics.median(s[1] for s in starts):.2f} s"
        f" | {', '.join(f'{s[1]:.2f}' for s in starts)} |",
        f"| first hybrid search answered semantically | {statistics.median(s[2] for s in starts):.2f} s"
        f" | {', '.join(f'{s[2]:.2f}' for s in starts)} |",
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
