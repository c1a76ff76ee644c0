"""Real MCP clients for the tests: the SDK's own client over streamable HTTP (with the bearer header) and
over stdio (launching `foldermind mcp`), plus raw HTTP for what a client library would never send."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import struct
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client import Client
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore

T = TypeVar("T")


def mcp_info(home: Path, timeout: float = 30) -> dict[str, Any]:
    """The front door's run/mcp.json once it serves."""

    info = Home.resolve(home).wait_mcp_serving(timeout)
    assert info is not None, f"the front door of {home} did not serve within {timeout:g} s"
    return info


def token_of(home: Path) -> str:
    return TokenStore(Home.resolve(home)).load_or_create()


@asynccontextmanager
async def http_client(
    url: str,
    token: str | None,
    headers: dict[str, str] | None = None,
    mode: str = "auto",
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[Client]:
    """``mode``: "auto" (the newest revision both sides speak: stateless 2026-07-28, no session id) or
    "legacy" (the initialize handshake, with an Mcp-Session-Id the rate limit buckets on).
    ``message_handler`` gets the server's notifications (the handshake era's standalone stream)."""
    all_headers = dict(headers or {})
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    async with (
        httpx2.AsyncClient(headers=all_headers, timeout=httpx2.Timeout(30.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, message_handler=message_handler) as client,
    ):
        yield client


@asynccontextmanager
async def stdio_client(home: Path, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client over stdio, launching the bridge; ``mode`` as for :func:`http_client`."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "foldermind.kernel.cli", "--home", str(home), "mcp"]
    )
    async with Client(params, read_timeout_seconds=120, mode=mode) as client:
        yield client


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def call(url: str, token: str, tool: str, args: dict[str, Any] | None = None) -> CallToolResult:
    """One tool call in a fresh HTTP session."""

    async def go() -> CallToolResult:
        async with http_client(url, token) as client:
            result = await client.call_tool(tool, args or {})
            assert isinstance(result, CallToolResult)
            return result

    return run(go)


def error_code(result: CallToolResult) -> str | None:
    if not result.is_error:
        return None
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(body) == {"code", "message"} and body["message"], body
    code = body["code"]
    assert isinstance(code, str)
    return code


def raw(
    url: str,
    method: str = "POST",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    content_length: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """One request with http.client, so a test controls every header (even a missing Content-Length)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.putrequest(method, parts.path, skip_accept_encoding=True)
        hdrs = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **(headers or {})}
        if body is not None and content_length:
            hdrs["Content-Length"] = str(len(body))
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders()
        if body is not None:
            # Refused before the body was read (413): the answer is waiting all the same.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.send(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def initialize_body(req_id: int = 1) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": req_id,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        }
    ).encode()


def legacy_session(url: str, token: str) -> dict[str, str]:
    """Headers of a fresh initialized 2025-06-18 session (the handshake revision, with Mcp-Session-Id)."""
    auth = {"Authorization": f"Bearer {token}"}
    status, hdrs, _ = raw(url, body=initialize_body(), headers=auth)
    assert status == 200, status
    headers = {**auth, "Mcp-Session-Id": hdrs["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert raw(url, body=body, headers=headers)[0] == 202
    return headers


def read_until(url: str, body: bytes, headers: dict[str, str], marker: str, timeout: float = 60) -> str:
    """POST ``body`` and read the (SSE) response until ``marker`` shows, then drop the connection at once,
    as a client that goes away mid-answer does; returns what was read."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout)
    try:
        head = [
            f"POST {parts.path} HTTP/1.1",
            f"Host: {parts.hostname}:{parts.port}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        seen = b""
        while marker.encode() not in seen:
            data = sock.recv(65536)
            if not data:
                break
            seen += data
        return seen.decode(errors="replace")
    finally:
        # RST instead of FIN: the server learns at once that nobody is reading any more.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
