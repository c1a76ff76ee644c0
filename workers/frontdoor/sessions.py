"""MCP sessions (the handshake era's Mcp-Session-Id): at the cap, the longest-idle one makes room.

The SDK's session manager refuses a new session with 503 while ``max_sessions`` are open, so clients
that initialize and walk away lock everyone out until the idle timeout (an hour by default) closes
theirs. :class:`EvictingSessionManager` closes the session idle longest instead, and logs it without
anything a client sent. A session with a request in flight or an open GET stream is in use, not idle:
when every session is in use, a new one is still refused with 503.

Idle time is the SDK's own: each session's transport moves its idle deadline to "last request done +
timeout" whenever its last request completes (infinite while one is in flight), so the smallest finite
deadline is the longest idle. The SDK has no public hook for admission or for its app's session
manager; ``_admit_session``, ``_server_instances``, ``_session_owners``, ``_task_group``,
``_lowlevel_server`` and ``_session_manager`` are its private names (the mcp version is pinned in
pyproject.toml).
"""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import anyio
from anyio.abc import TaskGroup
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

log = logging.getLogger("foldermind.frontdoor")


class EvictingSessionManager(StreamableHTTPSessionManager):
    def __init__(
        self,
        app: Server[Any],
        *,
        security: TransportSecuritySettings,
        max_body_bytes: int,
        idle_timeout_s: float,
        max_sessions: int,
    ) -> None:
        super().__init__(
            app,
            security_settings=security,
            max_request_body_size=max_body_bytes,
            session_idle_timeout=idle_timeout_s,
            max_sessions=max_sessions,
        )

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # Called under the SDK's session-creation lock, so two new sessions cannot both take one's room.
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._close_longest_idle()
        return super()._admit_session(requestor)

    def close(self, session_id: str) -> None:
        """End a session now, as a client's DELETE would (its key was revoked)."""
        transport = self._server_instances.pop(session_id, None)
        if transport is None:
            return
        self._session_owners.pop(session_id, None)
        group = cast(TaskGroup, self._task_group)
        group.start_soon(transport.terminate)

    def _close_longest_idle(self) -> None:
        idle: list[tuple[float, str]] = []
        for session_id, transport in self._server_instances.items():
            scope = transport.idle_scope
            if scope is not None and not scope.cancel_called and math.isfinite(scope.deadline):
                idle.append((scope.deadline, session_id))
        if not idle or self.session_idle_timeout is None:
            return
        deadline, session_id = min(idle)
        transport = self._server_instances.pop(session_id)
        self._session_owners.pop(session_id, None)
        # Forgotten at once (its id answers 404 from now on), then ended as a client's DELETE ends it:
        # the transport's streams close and its server task winds down.
        group = cast(TaskGroup, self._task_group)  # set by run(), before any request; untyped in the SDK
        group.start_soon(transport.terminate)
        idle_s = anyio.current_time() - (deadline - self.session_idle_timeout)
        log.info(
            "closed the MCP session idle longest (%.0f s) to admit a new one: %d sessions are open, the cap",
            idle_s,
            self.max_sessions,
        )


def session_app(
    server: MCPServer[Any],
    path: str,
    *,
    security: TransportSecuritySettings,
    max_body_bytes: int,
    idle_timeout_s: float,
    max_sessions: int,
) -> Starlette:
    """``server``'s streamable HTTP app as ``streamable_http_app`` builds it (without auth), on an
    :class:`EvictingSessionManager`, which ``server.session_manager`` then returns as it would the SDK's."""
    lowlevel = server._lowlevel_server
    manager = EvictingSessionManager(
        lowlevel,
        security=security,
        max_body_bytes=max_body_bytes,
        idle_timeout_s=idle_timeout_s,
        max_sessions=max_sessions,
    )
    lowlevel._session_manager = manager
    return Starlette(
        routes=[Route(path, endpoint=StreamableHTTPASGIApp(manager))],
        lifespan=lambda app: manager.run(),
    )
