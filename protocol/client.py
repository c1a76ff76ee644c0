"""A bus client: send requests to services through the kernel and wait for their replies.

Used by the CLI, by benchmarks and by workers that call other workers. One client per thread
(ZeroMQ sockets are not thread-safe).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, JobError, KernelUnavailable, ProtocolError
from foldermind.protocol.messages import Envelope, JobCancel, Message

T = TypeVar("T", bound=Message)

CANCEL_POLL_S = 0.1
"""How often a request that may be cancelled looks at its ``cancel`` event while it waits."""


@dataclass(slots=True)
class Reply(Generic[T]):
    env: Envelope
    body: T
    buffers: list[Any]


class BusClient:
    """A DEALER connected to the kernel's bus socket."""

    def __init__(
        self,
        endpoint: str,
        name: str = "client",
        context: zmq.Context[Any] | None = None,
        max_bytes: int = frames.DEFAULT_MAX_BYTES,
    ) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self._ctx = context or zmq.Context.instance()
        self.sock: zmq.Socket[Any] = self._ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.IDENTITY, f"{name}.{os.getpid()}.{os.urandom(4).hex()}".encode())
        self.sock.connect(endpoint)

    def close(self) -> None:
        self.sock.close(0)

    def __enter__(self) -> BusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self,
        to: str,
        msg: Message,
        buffers: Sequence[frames.Buffer] = (),
        timeout: float = 30.0,
        attempt: int = 1,
    ) -> Envelope:
        """Send a request without waiting; returns its envelope (match replies on ``env.id``)."""
        env = Envelope(kind=msg.KIND, src=self.name, to=to, deadline=time.time() + timeout, attempt=attempt)
        frames.send(self.sock, env, msg, buffers)
        return env

    def receive(self, timeout: float) -> frames.Packet:
        """The next message, or KernelUnavailable after ``timeout`` seconds of silence."""
        if not self.sock.poll(int(max(timeout, 0) * 1000)):
            raise KernelUnavailable(f"no answer from the kernel within {timeout:.1f} s")
        return frames.recv(self.sock, 0, self.max_bytes)

    def request(
        self,
        to: str,
        msg: Message,
        reply_type: type[T],
        buffers: Sequence[frames.Buffer] = (),
        timeout: float = 30.0,
        on_partial: Callable[[Message], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply[T]:
        """Send ``msg`` to service/worker ``to`` and wait for its final reply; ``partial`` replies on the
        way go to ``on_partial`` (their decoded body), or are skipped.

        Setting ``cancel`` (from another thread) sends a ``job.cancel`` for the request within
        ``CANCEL_POLL_S``; the request then still ends with one final reply, usually ``cancelled``.

        The broker answers by the deadline at the latest (``deadline_exceeded``); the extra second
        of local patience only covers a kernel that is not there at all.
        """
        env = self.send(to, msg, buffers, timeout)
        give_up = time.monotonic() + timeout + 1.0
        while True:
            if cancel is not None:
                if cancel.is_set():
                    self.cancel(env)
                    cancel = None
                    continue
                wait = min(CANCEL_POLL_S, max(give_up - time.monotonic(), 0))
                if not self.sock.poll(int(wait * 1000)) and time.monotonic() < give_up:
                    continue
            packet = self.receive(give_up - time.monotonic())
            if packet.env.cid != env.id:
                continue  # a late reply to an earlier, abandoned request
            if packet.env.status == "partial":
                if on_partial is not None:
                    on_partial(packet.body())
                continue
            return self._unwrap(packet, reply_type)

    def cancel(self, request: Envelope, reason: str = "") -> None:
        """Give up ``request`` (sent by this client): see ``job.cancel``."""
        frames.send(
            self.sock, Envelope(kind=JobCancel.KIND, src=self.name, to="kernel", cid=request.id), JobCancel(reason)
        )

    @staticmethod
    def _unwrap(packet: frames.Packet, reply_type: type[T]) -> Reply[T]:
        if packet.env.status == "error":
            raise JobError.of(packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error reply without error"))
        body = packet.body()
        if not isinstance(body, reply_type):
            raise ProtocolError(f"expected {reply_type.KIND}, got {packet.env.kind}")
        return Reply(packet.env, body, packet.buffers)
