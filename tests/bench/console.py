"""The web console's costs (docs/benchmarks/console.md): the overview's first paint in Chromium and its HTTP time
against the bus requests it makes, a search page against the same search asked over the bus, a PDF page's image
against the parser's render alone, the Clients page and doctor's findings against the command line the kernel runs
for them, the console worker's RSS idle and after use, and the idle tree with and without it. Every figure is set
beside the raw cost of the same work in the same run, on this (shared) machine, with its load average.

Also the Ask page against the evidence request its answer makes, and the console's RSS after its first questions.

Usage: python -m tests.bench.console [--reps N] [--report PATH]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import psutil

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import (
    ConsoleLinkReply,
    ConsoleLinkRequest,
    EvidenceReply,
    IndexStatusReply,
    IndexStatusRequest,
    RenderReply,
    RenderRequest,
    SearchReply,
    SearchRequest,
    StatusReply,
    StatusRequest,
)
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers.engine import evidence_request
from tests.bench import machine
from tests.bench.kernels import BenchKernel
from tests.config import Config, merge
from tests.filemakers import make_pdf

REPO = Path(__file__).resolve().parents[2]
QUERIES = [
    "restart policy",
    "bearer token rotation",
    "chunk overlap tokens",
    "heartbeat liveness",
    "OCR confidence",
    "Smart Folder",
    "DNS rebinding",
    "embedding model",
    "parser memory cap",
    "how does the kernel restart a crashed worker",
]
"""Written before any run: words a user of these docs would type, short and long."""
QUESTIONS = [
    "How does the kernel restart a crashed worker?",
    "What does a one-time sign-in link of the console do?",
    "Which port does the MCP server listen on?",
    "What happens to a file outside the Smart Folders?",
]
"""Written before any run: questions a user of these docs would ask."""
CONFIG: Config = {"mcp": {"port": 0}, "console": {"port": 0}, "llm": {"answer_mode": "extractive"}}
"""Extractive answers: the Ask page is then the engine's own work beside its evidence request, no model call."""
MIB = 1024 * 1024


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def _get(url: str, cookie: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers={"Cookie": cookie})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _sign_in(bus: BusClient) -> tuple[str, str]:
    """The console's base URL and a session cookie, from a link redeemed as a browser would."""
    link = bus.request("console", ConsoleLinkRequest(), ConsoleLinkReply, timeout=10).body.link
    parts = urlsplit(link)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}")
        response = conn.getresponse()
        response.read()
        return link.split("signin", 1)[0], response.headers["set-cookie"].split(";", 1)[0]
    finally:
        conn.close()


def _row(name: str, values: list[float], unit: str = "ms") -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"| {name} | {statistics.median(values):.1f} {unit} | {p95:.1f} {unit} | {len(values)} |"


def _tree_idle(k: BenchKernel) -> tuple[int, int | None]:
    """The idle tree's RSS and the console's, once the machine has had a few seconds to settle."""
    machine.wait_for_quiet(20.0, 20.0)
    st = k.status()
    console = next((w["rss_bytes"] for w in st.workers if w["name"] == "console"), None)
    return st.kernel["tree_rss_bytes"], console


def run(reps: int) -> list[str]:
    facts = machine.facts(REPO)
    lines: list[str] = []
    with BenchKernel(merge(CONFIG, {"workers": {"console": {"enabled": False}}}), "no console") as bare:
        tree_without, _ = _tree_idle(bare)
    with BenchKernel(CONFIG, "console") as k:
        tree_with, console_idle = _tree_idle(k)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "foldermind.kernel.cli",
                "--home",
                str(k.root),
                "folders",
                "add",
                str(REPO / "docs"),
                "--wait",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert out.returncode == 0, out.stderr
        cli = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root)]
        criteria = [*cli, "folders", "add-criteria", "--name", "Markdown", "--types", "md"]
        out = subprocess.run(criteria, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        bus = BusClient(k.home.bus_endpoint, name="bench-console")
        conn_url, cookie = _sign_in(bus)
        asks = _asks(bus, conn_url, cookie, reps)
        console_asked = asks.pop("rss")[0]
        raw_overview, page_overview, raw_search, page_search, query_ms = [], [], [], [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            bus.request("kernel", StatusRequest(), StatusReply, timeout=30)
            bus.request("indexer", IndexStatusRequest(max_failures=200), IndexStatusReply, timeout=30)
            raw_overview.append(_ms(t0))
            t0 = time.perf_counter()
            assert _get(conn_url, cookie)[0] == 200
            page_overview.append(_ms(t0))
            for query in QUERIES:
                t0 = time.perf_counter()
                reply = bus.request("indexer", SearchRequest(query), SearchReply, timeout=30).body
                raw_search.append(_ms(t0))
                query_ms.append(reply.query_ms)
                t0 = time.perf_counter()
                assert _get(f"{conn_url}search?{urlencode({'q': query})}", cookie)[0] == 200
                page_search.append(_ms(t0))
        renders = _renders(k, bus, conn_url, cookie, reps)
        setup = _clients(k, conn_url, cookie, max(3, reps // 3))
        paint = _paint(
            link=bus.request("console", ConsoleLinkRequest(), ConsoleLinkReply, timeout=10).body.link, reps=reps
        )
        console_used = next(w["rss_bytes"] for w in k.status().workers if w["name"] == "console")
        bus.close()
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines += [
        "# Benchmarks: the web console",
        "",
        "Made by `python -m tests.bench.console` (tests/bench/console.py).",
        "",
    ]
    lines += [
        "| | |",
        "|---|---|",
        *(f"| {k_} | {v} |" for k_, v in facts.items()),
        f"| load average after | {load_after} |",
        "",
    ]
    lines += ["## Pages against the bus requests they make (same run, alternated)", ""]
    lines += ["| what | median | p95 | n |", "|---|---|---|---|"]
    lines += [
        _row("overview: its two bus requests (kernel status, index status), raw", raw_overview),
        _row("overview: GET / over HTTP, rendered", page_overview),
        _row("search: the indexer's own query time (query_ms)", query_ms),
        _row("search: search.request over the bus, raw", raw_search),
        _row("search: GET /search over HTTP, rendered (with marks; lists the path and criteria folders)", page_search),
        _row("ask: evidence.request over the bus, raw (extractive: the answer's one indexer request)", asks["raw"]),
        _row("ask: GET /ask over HTTP, rendered (the answer engine in the console)", asks["page"]),
        f"| ask: the console's first GET /ask | {asks['first'][0]:.1f} ms | | 1 |",
    ]
    if paint:
        lines += [
            _row("overview in Chromium: response end", [p["responseEnd"] for p in paint]),
            _row(
                "overview in Chromium: first contentful paint",
                [p["firstContentfulPaint"] for p in paint if p["firstContentfulPaint"]],
            ),
        ]
    else:
        lines += ["", "(No Chromium or playwright-core here: the browser's first paint was not measured.)"]
    overhead = [p - r for p, r in zip(page_search, raw_search, strict=True)]
    lines += [
        "",
        f"A search page costs {statistics.median(overhead):.1f} ms (median; p95 "
        f"{sorted(overhead)[int(0.95 * len(overhead))]:.1f}) more than the same search over the bus.",
        "",
    ]
    lines += ["## A PDF page in the preview (each page of a fresh PDF, parser already started)", ""]
    lines += ["| what | median | p95 | n |", "|---|---|---|---|"]
    lines += [
        _row("parse.render.request over the bus, raw (the parser's render, no cache)", renders["raw"]),
        _row("GET /page, first time (the indexer's read of the passage, then the render)", renders["first"]),
        _row("GET /page, again (the console's cache)", renders["cached"]),
        f"| the run's first GET /page (page 1; the parser may still run from indexing the PDF)"
        f" | {renders['cold'][0]:.1f} ms | | 1 |",
    ]
    lines += [""]
    lines += [
        "## The Clients page against the command it runs (same run, alternated)",
        "",
        "The kernel runs the command line for these pages (kernel/errands.py): the raw cost is that same command run",
        "directly, as a new process like the kernel's child.",
        "",
        "| what | median | p95 | n |",
        "|---|---|---|---|",
        _row("`foldermind config snippet --json`, run directly", setup["snippet"]),
        _row("GET /clients (the kernel runs the same command)", setup["clients"]),
        _row("`foldermind doctor --json`, run directly", setup["doctor"]),
        _row("GET /clients/doctor (loaded into the Clients page by its script)", setup["doctor_page"]),
        "",
    ]
    fcp = [p["firstContentfulPaint"] for p in paint if p["firstContentfulPaint"]]
    targets = [
        ("first paint of the overview <= 300 ms (median FCP)", statistics.median(fcp) <= 300 if fcp else None),
        ("search page <= its search time + 50 ms (median)", statistics.median(overhead) <= 50),
        ("a PDF page rendered <= 500 ms first (median)", statistics.median(renders["first"]) <= 500),
        ("a PDF page <= 50 ms cached (median)", statistics.median(renders["cached"]) <= 50),
        ("console RSS <= 80 MiB idle", console_idle is not None and console_idle <= 80 * MIB),
        ("idle tree grows by <= 80 MiB", tree_with - tree_without <= 80 * MIB),
    ]
    lines += ["## Targets (issue 39)", "", "| target | here |", "|---|---|"]
    lines += [f"| {name} | {'not measured' if ok is None else 'PASS' if ok else 'MISS'} |" for name, ok in targets]
    lines += [""]
    lines += ["## Memory", "", "| what | RSS |", "|---|---|"]
    lines += [
        f"| console worker, idle after start | {console_idle / MIB if console_idle else float('nan'):.1f} MiB |",
        f"| console worker, after its first questions | {console_asked / MIB:.1f} MiB |",
        f"| console worker, after the runs above | {console_used / MIB if console_used else float('nan'):.1f} MiB |",
        f"| idle tree, default map without the console | {tree_without / MIB:.1f} MiB |",
        f"| idle tree, default map with it | {tree_with / MIB:.1f} MiB ({(tree_with - tree_without) / MIB:+.1f}) |",
        "",
        "Two kernels one after the other, each idle with no folder; the difference also holds whatever else moved",
        "between the two samples (the machine is shared).",
    ]
    return lines


def _asks(bus: BusClient, base: str, cookie: str, reps: int) -> dict[str, list[float]]:
    """Each question over the bus as the engine asks it (extractive: its one request), then through the console's
    Ask page; the console's RSS once it has answered."""
    times: dict[str, list[float]] = {"raw": [], "page": [], "first": [], "rss": []}
    policy = LlmPolicy()
    t0 = time.perf_counter()
    assert _get(f"{base}ask?{urlencode({'q': QUESTIONS[0]})}", cookie)[0] == 200
    times["first"].append(_ms(t0))
    for _ in range(max(1, reps // len(QUESTIONS))):
        for question in QUESTIONS:
            ask = evidence_request(policy, question, "", 5)
            t0 = time.perf_counter()
            bus.request("indexer", ask, EvidenceReply, timeout=60)
            times["raw"].append(_ms(t0))
            t0 = time.perf_counter()
            assert _get(f"{base}ask?{urlencode({'q': question})}", cookie)[0] == 200
            times["page"].append(_ms(t0))
    status = bus.request("kernel", StatusRequest(), StatusReply, timeout=30).body
    times["rss"].append(float(next(w["rss_bytes"] or 0 for w in status.workers if w["name"] == "console")))
    return times


def _renders(k: BenchKernel, bus: BusClient, base: str, cookie: str, reps: int) -> dict[str, list[float]]:
    """Render each page of a fresh PDF over the bus, then through the console twice (first, cached)."""
    folder = k.root / "pdfs"
    folder.mkdir()
    pdf = make_pdf(
        folder / "pages.pdf", [[f"Page {n} holds the passage number {n} of this report."] for n in range(reps + 2)]
    )
    out = subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root), "folders", "add", str(folder), "--wait"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    times: dict[str, list[float]] = {"raw": [], "first": [], "cached": [], "cold": []}
    t0 = time.perf_counter()
    assert _get(f"{base}page?{urlencode({'path': str(pdf), 'page': 1})}", cookie)[0] == 200
    times["cold"].append(_ms(t0))
    for n in range(2, reps + 2):
        passage = [f"Page {n} holds the passage number {n} of this report."]
        t0 = time.perf_counter()
        bus.request("parser", RenderRequest(str(pdf), n, 2_000_000, passage), RenderReply, timeout=60)
        times["raw"].append(_ms(t0))
        url = f"{base}page?{urlencode({'path': str(pdf), 'page': n, 'ls': n, 'le': n})}"
        for key in ("first", "cached"):
            t0 = time.perf_counter()
            assert _get(url, cookie)[0] == 200
            times[key].append(_ms(t0))
    return times


def _clients(k: BenchKernel, base: str, cookie: str, reps: int) -> dict[str, list[float]]:
    """The Clients page and doctor's page, each beside the command the kernel runs for it, alternated."""
    cli = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root)]
    times: dict[str, list[float]] = {"snippet": [], "clients": [], "doctor": [], "doctor_page": []}
    for _ in range(reps):
        for raw, page, args, path in (
            ("snippet", "clients", ["config", "snippet", "--json"], "clients"),
            ("doctor", "doctor_page", ["doctor", "--json"], "clients/doctor"),
        ):
            t0 = time.perf_counter()
            subprocess.run([*cli, *args], capture_output=True, timeout=300)
            times[raw].append(_ms(t0))
            t0 = time.perf_counter()
            assert _get(base + path, cookie)[0] == 200
            times[page].append(_ms(t0))
    return times


def _paint(link: str, reps: int) -> list[dict[str, float]]:
    prefix = REPO / ".cache" / "playwright"
    if not (Path("/usr/bin/chromium").exists() and (prefix / "node_modules" / "playwright-core").exists()):
        return []
    script = prefix / "console_paint.mjs"
    shutil.copyfile(Path(__file__).with_name("console_paint.mjs"), script)
    out = subprocess.run(["node", str(script), link, str(reps)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result: list[dict[str, float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "benchmarks" / "console.md")
    args = parser.parse_args()
    psutil.cpu_percent()
    args.report.write_text("\n".join(run(args.reps)) + "\n", encoding="utf-8")
    print(args.report.read_text())


if __name__ == "__main__":
    main()
