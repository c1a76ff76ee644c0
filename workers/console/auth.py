"""Who may use the console: one-time sign-in links, browser sessions, and the gate in front of every request.

A link (``foldermind console``) carries a random code that works once, within ``[console] link_ttl_s``; using it
opens a session whose id goes to the browser as a cookie (HttpOnly, SameSite=Strict, named after the port, so two
homes' consoles do not clash) and ends after ``session_idle_s`` without a request. Sessions live in this process
only: a restarted console signs its browsers out, and a new link signs them in again.

:class:`Gate` is the outermost ASGI layer: a Host that is not this loopback port is refused (421, DNS rebinding),
so is an Origin that is not this console's (403); a POST must come with this console's Origin, a Content-Length
and a small body. The session and its CSRF token are checked by the routes (:mod:`.pages`), which read the form.
Refusals log the method and the reason, never a path's query, a cookie or a code.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("foldermind.console")

MAX_LINKS = 32
"""Unused links kept at once: an older one is dropped when more are asked for."""
MAX_SESSIONS = 64
"""Signed-in browsers at once: a new sign-in ends the one idle longest beyond this."""
SAFE_METHODS = frozenset({"GET", "HEAD"})
LOG_EVERY_S = 5.0
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
        b" form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
"""On every response: no inline script or style, nothing from elsewhere, never framed, never cached, no Referer to
another site (same-origin: with no-referrer Chromium sends a form post the Origin "null")."""


class Links:
    """One-time sign-in codes: each is redeemed at most once, and only before it expires."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._codes: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def issue(self) -> str:
        code = secrets.token_urlsafe(32)
        with self._lock:
            now = self._clock()
            for old in [c for c, expires in self._codes.items() if expires < now]:
                del self._codes[old]
            while len(self._codes) >= MAX_LINKS:
                self._codes.popitem(last=False)
            self._codes[code] = now + self.ttl_s
        return code

    def redeem(self, code: str) -> bool:
        """True once for a code issued here and not expired; the code is spent either way."""
        with self._lock:
            expires = self._codes.pop(code, None)
        return expires is not None and self._clock() <= expires


@dataclass(slots=True)
class Session:
    csrf: str
    seen: float


class Sessions:
    """Signed-in browsers by session id, each with its CSRF token; idle ones expire."""

    def __init__(self, idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def open(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._by_id) >= MAX_SESSIONS:
                self._by_id.popitem(last=False)
            self._by_id[sid] = Session(csrf=secrets.token_urlsafe(32), seen=self._clock())
        return sid

    def get(self, sid: str | None, touch: bool = True) -> Session | None:
        """The live session ``sid`` names (its idle time starts over when ``touch``), else None."""
        if not sid:
            return None
        with self._lock:
            session = self._by_id.get(sid)
            if session is None:
                return None
            now = self._clock()
            if now - session.seen > self.idle_s:
                del self._by_id[sid]
                return None
            if touch:
                session.seen = now
                self._by_id.move_to_end(sid)
            return session

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def __len__(self) -> int:
        return len(self._by_id)


def csrf_ok(session: Session, given: str) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf.encode(), given.encode())


class Gate:
    """Host, Origin and body-size checks before any route runs (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, hosts: Collection[str], origins: Collection[str], max_body_bytes: int) -> None:
        self.app = app
        self.hosts = frozenset(h.encode() for h in hosts)
        self.origins = frozenset(o.encode() for o in origins)
        self.max_body_bytes = max_body_bytes
        self.refused: dict[str, int] = {}
        self._logged: dict[int, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
                message = {**message, "headers": [*given, *SECURITY_HEADERS]}
            await send(message)

        await self._http(scope, receive, secured)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        method = scope["method"]
        origin = headers.get(b"origin")
        if headers.get(b"host") not in self.hosts:
            return await self._refuse(send, method, 421, "Invalid Host header")
        if origin is not None and origin not in self.origins:
            return await self._refuse(send, method, 403, "Origin not allowed")
        if method not in SAFE_METHODS:
            if method != "POST":
                return await self._refuse(send, method, 405, "Method not allowed")
            if origin is None:
                return await self._refuse(send, method, 403, "A form post needs this console's Origin")
            length = headers.get(b"content-length", b"")
            if not length.isdigit():
                return await self._refuse(send, method, 411, "Content-Length required")
            if int(length) > self.max_body_bytes:
                return await self._refuse(send, method, 413, "Request body too large")
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, method: str, status: int, reason: str) -> None:
        self.refused[str(status)] = self.refused.get(str(status), 0) + 1
        now = time.monotonic()
        if now - self._logged.get(status, -LOG_EVERY_S) >= LOG_EVERY_S:  # a flood of refusals is one line a while
            self._logged[status] = now
            log.warning("refused a %s request: %s (%d refused so far)", method, reason, self.refused[str(status)])
        body = f"{reason}\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
