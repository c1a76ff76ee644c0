"""The frontdoor worker: the MCP server (streamable HTTP on 127.0.0.1) that every client, and the stdio
bridge ``foldermind mcp``, talks to.

The worker's main thread serves the bus like every worker (``mcp.info``, ``mcp.token.rotate``, ``mcp.activity``);
uvicorn runs the HTTP app on a second thread. Tool calls go from there to the other workers through the broker
(:mod:`.bus`), so a dead or stuck worker costs a typed SERVICE_UNAVAILABLE, never a hang, and this
process keeps answering. The URL and port actually bound are written to the home's ``run/mcp.json`` for
``foldermind status``, ``config snippet``, ``test-connection`` and the stdio bridge.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    ActivityReply,
    ActivityRequest,
    McpInfoReply,
    McpInfoRequest,
    TokenRotateReply,
    TokenRotateRequest,
)
from foldermind.protocol.runtime import activity
from foldermind.protocol.runtime.activity import ActivityLog
from foldermind.protocol.runtime.client_keys import ClientKeys
from foldermind.protocol.runtime.config import activity_from_env, llm_from_env, mcp_from_env
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenPersistError, TokenStore
from foldermind.workers.answers import conversations
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route
from foldermind.workers.frontdoor import keyscope
from foldermind.workers.frontdoor.guard import Guard
from foldermind.workers.frontdoor.http import HttpServer, bind, build_app
from foldermind.workers.frontdoor.keyscope import KeyMiddleware
from foldermind.workers.frontdoor.server import build_server
from foldermind.workers.frontdoor.sessions import EvictingSessionManager

log = logging.getLogger("foldermind.frontdoor")

ROLE = "The MCP server: streamable HTTP on 127.0.0.1 and the stdio bridge's endpoint."
PORT_ENV = "FOLDERMIND_MCP_PORT"


def _version() -> str:
    try:
        return version("foldermind")
    except PackageNotFoundError:
        return "0"


class FrontdoorWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = mcp_from_env()
        self.home = Home.resolve(ctx.home or None)
        self.state = "starting"
        self.error = ""
        self.url = ""
        self.port = 0
        self.asked_port: int | None = None
        self.http: HttpServer | None = None
        self.guard: Guard | None = None

    def setup(self) -> None:
        _raise_fd_limit()
        self.home.ensure()
        self.tokens = TokenStore(self.home)
        self.tokens.load_or_create()
        self.bus = Bus(self.ctx.bus_endpoint, f"{self.ctx.name}.tools", self.policy.tool_deadline_s, keyscope.apply)
        port = self.policy.port
        if os.environ.get(PORT_ENV, "").strip():
            port = int(os.environ[PORT_ENV])
        sock = bind(self.policy.host, port)
        self.asked_port = port  # what start, the environment or the config asked for; `doctor` compares
        self.port = sock.getsockname()[1]
        host = f"[{self.policy.host}]" if ":" in self.policy.host else self.policy.host
        self.url = f"http://{host}:{self.port}{self.policy.path}"
        self.keys = ClientKeys(self.home)
        self.activity = ActivityLog(self.home.data_dir, activity_from_env())
        middleware = KeyMiddleware(
            self.activity, self._key_names, self._close_session, lambda: self.server.issued_sessions()
        )
        kept = self.home.data_dir / conversations.FILE
        self.server = build_server(self.bus, self.policy, _version(), llm_from_env(), middleware, kept)
        self.guard = build_app(self.server, self.policy, self.port, lambda: self.tokens.current, self.keys.by_token)
        self.http = HttpServer(self.guard, sock, self.policy.request_timeout_s)
        self.http.start()
        if self.http.wait_started(15):
            self.state = "running"
            log.info("MCP server listening on %s (token stored in %s mode)", self.url, self.tokens.mode)
        else:
            self.state = "error"
            self.error = f"the HTTP server did not start: {self.http.error!r}"
            log.error("%s", self.error)
        self.status_note = f"{self.state} {self.url}"
        self._write_info()

    def _key_names(self) -> frozenset[str] | None:
        try:
            return self.keys.names()
        except OSError:
            return None

    def _close_session(self, session_id: str) -> None:
        cast(EvictingSessionManager, self.server.session_manager).close(session_id)

    def teardown(self) -> None:
        if self.http is not None:
            self.http.stop()
        if hasattr(self, "activity"):
            self.activity.close()
        self.bus.close()
        self.state = "stopped"
        with contextlib.suppress(FileNotFoundError):
            self.home.mcp_file.unlink()

    def _write_info(self) -> None:
        self.home.write_mcp_info(
            {
                "url": self.url,
                "port": self.port,
                "asked_port": self.asked_port,
                "state": self.state,
                "error": self.error,
                "pid": os.getpid(),
            }
        )

    def handlers(self) -> dict[str, Handler]:
        return dict(
            [
                *super().handlers().items(),
                route(McpInfoRequest, self.on_info),
                route(TokenRotateRequest, self.on_rotate),
                route(ActivityRequest, self.on_activity),
            ]
        )

    def details(self) -> dict[str, Any]:
        guard = self.guard.stats() if self.guard is not None else {}
        timed_out = self.http.read_deadline.expired if self.http is not None else 0
        return {
            "url": self.url,
            "port": self.port,
            "state": self.state,
            "sessions": self.sessions(),
            "refused": guard,
            "timed_out": timed_out,
        }

    def on_info(self, req: Request[McpInfoRequest]) -> Result:
        return McpInfoReply(
            url=self.url,
            port=self.port,
            state=self.state,
            error=self.error,
            token_mode=self.tokens.mode,
            sessions=self.sessions(),
        )

    def sessions(self) -> int:
        return len(self.server.issued_sessions())

    def on_rotate(self, req: Request[TokenRotateRequest]) -> Result:
        try:
            self.tokens.rotate()
        except TokenPersistError as exc:
            log.warning("token rotation failed; the previous token stays in use")
            raise JobError(ErrorCode.TOKEN_PERSIST_FAILED, str(exc)) from exc
        log.info("bearer token rotated")
        return TokenRotateReply(token_mode=self.tokens.mode)

    def on_activity(self, req: Request[ActivityRequest]) -> Result:
        """What clients did (the console's Activity page), read from the table this process writes."""
        body = req.body
        if not isinstance(body.client, str) or not isinstance(body.since, int | float) or isinstance(body.since, bool):
            raise JobError(ErrorCode.BAD_REQUEST, "client is a key's name and since a time in epoch seconds")
        limit = body.limit if isinstance(body.limit, int) and not isinstance(body.limit, bool) else 200
        data = self.home.data_dir
        rows = activity.read(data, body.client or None, float(body.since) or None, max(1, min(limit, 1000)))
        names = set(activity.last_used(data)) | (self._key_names() or frozenset())
        return ActivityReply(rows=rows[::-1], clients=sorted(names))


def _raise_fd_limit() -> None:
    """Every HTTP connection costs a descriptor: lift the soft limit (often 1024) to the hard one, so a
    burst of connections, which the read deadline closes within seconds, cannot starve real clients."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


WORKER = FrontdoorWorker
