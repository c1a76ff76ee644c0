"""What a worker module writes: a :class:`Worker` subclass, its handlers, and the request each one gets.

A worker declares its ``service`` and ``capacity``, loads what it needs in ``setup()`` (quickly: heavy things
lazily, after READY), maps message kinds to handlers in ``handlers()`` with :func:`route` (the kind's class and
the handler's ``req.body`` held together for the type checker), and frees things in ``teardown()``. A handler
gets a :class:`Request` (envelope, body, buffer frames; it may send ``partial`` replies and check
``cancelled()``) and returns a :data:`Result`, or raises a :class:`~foldermind.protocol.errors.JobError`.
Every worker answers ping, describe, echo and release.

A caller done with a worker for now sends ``release.request``: unless another caller used it within
:meth:`Worker.release_window_s`, the worker frees what it holds (:meth:`Worker.release`) and, on demand, asks
to go at once. A background job of the releaser's in hand is withdrawn first (:meth:`Worker.withdrawn`: it
ends retryable at its next step) and the release is answered once it ended, so what it held is freed too.
The process around it (the job loop, the heartbeat thread, rejoining) is
:mod:`foldermind.workers.framework.runner`, whose :func:`~foldermind.workers.framework.runner.run` starts it.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psutil

from foldermind.protocol import frames
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    EchoReply,
    EchoRequest,
    Envelope,
    Message,
    PingReply,
    PingRequest,
    ReleaseReply,
    ReleaseRequest,
)
from foldermind.protocol.runtime.context import WorkerContext as WorkerContext  # re-exported for the workers

log = logging.getLogger("foldermind.worker")

Result = Message | tuple[Message, Sequence[frames.Buffer]]
Handler = Callable[["Request[Any]"], Result]
B = TypeVar("B", bound=Message)


@dataclass(slots=True)
class Request(Generic[B]):
    """One job: its envelope, its body (of the kind the handler was routed for) and raw buffer frames."""

    env: Envelope
    body: B
    buffers: list[Any]
    send_partial: Callable[[Message], None] | None = None
    is_cancelled: Callable[[], bool] | None = None
    is_stopping: Callable[[], bool] | None = None

    def partial(self, msg: Message) -> None:
        """Send ``msg`` to the caller now, as a ``partial`` reply; the handler's result still ends the job."""
        if self.send_partial is not None:
            self.send_partial(msg)

    def cancelled(self) -> bool:
        """The caller sent ``job.cancel`` for this job: a long handler may stop and raise ``cancelled``."""
        return self.is_cancelled is not None and self.is_cancelled()

    def stopping(self) -> bool:
        """The worker was asked to stop (a restart, ``foldermind stop``): a long handler may end the job at its next
        step with a retryable ``worker_lost`` rather than run it to its end past the stop's grace."""
        return self.is_stopping is not None and self.is_stopping()


def route(kind: type[B], handler: Callable[[Request[B]], Result]) -> tuple[str, Handler]:
    """One entry of :meth:`Worker.handlers`: jobs of ``kind.KIND`` go to ``handler``, whose ``req.body`` is
    that class (the registry decodes the kind to it, and the type checker holds the pair together)."""
    return kind.KIND, handler


TEST_SWITCH_PREFIX = "FOLDERMIND_TEST_"
"""Environment variables named so are test switches (:mod:`foldermind.workers.framework.faults`)."""


@functools.cache
def testing() -> bool:
    """Whether a test switch is set: only then may a worker import :mod:`foldermind.workers.framework.faults`. Read
    once: a worker's environment is its spawn's, and the parser asks twice per file (6 µs a look at
    ``os.environ``)."""
    return any(k.startswith(TEST_SWITCH_PREFIX) for k in os.environ)


class Worker:
    """Base class: override ``service``, ``setup``, ``handlers`` and ``teardown`` as needed."""

    capacity: int = 1
    """How many jobs the broker may hand this worker at once (1 = strictly one after another)."""
    side_by_side: frozenset[str] = frozenset()
    """Kinds whose handlers may run at once, on :attr:`side_threads` threads beside the job thread (only
    handlers safe beside each other and beside every other handler)."""
    side_threads: int = 0
    background: frozenset[str] = frozenset()
    """Kinds the kernel hands beside the job in hand, one at a time, not counted in :attr:`capacity` (the llm
    worker's summaries, which give way to a chat between tokens); they run on a side thread of their own."""
    status_note: str = ""
    """A short state line sent with every heartbeat and shown by ``foldermind status``."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.started = time.monotonic()
        self.callers: dict[str, float] = {}
        """Who sent this worker a job of its own (not ping, describe, echo or release), and when last."""
        self.released = False
        """A caller released it and no job came since: an on-demand worker asks to exit now."""
        self._background: dict[str, str] = {}  # background jobs in hand (from the job thread on): id -> caller
        self._withdrawing: set[str] = set()
        self._background_ended = threading.Condition()

    def setup(self) -> None:
        """Runs before READY: keep it quick (load heavy things lazily, after READY)."""

    def teardown(self) -> None:
        """Runs after the last job on a graceful stop."""

    def handlers(self) -> dict[str, Handler]:
        return dict(
            [
                route(PingRequest, self.on_ping),
                route(DescribeRequest, self.on_describe),
                route(EchoRequest, self.on_echo),
                route(ReleaseRequest, self.on_release),
            ]
        )

    def details(self) -> dict[str, Any]:
        """Worker-specific facts for ``describe`` (model state, queue sizes, ...)."""
        return {}

    def release(self) -> None:
        """Free what the worker holds for its callers (its model); the next job loads it again."""

    def answered(self, kind: str) -> None:
        """Runs on the job thread once a job of ``kind`` has been answered (its reply or error sent): work that
        must not delay the answer."""

    def progress(self) -> int:
        """A count that advances while the job in hand makes progress, read on the heartbeat thread and sent with
        each heartbeat: while it moves, the kernel moves the job's deadline on (0, the default: not counted)."""
        return 0

    def release_window_s(self) -> float:
        """How long a job of another caller keeps a release from freeing anything: the model's idle time (0 =
        any other caller ever)."""
        return self.ctx.idle_exit_s

    def on_ping(self, req: Request[PingRequest]) -> Result:
        return PingReply(name=self.ctx.name, pid=os.getpid(), uptime_s=time.monotonic() - self.started)

    def on_describe(self, req: Request[DescribeRequest]) -> Result:
        return DescribeReply(
            name=self.ctx.name,
            service=self.ctx.service,
            pid=os.getpid(),
            kinds=sorted(self.handlers()),
            rss_bytes=psutil.Process().memory_info().rss,
            details=self.details(),
        )

    def on_echo(self, req: Request[EchoRequest]) -> Result:
        return EchoReply(data=req.body.data), req.buffers

    def background_began(self, job_id: str, caller: str) -> None:
        """On the job thread, as a background job is handed to its side thread."""
        with self._background_ended:
            self._background[job_id] = caller

    def background_ended(self, job_id: str) -> None:
        """On the side thread, as the job's handler returns (its answer is still to be sent)."""
        with self._background_ended:
            self._background.pop(job_id, None)
            self._withdrawing.discard(job_id)
            self._background_ended.notify_all()

    def withdrawn(self, job_id: str) -> bool:
        """A release of this job's caller asked it to stop: it ends at its next step, retryable, holding nothing."""
        return job_id in self._withdrawing

    def withdraw_all(self) -> None:
        """Stopping: every background job in hand ends at its next step, retryable (its caller asks again), rather
        than run to its end past the kernel's grace and be killed (a summary at Ctrl-C)."""
        with self._background_ended:
            self._withdrawing |= set(self._background)

    def _withdraw(self, caller: str, deadline: float) -> bool:
        """Withdraw ``caller``'s background jobs in hand and wait for them to end (until a second before the
        release's ``deadline``, epoch seconds, 0 = none); False if one did not."""
        with self._background_ended:
            mine = {i for i, c in self._background.items() if c == caller}
            self._withdrawing |= mine
            timeout = max(0.0, deadline - time.time() - 1.0) if deadline else None
            return self._background_ended.wait_for(lambda: not mine & self._background.keys(), timeout)

    def on_release(self, req: Request[ReleaseRequest]) -> Result:
        """Let go unless another caller needs what it holds: the releaser speaks for its own jobs only (the
        indexer's ingest, while a client's chat or the indexer's query encodes keep the model theirs)."""
        window, now = self.release_window_s(), time.monotonic()
        others = sorted(c for c, t in self.callers.items() if c != req.env.src and (not window or now - t < window))
        if others:
            return ReleaseReply(False, f"kept: also used by {', '.join(others)}")
        if not self._withdraw(req.env.src, req.env.deadline):
            return ReleaseReply(False, "kept: a background job of yours did not stop in time")
        self.release()
        self.released = True
        leaving = self.ctx.idle_exit_s > 0
        log.info("%s released by %s%s", self.ctx.name, req.env.src, ": exiting until needed" if leaving else "")
        return ReleaseReply(True, "freed, exiting until needed" if leaving else "freed")
