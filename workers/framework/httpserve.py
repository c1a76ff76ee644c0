"""Serving an ASGI app on a thread of a worker: the listening socket (with its taken-port fallback), a read
deadline per request and uvicorn on its own event loop, shared by the front door and the console.

The worker's main thread keeps serving the bus; uvicorn runs beside it. Access logs are off: a request line
carries queries and paths, which stay out of logs.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time

import h11
import uvicorn
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("foldermind.http")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``port``, or on an OS-assigned port if that one is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for candidate in (port, 0) if port else (0,):
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
        # listening socket says so, and without it every response waits ~40 ms on delayed ACKs.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE and candidate:
                log.warning("port %d is taken; binding an OS-assigned port instead", candidate)
                continue
            raise
        sock.listen(128)
        sock.set_inheritable(False)
        return sock
    raise OSError(errno.EADDRINUSE, "no port could be bound")


def loopback_hosts(port: int) -> list[str]:
    """The Host headers a loopback server answers (anything else is a DNS rebinding attempt)."""
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


def loopback_origins(port: int) -> set[str]:
    return {f"http://{host}" for host in loopback_hosts(port)}


# The client still owes (part of) a request: its headers, or the rest of a body it announced.
_READING = (h11.IDLE, h11.SEND_BODY)


class ReadDeadline:
    """How long a client may take to send one whole request, and how many connections missed it.

    uvicorn times out only an idle keep-alive connection after a response: a connection that never
    sends a byte, or sends half a request line, headers or body and stalls (slowloris), is held open
    forever, and a few thousand of them exhaust the front door's file descriptors.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = 0

    def protocol(self) -> type[H11Protocol]:
        deadline = self

        class TimedH11Protocol(H11Protocol):
            """uvicorn's h11 protocol, closing a connection whose request is not complete in time. The
            clock starts when the connection opens, or at the first byte of the next request on a
            kept-alive one (until then uvicorn's own keep-alive timeout applies); it is a deadline, not
            an idle timeout, so dripping one byte at a time does not extend it."""

            _read_timer: asyncio.TimerHandle | None = None

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                super().connection_made(transport)  # type: ignore[arg-type]
                self._watch_read()

            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                self._watch_read()

            def connection_lost(self, exc: Exception | None) -> None:
                self._stop_read_timer()
                super().connection_lost(exc)

            def _watch_read(self) -> None:
                if self.conn.their_state not in _READING or self.transport.is_closing():
                    self._stop_read_timer()
                elif self._read_timer is None:
                    self._read_timer = self.loop.call_later(deadline.seconds, self._read_expired)

            def _stop_read_timer(self) -> None:
                if self._read_timer is not None:
                    self._read_timer.cancel()
                    self._read_timer = None

            def _read_expired(self) -> None:
                self._read_timer = None
                if self.conn.their_state in _READING and not self.transport.is_closing():
                    deadline.expired += 1
                    # The app (if it got the headers) sees a disconnect and stops reading the body.
                    self.transport.close()

        return TimedH11Protocol


class HttpServer(threading.Thread):
    """uvicorn on its own thread and event loop; the worker's main thread keeps serving the bus."""

    def __init__(
        self, app: ASGIApp, sock: socket.socket, request_timeout_s: float = 10.0, name: str = "frontdoor-http"
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.read_deadline = ReadDeadline(request_timeout_s)
        config = uvicorn.Config(
            app,
            http=self.read_deadline.protocol(),
            log_level="warning",
            access_log=False,  # an access log would record request lines; keep requests out of logs
            lifespan="on",
            server_header=False,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
        )
        self.server = uvicorn.Server(config)
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self.sock])

    def run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self.error = exc
            log.exception("the HTTP server stopped")

    def wait_started(self, timeout: float) -> bool:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if self.server.started:
                return True
            if self.error is not None or not self.is_alive():
                return False
            time.sleep(0.01)
        return False

    def responsive(self, timeout: float) -> bool:
        """Whether the event loop runs a callback within ``timeout`` seconds (True before it started or after it
        ended: a server that is not serving is not hung)."""
        loop, ran = self.loop, threading.Event()
        if loop is None or loop.is_closed():
            return True
        try:
            loop.call_soon_threadsafe(ran.set)
        except RuntimeError:  # closed meanwhile
            return True
        return ran.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        # Open event streams (an MCP client's GET stream, a console page) end at once instead of holding the stop
        # until its grace runs out: sse-starlette notices uvicorn's exit by the signal handler uvicorn installs
        # only on the main thread, so it is told here.
        AppStatus.should_exit = True
        self.server.should_exit = True
        self.join(timeout)
        self.sock.close()
