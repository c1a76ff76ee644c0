"""CPU hogs for a bench run "beside N busy processes": N Python processes spinning a busy loop, started and
ended by the bench (:func:`running`), each ending by itself once the bench's process is gone.

What they took is measured, not assumed: :class:`Hogs` reports each one's CPU seconds over the wall clock it
ran, so a report can say how much of the machine they held (two hogs on a 2-core machine shared with others
get less than two cores).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psutil

from tests.bench.cpu import cpu_seconds

SPIN = (
    "import os, time\n"
    "parent = os.getppid()\n"
    "n = 0\n"
    "while True:\n"
    "    n += 1\n"
    "    if n % 2_000_000 == 0 and os.getppid() != parent:\n"
    "        break\n"
)
"""A busy loop that ends when its parent (the bench) has died and left it to init."""


@dataclass(slots=True)
class Hogs:
    """The hogs of one run: how many, and what they took (CPU seconds, wall seconds) once ended."""

    n: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0  # all of them together

    @property
    def cores(self) -> float:
        """The cores they held on average (their CPU time over the wall clock they ran)."""
        return self.cpu_s / self.wall_s if self.wall_s else 0.0

    def describe(self) -> str:
        if not self.n:
            return "no CPU hogs"
        return (
            f"{self.n} CPU hogs (busy-loop processes started by the bench) held {self.cores:.2f} cores on average"
            f" over {self.wall_s:.0f} s"
        )


def _cpu_s(proc: subprocess.Popen[bytes]) -> float:
    with contextlib.suppress(psutil.Error):
        return cpu_seconds(psutil.Process(proc.pid))
    return 0.0


@contextlib.contextmanager
def running(n: int) -> Iterator[Hogs]:
    """``n`` hogs spinning for the body of the ``with`` (none for 0); killed at its end, their CPU taken first."""
    hogs = Hogs(n)
    hogs.started = time.monotonic()
    try:
        for _ in range(n):
            hogs.procs.append(subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL))
        yield hogs
    finally:
        hogs.wall_s = time.monotonic() - hogs.started
        hogs.cpu_s = sum(_cpu_s(p) for p in hogs.procs)
        for p in hogs.procs:
            p.kill()
            p.wait()
