"""What keeping a conversation's turns in SQLite costs a chat turn (docs/reliability.md, "A conversation through
restarts"): ``python -m tests.bench.conversations [ROUNDS]``.

A store filled to its bound (``[llm] max_sessions`` conversations of :data:`.engine.HISTORY_TURNS` turns, each turn
a question and an answer of typical length) takes rounds of one turn kept (:meth:`Sessions.keep`: the upsert and the
two prunes in one transaction) and one conversation read back (what a new process does on a conversation's first
follow-up), beside the same turn kept in memory only (the raw cost of the bookkeeping every turn already does), in
turn in the same run. Thread CPU time and wall time, medians and p95, in microseconds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from foldermind.protocol.messages import ChatTurn
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers.conversations import FILE, Conversations
from foldermind.workers.answers.engine import HISTORY_TURNS, Sessions

QUESTION = "What does the --inactive option of chage set, and what happens after the password expires? " * 2
ANSWER = (
    "chage(1): \u201cThe INACTIVE option is the number of days of inactivity after a password expired.\u201d [1] " * 5
)


def turns(i: int) -> list[ChatTurn]:
    return [{"question": f"{i} {QUESTION}", "answer": ANSWER} for _ in range(HISTORY_TURNS)]


def timed(fn: object) -> tuple[float, float]:
    assert callable(fn)
    cpu, wall = time.thread_time(), time.perf_counter()
    fn()
    return (time.thread_time() - cpu) * 1e6, (time.perf_counter() - wall) * 1e6


def main(rounds: int) -> None:
    policy = LlmPolicy()
    with tempfile.TemporaryDirectory() as tmp:
        kept = Conversations(Path(tmp) / FILE, "mcp", policy.session_ttl_s, policy.max_sessions)
        stored = Sessions(policy.session_ttl_s, policy.max_sessions, kept=kept)
        memory = Sessions(policy.session_ttl_s, policy.max_sessions)
        for i in range(policy.max_sessions):
            kept.save(f"mcp::fill-{i}", turns(i))
        got: dict[str, list[tuple[float, float]]] = {"keep, SQLite": [], "keep, memory only": [], "read back": []}
        for r in range(rounds):
            for name, sessions in (("keep, SQLite", stored), ("keep, memory only", memory)):
                s = sessions.open(f"round-{r}")
                s.history[:] = turns(r)
                got[name].append(timed(lambda sessions=sessions, s=s: sessions.keep(s)))
            got["read back"].append(timed(lambda r=r: kept.load(f"mcp::round-{r}")))
        size = (Path(tmp) / FILE).stat().st_size + (Path(tmp) / f"{FILE}-wal").stat().st_size
    print(f"{policy.max_sessions} conversations of {HISTORY_TURNS} turns; file + WAL {size / 1048576:.1f} MiB")
    print("| step | CPU median / p95 (us) | wall median / p95 (us) |\n|---|---|---|")
    for name, rows in got.items():
        cpu, wall = sorted(c for c, _ in rows), sorted(w for _, w in rows)
        p95 = int(len(rows) * 0.95)
        cpu_us = f"{statistics.median(cpu):.0f} / {cpu[p95]:.0f}"
        print(f"| {name} | {cpu_us} | {statistics.median(wall):.0f} / {wall[p95]:.0f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
