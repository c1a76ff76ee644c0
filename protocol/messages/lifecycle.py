"""Worker lifecycle (worker <-> kernel) and the requests every worker answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foldermind.protocol.messages.envelope import Message, message


@message("worker.ready")
@dataclass(slots=True)
class WorkerReady(Message):
    """Sent once by a worker on its job socket when it can take jobs.

    ``name`` is the worker's slot (``parser#2``), ``service`` the name requests are routed by
    (``parser``), ``capacity`` how many jobs it may hold at once (1 unless the worker serves
    concurrently). The kernel answers nothing; from then on it routes requests and heartbeats.
    A READY from a name the supervisor did not start (and did not hand to ``worker run``) is refused
    with a ``worker.disconnect``.
    """

    name: str
    service: str
    pid: int
    capacity: int = 1
    kinds: list[str] = field(default_factory=list)


@message("worker.heartbeat")
@dataclass(slots=True)
class Heartbeat(Message):
    """Liveness, both ways, every ``bus.heartbeat_interval_s``, on the worker's heartbeat socket.

    A worker's heartbeat comes from its own thread, so a long job does not look dead; a worker that
    misses ``bus.heartbeat_liveness`` intervals is declared lost (its jobs fail with ``worker_lost``
    and it is killed and restarted). A worker that hears no kernel heartbeat for as long exits, so
    no worker outlives its kernel.
    """

    name: str
    pid: int
    busy: int = 0
    note: str = ""
    """A short state line the kernel shows in ``status`` (e.g. ``model ready``); never document text."""
    loading: bool = False
    """The worker is loading a model: a load can hold the GIL for seconds on a starved CPU, so the kernel
    then allows ``bus.loading_liveness`` missed heartbeats instead of ``bus.heartbeat_liveness``."""


@message("worker.disconnect")
@dataclass(slots=True)
class Disconnect(Message):
    """Either side says goodbye: a worker stopping cleanly, or the kernel refusing/dismissing one."""

    name: str
    reason: str = ""


@message("job.cancel")
@dataclass(slots=True)
class JobCancel(Message):
    """A caller gives up a job it sent: ``to="kernel"``, ``cid`` = the job's id. Not answered itself.

    The broker acts only on a cancel from the job's own caller (the same socket identity); others are
    ignored. A job still queued is failed at once with ``cancelled``. A job a worker holds stays in the
    job table and the cancel is forwarded to that worker's heartbeat socket (free while the job socket's
    thread is busy); a handler that looks (``Request.cancelled()``) stops early and answers ``cancelled``,
    and one that does not simply finishes. Either way the caller still gets exactly one final reply."""

    reason: str = ""


# --------------------------------------------------------------------------------------------
# Requests every worker answers


@message("ping.request")
@dataclass(slots=True)
class PingRequest(Message):
    """Are you there? Any worker (and the kernel, ``to="kernel"``) answers with ``ping.reply``."""


@message("ping.reply")
@dataclass(slots=True)
class PingReply(Message):
    """The answering process's name, pid and seconds since it started."""

    name: str
    pid: int
    uptime_s: float


@message("describe.request")
@dataclass(slots=True)
class DescribeRequest(Message):
    """Ask a worker what it is and what it handles."""


@message("describe.reply")
@dataclass(slots=True)
class DescribeReply(Message):
    """Name, service, pid, the kinds it handles, its RSS and worker-specific ``details``."""

    name: str
    service: str
    pid: int
    kinds: list[str]
    rss_bytes: int
    details: dict[str, Any] = field(default_factory=dict)


@message("echo.request")
@dataclass(slots=True)
class EchoRequest(Message):
    """Send ``data`` and every buffer frame straight back (benchmarks and tests)."""

    data: bytes = b""


@message("echo.reply")
@dataclass(slots=True)
class EchoReply(Message):
    """The request's ``data``; the request's buffer frames follow unchanged."""

    data: bytes = b""
