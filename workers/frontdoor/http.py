"""The HTTP side of the front door: the listening socket, the app stack and the uvicorn thread.

Stack, outermost first: :class:`~foldermind.workers.frontdoor.guard.Guard` (size -> auth -> Origin ->
rate limit), then the MCP SDK's Starlette app (Host/Origin checks against DNS rebinding, configured for
the port actually bound; sessions, :mod:`.sessions`; the tools).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time
from collections.abc import Callable

import h11
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from foldermind.protocol.runtime.client_keys import ClientKey
from foldermind.protocol.runtime.config import McpPolicy
from foldermind.workers.frontdoor.disconnect import WatchDisconnect
from foldermind.workers.frontdoor.guard import Guard
from foldermind.workers.frontdoor.sessions import session_app
from foldermind.workers.frontdoor.tools import FoldermindServer

log = logging.getLogger("foldermind.frontdoor")


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


def loopback_origins(port: int) -> set[str]:
    return {f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"}


def build_app(
    server: FoldermindServer,
    policy: McpPolicy,
    port: int,
    token: Callable[[], str],
    client_key: Callable[[str], ClientKey | None] | None = None,
) -> Guard:
    """The app stack; its outermost layer, the guard, is the ASGI app to serve."""
    origins = loopback_origins(port) | set(policy.allowed_origins)
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    if policy.host not in ("127.0.0.1", "localhost", "::1"):
        hosts.append(f"{policy.host}:{port}")
    max_body = int(policy.max_body_mb * 1024 * 1024)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=sorted(origins)
    )
    starlette_app = session_app(
        server,
        policy.path,
        security=security,
        max_body_bytes=max_body,
        idle_timeout_s=policy.session_idle_timeout_s,
        max_sessions=policy.max_sessions,
    )
    return Guard(
        WatchDisconnect(starlette_app),
        token=token,
        max_body_bytes=max_body,
        allowed_origins=lambda: origins,
        rate_per_minute=policy.rate_per_minute,
        # Session ids the server never issued count as no session (the connection's bucket), or a client
        # could dodge the limit by inventing a new id per request.
        session_known=lambda sid: sid in server.issued_sessions(),
        client_key=client_key,
    )


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

    def __init__(self, app: ASGIApp, sock: socket.socket, request_timeout_s: float = 10.0) -> None:
        super().__init__(name="frontdoor-http", daemon=True)
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

    def run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
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

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.join(timeout)
        self.sock.close()
