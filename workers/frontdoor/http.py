"""The HTTP side of the front door: its app stack (the socket and the uvicorn thread: :mod:`..framework.httpserve`).

Stack, outermost first: :class:`~foldermind.workers.frontdoor.guard.Guard` (size -> auth -> Origin ->
rate limit), then the MCP SDK's Starlette app (Host/Origin checks against DNS rebinding, configured for
the port actually bound; sessions, :mod:`.sessions`; the tools).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.transport_security import TransportSecuritySettings

from foldermind.protocol.runtime.client_keys import ClientKey
from foldermind.protocol.runtime.config import McpPolicy
from foldermind.workers.framework.httpserve import HttpServer, bind, loopback_hosts, loopback_origins
from foldermind.workers.frontdoor.disconnect import WatchDisconnect
from foldermind.workers.frontdoor.guard import Guard
from foldermind.workers.frontdoor.server import FoldermindServer
from foldermind.workers.frontdoor.sessions import session_app

__all__ = ["HttpServer", "bind", "build_app"]


def build_app(
    server: FoldermindServer,
    policy: McpPolicy,
    port: int,
    token: Callable[[], str],
    client_key: Callable[[str], ClientKey | None] | None = None,
) -> Guard:
    """The app stack; its outermost layer, the guard, is the ASGI app to serve."""
    origins = loopback_origins(port) | set(policy.allowed_origins)
    hosts = loopback_hosts(port)
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
