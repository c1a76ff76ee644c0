"""When the llm worker's model is in memory: loaded on use (or at start), freed after an idle while.

The model is the llm worker's memory: SmolLM2-135M under ctransformers holds ~100 MB more than the worker
without it, a bigger GGUF a user configures gigabytes. A tree that is only searched, or has finished its
summaries, should not hold it (docs/benchmarks/README.md has the measured figures). So the model's residency
is a small state machine of its own, apart from the requests that use it::

    unloaded --use--> loading --> ready --idle_unload_s (or a release, unused)--> unloaded
                          \\--> failed  (sticky: the reason stays on the status line until a restart)

``use()`` is the only way a request reaches the model. In ``unloaded`` it loads the model in the request itself (the
first chat answer waits for the load, ~1-2 s for SmolLM2 on 2 cores, and the front door's quotes are out before
that), or, for a request that must not wait for it (``wait=False``: a reading the answer can do without), starts the
load in the background and raises :class:`NotReady`; in ``loading`` (a background load, or, for such a request, a
load in another request) and ``failed`` it raises :class:`NotReady` at once, so a caller falls back instead of
waiting. While a request holds the model the unloader cannot free it: requests are counted under one lock (a chat
and a summary may hold it at once, taking turns on its context: :mod:`.lanes`), and the unloader frees it only at a
count of none.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Literal

from foldermind.workers.framework.memory import idle_check_every, return_memory
from foldermind.workers.llm.backends import Backend
from foldermind.workers.llm.model_file import ModelFileError

log = logging.getLogger("foldermind.llm")

State = Literal["unloaded", "loading", "ready", "failed"]

TRANSITIONS: dict[State, frozenset[State]] = {
    "unloaded": frozenset({"loading"}),
    "loading": frozenset({"ready", "failed"}),
    "ready": frozenset({"unloaded"}),
    "failed": frozenset(),
}
"""The legal moves; any other is a bug, and :meth:`Residency._move` says so."""


class NotReady(Exception):
    """The model cannot serve now: ``loading`` (retry shortly) or ``failed`` (the reason)."""

    def __init__(self, state: State, reason: str) -> None:
        super().__init__(reason)
        self.state, self.reason = state, reason


class Residency:
    """Holds the model the ``load`` callable makes, loads it on use, frees it after ``idle_unload_s``."""

    def __init__(self, load: Callable[[], Backend], idle_unload_s: float, on_change: Callable[[], None]) -> None:
        self._load, self.idle_unload_s, self._on_change = load, idle_unload_s, on_change
        self.state: State = "unloaded"
        self.reason = ""
        self.backend: Backend | None = None
        self.load_s = 0.0
        self.loads = self.unloads = 0
        self.last_used = time.monotonic()
        self._users = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def _move(self, new: State) -> None:
        if new not in TRANSITIONS[self.state]:
            raise AssertionError(f"llm model: no transition {self.state} -> {new}")
        self.state = new
        self._on_change()

    def start(self, at_start: bool) -> None:
        """Begin: load in the background now if ``at_start``; watch for idleness if unloading is on."""
        if at_start:
            self._load_behind()
        if self.idle_unload_s:
            threading.Thread(target=self._unload_when_idle, name="model-unload", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()

    def _load_behind(self) -> None:
        """``unloaded`` -> ``loading``, the load on a thread of its own."""
        self._move("loading")
        threading.Thread(target=self._load_now, name="model-load", daemon=True).start()

    def _load_now(self) -> None:
        """``loading`` -> ``ready`` or ``failed``; the load's own exceptions become the reason."""
        started = time.monotonic()
        try:
            backend = self._load()
        except Exception as exc:  # a bad file or a backend's own surprise: the worker stays up and says why
            known = isinstance(exc, ModelFileError)
            self.reason = (str(exc) if known else f"{type(exc).__name__}: {exc}")[:300]
            self._move("failed")
            log.error("model not loaded: %s", self.reason, exc_info=not known)
            return
        self.backend, self.load_s = backend, time.monotonic() - started
        self.loads += 1
        self.last_used = time.monotonic()
        self._move("ready")
        log.info("model %s ready on %s in %.1f s", backend.model.name, backend.NAME, self.load_s)

    @contextlib.contextmanager
    def use(self, wait: bool = True) -> Iterator[Backend]:
        """The model for one request, loaded first if it is ``unloaded`` (or, unless ``wait``, loading behind
        while this request is told :class:`NotReady`); :class:`NotReady` if it cannot be. A load in another request
        (a summary's, a chat's) holds the lock for its whole length: one that must not wait is told at once."""
        if not wait and self.state == "loading":
            raise NotReady(self.state, self.reason)
        with self._lock:
            if self.state == "unloaded" and not wait:
                self._load_behind()
            elif self.state == "unloaded":
                self._move("loading")
                self._load_now()
            backend = self.backend
            if backend is None:
                raise NotReady(self.state, self.reason)
            self._users += 1
        try:
            yield backend
        finally:
            with self._lock:
                self._users -= 1
                self.last_used = time.monotonic()

    def idle_s(self) -> float:
        return time.monotonic() - self.last_used

    def unload_if_idle(self, idle_unload_s: float | None = None) -> bool:
        """Free the model if it has not been used for ``idle_unload_s`` (by default the policy's; 0 when its
        caller released it) and no request holds it."""
        least = self.idle_unload_s if idle_unload_s is None else idle_unload_s
        if self.state != "ready" or self.idle_s() < least or not self._lock.acquire(blocking=False):
            return False
        try:
            if self.state != "ready" or self._users or self.idle_s() < least:  # a request holds it
                return False
            backend, self.backend = self.backend, None
            assert backend is not None
            backend.close()
            del backend
            self.unloads += 1
            self._move("unloaded")
        finally:
            self._lock.release()
        return_memory()
        released = " (released)" if least < self.idle_unload_s else ""
        log.info("model unloaded after %.0f s idle%s", self.idle_s(), released)
        return True

    def _unload_when_idle(self) -> None:
        every = idle_check_every(self.idle_unload_s)
        while not self._stopping.wait(every):
            self.unload_if_idle()
