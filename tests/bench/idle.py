"""CPU and memory of the default process tree doing nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.bench.cpu import cpu_seconds, machine_busy_seconds, total_cpu_seconds
from tests.bench.kernels import BenchKernel

QUIET = 0.05
"""Fraction of one core under which the tree counts as settled."""
SETTLE_MAX_S = 60.0


@dataclass(frozen=True, slots=True)
class ProcIdle:
    name: str
    pid: int
    cpu_s: float
    wakeups: int
    """Voluntary context switches during the window: how often the process woke up."""
    rss_bytes: int | None


@dataclass(frozen=True, slots=True)
class Idle:
    seconds: float
    settle_s: float
    ready_s: float
    procs: list[ProcIdle]
    vanished: list[str]
    not_running: dict[str, str]
    other_cores: float = 0.0
    """CPU the rest of the machine used during the window (cores): cold caches cost more then."""
    """Workers that never reached RUNNING (name -> state); their CPU is not in the figures."""

    @property
    def cpu_s(self) -> float:
        return sum(p.cpu_s for p in self.procs)

    @property
    def percent_of_core(self) -> float:
        return 100 * self.cpu_s / self.seconds

    @property
    def rss_bytes(self) -> int:
        return sum(p.rss_bytes or 0 for p in self.procs)


def wakeups(proc: psutil.Process) -> int:
    """Voluntary context switches of every thread of ``proc`` (psutil counts the main thread only)."""
    total = 0
    try:
        for status in Path(f"/proc/{proc.pid}/task").glob("*/status"):
            with contextlib.suppress(OSError):
                for line in status.read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
    except OSError:
        pass
    return total or int(proc.num_ctx_switches().voluntary)


def _settle(list_procs: Callable[[], list[psutil.Process]], at_least_s: float) -> float:
    """Wait ``at_least_s``, then until the tree used under QUIET of a core over a second (workers
    may load models after READY), for at most SETTLE_MAX_S; returns the seconds waited."""
    t0 = time.monotonic()
    time.sleep(at_least_s)
    while time.monotonic() - t0 < SETTLE_MAX_S:
        procs = list_procs()
        before, w0 = total_cpu_seconds(procs), time.monotonic()
        time.sleep(1.0)
        if (total_cpu_seconds(procs) - before) / (time.monotonic() - w0) < QUIET:
            break
    return time.monotonic() - t0


def measure(seconds: float, settle_s: float, say: Callable[[str], None]) -> Idle:
    with BenchKernel(label="default kernel", strict=False) as kernel:
        if kernel.not_running:
            say(f"  NOT RUNNING: {kernel.not_running}; measuring the rest")
        say(f"  default tree up after {kernel.ready_s:.1f} s; settling at least {settle_s:g} s")
        settled_s = _settle(kernel.processes, settle_s)
        say(f"  quiet after {settled_s:.1f} s")
        st = kernel.status()
        names = {w["pid"]: w["name"] for w in st.workers if w["pid"] is not None}
        names[kernel.kernel_pid] = "kernel"
        procs = kernel.processes()
        before = {p.pid: (cpu_seconds(p), wakeups(p)) for p in procs}
        machine0 = machine_busy_seconds()
        say(f"  measuring {len(procs)} processes for {seconds:g} s")
        t0 = time.monotonic()
        time.sleep(seconds)
        spent: dict[int, tuple[float, int]] = {}
        vanished = []
        for p in procs:
            try:
                spent[p.pid] = (
                    cpu_seconds(p) - before[p.pid][0],
                    wakeups(p) - before[p.pid][1],
                )
            except psutil.NoSuchProcess:
                vanished.append(names.get(p.pid, str(p.pid)))
        wall = time.monotonic() - t0
        machine_s = machine_busy_seconds() - machine0
        st = kernel.status()  # after the window: asking costs the kernel a little CPU
        rss = {w["pid"]: w["rss_bytes"] for w in st.workers if w["pid"] is not None}
        rss[kernel.kernel_pid] = st.kernel["rss_bytes"]
        rows = [
            ProcIdle(names.get(pid, f"pid {pid}"), pid, cpu, wakeups, rss.get(pid))
            for pid, (cpu, wakeups) in spent.items()
        ]
    other = max(0.0, machine_s - sum(p.cpu_s for p in rows)) / wall
    return Idle(wall, settled_s, kernel.ready_s, rows, vanished, kernel.not_running, other)
