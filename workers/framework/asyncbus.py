"""Requests from an HTTP worker's event loop (the front door's tool calls, the console's pages) reach the other
workers through the broker; this is where a bus failure gets its message for a person or an MCP client.

An HTTP server runs on an asyncio loop while :class:`BusClient` is a blocking ZeroMQ socket: each call
runs in a worker thread with that thread's own client (ZeroMQ sockets are not thread-safe), so many tool
calls are in flight at once and a slow worker never blocks the loop. Every request carries a deadline;
the broker answers by it at the latest, so no call can hang.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import anyio
import anyio.to_thread

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError, ErrorCode, JobError
from foldermind.protocol.messages import Message

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
                raise JobError(exc.code, f"the {to} worker is unavailable ({exc.code}); retry shortly") from None
            raise
        except BusError as exc:
            # No kernel answered, or a reply we could not read: the client's socket may hold a stale
            # reply now, so it is replaced.
            self._drop_client()
            raise JobError(
                ErrorCode.SERVICE_UNAVAILABLE, f"the {to} worker is unavailable ({type(exc).__name__})"
            ) from None
        return reply.body, reply.buffers

    async def call(
        self,
        to: str,
        msg: Message,
        reply_type: type[T],
        timeout: float | None = None,
        on_partial: Callable[[Message], None] | None = None,
    ) -> T:
        """``call_sync`` on a worker thread. If this task is cancelled (the MCP client sent
        ``notifications/cancelled`` or went away), the thread is left to finish on its own and the job is
        cancelled on the bus, so a long generation stops instead of running to its end for nobody."""
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
        cancel = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(self.call_sync, to, msg, reply_type, timeout, on_partial, cancel),
                abandon_on_cancel=True,
            )
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise

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
