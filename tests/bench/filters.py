"""Search latency with filters on and off, over MCP HTTP at SciFact size.

``python -m tests.bench.filters --home DIR [--docs N] [--queries N] [--no-write]`` from the repository root.
A real kernel (default process map, the front door on an OS-assigned port) indexes the first N SciFact
abstracts (:mod:`tests.bench.scifact`; ``--home`` keeps the index for the next run). Before indexing, each
file's modification time is set from its position in the corpus, spread evenly over 2020-2025, so a date
window admits a known share of the documents. Then one MCP session asks every query with each filter in turn
(hybrid, top 10; the filters interleaved query by query so a burst of load elsewhere falls on all alike):

- ``off``: no filter;
- ``file_types: [txt]``: every document (the filter admits all, so it costs only its resolution);
- ``path_glob: *3.txt``: the abstracts whose id ends in 3 (~a tenth, spread over the corpus);
- ``modified_after: 2024-07-01``: the last quarter of the corpus by position;
- ``window 2024-07-01 .. 2025-07-01``: a year of it, with no glob (applied by Tantivy's fields alone);
- ``path_glob + window``: both (a few per cent).

Each filter's first query is timed apart: it resolves the filter in SQLite and reads its vectors (the next
queries reuse both until the index changes). The section "Filters" of ``docs/benchmarks/mcp.md`` is replaced
with the report unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
from pathlib import Path
from typing import Any

from tests.bench import machine
from tests.bench.kernels import say
from tests.bench.markdown import ms, table
from tests.bench.mcpclient import BlockingClient, front_door, kernel_config
from tests.bench.scifact import SCIFACT_DOCS, indexed_kernel, scifact_queries, write_corpus
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks" / "mcp.md"
HEADING = "## 6. Filters over MCP HTTP (hybrid, top 10)"
START = dt.datetime(2020, 1, 1, tzinfo=dt.UTC).timestamp()
SPAN_S = 6 * 365 * 86400
FILTERS: dict[str, dict[str, Any]] = {
    "off": {},
    "file_types: [txt]": {"file_types": ["txt"]},
    "path_glob: *3.txt": {"path_glob": "*3.txt"},
    "modified_after: 2024-07-01": {"modified_after": "2024-07-01"},
    "window 2024-07-01 .. 2025-07-01": {"modified_after": "2024-07-01", "modified_before": "2025-07-01"},
    "path_glob + window": {"path_glob": "*3.txt", "modified_after": "2024-07-01", "modified_before": "2025-07-01"},
}


def date_files(corpus: Path) -> list[tuple[Path, float]]:
    """Give every file its mtime by position (idempotent: a kept index stays valid)."""
    paths = sorted(corpus.glob("*.txt"))
    out = []
    for i, path in enumerate(paths):
        when = START + SPAN_S * i / max(len(paths), 1)
        if abs(path.stat().st_mtime - when) > 1e-3:
            os.utime(path, (when, when))
        out.append((path, when))
    return out


def admitted(files: list[tuple[Path, float]], spec: dict[str, Any]) -> int:
    """How many documents a filter admits, counted from the files themselves."""
    after = _epoch(spec.get("modified_after"))
    before = _epoch(spec.get("modified_before"))
    n = 0
    for path, when in files:
        if spec.get("path_glob") == "*3.txt" and not path.name.endswith("3.txt"):
            continue
        if (after is not None and when < after) or (before is not None and when >= before):
            continue
        n += 1
    return n


def _epoch(day: str | None) -> float | None:
    return None if day is None else dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="kept: the next run reuses its index")
    ap.add_argument("--docs", type=int, default=SCIFACT_DOCS)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    facts = machine.facts(REPO)
    # Dated before the kernel starts, so the index sees the dates at once (and a kept one stays valid).
    write_corpus(args.home / f"scifact-{args.docs}", args.docs)
    files = date_files(args.home / f"scifact-{args.docs}")
    queries = scifact_queries()[: args.queries]
    end_to_end: dict[str, list[float]] = {name: [] for name in FILTERS}
    inside: dict[str, list[float]] = {name: [] for name in FILTERS}
    first: dict[str, float] = {}
    hits: dict[str, list[int]] = {name: [] for name in FILTERS}
    with indexed_kernel(args.home, args.docs, kernel_config()) as (kernel, index):
        url, token = front_door(kernel.root)
        with BlockingClient(url, token) as client:
            for q in queries[:10]:  # warm the model and the caches of the unfiltered path
                client.search(q, "hybrid", 10)
            for name, spec in FILTERS.items():
                t0 = time.perf_counter()
                client.search(queries[0], "hybrid", 10, spec)
                first[name] = (time.perf_counter() - t0) * 1000
            load_before = os.getloadavg()
            for i, q in enumerate(queries):
                order = list(FILTERS.items()) if i % 2 == 0 else list(FILTERS.items())[::-1]
                for name, spec in order:
                    t0 = time.perf_counter()
                    body = client.search(q, "hybrid", 10, spec)
                    end_to_end[name].append((time.perf_counter() - t0) * 1000)
                    inside[name].append(float(body["query_ms"]))
                    hits[name].append(len(body["results"]))
                if (i + 1) % 100 == 0:
                    say(f"  {i + 1}/{len(queries)} queries")
            load_after = os.getloadavg()
    rows = []
    for name, spec in FILTERS.items():
        e, n = end_to_end[name], inside[name]
        rows.append(
            [
                name,
                f"{admitted(files, spec):,}",
                ms(statistics.median(e)),
                ms(pct(e, 0.95)),
                ms(statistics.median(n)),
                ms(pct(n, 0.95)),
                ms(first[name]),
                f"{statistics.mean(hits[name]):.1f}",
            ]
        )
    lines = [
        HEADING,
        "",
        f"`python -m tests.bench.filters` ({facts['date (UTC)']} UTC, foldermind {facts['foldermind']}): "
        f"{index.files:,} SciFact abstracts, {index.chunks:,} chunks; {len(queries)} queries, each asked with every "
        f"filter in turn in one MCP session (hybrid, top 10). Load average (1, 5, 15 min) {_load(load_before)} "
        f"before the rounds, {_load(load_after)} after, on {facts['cores']}.",
        "",
        *table(
            [
                "filter",
                "documents admitted",
                "median ms (HTTP)",
                "p95 ms (HTTP)",
                "median ms (indexer)",
                "p95 ms (indexer)",
                "first query ms",
                "results (mean)",
            ],
            rows,
            "lrrrrrrr",
        ),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if not args.no_write:
        text = REPORT.read_text("utf-8")
        if HEADING in text:
            head, _, rest = text.partition(HEADING)
            tail = rest[rest.find("\n## ") :] if "\n## " in rest else ""
            text = head + report + tail.lstrip("\n")
        else:
            text = text.rstrip("\n") + "\n\n" + report
        REPORT.write_text(text, "utf-8")
    return 0


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.1f}" for x in avg)


if __name__ == "__main__":
    raise SystemExit(main())
