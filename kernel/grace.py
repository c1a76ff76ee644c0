"""A stopping worker's grace: wall time for a worker that waits, CPU time for one that works (slow is not hung).

SIGTERM asks a worker to stop and it gets ``stop_grace_s`` to exit. When the grace runs out, a worker with a thread on
a CPU or queued for one (state R), or whose threads were so at least half of the last period (Linux's per-thread
``schedstat``, whose queued time shows only once a thread runs again), is working on a busy machine: it gets the grace
again, until it has used ``stop_grace_s`` CPU-seconds since the stop, what one thread would have had in the grace on
an idle machine. A worker asleep (hung
in a call, waiting on a lock or a socket) is killed when the grace runs out, as one that spins on past its CPU
time is. Where the counts cannot be read (another OS, a process gone) the grace is wall time alone.
Measured: docs/architecture.md#stopping.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

BUSY_SHARE = 0.5
"""The share of a period a worker's threads (summed) ran or waited for a CPU, from which it counts as working."""


def cpu_wanted(pid: int) -> tuple[dict[int, int], bool] | None:
    """Nanoseconds each thread of ``pid`` has run plus waited on a run queue, and whether one is runnable now (None
    if unreadable)."""
    counts: dict[int, int] = {}
    runnable = False
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            ran, waited = task.joinpath("schedstat").read_text().split()[:2]
            counts[int(task.name)] = int(ran) + int(waited)
            stat = task.joinpath("stat").read_text()
            runnable = runnable or stat[stat.rindex(")") + 2] == "R"
    return (counts, runnable) if counts else None


def cpu_used(pid: int) -> float | None:
    """CPU-seconds ``pid`` has used, ended threads included (None if unreadable)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


class Grace:
    """One stop of one process: when its grace runs out, and whether it has earned another."""

    def __init__(self, pid: int, seconds: float, now: float) -> None:
        self.pid, self.seconds = pid, seconds
        self.due = now + seconds
        self.cpu_at_stop = cpu_used(pid)
        self.mark, self.wanted = now, cpu_wanted(pid)
        self.extended = 0
        """How many times the grace was given again."""
        self.spent = False
        """Whether it was let go on because it used its CPU time, not because it stopped working."""

    def extend(self, now: float) -> bool:
        """At :attr:`due`: True, with the next due set, if the process worked through the last period and has CPU
        time left."""
        wanted, used = cpu_wanted(self.pid), cpu_used(self.pid)
        before, self.wanted = self.wanted, wanted
        period, self.mark = max(now - self.mark, 1e-3), now
        if wanted is None or before is None or used is None or self.cpu_at_stop is None:
            return False
        (now_counts, runnable), (then, _) = wanted, before
        busy = sum(max(0, n - then.get(tid, 0)) for tid, n in now_counts.items()) / 1e9
        if not runnable and busy < BUSY_SHARE * period:
            return False
        if used - self.cpu_at_stop >= self.seconds:
            self.spent = True
            return False
        self.due, self.extended = now + self.seconds, self.extended + 1
        return True

    def used(self) -> float:
        """CPU-seconds used since the stop (0 if unreadable)."""
        used = cpu_used(self.pid)
        return 0.0 if used is None or self.cpu_at_stop is None else used - self.cpu_at_stop
