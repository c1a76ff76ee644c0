"""How far the parse in hand has got, for the heartbeat: a slow parse is not a hung one.

The job thread counts steps as it goes (:func:`step`: a PDF page read or OCRed, a segment added, a section
chunked); the heartbeat thread reads :meth:`Meter.read` once a beat and sends it as the heartbeat's
``progress``, and the kernel moves the parse's deadline on while it moves. It moves when a step was taken since
the last read, or when the job thread ran (at least :data:`MIN_CPU_SHARE` of a core since the last read) and
the CPU it used since its last step is still within the parse's deadline counted in CPU seconds. So a parse
that reads pages on a busy machine goes on; one that neither steps nor runs (a wait, a lock) stops counting;
and one that spins without a step (a library looping on a hostile file) stops once it had its deadline's CPU.
"""

from __future__ import annotations

import threading
import time

MIN_CPU_SHARE = 0.01
"""CPU the job thread must use between two reads, as a share of the time between them, to count as running:
a parse starved by a busy machine still gets more, a thread that waits and polls far less."""

_steps = 0


def step() -> None:
    """One step of the parse in hand (on the job thread; cheap enough for every page and segment)."""
    global _steps
    _steps += 1


class Meter:
    """The progress count of this parser process: :meth:`begin` and :meth:`end` on the job thread around a
    parse, :meth:`read` on the heartbeat thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self._clock: int | None = None
        self._budget_s = 0.0
        self._steps = 0
        self._cpu = self._cpu_at_step = self._wall = 0.0

    def begin(self, cpu_budget_s: float) -> None:
        """A parse starts on this thread; its CPU without a step counts as progress up to ``cpu_budget_s``."""
        try:
            clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # no per-thread CPU clock here: steps alone count
            clock = None
        with self._lock:
            self._clock, self._budget_s, self._steps = clock, cpu_budget_s, _steps
            self._cpu = self._cpu_at_step = time.thread_time()
            self._wall = time.monotonic()
            self.count += 1  # a parse that starts is progress

    def end(self) -> None:
        with self._lock:
            self._clock = None

    def read(self) -> int:
        """The count, moved on if the parse in hand progressed since the last read."""
        with self._lock:
            if self._clock is None:
                return self.count
            try:
                cpu = time.clock_gettime(self._clock)
            except OSError:
                return self.count
            now = time.monotonic()
            if _steps != self._steps:
                self._steps, self._cpu_at_step = _steps, cpu
                self.count += 1
            elif cpu - self._cpu > MIN_CPU_SHARE * (now - self._wall) and cpu - self._cpu_at_step <= self._budget_s:
                self.count += 1
            self._cpu, self._wall = cpu, now
            return self.count
