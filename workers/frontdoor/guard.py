"""The front door's guard: size, auth, Origin and rate checks in front of the MCP app.

A pure ASGI middleware, so the SDK's SSE streams pass through unbuffered. Checks run in this order
and the first refusal answers: size (431 for the headers, 411/413 for the body, before anything reads
it) -> bearer token (401) -> Origin allowlist (403) -> rate limit (429). Refusals never log header
values, bodies or tokens: only the method, path, client address and the reason.

The rate limit's unit is the client: its own key (:mod:`.keyscope`) when it has one, so that a client cannot
buy more by opening more sessions; with the owner's token, an MCP session the server issued, else the TCP
connection the request came on. A stateless (2026-07-28)
request carries no session id, and its clientInfo and User-Agent are whatever the client writes into
each request: they could only split a connection's bucket, never join two clients', so the key is the
connection alone. One client's calls never spend another's bucket, so nobody's initialize or discovery
waits on them. A 429 whose body was read keeps its connection open: the client stays in its bucket.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldermind.protocol.runtime.client_keys import ClientKey
from foldermind.workers.frontdoor.keyscope import OWNER_KEY, SCOPE_KEY

log = logging.getLogger("foldermind.frontdoor")

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
RATE_LIMIT_CODE = -32004
# Bodies up to this size are read on a 429 to echo the request's JSON-RPC id; bigger ones answer id null.
_ID_PEEK_BYTES = 64 * 1024
_LOG_EVERY_S = 5.0
MAX_HEADER_BYTES = 32 * 1024
"""All header names and values of one request together. h11 holds an incomplete header block to 16 KiB
but takes a complete one of any size that arrives in one read (up to 256 KiB on loopback)."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class _LogGate:
    last: float = -math.inf
    suppressed: int = 0


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: Callable[[], str],
        max_body_bytes: int,
        allowed_origins: Callable[[], Collection[str]],
        rate_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = 10_000,
        session_known: Callable[[str], bool] | None = None,
        client_key: Callable[[str], ClientKey | None] | None = None,
    ) -> None:
        self.app = app
        self._token = token
        self.max_body_bytes = max_body_bytes
        self._allowed_origins = allowed_origins
        self._clock = clock
        self.max_buckets = max_buckets
        self._session_known = session_known
        self._client_key = client_key
        # Least recently used first, so idle buckets are swept from the front.
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._rate = 0
        self.set_rate(rate_per_minute)
        self._refused = {"400": 0, "401": 0, "403": 0, "411": 0, "413": 0, "429": 0, "431": 0}
        self._log_gates: dict[str, _LogGate] = {}

    def set_rate(self, rate_per_minute: int) -> None:
        if rate_per_minute < 1:
            raise ValueError("rate_per_minute must be at least 1")
        self._rate = rate_per_minute
        for bucket in self._buckets.values():
            bucket.tokens = min(bucket.tokens, rate_per_minute)

    def stats(self) -> dict[str, int]:
        """Refusals by HTTP status since start, and the number of live rate buckets."""
        return {**self._refused, "buckets": len(self._buckets)}

    @property
    def bucket_count(self) -> int:
        return len(self._buckets)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            # MCP has no websocket transport; refusing here keeps one from ever bypassing the checks.
            await receive()
            await send({"type": "websocket.close", "code": 1008})
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        lengths: set[bytes] = set()
        header_bytes = 0
        for name, value in scope["headers"]:
            headers.setdefault(name, value)
            header_bytes += len(name) + len(value) + 4
            if name == b"content-length":
                lengths.add(value)
        if header_bytes > MAX_HEADER_BYTES:
            return await self._refuse(send, 431, "request_header_fields_too_large", "request headers too large")

        # (a) size, before anything parses the body. With Transfer-Encoding as well the server goes by
        # the chunks, so Content-Length is enforced below by counting what actually arrives.
        declared = headers.get(b"content-length")
        carries_body = scope["method"] in BODY_METHODS or b"transfer-encoding" in headers
        if declared is None:
            if carries_body:
                return await self._refuse(send, 411, "length_required", "Content-Length required")
            length = 0
        elif len(lengths) > 1 or not declared.isdigit():
            return await self._refuse(send, 400, "bad_request", "invalid Content-Length")
        else:
            length = int(declared)
            if length > self.max_body_bytes:
                return await self._refuse(send, 413, "payload_too_large", "request body too large")

        # (b) bearer token: the owner's, or a client key's (:mod:`.keyscope` carries it on to the tools).
        expected = self._token().encode()
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        bearer = scheme.lower() == b"bearer"
        client: ClientKey | None = None
        if bearer and expected and hmac.compare_digest(given.strip(), expected):
            client = OWNER_KEY
        elif bearer and self._client_key is not None:
            client = self._client_key(given.strip().decode("latin-1"))
        if client is None:
            reason = "missing bearer token" if b"authorization" not in headers else "wrong bearer token"
            self._warn("auth", scope, reason)
            challenge = b"Bearer" if b"authorization" not in headers else b'Bearer error="invalid_token"'
            return await self._refuse(
                send, 401, "invalid_token", "authentication required", [(b"www-authenticate", challenge)]
            )

        scope[SCOPE_KEY] = client

        # (c) Origin: browsers always send it, other clients need not.
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1") not in self._allowed_origins():
            self._warn("origin", scope, "origin not allowed")
            return await self._refuse(send, 403, "forbidden", "origin not allowed")

        # (d) rate limit per client key, else (the owner's token) per MCP session, else per connection.
        retry_after = self._take(self._bucket_key(headers.get(b"mcp-session-id"), scope, client))
        if retry_after is not None:
            self._warn("rate", scope, "rate limit exceeded")
            request_id, read = await _peek_id(receive, length) if length <= _ID_PEEK_BYTES else (None, False)
            body = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": RATE_LIMIT_CODE, "message": "Rate limit exceeded"},
            }
            retry = [(b"retry-after", str(retry_after).encode())]
            return await self._send_json(send, 429, body, retry, close=not read)

        await self._forward(scope, receive, send, length)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """Pass the request on, cutting off a body that runs past its declared Content-Length."""
        received = 0
        overflow = False
        started = False

        async def counted_receive() -> Message:
            nonlocal received, overflow
            if overflow:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # The app sees a disconnect and stops; the guard answers 413 if it still can.
                    overflow = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if overflow:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except Exception:
            # An app told of a disconnect mid-body may raise (Starlette's ClientDisconnect): expected here.
            if not overflow:
                raise
        if overflow and not started:
            await self._refuse(send, 413, "payload_too_large", "request body longer than its Content-Length")

    def _bucket_key(self, session: bytes | None, scope: Scope, client: ClientKey | None = None) -> str:
        if client is not None and client is not OWNER_KEY:
            return "key " + client.name  # all of one client's sessions and connections share its key's bucket
        if session is not None:
            key = session.decode("latin-1")
            # Session ids are client-chosen: one the server never issued would otherwise buy a fresh bucket.
            if self._session_known is None or self._session_known(key):
                return "session " + key
        client = scope.get("client")
        return f"connection {client[0]}:{client[1]}" if client else "connection unknown"

    def _take(self, key: str) -> int | None:
        """Spend one request from ``key``'s bucket: None when allowed, else the seconds to wait."""
        now = self._clock()
        refill_s = 60.0  # a bucket refills fully in a minute, whatever the rate
        while self._buckets:
            oldest_key, oldest = next(iter(self._buckets.items()))
            if now - oldest.stamp <= refill_s:
                break
            # Idle past a full refill it is indistinguishable from a new bucket: dropping it loses nothing.
            del self._buckets[oldest_key]
        bucket = self._buckets.get(key)
        if bucket is None:
            while len(self._buckets) >= self.max_buckets:
                self._buckets.popitem(last=False)
            bucket = self._buckets[key] = _Bucket(float(self._rate), now)
        per_s = self._rate / 60.0
        bucket.tokens = min(float(self._rate), bucket.tokens + (now - bucket.stamp) * per_s)
        bucket.stamp = now
        self._buckets.move_to_end(key)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - bucket.tokens) / per_s))

    def _warn(self, kind: str, scope: Scope, reason: str) -> None:
        """One warning per kind every few seconds, so a flood of refusals cannot flood the log."""
        gate = self._log_gates.setdefault(kind, _LogGate())
        now = self._clock()
        if now - gate.last < _LOG_EVERY_S:
            gate.suppressed += 1
            return
        client = scope.get("client")
        address = f"{client[0]}:{client[1]}" if client else "unknown"
        extra = f" ({gate.suppressed} similar suppressed)" if gate.suppressed else ""
        path = scope["path"][:200]  # a client picks the path: keep one line from becoming a megabyte
        log.warning("refused %s %s from %s: %s%s", scope["method"], path, address, reason, extra)
        gate.last, gate.suppressed = now, 0

    async def _refuse(
        self, send: Send, status: int, error: str, description: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        await self._send_json(send, status, {"error": error, "error_description": description}, headers or [])

    async def _send_json(
        self,
        send: Send,
        status: int,
        body: dict[str, object],
        headers: list[tuple[bytes, bytes]],
        close: bool = True,
    ) -> None:
        self._refused[str(status)] = self._refused.get(str(status), 0) + 1
        payload = json.dumps(body).encode()
        # A request body left unread: the connection cannot be reused for another request.
        closing = [(b"connection", b"close")] if close else []
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    *closing,
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


async def _peek_id(receive: Receive, length: int) -> tuple[object, bool]:
    """The JSON-RPC id of a small refused request (None when there is none to be had cheaply), and
    whether its whole body was read as declared, so that the connection can serve another request."""
    chunks: list[bytes] = []
    size = 0
    while size < length:
        message = await receive()
        if message["type"] != "http.request":
            return None, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
    if size != length:
        return None, False
    try:
        body = json.loads(b"".join(chunks))
    except ValueError:
        return None, True
    request_id = body.get("id") if isinstance(body, dict) else None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return (request_id if valid else None), True
