"""``foldermind mcp``: the stdio bridge that stdio-only MCP clients launch as a command.

It does not serve MCP itself: it finds (or starts) the supervisor of its home and relays every JSON-RPC
message between its stdin/stdout and the front door's streamable HTTP endpoint, with the bearer token
read from the home's token store. So two clients, or one client that spawns the server twice, share one
index, one set of models and one rate limit per session, instead of each opening the files and loading
the models again. stdout carries the MCP stream only: everything this module says goes to stderr.

Nothing a client writes stops it: a line that cannot be relayed is answered here (:mod:`.stdio_lines`), and
what happens to one request on its way to the front door becomes that request's error (:mod:`.transport`),
unless its answer was lost and running it twice does no harm: then it is sent again (:mod:`.resend`). Nothing
foldermind does stops it either: the URL and the token are read again when a request cannot use them
(:mod:`.link`), so a rotated token, a stop and start, a restarted front door, a killed kernel or a new port is
followed, a supervisor that is not running is started, and a request that cannot be served in time gets a typed
error; the client's session goes on.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from foldermind.kernel.cli.bridge import stdio_lines
from foldermind.kernel.cli.bridge.link import BROKE, BridgeFailure, Link
from foldermind.kernel.cli.bridge.resend import Resends
from foldermind.kernel.cli.bridge.transport import Guarded
from foldermind.protocol.runtime.home import Home


class BridgeError(Exception):
    """The bridge could not reach a serving front door; the message says why and what to do."""


def wait_for_frontdoor(home: Home, timeout: float) -> dict[str, Any]:
    """The front door's info once it serves (it writes ``run/mcp.json`` after binding)."""
    info = home.wait_mcp_serving(timeout)
    if info is None:
        state = (home.read_mcp_info() or {}).get("state", "not started")
        raise BridgeError(f"the MCP front door is not serving ({state}); see `foldermind status` and logs")
    return info


READ_S = 300.0
"""How long one answer of the front door may take (the HTTP read timeout); after the client closes stdin, the
answers still owed wait as long: slow is not hung, and a busy machine's answer is still delivered."""


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


async def relay(home: Home, link: Link, max_bytes: int) -> None:
    """Copy messages both ways until the client closes stdin. A request whose answer was lost is sent again when
    that is safe (:mod:`.resend`), else answered with a typed error, and a connection to the front door that
    fails is opened again: the client never sees its session end."""
    timeout = httpx2.Timeout(30.0, read=READ_S)
    client = ClientSide(max_bytes)
    pending: set[RequestId] = set()

    async def owe(rid: RequestId, line: bytes) -> None:
        await client.write(line)
        pending.discard(rid)

    resends = Resends(owe, lambda rid, why: _error_line(rid, BridgeFailure.CONNECTION_LOST, why))
    to_send, queued = anyio.create_memory_object_stream[SessionMessage](64)
    transport = Guarded(httpx2.AsyncHTTPTransport(), link)
    async with (
        httpx2.AsyncClient(timeout=timeout, transport=transport) as http,
        anyio.create_task_group() as tg,
    ):
        resends.tasks = tg
        tg.start_soon(client.read, to_send)
        while True:
            try:
                if await _connect(link.url or FALLBACK_URL, http, queued, client, pending, resends):
                    break  # the client closed stdin
            except Exception as exc:
                print(f"foldermind: the front door connection broke ({exc!r}); connecting again", file=sys.stderr)
            if client.gone:
                break
            why = BROKE
            for rid in sorted(pending, key=str):
                lost = JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=CONNECTION_CLOSED, message=why))
                if (flight := resends.lost(lost)) is not None:
                    resends.start(flight, lost)
                else:  # cancelled by the client: no answer is owed, but one ends its wait
                    await owe(rid, _error_line(rid, BridgeFailure.CONNECTION_LOST, f"{why}; ask again"))
            await anyio.sleep(0.5)
        tg.cancel_scope.cancel()


FALLBACK_URL = "http://127.0.0.1:1/mcp"
"""Where the SDK's transport is pointed while no front door serves: :class:`Guarded` aims each request at the
front door serving when it is sent."""


def _error_line(rid: RequestId | None, failure: BridgeFailure, message: str) -> bytes:
    error = failure.error(message)
    return stdio_lines.error_line(rid, error["code"], error["message"], error["data"])


async def _connect(
    url: str,
    http: httpx2.AsyncClient,
    queued: MemoryObjectReceiveStream[SessionMessage],
    client: ClientSide,
    pending: set[RequestId],
    resends: Resends,
) -> bool:
    """One connection to the front door, relaying until the client closes stdin (True) or the SDK's transport
    ends (False: the bridge connects again)."""
    done = False
    async with (
        streamable_http_client(url, http_client=http) as (from_server, to_server),
        anyio.create_task_group() as tg,
    ):

        async def up() -> None:
            nonlocal done
            resends.upstream = to_server.send
            async for message in queued:
                if isinstance(message.message, JSONRPCRequest):
                    pending.add(message.message.id)
                if isinstance(message.message, JSONRPCRequest | JSONRPCNotification):
                    resends.sent(message.message)
                await to_server.send(message)
            with anyio.move_on_after(READ_S):  # stdin closed: the answers still owed go out first
                while pending and not client.gone:
                    await anyio.sleep(0.05)
            done = True
            tg.cancel_scope.cancel()

        async def down() -> None:
            async for message in from_server:
                if isinstance(message, Exception):
                    print(f"foldermind: front door error: {message}", file=sys.stderr)
                    continue
                reply = message.message
                if isinstance(reply, JSONRPCError) and (flight := resends.lost(reply)) is not None:
                    resends.start(flight, reply)  # sent again, or answered why not
                    continue
                if isinstance(reply, JSONRPCResponse | JSONRPCError) and resends.answered(reply):
                    continue  # the bridge's own request
                if isinstance(reply, JSONRPCError) and reply.error.code == CONNECTION_CLOSED:
                    # The SDK's word for a stream that broke mid-answer: the bridge's typed, retryable one.
                    why = f"{BROKE} ({reply.error.message})"
                    await client.write(_error_line(reply.id, BridgeFailure.CONNECTION_LOST, why + "; ask again"))
                else:
                    await client.write(reply.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                if isinstance(reply, JSONRPCResponse | JSONRPCError):
                    # Owed until written: once stdin has closed, an empty ``pending`` ends the connection.
                    pending.discard(reply.id)
                if client.gone:
                    break  # the relay loop ends too
            tg.cancel_scope.cancel()

        tg.start_soon(up)
        tg.start_soon(down)
    return done


def run(home: Home, start_wait_s: float, max_body_mb: float, key: str = "") -> int:
    """Start the supervisor unless one runs and wait for its front door (up to ``start_wait_s``), then relay
    with the owner's token, or client key ``key``'s. A bridge whose foldermind cannot start stays up: each
    request is answered why, and starts it again."""
    link = Link(home, key)
    found = anyio.run(link.serving, start_wait_s)
    if found is None:
        print(link.why_not_serving(), file=sys.stderr, flush=True)
    anyio.run(relay, home, link, int(max_body_mb * 1024 * 1024))
    return 0
