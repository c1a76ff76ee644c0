"""Knowing that an HTTP client went away, so its tool call can stop (a chat answer nobody will read).

On the stateless 2026 transport the MCP SDK cancels a tool call whose HTTP request disconnects; on the
2025 handshake transport the call runs in the session's task, apart from the HTTP request that carried
it, and goes on after the client has gone. This layer gives each HTTP request an event, set when the
server reads ``http.disconnect`` from that request (the SDK's SSE response listens for it while a call
runs), and :func:`client_gone` finds the event from inside the tool through the request the SDK hands
the tool's context. A client that cancels explicitly (``notifications/cancelled``) needs none of this:
the SDK cancels the call itself.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE_KEY = "foldermind.client_gone"

T = TypeVar("T")


class WatchDisconnect:
    """ASGI middleware: ``scope[SCOPE_KEY]`` is an event set once the client of this request disconnects."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone = anyio.Event()
        scope[SCOPE_KEY] = gone

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        await self.app(scope, watched, send)


def client_gone(request: Any) -> anyio.Event | None:
    """The disconnect event of the HTTP request that carried a tool call (``ctx.request_context.request``),
    or None when the call did not come over HTTP."""
    scope = getattr(request, "scope", None)
    event = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return event if isinstance(event, anyio.Event) else None


async def until_gone(call: Awaitable[T], gone: anyio.Event | None) -> T | None:
    """``await call``, or None as soon as ``gone`` is set (``call`` is then cancelled)."""
    if gone is None:
        return await call
    results: list[T] = []
    errors: list[Exception] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            try:
                results.append(await call)
            except Exception as exc:  # re-raised below, bare: a task group would wrap it in a group
                errors.append(exc)
            finally:
                tg.cancel_scope.cancel()

        tg.start_soon(run)
        await gone.wait()
        tg.cancel_scope.cancel()
    if errors:
        raise errors[0]
    return results[0] if results else None
