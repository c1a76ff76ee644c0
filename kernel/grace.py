"""A stopping worker's grace: wall time for a worker that waits, CPU time for one that works (slow is not hung).

SIGTERM asks a worker to stop and it gets ``stop_grace_s`` to exit. Meanwhile the kernel looks at its threads ten
times per grace: a worker with a thread on a CPU or queued for one (Linux's state R) in at least half of the looks is
working, slowly on a busy machine, and gets the grace again, until it has used ``stop_grace_s`` CPU-seconds since the
stop (what one thread would have had in the grace on an idle machine). A worker asleep (hung in a call, waiting on a
lock or a socket) is killed when the grace runs out, as one that computes on past its CPU time is. Where threads
cannot be read (another OS, a process gone) the grace is wall time alone. Measured: docs/architecture.md#stopping.
A starting worker's ``start_timeout_s`` is counted the same way: importing a model at load 40 is slow, not hung.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

LOOKS = 10
"""Looks at a stopping worker's threads per grace."""


def runnable(pid: int) -> bool | None:
    """Whether a thread of ``pid`` is on a CPU or queued for one (None if its threads cannot be read)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):  # a thread that ended meanwhile
            stat = task.joinpath("stat").read_text()
            if stat[stat.rindex(")") + 2 :].startswith("R"):
                return True
    return False


def cpu_used(pid: int) -> float | None:
    """CPU-seconds ``pid`` has used, ended threads included (None if unreadable)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


class Grace:
    """One stop of one process: when to look at it next, and whether it has earned more time."""

    def __init__(self, pid: int, seconds: float, now: float) -> None:
        self.pid, self.seconds = pid, seconds
        self.end = now + seconds
        self.cpu_at_stop = cpu_used(pid)
        self.looks = self.working = 0
        self.extended = 0
        """How many times the grace was given again."""
        self.spent = False
        """Whether it was working still when its CPU time ran out."""

    @property
    def due(self) -> float:
        """When :meth:`step` wants to run next: the next look, or the grace's end."""
        return min(self.end, self.end - self.seconds + (self.looks + 1) * self.seconds / LOOKS)

    def step(self, now: float) -> bool:
        """At :attr:`due`: look at the threads; False once the grace ran out and the worker is not working (or has
        used its CPU time), so it is to be killed."""
        seen = runnable(self.pid)
        self.looks += 1
        self.working += bool(seen)
        if now < self.end:
            return True
        working = seen is not None and 2 * self.working >= self.looks
        used = cpu_used(self.pid)
        if not working or used is None or self.cpu_at_stop is None:
            return False
        if used - self.cpu_at_stop >= self.seconds:
            self.spent = True
            return False
        self.end, self.looks, self.working = now + self.seconds, 0, 0
        self.extended += 1
        return True

    def used(self) -> float:
        """CPU-seconds used since the stop (0 if unreadable)."""
        used = cpu_used(self.pid)
        return 0.0 if used is None or self.cpu_at_stop is None else used - self.cpu_at_stop
