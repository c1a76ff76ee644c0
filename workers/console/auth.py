"""Who may use the console: one-time sign-in links, browser sessions, and the gate in front of every request.

A link (``foldermind console``) carries a random code that works once, within ``[console] link_ttl_s``; using it
opens a session whose id goes to the browser as a cookie (HttpOnly, SameSite=Strict, named after the port, so two
homes' consoles do not clash) and ends after ``session_idle_s`` without a request. Sessions are kept in the home's
``data/console-sessions.sqlite`` as a SHA-256 of the cookie and the time of its last request, so a restarted
console (killed -9 too) keeps its browsers signed in; the CSRF token is an HMAC of the cookie, stored nowhere.
Links live in this process only.

:class:`Gate` is the outermost ASGI layer: a Host that is not this loopback port is refused (421, DNS rebinding),
so is an Origin that is not this console's (403); a POST must come with this console's Origin, a Content-Length
and a small body. The session and its CSRF token are checked by the routes (:mod:`.pages`), which read the form.
Refusals log the method and the reason, never a path's query, a cookie or a code.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldermind.protocol.runtime.private_sqlite import open_private

log = logging.getLogger("foldermind.console")

MAX_LINKS = 32
"""Unused links kept at once: an older one is dropped when more are asked for."""
MAX_SESSIONS = 64
"""Signed-in browsers at once: a new sign-in ends the one idle longest beyond this."""
SESSIONS_FILE = "console-sessions.sqlite"
SEEN_EVERY_S = 30.0
"""A session's last request is written at most this often: a restart can end it up to this much early, never late."""
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


def digest(sid: str) -> str:
    """What the store keeps of a cookie: its SHA-256 (the cookie is 256 random bits: nothing to guess from)."""
    return hashlib.sha256(sid.encode()).hexdigest()


def csrf_of(sid: str) -> str:
    """The session's CSRF token: derived from its cookie, so it is stored nowhere and survives a restart."""
    return hmac.new(sid.encode(), b"foldermind console csrf", hashlib.sha256).hexdigest()


class Sessions:
    """Signed-in browsers (their cookies' digests) with the time of their last request; idle ones expire. Kept in
    SQLite at ``path`` (None: in memory only; a store that cannot be opened or written is dropped for memory, with a
    warning). Wall-clock time, since it must count across restarts."""

    def __init__(self, idle_s: float, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._stored: dict[str, float] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._open(path)

    def _open(self, path: Path) -> None:
        try:
            db = open_private(path)
            db.execute("CREATE TABLE IF NOT EXISTS sessions (digest TEXT PRIMARY KEY, seen REAL NOT NULL)")
            cutoff = self._clock() - self.idle_s
            db.execute("DELETE FROM sessions WHERE seen < ?", (cutoff,))
            rows = db.execute("SELECT digest, seen FROM sessions ORDER BY seen").fetchall()
        except (OSError, sqlite3.Error) as exc:
            log.warning("console sessions kept in memory only: %s cannot be used (%s)", path, exc)
            return
        self._db = db
        for key, seen in rows[-MAX_SESSIONS:]:
            self._seen[key] = self._stored[key] = float(seen)

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        if self._db is None:
            return
        try:
            self._db.execute(sql, args)
        except sqlite3.Error as exc:
            log.warning("console sessions kept in memory only from now on: %s", exc)
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def open(self) -> str:
        sid = secrets.token_urlsafe(32)
        key, now = digest(sid), self._clock()
        with self._lock:
            while len(self._seen) >= MAX_SESSIONS:
                self._drop(next(iter(self._seen)))
            self._seen[key] = self._stored[key] = now
            self._write("INSERT OR REPLACE INTO sessions (digest, seen) VALUES (?, ?)", (key, now))
        return sid

    def get(self, sid: str | None, touch: bool = True) -> Session | None:
        """The live session ``sid`` names (its idle time starts over when ``touch``), else None."""
        if not sid:
            return None
        key = digest(sid)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                return None
            now = self._clock()
            if now - seen > self.idle_s:
                self._drop(key)
                return None
            if touch:
                seen = self._seen[key] = now
                self._seen.move_to_end(key)
                if now - self._stored.get(key, 0.0) >= SEEN_EVERY_S:
                    self._stored[key] = now
                    self._write("UPDATE sessions SET seen = ? WHERE digest = ?", (now, key))
        return Session(csrf=csrf_of(sid), seen=seen)

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._drop(digest(sid or ""))

    def _drop(self, key: str) -> None:
        if self._seen.pop(key, None) is not None:
            self._stored.pop(key, None)
            self._write("DELETE FROM sessions WHERE digest = ?", (key,))

    def __len__(self) -> int:
        return len(self._seen)


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
