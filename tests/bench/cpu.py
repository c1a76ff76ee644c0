"""CPU time of a set of processes over measured sections, and how busy the rest of the machine was."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import psutil


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system time of ``proc`` (all its threads), not counting reaped children."""
    t = proc.cpu_times()
    return float(t.user + t.system)


def total_cpu_seconds(procs: list[psutil.Process]) -> float:
    """User + system time of ``procs`` together (a process gone counts as nothing more)."""
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += cpu_seconds(p)
    return total


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent not idle (steal and I/O wait excluded)."""
    t = psutil.cpu_times()
    return float(sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq")))


@dataclass(slots=True)
class CpuProbe:
    """Wrap sections in ``start()``/``stop()``; CPU seconds of each process add up over the sections."""

    procs: dict[str, psutil.Process]
    spent: dict[str, float] = field(default_factory=dict)
    machine_s: float = 0.0
    wall_s: float = 0.0
    _before: dict[str, float] = field(default_factory=dict)
    _machine: float = 0.0
    _wall: float = 0.0

    def start(self) -> None:
        self._before = {name: cpu_seconds(p) for name, p in self.procs.items()}
        self._machine = machine_busy_seconds()
        self._wall = time.perf_counter()

    def stop(self) -> None:
        self.wall_s += time.perf_counter() - self._wall
        self.machine_s += machine_busy_seconds() - self._machine
        for name, p in self.procs.items():
            self.spent[name] = self.spent.get(name, 0.0) + cpu_seconds(p) - self._before[name]

    def per_op_us(self, n: int) -> dict[str, float]:
        return {name: s * 1e6 / n for name, s in self.spent.items()}

    @property
    def other_cores(self) -> float:
        """Cores kept busy by processes outside the chain (other work on the machine), on average."""
        if self.wall_s <= 0:
            return 0.0
        return max(0.0, self.machine_s - sum(self.spent.values())) / self.wall_s
