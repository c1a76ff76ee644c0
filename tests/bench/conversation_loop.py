"""What a chat turn's save holds the front door's event loop for (docs/reliability.md, "A conversation through
restarts"): ``python -m tests.bench.conversation_loop [ROUNDS] [DIR]``.

A store filled to its bound (as :mod:`tests.bench.conversations`) in DIR (a real disk; default a temporary
directory); each round keeps one turn both ways, in turn: inside the event loop (``Sessions.keep`` called there, as
``Chat._done`` did until s56) and on a thread (``asyncio.to_thread``, as it does now), beside a control that saves
nothing and lets the loop idle a millisecond. Two figures: the loop thread's own time in the save (the whole save, or
the hand-off to the thread), and how late a probe timer due at once and then every millisecond ran (what another
client of the process waits for; a loop that idles is also woken late by a busy machine: the control's row). Twice:
alone, and beside a second process writing the same file without pause (the console's Ask keeping turns of its
own). Milliseconds, median / p95 / max.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers.conversations import FILE, Conversations
from foldermind.workers.answers.engine import Session, Sessions
from tests.bench.conversations import turns

TICK_S = 0.001
WRITER = """
import sys, time
from foldermind.workers.answers.conversations import Conversations
from tests.bench.conversations import turns
kept = Conversations(__import__("pathlib").Path(sys.argv[1]), "console", 3600, 1000)
i = 0
while True:
    kept.save(f"console::{i % 50}", turns(i))
    i += 1
"""
"""The second writer: the console's store keeping turns of its own as fast as it can."""


async def worst_lateness(save: Callable[[], Awaitable[None]]) -> float:
    """The longest a probe due every :data:`TICK_S` waited for the loop while ``save`` ran (milliseconds)."""
    loop = asyncio.get_running_loop()
    worst, running = 0.0, True

    def probe(due: float) -> None:
        nonlocal worst
        now = loop.time()
        worst = max(worst, now - due)
        if running:
            loop.call_at(now + TICK_S, probe, now + TICK_S)

    loop.call_soon(probe, loop.time())
    await save()
    running = False
    await asyncio.sleep(2 * TICK_S)  # the probe due during the save's last moment runs (late, if it waited)
    return worst * 1000


async def rounds(sessions: Sessions, count: int) -> dict[str, list[tuple[float, float]]]:
    """Per round and way: (the probe's worst lateness, the loop thread's own time in the save), milliseconds."""
    loop = asyncio.get_running_loop()
    got: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for r in range(count):
        session = sessions.open(f"round-{r}")
        session.history[:] = turns(r)
        held = 0.0

        async def inline(s: Session = session) -> None:
            nonlocal held
            start = time.perf_counter()
            sessions.keep(s)
            held = time.perf_counter() - start

        async def threaded(s: Session = session) -> None:
            nonlocal held
            start = time.perf_counter()
            saved = loop.run_in_executor(None, sessions.keep, s)  # what asyncio.to_thread does, its hand-off timed
            held = time.perf_counter() - start
            await saved

        async def idle() -> None:
            nonlocal held
            held = 0.0
            await asyncio.sleep(TICK_S)

        ways = list(zip(WAYS, (inline, threaded, idle), strict=True))
        for way, save in ways[r % 3 :] + ways[: r % 3]:
            got[way].append((await worst_lateness(save), held * 1000))
    return got


WAYS = ("in the event loop (until s56)", "on a thread (now)", "no save: the loop idle 1 ms (control)")


def report(title: str, got: dict[str, list[tuple[float, float]]]) -> None:
    print(f"\n{title}\n| the save | probe lateness, median / p95 / max | loop thread in the save, median / p95 / max |")
    print("|---|---|---|")
    for way, rows in got.items():
        cells = []
        for ms in (sorted(late for late, _ in rows), sorted(held for _, held in rows)):
            cells.append(f"{statistics.median(ms):.2f} / {ms[int(len(ms) * 0.95)]:.2f} / {ms[-1]:.2f}")
        print(f"| {way} | {cells[0]} | {cells[1]} |")


def main(count: int, where: Path | None) -> None:
    policy = LlmPolicy()
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        path = Path(tmp) / FILE
        kept = Conversations(path, "mcp", policy.session_ttl_s, policy.max_sessions)
        for i in range(policy.max_sessions):
            kept.save(f"mcp::fill-{i}", turns(i))
        sessions = Sessions(policy.session_ttl_s, policy.max_sessions, kept=kept)
        report(f"alone ({count} rounds)", asyncio.run(rounds(sessions, count)))
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
        try:
            time.sleep(1.0)  # its interpreter started and writing
            report(f"beside a second writer ({count} rounds)", asyncio.run(rounds(sessions, count)))
        finally:
            writer.kill()
            writer.wait()
        kept.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, Path(sys.argv[2]) if len(sys.argv) > 2 else None)
