"""``make bench``: measure the bus and the idle process tree, print the report, write docs/benchmarks/README.md.

Run from the repository root: ``python -m tests.bench.run_all [--idle-seconds S] [--no-write]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback

from tests.bench import costs, idle, suites
from tests.bench.machine import facts, wait_for_quiet
from tests.bench.markdown import merged, section
from tests.bench.payloads import all_payloads
from tests.bench.report import Results, render
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks" / "README.md"
INGEST_REPORT = REPORT.parent / "ingest.md"
ONNX_REPORT = REPORT.parent / "onnx.md"
MCP_REPORT = REPORT.parent / "mcp.md"
TAIL_HEADINGS = ("## Ingestion", "## Search and MCP", "## Local model: chat and analysis")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def tail() -> str:
    """The end of docs/benchmarks/README.md: a link to the ingestion figures, and the Summary of the search and
    MCP figures (docs/benchmarks/mcp.md, written by ``python -m tests.bench.search``) with a link to them."""
    text = ""
    if INGEST_REPORT.exists():
        text += "\n## Ingestion\n\n"
        text += f"The ingestion figures (SciFact) are in [{INGEST_REPORT.name}]({INGEST_REPORT.name}).\n"
        if ONNX_REPORT.exists():
            text += (
                "The embedder's encode, ONNX Runtime against torch, and what a worker start costs:"
                f" [{ONNX_REPORT.name}]({ONNX_REPORT.name}) (`python -m tests.bench.onnx_embed`).\n"
            )
    summary = section(MCP_REPORT.read_text(encoding="utf-8"), "Summary") if MCP_REPORT.exists() else ""
    if summary:
        text += "\n## Search and MCP\n\n"
        text += "Retrieval quality, latency and throughput over MCP HTTP on SciFact: the Summary of\n"
        text += f"[{MCP_REPORT.name}]({MCP_REPORT.name}), written by `python -m tests.bench.search`; the full\n"
        text += "figures, the method and the machine's load are there.\n\n"
        text += summary + "\n"
    from tests.bench import ceiling_report, llm  # imported here: they import this module

    text += llm.overview_section()
    ceiling = ceiling_report.overview_body()
    return text + (f"\n## {ceiling_report.HEADING}\n\n{ceiling}" if ceiling else "")


def refresh_tail() -> None:
    """Rewrite the end of docs/benchmarks/README.md (from its first tail heading on) from the current files, so a
    search bench run after this one (``make bench``) shows in it without measuring the bus again. Sections the
    tail does not write (figures other benches or people put there) are kept (:func:`.markdown.merged`)."""
    if not REPORT.exists():
        return
    lines = REPORT.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next((i for i, line in enumerate(lines) if line.rstrip("\n") in TAIL_HEADINGS), len(lines))
    body = "".join(lines[:cut]).rstrip("\n") + "\n"
    REPORT.write_text(merged(REPORT, body + tail()), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run_all", description=__doc__)
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU window (default 20)")
    parser.add_argument("--settle-seconds", type=float, default=3.0, help="wait before the idle window")
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {REPORT}")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as `make` sets it: the workers never download a model

    t0 = time.monotonic()
    say("waiting for the machine to be quiet (under 10% CPU, at most 60 s)")
    load, waited = wait_for_quiet()
    machine = facts(REPO)
    machine["CPU in use when the run began"] = f"{load:.0f}% of all cores (after waiting {waited:.0f} s)"
    payloads = all_payloads()
    errors: list[str] = []

    say("1/3 round trips: bare echo, bare relay and the kernel, side by side")
    with contextlib.ExitStack() as stack:
        chains = [
            stack.enter_context(suites.bare_chain()),
            stack.enter_context(suites.relay_chain()),
            stack.enter_context(suites.brokered_chain()),
        ]
        say(f"  {chains[2].info}")
        bare, relay, brokered = suites.run(chains, payloads, say)
        wakeup = suites.wakeup_penalty(chains[0], payloads[0])
        if wakeup is not None:
            say(f"  bare echo pinned: {wakeup.same_cpu_us:.1f} us on one CPU, {wakeup.two_cpus_us:.1f} us on two")

    say("2/3 foldermind's Python work per message (in-process)")
    cost_rows = costs.measure(payloads[0])
    for c in cost_rows:
        say(f"  {c.us:7.1f} us  {c.what}")

    say(f"3/3 idle CPU of the default process tree ({args.idle_seconds:g} s)")
    idle_result = None
    try:
        idle_result = idle.measure(args.idle_seconds, args.settle_seconds, say)
        say(f"  whole tree: {idle_result.percent_of_core:.2f}% of one core")
    except Exception as exc:  # report what was measured even if the default tree cannot start
        traceback.print_exc()
        errors.append(f"idle measurement failed: {exc}")

    text = render(
        Results(
            machine=machine,
            bare=bare,
            relay=relay,
            brokered=brokered,
            costs=cost_rows,
            costs_payload=payloads[0].label,
            wakeup=wakeup,
            idle=idle_result,
            elapsed_s=time.monotonic() - t0,
            errors=errors,
        )
    )
    text += tail()
    print(text)
    if not args.no_write:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(merged(REPORT, text), encoding="utf-8")  # the sections it does not write kept
        say(f"wrote {REPORT.relative_to(REPO)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
