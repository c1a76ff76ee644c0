"""``foldermind mcp``: the stdio bridge that stdio-only MCP clients launch as a command.

It does not serve MCP itself: it finds (or starts) the supervisor of its home and relays every JSON-RPC
message between its stdin/stdout and the front door's streamable HTTP endpoint, with the bearer token
read from the home's token store. So two clients, or one client that spawns the server twice, share one
index, one set of models and one rate limit per session, instead of each opening the files and loading
the models again. stdout carries the MCP stream only: everything this module says goes to stderr.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server

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


async def relay(url: str, token: str) -> None:
    """Copy messages both ways until the client closes stdin (or the server goes away)."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (from_server, to_server),
        stdio_server() as (from_client, to_client),
        anyio.create_task_group() as tg,
    ):

        async def pump(source: Any, sink: Any, trouble: str) -> None:
            async for message in source:
                if isinstance(message, Exception):
                    print(f"foldermind: {trouble}: {message}", file=sys.stderr)
                    continue
                await sink.send(message)
            tg.cancel_scope.cancel()  # one side closed (the client's stdin, or the server): we are done

        tg.start_soon(pump, from_client, to_server, "dropped an unreadable message from the client")
        tg.start_soon(pump, from_server, to_client, "front door error")


def run(home: Home, start_wait_s: float) -> int:
    try:
        info = ensure_running(home, start_wait_s)
    except BridgeError as exc:
        print(f"foldermind: {exc}", file=sys.stderr)
        return 1
    token = TokenStore(home).load_or_create()
    anyio.run(relay, str(info["url"]), token)
    return 0
