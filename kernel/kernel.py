"""The kernel process: one event loop driving the broker, the supervisor and the control API.

Single-threaded on purpose: every table (workers, jobs, slots) is touched by this loop only, so
there are no locks. The loop sleeps in ``zmq.Poller.poll`` until a message arrives, a child exits
(its pidfd becomes readable) or the nearest timer is due, which keeps an idle kernel idle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psutil
import zmq

from foldermind.kernel import __version__, curve
from foldermind.kernel.bus.broker import Broker
from foldermind.kernel.curve import Gate
from foldermind.kernel.errands import Errands
from foldermind.kernel.remote import REMOTE, RemoteMembers
from foldermind.kernel.slot import Slot
from foldermind.kernel.states import IDLE_NOTE, State
from foldermind.kernel.supervisor import Supervisor
from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, JobError, ProtocolError
from foldermind.protocol.messages import (
    AttachReply,
    AttachRequest,
    CliRequest,
    Envelope,
    KernelInfo,
    McpInfo,
    Message,
    PingReply,
    PingRequest,
    RestartReply,
    RestartRequest,
    StatusReply,
    StatusRequest,
    StopReply,
    StopRequest,
    WorkerInfo,
    WorkerStateEvent,
)
from foldermind.protocol.runtime.config import WILDCARD_HOSTS, SupervisorConfig, split_host_port
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.keys import curve_server, ensure_keypair, load_keypair

log = logging.getLogger("foldermind.kernel")

B = TypeVar("B", bound=Message)
ControlHandler = Callable[[bytes, Envelope, Any], "Message | None"]


def _control(kind: type[B], handler: Callable[[bytes, Envelope, B], Message | None]) -> tuple[str, ControlHandler]:
    """One control command: its request class and the handler that gets that body (typed), returns the reply
    (None: it answers later) or raises :class:`JobError`."""
    return kind.KIND, handler


class Kernel:
    def __init__(self, home: Home, config: SupervisorConfig) -> None:
        self.home = home
        self.config = config
        self.started = time.monotonic()
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.bus = self._bind(zmq.ROUTER, home.bus_endpoint)
        self.bus.setsockopt(zmq.ROUTER_HANDOVER, 1)
        if config.bus.tcp_debug_endpoint:
            self.bus.bind(f"tcp://{config.bus.tcp_debug_endpoint}")
        self.events = self._bind(zmq.PUB, home.events_endpoint)
        self.poller = zmq.Poller()
        self.poller.register(self.bus, zmq.POLLIN)
        self.supervisor = Supervisor(home, config, self._publish_state)
        self.remote = RemoteMembers(
            set(self.supervisor.services), set(self.supervisor.slots), lambda: set(curve.allowed(home))
        )
        self._allowed_stamp: tuple[int, int] | None = None
        self._next_allow_check = 0.0
        self.gate: Gate | None = None
        self.tcp: zmq.Socket[Any] | None = None
        if config.bus.listen_tcp:
            self.gate, self.tcp = self._listen_tcp(config.bus.listen_tcp)
            self.poller.register(self.tcp, zmq.POLLIN)
        self.broker = Broker(self.bus, config.bus, self.supervisor, self.tcp, self.remote)
        self.broker.control = self._on_control
        self._commands = dict(
            [
                _control(PingRequest, self._ping),
                _control(StatusRequest, lambda _client, _env, _body: self.status()),
                _control(RestartRequest, self._restart),
                _control(StopRequest, self._stop),
                _control(AttachRequest, self._attach),
                _control(CliRequest, self._cli),
            ]
        )
        self.supervisor.on_gone = self.broker.drop_name
        self.supervisor.on_fd_change = self._watch_fd
        self._stop_waiters: list[tuple[bytes, Envelope]] = []
        self._stopping = False
        self._signalled = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.poller.register(self._wake_r.fileno(), zmq.POLLIN)
        self.errands = Errands(home)
        self.poller.register(self.errands.fileno(), zmq.POLLIN)

    def _bind(self, kind: int, endpoint: str) -> zmq.Socket[Any]:
        sock: zmq.Socket[Any] = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.MAXMSGSIZE, self.config.bus.max_message_bytes)
        # Create the socket file already restricted to this user (the folder is 0700 as well).
        old_umask = os.umask(0o177)
        try:
            sock.bind(endpoint)
        finally:
            os.umask(old_umask)
        return sock

    def _listen_tcp(self, host_port: str) -> tuple[Gate, zmq.Socket[Any]]:
        """The CURVE-only ROUTER where remote workers join, its ZAP handler running before it binds."""
        gate = Gate(self.ctx, self.home)
        gate.open()
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.MAXMSGSIZE, self.config.bus.max_message_bytes)
        # No ROUTER_HANDOVER here: a second connection with a remote member's identity (another admitted
        # key, say) is refused rather than taking its jobs over. ZMTP heartbeats close a dead link's
        # connection, so the identity is free again when that worker's replacement connects.
        sock.setsockopt(zmq.HEARTBEAT_IVL, int(self.config.bus.heartbeat_interval_s * 1000))
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(self.config.bus.liveness_s * 1000))
        ensure_keypair(self.home.bus_keys)
        curve_server(sock, load_keypair(self.home.bus_keys))
        host, port = split_host_port(host_port)
        sock.setsockopt(zmq.IPV6, ":" in host)
        sock.bind(f"tcp://{'*' if host in WILDCARD_HOSTS else ('[' + host + ']' if ':' in host else host)}:{port}")
        return gate, sock

    def _watch_fd(self, fd: int, add: bool) -> None:
        if add:
            self.poller.register(fd, zmq.POLLIN)
        else:
            self.poller.unregister(fd)

    # ---------------------------------------------------------------------------------------

    def _publish_state(self, slot: Slot, old: State, reason: str) -> None:
        event = WorkerStateEvent(slot.name, slot.service, str(old), str(slot.state), slot.pid, reason)
        env = Envelope(kind=WorkerStateEvent.KIND, src="kernel")
        frames.send(self.events, env, event, route=[WorkerStateEvent.KIND.encode()])
        if slot.state in (State.FAILED, State.EXITED):
            self.broker.fail_unservable()

    def _on_signal(self, signum: int, frame: object) -> None:
        # Only note it: the loop starts the stop between two events, never in the middle of one.
        self._signalled = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _begin_stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("stopping every worker")
        self.broker.accepting = False
        self.supervisor.stop_all()
        self.broker.fail_unservable()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        log.info("kernel %s started (pid %d), bus %s", __version__, os.getpid(), self.home.bus_endpoint)
        if self.config.bus.listen_tcp:
            log.info("remote workers join on tcp://%s (CURVE, allow-listed keys only)", self.config.bus.listen_tcp)
        self.supervisor.start_all()
        while not (self._stopping and self.supervisor.all_stopped):
            now = time.monotonic()
            due = min(self.broker.next_due(), self.supervisor.next_due())
            timeout_ms = max(0, min(int((due - now) * 1000) + 1, 5000))
            for sock, _ in self.poller.poll(timeout_ms):
                if sock is self.bus:
                    self.broker.on_readable()
                elif sock is self.tcp:
                    self.broker.on_readable(remote=True)
                elif sock == self._wake_r.fileno():
                    self._drain_wake()
                elif sock == self.errands.fileno():
                    self._answer_errands()
                elif isinstance(sock, int):
                    self.supervisor.on_fd(sock)
            if self._signalled:
                self._begin_stop()
            now = time.monotonic()
            self.broker.tick(now)
            self.supervisor.tick(now)
            if self.tcp is not None and now >= self._next_allow_check:
                self._next_allow_check = now + self.config.bus.heartbeat_interval_s
                self._dismiss_denied()
        report = self.supervisor.report()
        for client, env in self._stop_waiters:
            self.broker.reply(client, env, StopReply(report))
        log.info("kernel stopped: %s", report)
        self.bus.close(linger=500)
        if self.tcp is not None:
            self.tcp.close(linger=500)
        if self.gate is not None:
            self.gate.stop()
        self.events.close(linger=0)
        self.errands.close()
        self.ctx.term()
        return 0

    def _dismiss_denied(self) -> None:
        """After a ``bus deny`` (the allow list's file changed): its key's members are dropped and told to go."""
        try:
            st = self.home.allowed_keys_file.stat()
            stamp = (st.st_mtime_ns, st.st_ino)
        except OSError:
            stamp = (0, 0)
        if stamp == self._allowed_stamp:
            return
        self._allowed_stamp = stamp
        self.broker.dismiss_keys(set(curve.allowed(self.home)), "its key was denied")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(64):
                pass
        except OSError:
            pass

    # ---------------------------------------------------------------------------------------
    # control API: requests addressed to "kernel"

    def _on_control(self, client: bytes, packet: frames.Packet) -> None:
        env = packet.env
        handler = self._commands.get(env.kind)
        if handler is None:
            info = ErrorInfo(ErrorCode.UNKNOWN_KIND, f"kernel does not handle {env.kind}")
            self.broker.reply_error(client, env, info)
            return
        try:
            reply = handler(client, env, packet.body())
        except ProtocolError as exc:
            self.broker.reply_error(client, env, ErrorInfo(ErrorCode.BAD_REQUEST, str(exc)))
        except JobError as exc:
            self.broker.reply_error(client, env, exc.info)
        else:
            if reply is not None:
                self.broker.reply(client, env, reply)

    def _ping(self, _client: bytes, _env: Envelope, _body: PingRequest) -> Message:
        return PingReply("kernel", os.getpid(), time.monotonic() - self.started)

    def _restart(self, _client: bytes, _env: Envelope, body: RestartRequest) -> Message:
        if not self.supervisor.targets(body.target):
            slots = self.supervisor.slots.values()
            known = ", ".join(
                dict.fromkeys([*(s.name for s in slots), *(s.service for s in slots if s.service != s.name)])
            )
            raise JobError(ErrorCode.UNKNOWN_WORKER, f"no worker named {body.target!r} (known: {known})")
        if self._stopping:
            raise JobError(ErrorCode.SHUTTING_DOWN, "foldermind is stopping")
        return RestartReply(self.supervisor.restart(body.target))

    def _stop(self, client: bytes, env: Envelope, _body: StopRequest) -> None:
        """Answered when every worker has stopped (the report), by :meth:`run`."""
        self._stop_waiters.append((client, env))
        self._begin_stop()

    def _attach(self, _client: bytes, env: Envelope, body: AttachRequest) -> Message:
        # Field types were checked when the body was decoded; a pid must also name a process.
        if body.pid <= 0:
            raise JobError(ErrorCode.BAD_REQUEST, f"{env.kind}: pid must be positive")
        slot = self.supervisor.attach(body.name, body.pid)
        if slot is None:
            raise JobError(ErrorCode.UNKNOWN_WORKER, f"no worker {body.name!r}, or it is already attached")
        return AttachReply(slot.name, slot.service)

    def _cli(self, client: bytes, env: Envelope, body: CliRequest) -> None:
        """Answered when the command ends, by :meth:`_answer_errands` (:mod:`.errands`)."""
        if self._stopping:
            raise JobError(ErrorCode.SHUTTING_DOWN, "foldermind is stopping")
        self.errands.start(client, env, body)

    def _answer_errands(self) -> None:
        for client, env, result in self.errands.finished():
            if isinstance(result, JobError):
                self.broker.reply_error(client, env, result.info)
            else:
                self.broker.reply(client, env, result)

    def status(self) -> StatusReply:
        now = time.monotonic()
        workers: list[WorkerInfo] = []
        for slot in self.supervisor.slots.values():
            running = slot.state is State.RUNNING and slot.running_since is not None
            last_error, past_error = slot.error_now()
            workers.append(
                WorkerInfo(
                    name=slot.name,
                    service=slot.service,
                    state=str(slot.state),
                    pid=slot.pid,
                    uptime_s=round(now - slot.running_since, 3) if running and slot.running_since else None,
                    restarts=slot.restarts,
                    in_flight=self.broker.in_flight(slot.name),
                    last_error=last_error,
                    rss_bytes=self.supervisor.rss(slot),
                    note=self.broker.note(slot.name) or (IDLE_NOTE if slot.state is State.IDLE else ""),
                    remote=False,
                    key=None,
                    past_error=past_error,
                    error_at=slot.error_at,
                )
            )
        for member in self.remote.members.values():
            up = member.state == REMOTE
            workers.append(
                WorkerInfo(
                    name=member.name,
                    service=member.service,
                    state=member.state,
                    pid=member.pid,
                    uptime_s=round(now - member.joined, 3) if up else None,
                    restarts=0,
                    in_flight=self.broker.in_flight(member.name) if up else 0,
                    last_error=member.last_error,
                    rss_bytes=None,
                    note=self.broker.note(member.name) if up else "",
                    remote=True,
                    key=member.key,
                    past_error=None,
                    error_at=None,
                )
            )
        me = psutil.Process()
        own = int(me.memory_info().rss)
        kernel = KernelInfo(
            pid=os.getpid(),
            uptime_s=round(now - self.started, 3),
            version=__version__,
            rss_bytes=own,
            tree_rss_bytes=own + _children_rss(me),
        )
        console = self._served("console", self.home.read_console_info)
        return StatusReply(kernel=kernel, workers=workers, mcp=self.mcp_info(), folders=[], console=console)

    def mcp_info(self) -> McpInfo:
        """The front door's URL and port as it wrote them once bound; its state follows the worker's."""
        return self._served("frontdoor", self.home.read_mcp_info)

    def _served(self, name: str, read: Callable[[], dict[str, Any] | None]) -> McpInfo:
        """An HTTP worker's URL and port from the file it wrote once bound; its state follows the worker's."""
        slot = self.supervisor.slots.get(name)
        if slot is None:
            return McpInfo(url=None, port=None, state="disabled")
        info = read() or {}
        if info.get("pid") != slot.pid or slot.state is not State.RUNNING:
            # A file left by an earlier process says nothing about this one.
            return McpInfo(url=None, port=None, state="starting" if slot.state is State.STARTING else "stopped")
        return McpInfo(url=info.get("url"), port=info.get("port"), state=str(info.get("state", "unknown")))


def _children_rss(process: psutil.Process) -> int:
    """The RSS of every process under ``process`` (a child may end while it is counted: then it counts 0)."""
    total = 0
    for pid in _descendants(process):
        with contextlib.suppress(psutil.Error):
            total += int(psutil.Process(pid).memory_info().rss)
    return total


def _descendants(process: psutil.Process) -> list[int]:
    """Every process under ``process``, read from each of its threads' ``children`` files in /proc and theirs in
    turn: the tree's own files, where psutil's ``children()`` reads the state of every process on the machine
    (status asks this at each call; the ingest bench samples it twice a second). Where the files are missing
    (no /proc, a kernel built without them): psutil's walk."""
    if not os.path.exists(f"/proc/{process.pid}/task/{process.pid}/children"):
        return [child.pid for child in process.children(recursive=True)]
    found: list[int] = []
    todo = [process.pid]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):  # a process that ended meanwhile has no children left to count
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                    kids = [int(n) for n in fh.read().split()]
                    found += kids
                    todo += kids
    return found
