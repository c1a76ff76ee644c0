"""A worker process's life: the job loop on the main thread, from READY to a graceful stop or a rejoin.

The job socket belongs to the main thread: READY, then requests in and replies out, one job at a time (the
kinds a worker marks ``side_by_side`` or ``background`` run on a few threads beside it,
:mod:`foldermind.workers.framework.side`). Each request goes to the handler its kind is routed to
(:meth:`Worker.handlers`); a :class:`JobError` becomes a typed error reply, any other exception ``internal`` (the
traceback stays in this worker's log).

SIGTERM asks for a graceful stop: the job in hand finishes, or ends at its next step where its handler asks
``req.stopping()`` (a chat answer: a retryable ``worker_lost``; a ``background`` job is withdrawn, retryable), a
``worker.disconnect`` is sent, ``teardown()`` runs, and the process leaves at once (:func:`leave`); a SIGTERM before
this loop starts ends it at once too (:mod:`foldermind.workers.__main__`). An on-demand worker (``idle_exit_s`` > 0)
idle that long, or released, asks the kernel to go and serves on until the kernel agrees. A remote worker that the
heartbeat thread (:mod:`foldermind.workers.framework.heartbeat`) finds cut off, or that the kernel dismisses as already
lost, rejoins with new sockets (a new READY, same name, model kept).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, JobError, ProtocolError
from foldermind.protocol.messages import (
    DescribeRequest,
    Disconnect,
    EchoRequest,
    Envelope,
    Message,
    PingRequest,
    ReleaseRequest,
    WorkerReady,
)
from foldermind.protocol.runtime.context import WorkerContext
from foldermind.workers.framework.base import Handler, Request, Result, Worker, testing
from foldermind.workers.framework.heartbeat import HeartbeatThread, connect
from foldermind.workers.framework.side import Send, SidePool

log = logging.getLogger("foldermind.worker")

_PR_SET_PDEATHSIG = 1
_NOT_USE = frozenset(k.KIND for k in (PingRequest, DescribeRequest, EchoRequest, ReleaseRequest))
"""Kinds every worker answers: they do not make their caller one a release must leave the model to."""


class Runner:
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
            from foldermind.workers.framework import faults

            self.delays = faults.delays()
        self.zctx: zmq.Context[Any] = zmq.Context()
        self.identity = f"{ctx.name}.{os.getpid()}.{os.urandom(3).hex()}".encode()
        self.sock: zmq.Socket[Any] = self.zctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.setsockopt(zmq.IDENTITY, self.identity)
        self.sock.setsockopt(zmq.MAXMSGSIZE, ctx.max_message_bytes)
        connect(self.sock, ctx)
        # A signal only sets a flag; the wake-up pipe makes the blocking poll return to see it.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def status(self) -> tuple[str, int]:
        return self.worker.status_note, self.worker.progress()

    def _stopping(self) -> bool:
        return self.stop_requested

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
        heartbeat = HeartbeatThread(self.zctx, self.ctx, self.identity + b"/hb", self)
        heartbeat.start()
        handlers = self.worker.handlers()
        if not self.rejoining:
            self.worker.setup()
        threads = (self.worker.side_threads if self.worker.side_by_side else 0) + bool(self.worker.background)
        if threads and self.side is None:
            self.side = SidePool(threads, self._wake)
        ready = WorkerReady(
            name=self.ctx.name,
            service=self.ctx.service,
            pid=os.getpid(),
            capacity=self.worker.capacity,
            kinds=sorted(handlers),
            background=sorted(self.worker.background),
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
            self.worker.withdraw_all()  # background jobs stop at their next step; side-by-side ones finish
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
        if not heartbeat.is_alive():  # its socket closed too: the goodbye goes out within the job socket's linger
            self.zctx.term()
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
        if side is not None and env.kind in self.worker.background:
            partial: Callable[[Message], None] = lambda msg: side.post(lambda: self._send_partial(env, msg))  # noqa: E731
            self.worker.background_began(env.id, env.src)
            side.submit(lambda: self._behind(env, body, packet.buffers, handler, partial))
        elif side is not None and env.kind in self.worker.side_by_side:
            partial = lambda msg: side.post(lambda: self._send_partial(env, msg))  # noqa: E731
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
            result = handler(Request(env, body, buffers, partial, lambda: env.id in self.cancelled, self._stopping))
        except JobError as exc:
            info = exc.info
            return lambda: self._finish(env, info)
        except Exception:
            # The traceback stays in this worker's log; callers get a typed error without it.
            log.exception("%s failed", env.kind)
            failed = ErrorInfo(ErrorCode.INTERNAL, f"{env.kind} failed in {self.ctx.name}")
            return lambda: self._finish(env, failed)
        return lambda: self._finish(env, result)

    def _behind(
        self, env: Envelope, body: Message, buffers: list[Any], handler: Handler, partial: Callable[[Message], None]
    ) -> Send:
        """A background job on its side thread: a release waiting for it hears when its handler is done."""
        try:
            return self._handle(env, body, buffers, handler, partial)
        finally:
            self.worker.background_ended(env.id)

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


def leave(code: int) -> NoReturn:
    """End the worker process with ``code`` once :func:`run` has returned: the exit handlers run (logging's
    flush among them) and stdio is flushed, but the interpreter's finalization is skipped, and with it the join
    of any thread that teardown left running. Freeing every module's objects is work nobody needs that, on a busy
    machine, outlasted the kernel's stop grace after "stopped cleanly" (docs/architecture.md#stopping); what a
    worker keeps is closed by its teardown, not by finalization."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run(worker_cls: type[Worker], ctx: WorkerContext, configure_logging: bool = True) -> int:
    """Serve as ``ctx.name`` until stopped; returns the process exit status."""
    if configure_logging and ctx.log_file:
        from foldermind.protocol.runtime import logs

        logs.setup(Path(ctx.log_file), ctx.log_max_mb, ctx.log_backups)
    _die_with_parent(ctx.kernel_pid)
    worker = worker_cls(ctx)
    runner = Runner(worker, ctx)
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
        runner = Runner(worker, ctx, rejoining=True)
        code = runner.serve()
    return code
