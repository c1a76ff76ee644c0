"""Worker lifecycle (worker <-> kernel) and the requests every worker answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = (
    "every worker answers `ping`, `describe`, `echo` and `release` (the kernel answers `ping` too); `worker.*` and"
    " `job.cancel` pass between a worker and the kernel"
)
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


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
    """The worker's slot name (`parser#2`)."""
    service: str
    """The service name requests are routed by (`parser`)."""
    pid: int
    """The worker's process id; must match the process the supervisor started (or the `worker run` pid)."""
    capacity: int = 1
    """How many jobs the broker may hand it at once (values below 1 are treated as 1)."""
    kinds: list[str] = field(default_factory=list)
    """The request kinds it handles (informational; the broker does not use it)."""
    background: list[str] = field(default_factory=list)
    """Kinds it runs beside its other jobs, one at a time, giving way to them (the llm worker's summaries): the broker
    hands it one such job beside those of `capacity`, and holds a second back until the first is answered."""


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
    """The sender's name (`kernel` in the kernel's answer)."""
    pid: int
    """The sender's pid (`0` in the kernel's answer)."""
    busy: int = 0
    """Jobs the worker is running right now (0 or 1; the kernel does not use it)."""
    note: str = ""
    """A short state line the kernel shows in ``status`` (e.g. ``model ready``); never document text."""
    loading: bool = False
    """The worker is loading a model: a load can hold the GIL for seconds on a starved CPU, so the kernel
    then allows ``bus.loading_liveness`` missed heartbeats instead of ``bus.heartbeat_liveness``."""
    progress: int = 0
    """A count the worker advances while its job makes progress (a parser: pages read, CPU used); 0 from workers
    that do not count. While it advances, the kernel moves the job's deadline on: a job is cut off once it has
    gone its whole deadline without progress (slow, not hung)."""


@message("worker.disconnect")
@dataclass(slots=True)
class Disconnect(Message):
    """Either side says goodbye: a worker stopping cleanly, or the kernel refusing/dismissing one."""

    name: str
    """The worker's name."""
    reason: str = ""
    """`stopping` from a worker. `idle` from an on-demand worker with no job in hand for its idle time: it asks
    to go, and goes only when the kernel answers `idle` too (it had no job routed to it meanwhile: the kernel took
    it out of routing; else the job arrives and it stays). From the kernel: `refused` (a READY it will not route
    to); `dropped by the kernel` (a heartbeat from a worker it already declared lost: a remote member joins again,
    a local one stops and its slot is restarted); or why a remote member's key was dismissed."""

    STOPPING: ClassVar[str] = "stopping"
    REFUSED: ClassVar[str] = "refused"
    DROPPED: ClassVar[str] = "dropped by the kernel"
    IDLE: ClassVar[str] = "idle"


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
    """Informational."""


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
    """The answering worker's name, or `kernel`."""
    pid: int
    """Its process id."""
    uptime_s: float
    """Seconds since the process started."""


@message("describe.request")
@dataclass(slots=True)
class DescribeRequest(Message):
    """Ask a worker what it is and what it handles."""


@message("describe.reply")
@dataclass(slots=True)
class DescribeReply(Message):
    """Name, service, pid, the kinds it handles, its RSS and worker-specific ``details``."""

    name: str
    """Worker name."""
    service: str
    """Service name."""
    pid: int
    """Process id."""
    kinds: list[str]
    """Request kinds it handles, sorted."""
    rss_bytes: int
    """Its resident memory."""
    details: dict[str, Any] = field(default_factory=dict)
    """Worker-specific facts (see below): each worker's own, so a map of no fixed shape."""


@message("echo.request")
@dataclass(slots=True)
class EchoRequest(Message):
    """Send ``data`` and every buffer frame straight back (benchmarks and tests)."""

    data: bytes = b""
    """Bytes to send back."""


@message("echo.reply")
@dataclass(slots=True)
class EchoReply(Message):
    """The request's ``data``; the request's buffer frames follow unchanged."""

    data: bytes = b""
    """The request's `data`."""


@message("release.request")
@dataclass(slots=True)
class ReleaseRequest(Message):
    """The caller is done with this worker for now: the indexer's ingest sends it to the embedder before it
    asks the llm for summaries, and to the llm before it sends chunks to embed, so the two models are never
    resident together on its account. Unless another caller sent this worker a job within its model's idle
    time, the worker frees its model before it answers, and an on-demand worker then exits at once instead of
    waiting out its idle time. A background job of the caller's in hand (a summary) stops first and fails
    retryable. Every worker answers; one without a model frees nothing."""


@message("release.reply")
@dataclass(slots=True)
class ReleaseReply(Message):
    """Whether the worker let go, and why not when it did not."""

    released: bool
    """True: what it held is freed (and an on-demand worker is about to exit); false: it keeps it."""
    reason: str = ""
    """Why it kept it (another caller used it within its idle time), or what it did."""
