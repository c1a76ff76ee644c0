"""Requests from an HTTP worker's event loop (the front door's tool calls, the console's pages) reach the other
workers through the broker; this is where a bus failure gets its message for a person or an MCP client.

A call waits on the HTTP server's asyncio loop itself, on a ZeroMQ asyncio socket of its own (a pool per
loop, one socket per call in flight), so many tool calls are in flight at once, a slow worker never blocks
the loop, and no call pays a hop to a thread and back. A call with partial replies (the chat's streamed
answer, whose callback blocks) runs :class:`BusClient` in a worker thread with that thread's own client
(ZeroMQ sockets are not thread-safe). Every request carries a deadline; the broker answers by it at the
latest, so no call can hang.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import anyio
import anyio.to_thread
import zmq
import zmq.asyncio

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError, ErrorCode, JobError, KernelUnavailable
from foldermind.protocol.messages import Envelope, JobCancel, Message

T = TypeVar("T", bound=Message)


class Bus:
    def __init__(
        self, endpoint: str, name: str, deadline_s: float, prepare: Callable[[str, Message], Message] | None = None
    ) -> None:
        self.endpoint = endpoint
        self.name = name
        self.deadline_s = deadline_s
        self.prepare = prepare
        """What an async request becomes before it goes (the front door: a scoped client key's folders)."""
        self._local = threading.local()
        self._clients: list[BusClient] = []
        self._sockets: list[zmq.asyncio.Socket] = []
        self._lock = threading.Lock()

    def _client(self) -> BusClient:
        client: BusClient | None = getattr(self._local, "client", None)
        if client is None:
            client = BusClient(self.endpoint, name=self.name)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def call_sync(
        self,
        to: str,
        msg: Message,
        reply_type: type[T],
        timeout: float | None = None,
        on_partial: Callable[[Message], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[T, Sequence[frames.Buffer]]:
        """A failure is a :class:`JobError` with the code that says what happened; a bus failure (the
        worker lost, past its deadline, none running, no kernel) gets a message that names the worker and
        hides the internal cause, and a client sees it as ``SERVICE_UNAVAILABLE`` (``ErrorCode.mcp``).
        Setting ``cancel`` gives the request up (``job.cancel``)."""
        try:
            reply = self._client().request(
                to, msg, reply_type, timeout=timeout or self.deadline_s, on_partial=on_partial, cancel=cancel
            )
        except JobError as exc:
            if exc.code.mcp == ErrorCode.SERVICE_UNAVAILABLE.mcp:
                raise _unavailable(to, exc) from None
            raise
        except BusError as exc:
            # No kernel answered, or a reply we could not read: the client's socket may hold a stale
            # reply now, so it is replaced.
            self._drop_client()
            raise _lost(to, exc) from None
        return reply.body, reply.buffers

    async def call(
        self,
        to: str,
        msg: Message,
        reply_type: type[T],
        timeout: float | None = None,
        on_partial: Callable[[Message], None] | None = None,
    ) -> T:
        """The request's reply body, as ``call_sync`` gives it. If this task is cancelled (the MCP client sent
        ``notifications/cancelled`` or went away), the job is cancelled on the bus, so a long generation stops
        instead of running to its end for nobody."""
        body, _ = await self.call_with_buffers(to, msg, reply_type, timeout, on_partial)
        return body

    async def call_with_buffers(
        self,
        to: str,
        msg: Message,
        reply_type: type[T],
        timeout: float | None = None,
        on_partial: Callable[[Message], None] | None = None,
    ) -> tuple[T, Sequence[frames.Buffer]]:
        """As :meth:`call`, with the reply's buffer frames (a rendered page's PNG)."""
        if self.prepare is not None:
            msg = self.prepare(to, msg)
        if on_partial is None and _on_asyncio():
            return await self._call_on_loop(to, msg, reply_type, timeout or self.deadline_s)
        cancel = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(self.call_sync, to, msg, reply_type, timeout, on_partial, cancel),
                abandon_on_cancel=True,
            )
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise

    async def _call_on_loop(
        self, to: str, msg: Message, reply_type: type[T], timeout: float
    ) -> tuple[T, Sequence[frames.Buffer]]:
        """``BusClient.request`` on an asyncio socket of this loop's pool: one request in flight per socket, so a
        socket goes back to the pool only after its final reply; a cancelled or failed one is closed."""
        pool: list[zmq.asyncio.Socket] = self._local.__dict__.setdefault("pool", [])
        sock = pool.pop() if pool else self._async_socket()
        env = Envelope(kind=msg.KIND, src=self.name, to=to, deadline=time.time() + timeout)
        give_up = time.monotonic() + timeout + 1.0  # the broker answers by the deadline; this covers no kernel
        try:
            await sock.send_multipart(frames.encode(env, msg), copy=False)
            while True:
                parts: list[zmq.Frame] | None = None
                with anyio.move_on_after(give_up - time.monotonic()):
                    parts = await sock.recv_multipart(copy=False)
                if parts is None:
                    raise KernelUnavailable(f"no answer from the kernel within {timeout + 1.0:.1f} s")
                packet = frames.parse(parts, 0)
                if packet.env.cid == env.id and packet.env.status != "partial":
                    reply = BusClient._unwrap(packet, reply_type)
                    break
        except anyio.get_cancelled_exc_class():
            cancel = Envelope(kind=JobCancel.KIND, src=self.name, to="kernel", cid=env.id)
            sock.send_multipart(frames.encode(cancel, JobCancel("")), flags=zmq.NOBLOCK)
            self._discard(sock, linger_ms=100)  # the cancel still goes
            raise
        except JobError as exc:
            pool.append(sock)  # its final reply came: the socket is clean
            if exc.code.mcp == ErrorCode.SERVICE_UNAVAILABLE.mcp:
                raise _unavailable(to, exc) from None
            raise
        except (BusError, zmq.ZMQError) as exc:
            self._discard(sock, linger_ms=0)  # it may hold a stale reply
            raise _lost(to, exc) from None
        pool.append(sock)
        return reply.body, reply.buffers

    def _async_socket(self) -> zmq.asyncio.Socket:
        ctx = zmq.asyncio.Context.shadow(zmq.Context.instance())
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IDENTITY, f"{self.name}.{os.getpid()}.{os.urandom(4).hex()}".encode())
        sock.connect(self.endpoint)
        with self._lock:
            self._sockets.append(sock)
        return sock

    def _discard(self, sock: zmq.asyncio.Socket, linger_ms: int) -> None:
        with self._lock:
            self._sockets.remove(sock)
        sock.close(linger=linger_ms)

    def _drop_client(self) -> None:
        client: BusClient | None = getattr(self._local, "client", None)
        if client is not None:
            self._local.client = None
            with self._lock:
                self._clients.remove(client)
            client.close()

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()
            for sock in self._sockets:
                sock.close(linger=0)
            self._sockets.clear()


def _on_asyncio() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # another event loop library (trio)
        return False


def _unavailable(to: str, exc: JobError) -> JobError:
    """A worker's SERVICE_UNAVAILABLE reply, with a message that names it."""
    return JobError(exc.code, f"the {to} worker is unavailable ({exc.code}); retry shortly")


def _lost(to: str, exc: Exception) -> JobError:
    """No kernel answered, or a reply that could not be read."""
    return JobError(ErrorCode.SERVICE_UNAVAILABLE, f"the {to} worker is unavailable ({type(exc).__name__})")
