"""The front door's guard in front of a real uvicorn server, driven with raw HTTP.

A tiny Starlette app stands in for the MCP SDK: it echoes request bodies and streams a response in
two parts, and counts the requests that reach it. The guard's clock is a settable number, so refill
and idle expiry are tested without sleeping.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from foldermind.protocol.runtime.client_keys import ClientKey
from foldermind.workers.frontdoor.guard import Guard

TOKEN = "test-token-" + "x" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ALLOWED_ORIGIN = "http://localhost:53827"
RATE = 5
MAX_BODY = 1000
AGENT_TOKEN = "agent-token-" + "y" * 32
AGENT = ClientKey("agent", ("folder-a",))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """The app behind the guard: what reached it."""

    hits: int = 0
    release_stream: threading.Event = field(default_factory=threading.Event)

    def app(self) -> Starlette:
        async def echo(request: Request) -> Response:
            self.hits += 1
            body = await request.body()
            return JSONResponse({"length": len(body), "body": body.decode("latin-1")})

        async def stream(request: Request) -> Response:
            self.hits += 1

            async def parts() -> AsyncIterator[bytes]:
                yield b"data: first\n\n"
                while not self.release_stream.is_set():
                    await asyncio.sleep(0.01)
                yield b"data: second\n\n"

            return StreamingResponse(parts(), media_type="text/event-stream")

        return Starlette(
            routes=[Route("/mcp", echo, methods=["POST", "DELETE"]), Route("/mcp", stream, methods=["GET"])]
        )


@dataclass
class Server:
    port: int
    guard: Guard
    backend: Backend
    clock: Clock

    def request(
        self, method: str, body: bytes | None = None, headers: dict[str, str] | None = None, path: str = "/mcp"
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def raw(self, data: bytes) -> tuple[int, http.client.HTTPMessage, bytes]:
        """Send bytes exactly as given (no Content-Length fixed up for us) and read one response."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(data)
            resp = http.client.HTTPResponse(sock)
            resp.begin()
            try:
                body = resp.read()
            except ConnectionResetError:
                # A server that refuses a request before reading all of it (oversize headers) closes with
                # bytes of it unread, and the kernel answers those with a reset: the status line and
                # headers were read already, and are what such a test checks.
                body = b""
            return resp.status, resp.headers, body

    def post(
        self, payload: object, session: str | None = None, **extra: str
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        headers = {**AUTH, "Content-Type": "application/json", **extra}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return self.request("POST", json.dumps(payload).encode(), headers)


def poll(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


@pytest.fixture
def server() -> Iterator[Server]:
    backend = Backend()
    clock = Clock()
    guard = Guard(
        backend.app(),
        token=lambda: TOKEN,
        max_body_bytes=MAX_BODY,
        allowed_origins=lambda: {ALLOWED_ORIGIN},
        rate_per_minute=RATE,
        clock=clock,
        client_key=lambda token: AGENT if token == AGENT_TOKEN else None,
    )
    config = uvicorn.Config(guard, host="127.0.0.1", port=0, lifespan="off", log_level="warning", http="h11")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    try:
        poll(lambda: uv.started or not thread.is_alive())
        assert uv.started, "uvicorn did not start"
        port = uv.servers[0].sockets[0].getsockname()[1]
        yield Server(port, guard, backend, clock)
    finally:
        backend.release_stream.set()
        uv.should_exit = True
        thread.join(timeout=10)


def rpc(request_id: int = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}


# --- (a) size -------------------------------------------------------------------------------------


def test_post_without_content_length_is_411(server: Server) -> None:
    status, _, _ = server.raw(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    )
    assert status == 411
    status, _, _ = server.raw(b"POST /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 411
    assert server.backend.hits == 0
    assert server.guard.stats()["411"] == 2


def test_get_needs_no_content_length(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/mcp", headers=AUTH)
        resp = conn.getresponse()
        assert resp.status == 200
        server.backend.release_stream.set()
        assert resp.read() == b"data: first\n\ndata: second\n\n"
    finally:
        conn.close()
    status, _, _ = server.request("DELETE", headers=AUTH)
    assert status == 200


def test_oversize_body_is_413_before_auth(server: Server) -> None:
    status, _, body = server.request("POST", b"x" * (MAX_BODY + 1), {"Content-Type": "application/json"})
    assert status == 413
    assert json.loads(body)["error"] == "payload_too_large"
    status, _, _ = server.request("POST", b"x" * (MAX_BODY + 1), AUTH)
    assert status == 413
    assert server.backend.hits == 0


def test_body_at_the_limit_passes(server: Server) -> None:
    status, _, body = server.request("POST", b"y" * MAX_BODY, AUTH)
    assert status == 200
    assert json.loads(body)["length"] == MAX_BODY


def test_body_longer_than_content_length_never_reaches_the_app(server: Server) -> None:
    status, _, body = server.raw(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: 5\r\nConnection: close\r\n\r\nhello, and a lot more than five bytes"
    )
    assert status == 200
    assert json.loads(body) == {"length": 5, "body": "hello"}


def test_chunked_body_longer_than_content_length_is_cut_off_with_413(server: Server) -> None:
    # h11 frames a request carrying both headers by its chunks: only the guard's count holds it to 5.
    status, _, _ = server.raw(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n" + b"a" * 20 + b"\r\n0\r\n\r\n"
    )
    assert status == 413
    assert server.guard.stats()["413"] == 1


def test_invalid_content_length_is_refused(server: Server) -> None:
    status, _, _ = server.raw(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    assert status == 400
    assert server.backend.hits == 0


def test_oversize_headers_are_refused_by_the_server(server: Server) -> None:
    status, _, _ = server.raw(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    )
    assert 400 <= status < 500
    assert server.backend.hits == 0


# --- (b) auth -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer "},
        {"Authorization": TOKEN},
    ],
)
def test_missing_or_wrong_token_is_401(server: Server, headers: dict[str, str]) -> None:
    status, resp_headers, body = server.request("POST", json.dumps(rpc()).encode(), headers)
    assert status == 401
    assert resp_headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(body)["error"] == "invalid_token"
    assert server.backend.hits == 0


def test_bad_origin_without_token_is_401(server: Server) -> None:
    status, _, _ = server.request("POST", b"{}", {"Origin": "http://evil.example"})
    assert status == 401


def test_token_is_read_on_every_request() -> None:
    # A rotated token takes effect at once: the guard asks for it per request.
    current = ["first"]
    guard = Guard(_ok_app, token=lambda: current[0], max_body_bytes=10, allowed_origins=frozenset, rate_per_minute=60)
    assert _call(guard, headers={"authorization": "Bearer first"})[0] == 200
    current[0] = "second"
    assert _call(guard, headers={"authorization": "Bearer first"})[0] == 401
    assert _call(guard, headers={"authorization": "Bearer second"})[0] == 200


# --- (c) Origin -----------------------------------------------------------------------------------


def test_origin_allowlist(server: Server) -> None:
    assert server.post(rpc(), Origin="http://evil.example")[0] == 403
    assert server.post(rpc(), Origin="null")[0] == 403
    assert server.post(rpc(), Origin=ALLOWED_ORIGIN)[0] == 200
    assert server.post(rpc())[0] == 200  # no Origin: a non-browser client
    assert server.backend.hits == 2
    assert server.guard.stats()["403"] == 2


# --- (d) rate limit -------------------------------------------------------------------------------


def test_burst_then_429_per_session(server: Server) -> None:
    for i in range(RATE):
        assert server.post(rpc(i), session="A")[0] == 200
    status, headers, body = server.post(rpc(99), session="A")

    assert status == 429
    assert int(headers["Retry-After"]) >= 1
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": 99,
        "error": {"code": -32004, "message": "Rate limit exceeded"},
    }
    assert server.post(rpc(), session="B")[0] == 200
    assert server.post(rpc())[0] == 200  # the shared no-session bucket is its own
    assert server.guard.stats()["429"] == 1


def test_requests_without_a_session_are_limited_per_connection(server: Server) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:

        def post(payload: object) -> tuple[int, http.client.HTTPMessage, bytes]:
            conn.request("POST", "/mcp", body=json.dumps(payload).encode(), headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()

        for i in range(RATE):
            assert post(rpc(i))[0] == 200
        sock = conn.sock
        status, hdrs, _ = post({"jsonrpc": "2.0", "id": "init", "method": "initialize"})
        assert status == 429 and "close" not in hdrs.get("Connection", "")
        # The refused request's body was read, so the connection (and with it the bucket) goes on.
        assert post(rpc())[0] == 429 and conn.sock is sock
        # Another connection is another client: an initialize there is not held up.
        assert server.post({"jsonrpc": "2.0", "id": "init", "method": "initialize"})[0] == 200
        assert server.guard.bucket_count == 2
    finally:
        conn.close()


def test_a_client_keys_sessions_share_its_bucket_and_spend_nobody_elses(server: Server) -> None:
    agent = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    for i in range(RATE):
        assert server.post(rpc(i), session=f"agent-{i % 2}", **agent)[0] == 200
    # A new session (or connection) of the same key buys nothing more.
    assert server.post(rpc(), session="agent-new", **agent)[0] == 429
    assert server.post(rpc(), **agent)[0] == 429
    # The owner's sessions keep their own buckets.
    assert server.post(rpc(), session="owner-1")[0] == 200
    # A revoked or unknown key is refused before any bucket.
    assert server.post(rpc(), **{"Authorization": "Bearer not-a-key"})[0] == 401


def test_refill_after_time_passes(server: Server) -> None:
    for i in range(RATE):
        assert server.post(rpc(i), session="A")[0] == 200
    status, headers, _ = server.post(rpc(), session="A")
    assert status == 429
    wait = int(headers["Retry-After"])
    assert wait == 60 // RATE

    server.clock.now += wait - 1
    assert server.post(rpc(), session="A")[0] == 429
    server.clock.now += 1
    assert server.post(rpc(), session="A")[0] == 200
    assert server.post(rpc(), session="A")[0] == 429

    server.clock.now += 60
    for i in range(RATE):
        assert server.post(rpc(i), session="A")[0] == 200  # a full bucket again, never more


def test_unauthenticated_flood_creates_and_spends_no_bucket(server: Server) -> None:
    assert server.post(rpc(), session="A")[0] == 200
    for _ in range(50):
        assert server.request("POST", b"{}", {"Mcp-Session-Id": "A"})[0] == 401
        assert server.request("POST", b"{}", {"Mcp-Session-Id": "flood", "Authorization": "Bearer no"})[0] == 401
    assert server.guard.bucket_count == 1
    for i in range(RATE - 1):
        assert server.post(rpc(i), session="A")[0] == 200
    assert server.post(rpc(), session="A")[0] == 429


def test_unauthenticated_flood_leaves_no_buckets(server: Server) -> None:
    for _ in range(30):
        assert server.request("POST", b"{}", {})[0] == 401
    assert server.guard.bucket_count == 0
    assert server.guard.stats()["401"] == 30


def test_refused_origin_spends_no_bucket(server: Server) -> None:
    for _ in range(RATE * 2):
        assert server.post(rpc(), session="A", Origin="http://evil.example")[0] == 403
    assert server.guard.bucket_count == 0


def test_idle_buckets_are_dropped(server: Server) -> None:
    for name in "ABC":
        assert server.post(rpc(), session=name)[0] == 200
    assert server.guard.bucket_count == 3
    server.clock.now += 61
    assert server.post(rpc(), session="D")[0] == 200
    assert server.guard.bucket_count == 1


def test_bucket_count_is_capped() -> None:
    guard = Guard(
        _ok_app, token=lambda: "t", max_body_bytes=10, allowed_origins=frozenset, rate_per_minute=1, max_buckets=3
    )
    for i in range(10):
        assert _call(guard, headers={"authorization": "Bearer t", "mcp-session-id": f"s{i}"})[0] == 200
    assert guard.bucket_count == 3


def test_unknown_session_ids_count_as_no_session() -> None:
    guard = Guard(
        _ok_app,
        token=lambda: "t",
        max_body_bytes=10,
        allowed_origins=frozenset,
        rate_per_minute=2,
        session_known=lambda sid: sid == "real",
    )
    auth = {"authorization": "Bearer t"}
    statuses = [_call(guard, headers={**auth, "mcp-session-id": f"made-up-{i}"})[0] for i in range(3)]
    assert statuses == [200, 200, 429]
    assert _call(guard, headers={**auth, "mcp-session-id": "real"})[0] == 200


def test_set_rate_applies_to_existing_buckets() -> None:
    guard = Guard(_ok_app, token=lambda: "t", max_body_bytes=10, allowed_origins=frozenset, rate_per_minute=100)
    auth = {"authorization": "Bearer t"}
    assert _call(guard, headers=auth)[0] == 200
    guard.set_rate(1)
    assert _call(guard, headers=auth)[0] == 200
    assert _call(guard, headers=auth)[0] == 429
    with pytest.raises(ValueError):
        guard.set_rate(0)


# --- streaming, logging, other scopes -------------------------------------------------------------


def test_streaming_response_is_not_buffered(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
        seen = b""
        while b"data: first" not in seen:
            chunk = sock.recv(4096)
            assert chunk, "connection closed before the first event"
            seen += chunk
        # The first event arrived while the app is still holding the stream open.
        assert b"data: second" not in seen
        server.backend.release_stream.set()
        while b"data: second" not in seen:
            chunk = sock.recv(4096)
            assert chunk
            seen += chunk


def test_refusals_are_logged_sparingly_and_without_secrets(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="foldermind.frontdoor")
    for _ in range(20):
        server.request("POST", b'{"q": "secret query"}', {"Authorization": "Bearer leaked-guess"})

    def mine() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "foldermind.frontdoor"]

    assert len(mine()) == 1
    server.clock.now += 10
    server.request("POST", b"{}", {"Authorization": "Bearer leaked-guess"})
    assert len(mine()) == 2
    last = mine()[-1].getMessage()
    assert "19 similar suppressed" in last
    assert "POST /mcp from 127.0.0.1:" in last
    for record in mine():
        text = record.getMessage()
        assert "leaked-guess" not in text and TOKEN not in text and "secret query" not in text

    for i in range(RATE + 1):
        server.post(rpc(i), session="A")
    assert any("rate limit" in r.getMessage() for r in mine())


def test_lifespan_passes_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    guard = Guard(app, token=lambda: "t", max_body_bytes=10, allowed_origins=frozenset, rate_per_minute=1)

    async def nothing() -> Message:
        return {}

    async def drop(message: Message) -> None:
        pass

    asyncio.run(guard({"type": "lifespan"}, nothing, drop))
    assert seen == ["lifespan"]


def test_websocket_is_refused() -> None:
    sent: list[Message] = []
    reached: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["type"])

    async def connect() -> Message:
        return {"type": "websocket.connect"}

    async def record(message: Message) -> None:
        sent.append(message)

    guard = Guard(app, token=lambda: "t", max_body_bytes=10, allowed_origins=frozenset, rate_per_minute=1)
    asyncio.run(guard({"type": "websocket", "headers": []}, connect, record))
    assert sent == [{"type": "websocket.close", "code": 1008}]
    assert reached == []


def test_body_running_past_content_length_is_cut_off() -> None:
    # uvicorn never hands an app more than Content-Length bytes; the guard does not rely on that.
    app_saw: list[Message] = []

    async def reader(scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            app_saw.append(message)
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                return

    guard = Guard(reader, token=lambda: "t", max_body_bytes=100, allowed_origins=frozenset, rate_per_minute=10)
    status, _ = _call(
        guard,
        headers={"authorization": "Bearer t", "content-length": "4"},
        chunks=[b"abc", b"defgh", b"never read"],
    )
    assert status == 413
    assert app_saw[-1] == {"type": "http.disconnect"}
    assert sum(len(m.get("body", b"")) for m in app_saw) == 3


# --- in-process ASGI helpers (for the guard alone, where a server adds nothing) --------------------


async def _ok_app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _call(
    guard: Guard, *, headers: dict[str, str], method: str = "GET", chunks: list[bytes] | None = None
) -> tuple[int, bytes]:
    chunks = chunks or []
    pending: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
    }
    asyncio.run(guard(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(start["status"]), body
