"""The HTTP transport under the stdio bridge's MCP client: what happens to one request stays that request's.

The SDK's streamable HTTP client lets a transport exception (a reset, a refused connection, a timeout) end its
task group, and with it the bridge. :class:`Guarded` turns each into a JSON-RPC error in a failed response's
JSON body, which the SDK hands back to the client under the request's own id, and follows foldermind through
what happens to it (:class:`~.link.Link` reads the URL and the token again):

- every request goes to where the front door serves now, with the token read last;
- a refused connection (a stop, a kill, a restart, on another port or the same) reads where the front door serves
  again, starting the supervisor if none runs, and tries there until one takes it (a refused request never
  reached a front door); with none serving in time: ``NOT_RUNNING``;
- a 401 (``token rotate``) reads the token again and tries once more; refused again: ``TOKEN_REFUSED``;
- a 404 for the session (a restarted front door knows none of the old ones) opens a new session with the
  client's own ``initialize`` and tries once more. The bridge holds the session for its client: every request
  carries the session opened last, whichever the SDK's transport remembers. A client on the stateless
  revision has no session to lose;
- a 413 (a message the front door found too large) becomes -32600 saying so;
- a connection that breaks before the answer (the front door gone mid-request): ``CONNECTION_LOST``,
  retryable, at once. A JSON reply is read here in full, so a loss mid-body is caught too.
"""

from __future__ import annotations

import json
import sys
import time

import anyio
import httpx2
from mcp_types import INVALID_REQUEST

from foldermind.kernel.cli.bridge.link import CALL_WAIT_S, RESTART_WAIT_S, BridgeFailure, Link

SESSION = "mcp-session-id"
VERSION = "mcp-protocol-version"
REINIT_ID = "foldermind-bridge-reinitialize"
RESENT = "x-foldermind-resent"
"""Marks a request the bridge sends again (:mod:`.resend`): it waits for a front door but never starts the
supervisor, so a call in flight during `foldermind stop` does not bring foldermind back (the client's next one
does, as always). Taken off before the request leaves."""
REFUSED = (
    "token refused: the front door refused the token in this home's token store, read again; "
    "`foldermind doctor` checks the setup"
)


class Guarded(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, link: Link) -> None:
        self.inner = inner
        self.link = link
        self.initialize: bytes | None = None
        self.session: str | None = None
        """The session the front door serving now knows this client by (opened by its initialize or again)."""
        self.version: str | None = None
        self.reopening = anyio.Lock()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return await self._stream(request)
        body = await request.aread()
        initialize = _method(body) == "initialize"
        start = request.headers.pop(RESENT, None) is None  # the bridge's own resend never undoes a `stop`
        if initialize:
            self.initialize, self.session = body, None
        try:
            if self.link.url is None and await self.link.serving(start=start, running_wait_s=RESTART_WAIT_S) is None:
                return _failure(503, request, BridgeFailure.NOT_RUNNING, self.link.why_not_serving())
            self._dress(request, initialize)
            response = await self._send(request, start)
            if response is None:
                return _failure(503, request, BridgeFailure.NOT_RUNNING, self.link.why_not_serving())
            if response.status_code == 401:
                await response.aclose()
                if not await self._newer_token(request):
                    return _failure(401, request, BridgeFailure.TOKEN_REFUSED, REFUSED)
                print("foldermind: the token changed (rotated?): using the new one", file=sys.stderr, flush=True)
                self._dress(request, initialize)
                response = await self.inner.handle_async_request(request)
            if response.status_code == 404 and not initialize and self.session is not None:
                await response.aclose()
                if await self._reopen_once(request):
                    self._dress(request, initialize)
                    response = await self.inner.handle_async_request(request)
                else:
                    why = "the front door restarted and the bridge could not open a new session; ask again"
                    return _failure(502, request, BridgeFailure.CONNECTION_LOST, why)
            if response.status_code == 401:
                await response.aclose()
                return _failure(401, request, BridgeFailure.TOKEN_REFUSED, REFUSED)
            if response.status_code == 413:
                await response.aclose()
                why = "Invalid Request: the front door refused the message as too large ([mcp] max_body_mb)"
                return _error_response(413, request, {"code": INVALID_REQUEST, "message": why})
            if initialize and response.headers.get(SESSION):
                self.session = response.headers[SESSION]
            if response.headers.get("content-type", "").startswith("application/json"):
                await response.aread()
            return response
        except httpx2.TransportError as exc:
            why = (
                f"the connection to the front door broke before it answered ({type(exc).__name__}): a front door "
                "restarting or stopping, or a message over its size limit; ask again"
            )
            print(f"foldermind: {why}", file=sys.stderr, flush=True)
            return _failure(502, request, BridgeFailure.CONNECTION_LOST, why)

    def _dress(self, request: httpx2.Request, initialize: bool) -> None:
        """Aim ``request`` at the front door serving now, with the token read last and this client's session."""
        url = httpx2.URL(self.link.url or str(request.url))
        request.url = url
        request.headers["host"] = url.netloc.decode("ascii")
        request.headers["authorization"] = f"Bearer {self.link.token}"
        if initialize:
            return
        if self.session is not None:
            request.headers[SESSION] = self.session
        version = request.headers.get(VERSION)
        if version is not None:
            self.version = version
        elif self.version is not None and self.session is not None:
            request.headers[VERSION] = self.version

    async def _send(self, request: httpx2.Request, start: bool) -> httpx2.Response | None:
        """Send ``request``; where the connection is refused, again to where the front door serves now, until one
        takes it: a refused request never reached a front door, so sending it again is always safe. It waits
        :data:`~.link.CALL_WAIT_S` for a front door, :data:`~.link.RESTART_WAIT_S` while the home's kernel runs
        (``run/mcp.json`` names the front door that is stopping until it has stopped), starting the supervisor
        if none runs and ``start``. None when none serves in time."""
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.ConnectError:
            pass
        began = time.monotonic()
        while True:
            before = self.link.url
            waited = time.monotonic() - began
            if waited >= RESTART_WAIT_S:
                return None
            wait_s = max(0.0, CALL_WAIT_S - waited)
            if await self.link.serving(wait_s, start, running_wait_s=RESTART_WAIT_S - waited) is None:
                return None
            if self.link.url != before:
                print(f"foldermind: the front door serves at {self.link.url} now", file=sys.stderr, flush=True)
            self._dress(request, _method(await request.aread()) == "initialize")
            try:
                return await self.inner.handle_async_request(request)
            except httpx2.ConnectError:
                await anyio.sleep(0.1)

    async def _stream(self, request: httpx2.Request) -> httpx2.Response:
        """A GET (the server's own stream) or DELETE, sent as it is to the front door serving now; a restart
        is followed (the SDK's transport opens its stream again a few times) but never starts the supervisor,
        and a DELETE (the client leaving) does not wait for one."""
        wait_s = CALL_WAIT_S if request.method == "GET" else 0.0
        if self.link.url is None and await self.link.serving(wait_s, start=False) is None:
            raise httpx2.ConnectError("the front door is not serving")
        self._dress(request, False)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.ConnectError:
            if await self.link.serving(wait_s, start=False) is None:
                raise
            self._dress(request, False)
            response = await self.inner.handle_async_request(request)
        if response.status_code == 401 and await self._newer_token(request):
            await response.aclose()
            self._dress(request, False)
            response = await self.inner.handle_async_request(request)
        return response

    async def _newer_token(self, refused: httpx2.Request) -> bool:
        """Read the token again; True if it is not the one ``refused`` carried (another request that met the
        401 first may have read the new one already)."""
        await self.link.reread_token()
        return refused.headers.get("authorization") != f"Bearer {self.link.token}"

    async def _reopen_once(self, failed: httpx2.Request) -> bool:
        """A new session, unless another request opened one since ``failed`` was sent (calls sent at once to a
        restarted front door all meet its 404: one session is opened for them, not one each)."""
        async with self.reopening:
            if failed.headers.get(SESSION) != self.session:
                return self.session is not None
            return await self._reopen(failed)

    async def _reopen(self, failed: httpx2.Request) -> bool:
        """Open a new session with the client's own initialize; True once it is open."""
        if self.initialize is None:
            return False
        message = json.loads(self.initialize)
        message["id"] = REINIT_ID
        skip = (SESSION, VERSION, "content-length", "host", "authorization")
        headers = {k: v for k, v in failed.headers.items() if k.lower() not in skip}
        url = httpx2.URL(self.link.url or str(failed.url))
        headers["authorization"] = f"Bearer {self.link.token}"
        opened = await self._post(url, headers, message)
        sid = opened.headers.get(SESSION)
        if opened.status_code != 200 or not sid:
            return False
        print("foldermind: the front door forgot the session (restarted?): opened a new one", file=sys.stderr)
        if self.version is not None:
            headers[VERSION] = self.version
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._post(url, {**headers, SESSION: sid}, initialized)
        self.session = sid
        return True

    async def _post(self, url: httpx2.URL, headers: dict[str, str], message: object) -> httpx2.Response:
        request = httpx2.Request("POST", url, headers=headers, content=json.dumps(message).encode())
        response = await self.inner.handle_async_request(request)
        await response.aread()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _method(body: bytes) -> str | None:
    if len(body) > 1 << 20:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    method = value.get("method") if isinstance(value, dict) else None
    return method if isinstance(method, str) else None


def _failure(status: int, request: httpx2.Request, failure: BridgeFailure, message: str) -> httpx2.Response:
    return _error_response(status, request, failure.error(message))


def _error_response(status: int, request: httpx2.Request, error: dict[str, object]) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": None, "error": error}
    return httpx2.Response(status, json=body, request=request)
