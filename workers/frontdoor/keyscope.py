"""Which client key a request came with, the scope that puts on every request to the indexer, and its activity.

The guard (:mod:`.guard`) authenticates a request and leaves its :class:`ClientKey` in the ASGI scope under
:data:`SCOPE_KEY`. :class:`KeyMiddleware`, a server middleware around every MCP request, makes it the
request's :data:`CLIENT` and records the request's activity; :func:`apply`, the ``prepare`` hook of the front
door's bus (:class:`foldermind.workers.framework.asyncbus.Bus`), puts a scoped key's folder ids on every message it
sends. That is the one place the scope is added: every tool, resource and prompt reaches the indexer through
the bus, and a message to the indexer that cannot carry a scope is refused for a scoped key rather than sent
without one. The indexer enforces it
(:mod:`foldermind.workers.indexer.search.visibility`).

A revoked key's open sessions and listen streams are closed within :data:`WATCH_S` (its next request is
refused at once).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import CheckRequest, Message
from foldermind.protocol.runtime.activity import ActivityLog, Row
from foldermind.protocol.runtime.client_keys import OWNER, ClientKey

log = logging.getLogger("foldermind.frontdoor")

SCOPE_KEY = "foldermind.client"
WATCH_S = 1.0
OWNER_KEY = ClientKey(OWNER, None)
CLIENT: contextvars.ContextVar[ClientKey | None] = contextvars.ContextVar("client", default=None)
SCOPE_FREE = frozenset({CheckRequest.KIND})
"""Indexer kinds that read no document beyond what the request carries (the claim check's given passages)."""
RECORDED = {"tools/call", "resources/read", "prompts/get", "resources/list"}
LISTEN = "subscriptions/listen"


def apply(to: str, msg: Message) -> Message:
    """``msg`` with the request's key scope on it (the request's own scope is never wider)."""
    key = CLIENT.get()
    if key is None or key.folders is None or to.split("#")[0] != "indexer":
        return msg
    if hasattr(msg, "scope"):
        msg.scope = list(key.folders)
        return msg
    if msg.KIND in SCOPE_FREE:
        return msg
    raise JobError(ErrorCode.INVALID_ARGUMENT, "not available to a client key scoped to some Smart Folders")


def asker() -> str:
    """The client key asking now: the answer engine keeps each key's chat sessions apart by it. Its name and the
    time it was made, so a key revoked and made again under the same name starts with none of its predecessor's
    conversations (kept in the home across restarts); a rotated token keeps them."""
    key = CLIENT.get()
    return f"{key.name}@{key.created!r}" if key is not None else ""


def request_key(ctx: ServerRequestContext[Any, Any]) -> ClientKey | None:
    request = ctx.request
    scope = getattr(request, "scope", None)
    key = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return key if isinstance(key, ClientKey) else None


class KeyMiddleware:
    """Every MCP request runs as its key (:data:`CLIENT`); tool calls and resource reads are recorded."""

    def __init__(
        self,
        activity: ActivityLog | None,
        live_names: Callable[[], frozenset[str] | None],
        close_session: Callable[[str], None],
        issued: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        self.activity = activity
        self.issued = issued  # the session ids the session manager still holds
        self.live_names = live_names  # the registry's key names now (None: unreadable, close nothing)
        self.close_session = close_session
        self.sessions: dict[str, str] = {}  # handshake-era session id -> key name
        self.streams: dict[str, set[anyio.CancelScope]] = {}  # key name -> its open listen streams
        self.task: asyncio.Task[None] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        key = request_key(ctx)
        if key is None:  # every HTTP request passed the guard; nothing else reaches the server
            key = ClientKey("unknown", ())
        sid = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if isinstance(sid, str) and sid and key.name != OWNER:
            self.sessions[sid] = key.name
            self._watch()
        token = CLIENT.set(key)
        started = time.perf_counter()
        outcome = "ok"
        result: HandlerResult = None
        try:
            result = await (self._stream(ctx, call_next, key) if ctx.method == LISTEN else call_next(ctx))
            return result
        except Exception as exc:
            outcome = _code_of(exc)
            raise
        finally:
            CLIENT.reset(token)
            if self.activity is not None and ctx.method in RECORDED:
                self._record(ctx, key, result, outcome, (time.perf_counter() - started) * 1000)

    async def _stream(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, key: ClientKey) -> HandlerResult:
        """A ``subscriptions/listen`` stream, ended when its client key is revoked."""
        if key.name == OWNER:
            return await call_next(ctx)
        with anyio.CancelScope() as scope:
            self.streams.setdefault(key.name, set()).add(scope)
            self._watch()
            try:
                return await call_next(ctx)
            finally:
                self.streams[key.name].discard(scope)
        raise MCPError(INVALID_REQUEST, "TOKEN_REFUSED: the client key of this stream was revoked")

    def _record(
        self, ctx: ServerRequestContext[Any, Any], key: ClientKey, result: Any, outcome: str, ms: float
    ) -> None:
        params = dict(ctx.params or {})
        tool = str(params.get("name", "")) if ctx.method in ("tools/call", "prompts/get") else ""
        label = f"{ctx.method}:{tool}" if tool and ctx.method == "prompts/get" else tool or ctx.method
        body = result if isinstance(result, dict) else getattr(result, "model_dump", lambda **_: {})(by_alias=True)
        if isinstance(body, dict) and body.get("isError"):
            outcome = _error_code(body)
        args = params.get("arguments") if ctx.method != "resources/read" else {"uri": params.get("uri")}
        assert self.activity is not None
        self.activity.record(
            Row(key.name, label[:100], outcome, documents(body), ms, arguments=args if isinstance(args, dict) else None)
        )

    def _watch(self) -> None:
        if self.task is None or self.task.done():
            # A context of its own: the loop must not run as the key of the request that started it.
            self.task = asyncio.get_running_loop().create_task(self._sweep(), context=contextvars.Context())

    async def _sweep(self) -> None:
        while self.sessions or any(self.streams.values()):
            await asyncio.sleep(WATCH_S)
            names = self.live_names()
            if names is None:
                continue
            for name, scopes in self.streams.items():
                if name not in names:
                    for scope in scopes:
                        scope.cancel()
            live = set(self.issued())
            for sid, name in list(self.sessions.items()):
                if sid not in live:
                    del self.sessions[sid]  # ended by its client or its idle timeout
                elif name not in names:
                    del self.sessions[sid]
                    self.close_session(sid)
                    log.info("closed an MCP session of a revoked client key")


def documents(body: Any) -> list[str]:
    """The document paths a tool result or resource read returned, in order, once each."""
    found: dict[str, None] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("file_path", "path") and isinstance(v, str) and v.startswith("/"):
                    found.setdefault(v, None)
                elif k == "uri" and isinstance(v, str) and v.startswith("foldermind://document/"):
                    from foldermind.workers.frontdoor.resources import document_path

                    found.setdefault(document_path(v) or v, None)
                else:
                    walk(v)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(body.get("structuredContent") if isinstance(body, dict) and "structuredContent" in body else body)
    return list(found)


def _error_code(body: dict[str, Any]) -> str:
    try:
        return str(json.loads(body["content"][0]["text"])["code"])
    except (KeyError, IndexError, TypeError, ValueError):
        return "error"


def _code_of(exc: Exception) -> str:
    message = str(getattr(getattr(exc, "error", None), "message", "") or exc)
    head = message.split(":", 1)[0]
    return head if head.isupper() and len(head) < 40 else type(exc).__name__
