"""The HTTP transport under the stdio bridge's MCP client: what happens to one request stays that request's.

The SDK's streamable HTTP client lets a transport exception (a reset, a refused connection, a timeout) end its
task group, and with it the bridge. :class:`Guarded` turns each into a JSON-RPC error in a failed response's
JSON body, which the SDK hands back to the client under the request's own id:

- a 413 (a message the front door found too large) becomes -32600 saying so;
- a connection reset or timeout becomes -32603 naming it; a JSON reply is read here in full, so a loss
  mid-body is caught too (an event stream's loss the SDK answers itself);
- a refused connection first re-reads where the front door serves (``run/mcp.json``: a restarted one may have
  bound another port) and tries there once;
- a 404 for a session (a restarted front door knows none of the old ones) opens a new session with the
  client's own ``initialize`` and tries once more; later requests carry the new session's id. A client on
  the stateless revision has no session to lose.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import httpx2
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

SESSION = "mcp-session-id"
REINIT_ID = "foldermind-bridge-reinitialize"


class Guarded(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, locate: Callable[[], str | None]) -> None:
        self.inner = inner
        self.locate = locate
        """The front door's URL as it last wrote it, or None while it does not serve."""
        self.url: httpx2.URL | None = None
        self.initialize: bytes | None = None
        self.sessions: dict[str, str] = {}
        """Session ids the client holds -> the ids of the sessions opened again in their place."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.url is not None:
            _aim(request, self.url)
        old = request.headers.get(SESSION)
        if old in self.sessions:
            request.headers[SESSION] = self.sessions[old]
        if request.method != "POST":
            return await self.inner.handle_async_request(request)
        body = await request.aread()
        if old is None and _method(body) == "initialize":
            self.initialize = body
        try:
            response = await self._send(request)
            if response.status_code == 404 and old is not None and await self._reopen(request, old):
                await response.aclose()
                request.headers[SESSION] = self.sessions[old]
                response = await self.inner.handle_async_request(request)
            if response.status_code == 413:
                await response.aclose()
                why = "Invalid Request: the front door refused the message as too large ([mcp] max_body_mb)"
                return _error_response(413, request, INVALID_REQUEST, why)
            if response.headers.get("content-type", "").startswith("application/json"):
                await response.aread()
            return response
        except httpx2.TransportError as exc:
            why = (
                f"the front door closed the connection ({type(exc).__name__}) before it answered: a message over"
                " its size limit, or a front door restarting; the bridge goes on"
            )
            print(f"foldermind: {why}", file=sys.stderr, flush=True)
            return _error_response(502, request, INTERNAL_ERROR, why)

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; where the connection is refused, once more to where the front door serves now."""
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.ConnectError:
            url = self.locate()
            if url is None or httpx2.URL(url) == request.url:
                raise
            print(f"foldermind: the front door serves at {url} now", file=sys.stderr, flush=True)
            self.url = httpx2.URL(url)
            _aim(request, self.url)
            return await self.inner.handle_async_request(request)

    async def _reopen(self, failed: httpx2.Request, old: str) -> bool:
        """Open a new session in place of ``old`` with the client's own initialize; True once it is open."""
        if self.initialize is None:
            return False
        message = json.loads(self.initialize)
        message["id"] = REINIT_ID
        headers = {k: v for k, v in failed.headers.items() if k.lower() not in (SESSION, "content-length")}
        version = headers.pop("mcp-protocol-version", None)  # initialize negotiates it: it carries none
        opened = await self._post(failed.url, headers, message)
        sid = opened.headers.get(SESSION)
        if opened.status_code != 200 or not sid:
            return False
        print("foldermind: the front door forgot the session (restarted?): opened a new one", file=sys.stderr)
        if version is not None:
            headers["mcp-protocol-version"] = version
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._post(failed.url, {**headers, SESSION: sid}, initialized)
        self.sessions[old] = sid
        return True

    async def _post(self, url: httpx2.URL, headers: dict[str, str], message: object) -> httpx2.Response:
        request = httpx2.Request("POST", url, headers=headers, content=json.dumps(message).encode())
        response = await self.inner.handle_async_request(request)
        await response.aread()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _aim(request: httpx2.Request, url: httpx2.URL) -> None:
    """Send ``request`` to ``url``, with the Host header to match (the front door checks it)."""
    request.url = url
    request.headers["host"] = url.netloc.decode("ascii")


def _method(body: bytes) -> str | None:
    if len(body) > 1 << 20:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    method = value.get("method") if isinstance(value, dict) else None
    return method if isinstance(method, str) else None


def _error_response(status: int, request: httpx2.Request, code: int, message: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return httpx2.Response(status, json=body, request=request)
