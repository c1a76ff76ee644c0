"""A readers-first lock: any number of readers at once, or one writer; a reader that is waiting goes
before the writer's next turn.

The vector index's readers are searches (interactive) and its writers the ingest thread's adds (bulk,
in slices): between two slices of one add, every search that arrived meanwhile runs first. A plain
:class:`threading.Lock` gives no such order: the thread that releases it takes it again before a
waiting one wakes, so a search could still wait for a whole batch. Writers can wait for as long as
readers keep arriving; here readers are searches, each a few milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0  # holding it
        self._waiting = 0  # readers waiting for a writer to finish
        self._writing = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._writing:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._readers or self._waiting:
                self._cond.wait()
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
