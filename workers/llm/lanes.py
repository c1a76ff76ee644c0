"""Who has the model's one context: a job a person waits for goes before a background summary.

The llm worker serves a chat or a reading (``llm.likely``) on its job thread and a summary (``llm.analyze``, the
kernel hands one beside the job in hand: :attr:`~foldermind.workers.framework.base.Worker.background`) on a thread
of its own. The backend has one context and is not thread-safe, so one job at a time uses it: a foreground job
waits only for the summary's next step (a token, or a slice of its prompt), where the summary steps aside; the
summary takes the context back when no foreground job holds or wants it, and evaluates its tokens again (the
foreground job reset the context) as they were made, so it writes the same summary. It never runs beside a chat
on the cores the chat measured as free.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

CANCEL_POLL_S = 0.5
"""How often a summary waiting for the context looks at its cancel."""


class Cancelled(Exception):
    """A background job gave up waiting for the context (its caller went, or its deadline is near)."""


class Lanes:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False  # some job holds the context
        self._waiting = 0  # foreground jobs waiting for it
        self._background_holds = False
        self.asides = 0
        """How many times a summary stepped aside for a foreground job (``describe`` shows it)."""

    @property
    def wanted(self) -> bool:
        """A foreground job waits for the context."""
        return self._waiting > 0

    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """Hold the context for a chat or a reading, as soon as a summary in hand steps aside."""
        with self._cond:
            self._waiting += 1
            try:
                self._cond.wait_for(lambda: not self._busy)
            finally:
                self._waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def background(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Hold the context for a summary while no foreground job holds or wants it (:meth:`step_aside` lets
        them in); :class:`Cancelled` if its caller gives it up while it waits."""
        self._take_background(cancelled)
        try:
            yield
        finally:
            if self._background_holds:
                self._background_holds = False
                self._release()

    def step_aside(self, cancelled: Callable[[], bool]) -> bool:
        """Between two steps of the summary: if a foreground job waits, let it use the context and take the context
        back after it; True when it did (the context was reset meanwhile)."""
        with self._cond:
            if not self._waiting:
                return False
            self.asides += 1
            self._background_holds = self._busy = False
            self._cond.notify_all()
        self._take_background(cancelled)
        return True

    def _take_background(self, cancelled: Callable[[], bool]) -> None:
        with self._cond:
            while self._busy or self._waiting:
                if cancelled():
                    raise Cancelled
                self._cond.wait(CANCEL_POLL_S)
            self._busy = self._background_holds = True

    def _release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()
