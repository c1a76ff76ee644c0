"""How far the parse in hand has got, for the heartbeat: a slow parse is not a hung one.

The job thread counts steps as it goes (:func:`step`: a PDF page read or OCRed, a segment added, a section
chunked); the heartbeat thread reads :meth:`Meter.read` once a beat and sends it as the heartbeat's
``progress``, and the kernel moves the parse's deadline on while it moves. It moves when a step was taken since
the last read, or when the job thread ran (at least :data:`MIN_CPU_SHARE` of a core since the last read) and
the CPU it used since its last step is still within the parse's deadline counted in CPU seconds. So a parse
that reads pages on a busy machine goes on; one that neither steps nor runs (a wait, a lock) stops counting;
and one that spins without a step (a library looping on a hostile file) stops once it had its deadline's CPU.

A format that reads page by page also says which pages are read for good (:func:`pages_read`): the parser worker
may then chunk and send them ahead of the reply (:mod:`foldermind.workers.parser.stream`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from foldermind.workers.parser.formats.document import Segment

Segments = Callable[[], Sequence["Segment"]]
"""The segments of the pages read for good so far, made when asked (they cost a walk of every page)."""
PagesSink = Callable[[Segments, int, int, "str | None"], None]

MIN_CPU_SHARE = 0.01
"""CPU the job thread must use between two reads, as a share of the time between them, to count as running:
a parse starved by a busy machine still gets more, a thread that waits and polls far less."""

_steps = 0
_sink: PagesSink | None = None


def step() -> None:
    """One step of the parse in hand (on the job thread; cheap enough for every page and segment)."""
    global _steps
    _steps += 1


def pages_read(segments: Segments, read: int, total: int, title: str | None) -> None:
    """Pages 1..``read`` of ``total`` are read for good: ``segments()`` are theirs, in order, as the whole
    document's will begin, and each page's segments are whole (a page never continues into the next call);
    ``title`` is the document's, as its parse will give it."""
    if _sink is not None:
        _sink(segments, read, total, title)


@contextmanager
def streaming(sink: PagesSink | None) -> Iterator[None]:
    """Send :func:`pages_read` to ``sink`` during the parse in hand (None: to nobody)."""
    global _sink
    _sink = sink
    try:
        yield
    finally:
        _sink = None


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
