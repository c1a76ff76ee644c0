"""A lock of turns for the vector index: any number of readers at once, or one writer; readers and the
writer take turns, so neither waits for long.

The readers are searches (interactive), the writer is the ingest thread adding vectors in slices (bulk).
When a writer's slice ends, every search that was waiting for it goes in before its next slice; a search
that arrives while a writer is waiting for the searches in hand to end waits for that one slice. A plain
:class:`threading.Lock` gives no such order: the thread that releases it takes it again before a waiting
one wakes, so a search could wait for a whole batch; a plain readers-first lock lets back-to-back searches
keep the writer out for as long as they come.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0  # holding it
        self._waiting = 0  # readers waiting to go in
        self._admit = 0  # readers let in ahead of the next writer (those waiting when the last writer left)
        self._writers_waiting = 0
        self._writing = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._writing or (self._writers_waiting and not self._admit):
                    self._cond.wait()
            finally:
                self._waiting -= 1
            if self._admit:
                self._admit -= 1
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
            self._writers_waiting += 1
            try:
                while self._writing or self._readers or self._admit:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._admit = self._waiting
                self._cond.notify_all()
