"""A worker's heartbeat thread: it keeps the kernel sure the worker lives, and the worker sure the kernel does.

It owns the worker's second DEALER socket (the job socket's identity plus ``/hb``), so a long job on the job
thread never delays a beat. Each beat carries the job count, the status note, whether a model is loading
(:data:`model_loads`: the kernel then allows more missed beats) and the progress count. The kernel's answers
also carry a ``job.cancel`` for the job in hand and a dismissal. If the kernel stops answering for ``liveness``
intervals the process exits, so no worker outlives its kernel; a remote worker that has been heard joins again
instead, and one whose key the kernel's ZAP handler refuses exits with :data:`EXIT_KEY_REFUSED`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ProtocolError
from foldermind.protocol.messages import Disconnect, Envelope, Heartbeat, JobCancel
from foldermind.protocol.runtime.context import WorkerContext

log = logging.getLogger("foldermind.worker")

ZAP_REFUSED = 400
"""The ZAP status of a key the kernel's allow list does not hold (RFC 27: 400 = authentication failure)."""
EXIT_KEY_REFUSED = 3
"""How a remote worker whose key the kernel refused exits (`worker run` then fails, and says why)."""


class ModelLoads:
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


model_loads = ModelLoads()


class Beating(Protocol):
    """What the heartbeat thread reads from the job loop, and tells it."""

    busy: int
    rejoin: bool
    rejoining: bool

    def status(self) -> tuple[str, int]:
        """The worker's status note and progress count, sent with each beat."""
        ...

    def dismissed(self, packet: frames.Packet) -> None: ...

    def cancel(self, job_id: str) -> None: ...

    def request_stop(self) -> None: ...


def connect(sock: zmq.Socket[Any], ctx: WorkerContext) -> None:
    """Connect to the bus; a remote worker's sockets (both of them) first become CURVE clients."""
    if ctx.curve_server_key:
        # Imported here: only a remote worker needs them (zmq.auth and asyncio, via the monitor, ~0.03 CPU-s
        # of every local worker's start otherwise).
        from foldermind.protocol.runtime import keys

        keys.curve_client(sock, keys.load_keypair(Path(ctx.curve_keys)), ctx.curve_server_key)
    sock.connect(ctx.bus_endpoint)


class HeartbeatThread(threading.Thread):
    """Sends heartbeats on a socket of its own and exits the process if the kernel goes silent."""

    def __init__(self, zctx: zmq.Context[Any], ctx: WorkerContext, identity: bytes, runner: Beating) -> None:
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
        connect(self.sock, ctx)
        self.stopping = threading.Event()

    def _key_refused(self) -> bool:
        if self.refusals is None:
            return False
        from zmq.utils.monitor import recv_monitor_message  # a remote worker's only (see connect)

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
                note, progress = self.runner.status()
                beat = Heartbeat(self.ctx.name, os.getpid(), self.runner.busy, note, model_loads.active(), progress)
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
