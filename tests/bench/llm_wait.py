"""How long a question in the model's band waits behind a background summary (``llm.analyze``), paired against the
model's reading alone (``llm.likely``) in the same run.

A real kernel indexes two manual pages and pytest 2.0.0's release notes (as tests/test_answer_likely.py); analysis is
off, so the bench sends the summaries itself, as the indexer's enricher would (one ``llm.analyze`` of a document's
first 4,000 characters). Each round, in turn: the reading alone over the bus; the question alone over MCP
(extractive, in the band: the model reads it); a summary alone; then a summary with the same question asked as soon
as the llm worker says it is summarising. ``likely_wait_s`` is long, so a reading behind a summary is waited for
(the product's 20 s would skip it and answer from the evidence alone).

    python -m tests.bench.llm_wait [--rounds 4] [--out docs/benchmarks/llm-wait.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from foldermind.protocol.messages import (
    AnalyzeReply,
    AnalyzeRequest,
    DescribeReply,
    DescribeRequest,
    LikelyReply,
    LikelyRequest,
)
from foldermind.workers.answers.quotes import evidence_text
from tests.bench import machine
from tests.bench.markdown import table
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, short_tmpdir, wait_for
from tests.test_answer_likely import folder  # the test's folder: the same three documents
from tests.test_answers import chat, kernel_with_folder

TESTS = Path(__file__).resolve().parent.parent
QUESTION = "Which command changes a user's password?"
SUMMARISED = TESTS / "manpages" / "chage.txt"


def ask(url: str, token: str) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    out = chat(url, token, {"query": QUESTION, "answer_mode": "extractive"})
    return time.monotonic() - started, out


def round_(k: Any, url: str, token: str, quotes: str, text: str) -> dict[str, Any]:
    client = k.client("llm-wait-bench")
    row: dict[str, Any] = {}
    started = time.monotonic()
    got = client.request("llm", LikelyRequest(QUESTION, quotes), LikelyReply, timeout=600).body
    row["reading"], row["reading_worker"] = time.monotonic() - started, got.seconds
    row["alone"], out = ask(url, token)
    row["alone_floor"] = out["floor"]
    started = time.monotonic()
    client.request("llm", AnalyzeRequest("chage.txt", text, 1, 1), AnalyzeReply, timeout=600)
    row["summary"] = time.monotonic() - started
    started = time.monotonic()
    env = client.send("llm", AnalyzeRequest("chage.txt", text, 1, 1), timeout=600)
    answered: list[tuple[float, Any]] = []  # when the summary's reply came, and the reply (this thread's socket)

    def wait() -> None:
        packet = client.receive(600)
        answered.append((time.monotonic(), packet))

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for(lambda: "summarising" in str(k.worker("llm").get("note") or ""), 60, 0.05, what="a summary running")
    row["behind"], out = ask(url, token)
    row["behind_floor"] = out["floor"]
    row["summary_done_first"] = bool(answered)
    waiter.join(600)
    at, packet = answered[0]
    assert packet.env.cid == env.id and packet.env.status == "ok", packet.env
    row["summary_with_question"] = at - started
    described = client.request("llm", DescribeRequest(), DescribeReply, timeout=60).body
    row["asides"] = described.details.get("asides", "-")
    client.close()
    return row


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path, default=TESTS.parent / "docs" / "benchmarks" / "llm-wait.md")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        {"mcp": {"port": 0, "rate_per_minute": 6000}},
        {"llm": {"analysis": False, "load": "at_start", "likely_wait_s": 600}},
    )
    before = os.getloadavg()
    facts = machine.facts(TESTS.parent)
    rows: list[dict[str, Any]] = []
    with kernel_with_folder(short_tmpdir(), config, "ready", 300, folder) as (k, _docs, url, token):
        _, out = ask(url, token)  # warm-up; its quotes are the text the reading reads
        quotes = evidence_text(out["answer"])
        text = SUMMARISED.read_text(encoding="utf-8")[:4000]
        for n in range(args.rounds):
            rows.append(round_(k, url, token, quotes, text))
            print(n + 1, rows[-1], flush=True)
    after = os.getloadavg()
    head = ["round", "reading alone (bus)", "question alone", "summary alone", "question behind a summary",
            "summary with the question", "summary done first", "floors (alone / behind)", "asides"]  # fmt: skip
    body = [
        [
            str(i + 1),
            f"{r['reading']:.2f} s",
            f"{r['alone']:.2f} s",
            f"{r['summary']:.2f} s",
            f"{r['behind']:.2f} s",
            f"{r['summary_with_question']:.2f} s",
            "yes" if r["summary_done_first"] else "no",
            f"{r['alone_floor']} / {r['behind_floor']}",
            str(r["asides"]),
        ]
        for i, r in enumerate(rows)
    ]
    alone, behind = median(rows, "alone"), median(rows, "behind")
    first = sum(r["summary_done_first"] for r in rows)
    summary = (
        f"median: reading alone {median(rows, 'reading'):.2f} s; question alone {alone:.2f} s, behind a summary "
        f"{behind:.2f} s (added wait {behind - alone:.2f} s); summary alone {median(rows, 'summary'):.2f} s, with "
        f"the question {median(rows, 'summary_with_question'):.2f} s; the summary was done before the answer in "
        f"{first}/{len(rows)}"
    )
    lines = [
        f"## {args.label or 'run'} ({facts.get('date (UTC)', '')})",
        "",
        summary,
        "",
        *table(head, body),
        "",
        *machine.facts_table(facts, before, after),
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    old = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    args.out.write_text(old + "\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
