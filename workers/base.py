"""The skeleton every worker shares, so each worker module is only its job.

A worker process has two DEALER sockets to the kernel's bus:

- the *job socket*, owned by the main thread: READY, then requests in and replies out, one job at a time
  (``capacity`` > 1 lets the broker queue more), except the kinds a worker marks ``side_by_side``, which run on a
  few threads beside it (:mod:`foldermind.workers.side`);
- the *heartbeat socket*, owned by its own thread, so a long job does not look dead; if the kernel stops answering
  for ``liveness`` intervals the process exits, so no worker outlives its kernel.

SIGTERM asks for a graceful stop: the job in hand finishes, a ``worker.disconnect`` is sent, then ``teardown()``
runs. Subclasses declare ``service`` and add handlers in ``handlers()``.

An on-demand worker (``idle_exit_s`` > 0) idle that long asks the kernel to go (``worker.disconnect``, ``idle``)
and serves on until the kernel agrees. A caller done with it for now sends ``release.request`` (:mod:`.indexer.turns`):
unless another caller used it within :meth:`Worker.release_window_s`, the worker frees what it holds
(:meth:`Worker.release`) and, on demand, asks to go at once.

A remote worker (``worker run --connect``) that hears nothing for ``liveness`` intervals, or is dismissed as already
lost, rejoins with new sockets (a new READY, same name, model kept) until the kernel answers; one whose handshake,
READY or key is refused exits.

Its length (~570 lines): the job loop, the heartbeat thread and the rejoin of a remote worker are one
lifecycle over the same two sockets and stop flag; every worker module is short because this one is not.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import psutil
import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, JobError, ProtocolError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    Disconnect,
    EchoReply,
    EchoRequest,
    Envelope,
    Heartbeat,
    JobCancel,
    Message,
    PingReply,
    PingRequest,
    ReleaseReply,
    ReleaseRequest,
    WorkerReady,
)
from foldermind.protocol.runtime.context import WorkerContext as WorkerContext  # re-exported for the workers
from foldermind.workers.side import Send, SidePool

log = logging.getLogger("foldermind.worker")

Result = Message | tuple[Message, Sequence[frames.Buffer]]
Handler = Callable[["Request[Any]"], Result]
B = TypeVar("B", bound=Message)

_PR_SET_PDEATHSIG = 1
_NOT_USE = frozenset(k.KIND for k in (PingRequest, DescribeRequest, EchoRequest, ReleaseRequest))
"""Kinds every worker answers: they do not make their caller one a release must leave the model to."""
ZAP_REFUSED = 400
"""The ZAP status of a key the kernel's allow list does not hold (RFC 27: 400 = authentication failure)."""
EXIT_KEY_REFUSED = 3
"""How a remote worker whose key the kernel refused exits (`worker run` then fails, and says why)."""


@dataclass(slots=True)
class Request(Generic[B]):
    """One job: its envelope, its body (of the kind the handler was routed for) and raw buffer frames."""

    env: Envelope
    body: B
    buffers: list[Any]
    send_partial: Callable[[Message], None] | None = None
    is_cancelled: Callable[[], bool] | None = None

    def partial(self, msg: Message) -> None:
        """Send ``msg`` to the caller now, as a ``partial`` reply; the handler's result still ends the job."""
        if self.send_partial is not None:
            self.send_partial(msg)

    def cancelled(self) -> bool:
        """The caller sent ``job.cancel`` for this job: a long handler may stop and raise ``cancelled``."""
        return self.is_cancelled is not None and self.is_cancelled()


def route(kind: type[B], handler: Callable[[Request[B]], Result]) -> tuple[str, Handler]:
    """One entry of :meth:`Worker.handlers`: jobs of ``kind.KIND`` go to ``handler``, whose ``req.body`` is
    that class (the registry decodes the kind to it, and the type checker holds the pair together)."""
    return kind.KIND, handler


TEST_SWITCH_PREFIX = "FOLDERMIND_TEST_"
"""Environment variables named so are test switches (:mod:`foldermind.workers.faults`)."""


@functools.cache
def testing() -> bool:
    """Whether a test switch is set: only then may a worker import :mod:`foldermind.workers.faults`. Read
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
    status_note: str = ""
    """A short state line sent with every heartbeat and shown by ``foldermind status``."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.started = time.monotonic()
        self.callers: dict[str, float] = {}
        """Who sent this worker a job of its own (not ping, describe, echo or release), and when last."""
        self.released = False
        """A caller released it and no job came since: an on-demand worker asks to exit now."""

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

    def on_release(self, req: Request[ReleaseRequest]) -> Result:
        """Let go unless another caller needs what it holds: the releaser speaks for its own jobs only (the
        indexer's ingest, while a client's chat or the indexer's query encodes keep the model theirs)."""
        window, now = self.release_window_s(), time.monotonic()
        others = sorted(c for c, t in self.callers.items() if c != req.env.src and (not window or now - t < window))
        if others:
            return ReleaseReply(False, f"kept: also used by {', '.join(others)}")
        self.release()
        self.released = True
        leaving = self.ctx.idle_exit_s > 0
        log.info("%s released by %s%s", self.ctx.name, req.env.src, ": exiting until needed" if leaving else "")
        return ReleaseReply(True, "freed, exiting until needed" if leaving else "freed")


def _connect(sock: zmq.Socket[Any], ctx: WorkerContext) -> None:
    """Connect to the bus; a remote worker's sockets (both of them) first become CURVE clients."""
    if ctx.curve_server_key:
        # Imported here: only a remote worker needs them (zmq.auth and asyncio, via the monitor, ~0.03 CPU-s
        # of every local worker's start otherwise).
        from foldermind.protocol.runtime import keys

        keys.curve_client(sock, keys.load_keypair(Path(ctx.curve_keys)), ctx.curve_server_key)
    sock.connect(ctx.bus_endpoint)


class _Heartbeat(threading.Thread):
    """Sends heartbeats on a socket of its own and exits the process if the kernel goes silent."""

    def __init__(self, zctx: zmq.Context[Any], ctx: WorkerContext, identity: bytes, runner: _Runner) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.ctx, self.runner = ctx, runner
        # A remote member that has been heard joins again after a silence instead of exiting (module docstring).
        self.heard = runner.rejoining
        self.sock: zmq.Socket[Any] = zctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.IDENTITY, identity)
        self.sock.setsockopt(zmq.MAXMSGSIZE, ctx.max_message_bytes)
        # A DEALER whose only peer refused it (a CURVE key not allowed) has nowhere to queue and would block
        # this thread in send for good; with a timeout the silence is noticed and the process exits.
        self.sock.setsockopt(zmq.SNDTIMEO, int(ctx.heartbeat_interval_s * 1000))
        # A remote worker learns from ZeroMQ itself when the kernel's ZAP handler refuses its key (a handshake
        # failed with status 400): it then exits and says so, instead of taking the silence for a link down and
        # joining again for ever (a key denied while the link was down).
        self.refusals: zmq.Socket[Any] | None = None
        if ctx.curve_server_key:
            self.refusals = self.sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        _connect(self.sock, ctx)
        self.stopping = threading.Event()

    def _key_refused(self) -> bool:
        if self.refusals is None:
            return False
        from zmq.utils.monitor import recv_monitor_message  # a remote worker's only (see _connect)

        while self.refusals.poll(0):
            event = recv_monitor_message(self.refusals)
            if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH and event["value"] == ZAP_REFUSED:
                return True
        return False

    def run(self) -> None:
        interval = self.ctx.heartbeat_interval_s
        last_heard = looped = time.monotonic()
        next_beat = 0.0
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_beat:
                env = Envelope(kind=Heartbeat.KIND, src=self.ctx.name, to="kernel")
                note = self.runner.worker.status_note
                worker = self.runner.worker
                beat = Heartbeat(
                    self.ctx.name, os.getpid(), self.runner.busy, note, model_loads.active(), worker.progress()
                )
                with contextlib.suppress(zmq.Again):  # not connected: silence, counted below
                    frames.send(self.sock, env, beat)
                next_beat = now + interval
            if self.sock.poll(int(max(next_beat - time.monotonic(), 0) * 1000) + 1):
                try:
                    packet = frames.recv(self.sock, 0, self.ctx.max_message_bytes)
                except ProtocolError as exc:
                    log.warning("dropped a bad frame on the heartbeat socket: %s", exc)
                    continue
                last_heard = time.monotonic()
                self.heard = True
                if packet.env.kind == Disconnect.KIND:
                    self.runner.dismissed(packet)
                    if self.runner.rejoin:
                        break
                elif packet.env.kind == JobCancel.KIND:
                    self.runner.cancel(packet.env.cid)
            if self._key_refused():
                log.error(
                    "the kernel refused this worker's key (it is not on the kernel's allow list: `foldermind bus"
                    " allow NAME KEY` on the kernel's machine admits it): exiting"
                )
                logging.shutdown()
                os._exit(EXIT_KEY_REFUSED)
            now = time.monotonic()
            # One pass takes at most an interval (the poll's timeout). Longer, and this thread could not
            # run (the GIL held by a model load, a starved CPU): that time is not the kernel's silence,
            # and the kernel answers only our beats, so it sent nothing meanwhile either.
            stalled = now - looped - interval
            if stalled > 0:
                last_heard += stalled
            looped = now
            if now - last_heard > interval * self.ctx.heartbeat_liveness:
                if self.ctx.curve_server_key and self.heard:
                    log.warning("no heartbeat from the kernel for %.1f s: joining it again", now - last_heard)
                    self.runner.rejoin = True
                    self.runner.request_stop()
                    break
                log.error("no heartbeat from the kernel for %.1f s: exiting", now - last_heard)
                logging.shutdown()
                os._exit(0)
        if self.refusals is not None:
            self.sock.disable_monitor()
            self.refusals.close(0)
        self.sock.close(0)


class _Runner:
    """Owns the job socket and runs the serve loop in the main thread."""

    def __init__(self, worker: Worker, ctx: WorkerContext, rejoining: bool = False) -> None:
        self.worker, self.ctx = worker, ctx
        self.busy = 0
        self.stop_requested = False
        self.rejoining = rejoining  # a remote member joining again: setup() has run, the model is kept
        self.rejoin = False  # set by the heartbeat thread: the kernel went silent, join again
        self.signalled = False
        # Ids of the jobs in hand, and of those among them whose caller cancelled (the heartbeat thread
        # adds to it; set operations are atomic under the GIL).
        self.running: set[str] = set()
        self.cancelled: set[str] = set()
        self.delays: dict[str, float] = {}
        self.side: SidePool | None = None
        self.last_active = time.monotonic()  # the last job received or answered: the idle exit counts from it
        if testing():
            from foldermind.workers import faults

            self.delays = faults.delays()
        self.zctx: zmq.Context[Any] = zmq.Context()
        self.identity = f"{ctx.name}.{os.getpid()}.{os.urandom(3).hex()}".encode()
        self.sock: zmq.Socket[Any] = self.zctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.setsockopt(zmq.IDENTITY, self.identity)
        self.sock.setsockopt(zmq.MAXMSGSIZE, ctx.max_message_bytes)
        _connect(self.sock, ctx)
        # A signal only sets a flag; the wake-up pipe makes the blocking poll return to see it.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def request_stop(self) -> None:
        self.stop_requested = True
        self._wake()

    def dismissed(self, packet: frames.Packet) -> None:
        """The kernel said goodbye (on either socket). A remote member it had declared lost while this process
        ran on (a starved CPU, a stalled link: its heartbeats came too late) joins again, since nothing else
        would restart it; any other dismissal stops this worker."""
        try:
            reason = getattr(packet.body(), "reason", "")
        except ProtocolError:
            reason = ""
        if reason == Disconnect.DROPPED and self.ctx.curve_server_key:
            log.warning("the kernel had declared this member lost: joining it again")
            self.rejoin = True
        elif reason == Disconnect.IDLE:
            log.info("the kernel lets this idle worker go; stopping")
        else:
            log.warning("the kernel dismissed this worker; stopping")
        self.request_stop()

    def _wake(self) -> None:
        """Make the job loop's poll return (from any thread); a full pipe already holds a wake-up."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signalled = True
        self.request_stop()

    def serve(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        heartbeat = _Heartbeat(self.zctx, self.ctx, self.identity + b"/hb", self)
        heartbeat.start()
        handlers = self.worker.handlers()
        if not self.rejoining:
            self.worker.setup()
        if self.worker.side_by_side and self.worker.side_threads > 0 and self.side is None:
            self.side = SidePool(self.worker.side_threads, self._wake)
        ready = WorkerReady(
            name=self.ctx.name,
            service=self.ctx.service,
            pid=os.getpid(),
            capacity=self.worker.capacity,
            kinds=sorted(handlers),
        )
        frames.send(self.sock, Envelope(kind=WorkerReady.KIND, src=self.ctx.name, to="kernel"), ready)
        log.info("%s READY (service %s, pid %d)", self.ctx.name, self.ctx.service, os.getpid())
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self._wake_r.fileno(), zmq.POLLIN)
        while not self.stop_requested:
            events = dict(poller.poll(self._until_idle_ms()))
            if self._wake_r.fileno() in events:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            if self.sock in events:
                self._serve_available(handlers)
            if self.side is not None:
                self.side.send_ready()
            self._ask_idle()
        dropped = self.rejoin and not self.signalled
        if self.side is not None and not dropped:
            self.side.finish()  # the jobs in hand on side threads end and are answered, as the job thread's is
        if dropped:
            # The kernel dropped this member already; a goodbye could block on a socket with no peer.
            heartbeat.stopping.set()
            heartbeat.join(timeout=self.ctx.heartbeat_interval_s * 2)
            self.zctx.destroy(linger=0)
            signal.set_wakeup_fd(-1)
            self._wake_r.close()
            self._wake_w.close()
            return 0
        frames.send(
            self.sock,
            Envelope(kind=Disconnect.KIND, src=self.ctx.name, to="kernel"),
            Disconnect(self.ctx.name, Disconnect.STOPPING),
        )
        self.worker.teardown()
        heartbeat.stopping.set()
        heartbeat.join(timeout=self.ctx.heartbeat_interval_s * 2)
        self.sock.close()
        log.info("%s stopped cleanly", self.ctx.name)
        return 0

    def _until_idle_ms(self) -> int | None:
        """The poll's timeout: until this worker has been idle ``idle_exit_s`` (None: wait for a message)."""
        if self.ctx.idle_exit_s <= 0:
            return None
        if self.worker.released and not self.busy:
            return 0
        return max(0, int((self.last_active + self.ctx.idle_exit_s - time.monotonic()) * 1000) + 1)

    def _ask_idle(self) -> None:
        """Ask the kernel to let this on-demand worker go, once it has held no job for ``idle_exit_s``."""
        idle = self.ctx.idle_exit_s
        if idle <= 0 or self.busy or self.stop_requested:
            return
        released, self.worker.released = self.worker.released, False  # asked once; a refusal means a job came
        if not released and time.monotonic() - self.last_active < idle:
            return
        self.last_active = time.monotonic()  # not let go (a job was on its way): ask again after as long
        why = "released" if released else f"idle for {idle:g} s"
        log.info("%s %s: asking to exit until needed", self.ctx.name, why)
        env = Envelope(kind=Disconnect.KIND, src=self.ctx.name, to="kernel")
        frames.send(self.sock, env, Disconnect(self.ctx.name, Disconnect.IDLE))

    def _serve_available(self, handlers: dict[str, Handler]) -> None:
        while not self.stop_requested and frames.readable(self.sock):
            raw = frames.recv_frames(self.sock)
            try:
                packet = frames.parse(raw, 0, self.ctx.max_message_bytes)
            except ProtocolError as exc:
                log.warning("dropped a bad message: %s", exc)
                continue
            env = packet.env
            if env.kind == Disconnect.KIND:
                self.dismissed(packet)
                return
            if env.kind.endswith(".reply") or env.kind.startswith("event."):
                continue
            self._run_job(packet, handlers)

    def _run_job(self, packet: frames.Packet, handlers: dict[str, Handler]) -> None:
        env = packet.env
        handler = handlers.get(env.kind)
        if handler is None:
            self._reply_error(env, ErrorInfo(ErrorCode.UNKNOWN_KIND, f"{self.ctx.name} does not handle {env.kind}"))
            return
        try:
            body = packet.body()
        except ProtocolError as exc:
            self._reply_error(env, ErrorInfo(ErrorCode.BAD_REQUEST, str(exc)))
            return
        self.busy += 1
        self.last_active = time.monotonic()
        if env.kind not in _NOT_USE:
            self.worker.callers[env.src] = self.last_active
            self.worker.released = False
        self.running.add(env.id)
        side = self.side
        if side is not None and env.kind in self.worker.side_by_side:
            partial: Callable[[Message], None] = lambda msg: side.post(lambda: self._send_partial(env, msg))  # noqa: E731
            side.submit(lambda: self._handle(env, body, packet.buffers, handler, partial))
        else:
            self._handle(env, body, packet.buffers, handler, lambda msg: self._send_partial(env, msg))()

    def _handle(
        self, env: Envelope, body: Message, buffers: list[Any], handler: Handler, partial: Callable[[Message], None]
    ) -> Send:
        """Run the job (on the job thread or a side thread); returns what answers it, on the job thread."""
        try:
            if env.kind in self.delays:
                time.sleep(self.delays[env.kind])
            result = handler(Request(env, body, buffers, partial, lambda: env.id in self.cancelled))
        except JobError as exc:
            info = exc.info
            return lambda: self._finish(env, info)
        except Exception:
            # The traceback stays in this worker's log; callers get a typed error without it.
            log.exception("%s failed", env.kind)
            failed = ErrorInfo(ErrorCode.INTERNAL, f"{env.kind} failed in {self.ctx.name}")
            return lambda: self._finish(env, failed)
        return lambda: self._finish(env, result)

    def _finish(self, env: Envelope, outcome: Result | ErrorInfo) -> None:
        self.busy -= 1
        self.last_active = time.monotonic()
        self.running.discard(env.id)
        self.cancelled.discard(env.id)
        if isinstance(outcome, ErrorInfo):
            self._reply_error(env, outcome)
        else:
            msg, buffers = outcome if isinstance(outcome, tuple) else (outcome, ())
            reply = env.reply(self.ctx.name)
            reply.kind = msg.KIND
            frames.send(self.sock, reply, msg, buffers)
        self.worker.answered(env.kind)

    def cancel(self, job_id: str) -> None:
        """Called on the heartbeat thread: mark ``job_id`` cancelled if it is still in hand."""
        if job_id in self.running:
            self.cancelled.add(job_id)
            if job_id not in self.running:  # it ended meanwhile: leave nothing behind
                self.cancelled.discard(job_id)

    def _send_partial(self, env: Envelope, msg: Message) -> None:
        reply = env.reply(self.ctx.name, status="partial")
        reply.kind = msg.KIND
        frames.send(self.sock, reply, msg)

    def _reply_error(self, env: Envelope, info: ErrorInfo) -> None:
        frames.send(self.sock, env.reply(self.ctx.name, status="error", error=info), {})


class _ModelLoads:
    """How many model loads are in progress in this process (any thread): heartbeats say so."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def active(self) -> bool:
        return self._count > 0

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """Around a model load: the kernel then allows ``[bus] loading_liveness`` missed heartbeats."""
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1


model_loads = _ModelLoads()


def _die_with_parent(kernel_pid: int) -> None:
    """Ask Linux to SIGKILL us when the kernel dies (heartbeats remain the portable backstop)."""
    if not sys.platform.startswith("linux") or not kernel_pid:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != kernel_pid:  # the kernel died before prctl took effect
        os._exit(0)


def run(worker_cls: type[Worker], ctx: WorkerContext, configure_logging: bool = True) -> int:
    """Serve as ``ctx.name`` until stopped; returns the process exit status."""
    if configure_logging and ctx.log_file:
        from foldermind.protocol.runtime import logs

        logs.setup(Path(ctx.log_file), ctx.log_max_mb, ctx.log_backups)
    _die_with_parent(ctx.kernel_pid)
    worker = worker_cls(ctx)
    runner = _Runner(worker, ctx)
    try:
        code = runner.serve()
    except Exception as exc:
        # Its cause in one line: the traceback in this worker's log, and the line last on stderr, where the
        # kernel reads it into the exit's reason (``status``, ``doctor``) instead of a bare exit status.
        cause = f"{ctx.name} failed: {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        log.exception("%s", cause)
        logging.shutdown()
        print(cause, file=sys.stderr, flush=True)
        return 1
    while runner.rejoin and not runner.signalled:
        time.sleep(ctx.heartbeat_interval_s)
        runner = _Runner(worker, ctx, rejoining=True)
        code = runner.serve()
    return code
