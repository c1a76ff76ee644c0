"""``foldermind mcp``: the stdio bridge that stdio-only MCP clients launch as a command.

It does not serve MCP itself: it finds (or starts) the supervisor of its home and relays every JSON-RPC
message between its stdin/stdout and the front door's streamable HTTP endpoint, with the bearer token
read from the home's token store. So two clients, or one client that spawns the server twice, share one
index, one set of models and one rate limit per session, instead of each opening the files and loading
the models again. stdout carries the MCP stream only: everything this module says goes to stderr.

Nothing a client writes stops it: a line that cannot be relayed is answered here (:mod:`.stdio_lines`), and
what happens to one request on its way to the front door becomes that request's error
(:mod:`.bridge_transport`, which also follows a restarted front door to its new port and session).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId

from foldermind.kernel.cli import stdio_lines
from foldermind.kernel.cli.bridge_transport import Guarded
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore


class BridgeError(Exception):
    """The bridge could not reach a serving front door; the message says why and what to do."""


def wait_for_frontdoor(home: Home, timeout: float) -> dict[str, Any]:
    """The front door's info once it serves (it writes ``run/mcp.json`` after binding)."""
    info = home.wait_mcp_serving(timeout)
    if info is None:
        state = (home.read_mcp_info() or {}).get("state", "not started")
        raise BridgeError(f"the MCP front door is not serving ({state}); see `foldermind status` and logs")
    return info


def ensure_running(home: Home, start_wait_s: float) -> dict[str, Any]:
    """Start the supervisor of ``home`` in the background unless one runs, then wait for the front door.

    Two bridges may race here: the kernel's lock lets one win, the other's start exits at once, and
    both then find the same front door.
    """
    if home.running_pid() is None:
        args = [sys.executable, "-m", "foldermind.kernel.cli"]
        if home.root is not None:
            args += ["--home", str(home.root)]
        args += ["start"]
        print("foldermind: starting the supervisor", file=sys.stderr, flush=True)
        subprocess.run(args, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr, check=False)
    return wait_for_frontdoor(home, start_wait_s)


DRAIN_S = 10.0
"""After the client closes stdin, how long the answers to its last requests may still take to go out."""


class ClientSide:
    """stdin and stdout of the bridge: one JSON-RPC message a line each way, written whole under a lock."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.stdin = sys.stdin.buffer
        self.stdout = sys.stdout.buffer
        self.lock = anyio.Lock()
        self.gone = False
        """The client closed its end of stdout: nothing more can reach it."""

    async def write(self, line: bytes) -> None:
        def put() -> None:
            self.stdout.write(line)
            self.stdout.flush()

        async with self.lock:
            if self.gone:
                return
            try:
                await anyio.to_thread.run_sync(put)
            except (OSError, ValueError):  # a broken pipe, a closed file
                self.gone = True

    async def read(self, sink: MemoryObjectSendStream[SessionMessage]) -> None:
        """Relay the client's messages to ``sink`` until stdin closes; answer what cannot be relayed."""
        cap = self.max_bytes * stdio_lines.READ_FACTOR
        async with sink:
            while True:
                got = await anyio.to_thread.run_sync(stdio_lines.read_line, self.stdin, cap, abandon_on_cancel=True)
                if got is None:
                    return
                verdict = stdio_lines.judge(*got, self.max_bytes)
                if verdict.note:
                    print(f"foldermind: {verdict.note}", file=sys.stderr, flush=True)
                if verdict.reply is not None:
                    await self.write(verdict.reply)
                if verdict.message is not None:
                    await sink.send(SessionMessage(verdict.message))


def serving_url(home: Home) -> str | None:
    """Where the front door serves now (a restarted one may have bound another port), or None."""
    info = home.read_mcp_info()
    return str(info["url"]) if info and info.get("state") == "running" and info.get("url") else None


async def relay(home: Home, url: str, token: str, max_bytes: int) -> None:
    """Copy messages both ways until the client closes stdin (or the server goes away). A failure of the
    connection to the front door answers the requests it held with an error, and the bridge connects again."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    client = ClientSide(max_bytes)
    pending: set[RequestId] = set()
    to_send, queued = anyio.create_memory_object_stream[SessionMessage](64)
    transport = Guarded(httpx2.AsyncHTTPTransport(), lambda: serving_url(home))
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as http,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(client.read, to_send)
        while True:
            try:
                if await _connect(url, http, queued, client, pending):
                    break  # the client closed stdin, or the server went away
            except Exception as exc:
                print(f"foldermind: the front door connection broke ({exc!r}); connecting again", file=sys.stderr)
            if client.gone:
                break
            for rid in sorted(pending, key=str):
                why = "the connection to the front door broke before the answer came"
                await client.write(stdio_lines.error_line(rid, INTERNAL_ERROR, why))
            pending.clear()
            await anyio.sleep(0.5)
        tg.cancel_scope.cancel()


async def _connect(
    url: str,
    http: httpx2.AsyncClient,
    queued: MemoryObjectReceiveStream[SessionMessage],
    client: ClientSide,
    pending: set[RequestId],
) -> bool:
    """One connection to the front door, relaying until either side closes (True)."""
    async with (
        streamable_http_client(url, http_client=http) as (from_server, to_server),
        anyio.create_task_group() as tg,
    ):

        async def up() -> None:
            async for message in queued:
                if isinstance(message.message, JSONRPCRequest):
                    pending.add(message.message.id)
                await to_server.send(message)
            with anyio.move_on_after(DRAIN_S):  # stdin closed: the answers still owed go out first
                while pending and not client.gone:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

        async def down() -> None:
            async for message in from_server:
                if isinstance(message, Exception):
                    print(f"foldermind: front door error: {message}", file=sys.stderr)
                    continue
                if isinstance(message.message, JSONRPCResponse | JSONRPCError):
                    pending.discard(message.message.id)
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await client.write(line.encode() + b"\n")
                if client.gone:
                    break
            tg.cancel_scope.cancel()

        tg.start_soon(up)
        tg.start_soon(down)
    return True


def run(home: Home, start_wait_s: float, max_body_mb: float) -> int:
    try:
        info = ensure_running(home, start_wait_s)
    except BridgeError as exc:
        print(f"foldermind: {exc}", file=sys.stderr)
        return 1
    token = TokenStore(home).load_or_create()
    anyio.run(relay, home, str(info["url"]), token, int(max_body_mb * 1024 * 1024))
    return 0
