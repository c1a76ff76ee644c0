"""One MCP client cannot lock the others out: the rate limit is per client, and the session cap makes room.

A real kernel (front door and indexer only: every call here is a folder listing), real MCP SDK clients
over real HTTP. The rate limit and the session cap are set small so a test reaches them in a few calls.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from foldermind.protocol.messages import DescribeReply, DescribeRequest
from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, only_workers, remove_tree, short_tmpdir, wait_for

RATE = 6  # [mcp] rate_per_minute: a token back every 10 s, so a burst's refusals stay refusals
CAP = 3  # [mcp] max_sessions
RATE_LIMITED = -32004


@dataclass
class Served:
    k: RunningKernel
    url: str
    token: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    root = short_tmpdir()
    config = merge(
        FAST_RESTART,
        only_workers("frontdoor", "indexer"),
        {"mcp": {"port": 0, "rate_per_minute": RATE, "max_sessions": CAP}},
    )
    k = RunningKernel(root / "home", config)
    try:
        k.start()
        yield Served(k, str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root))
    finally:
        k.stop()
        remove_tree(root)


async def folders(client: Client) -> str:
    """One tool call: "ok", or the JSON-RPC error code it was refused with."""
    try:
        result = await client.call_tool("list_smart_folders", {})
    except MCPError as exc:
        return str(exc.error.code)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    return "ok"


def test_a_stateless_client_over_its_limit_does_not_lock_out_another(served: Served) -> None:
    async def go() -> tuple[list[str], str, set[str], tuple[str, str]]:
        async with mc.http_client(served.url, served.token) as busy:
            assert busy.session.discover_result is not None, "the SDK's default is the stateless revision"
            outcomes = [await folders(busy) for _ in range(RATE + 4)]
            # A second client, from connecting on: discovery, the tool list, a call.
            async with mc.http_client(served.url, served.token) as other:
                assert other.session.discover_result is not None
                names = {tool.name for tool in (await other.list_tools()).tools}
                call = await folders(other)
                version = other.protocol_version
            # And a client of the handshake era: its initialize (no session id yet) is not held up either.
            async with mc.http_client(served.url, served.token, mode="legacy") as legacy:
                assert legacy.session.initialize_result is not None
                call_after_initialize = await folders(legacy)
        return outcomes, version, names, (call, call_after_initialize)

    outcomes, version, names, calls = mc.run(go)
    limited = str(RATE_LIMITED)
    # The busy client ran into its limit, and stayed there: its refusals are not undone by the 429's
    # reply (its connection, and so its bucket, is kept).
    first_refusal = outcomes.index(limited)
    assert first_refusal >= 1 and set(outcomes[:first_refusal]) == {"ok"}, outcomes
    assert set(outcomes[first_refusal:]) == {limited} and len(outcomes) - first_refusal >= 4, outcomes
    assert version == "2026-07-28"
    assert "list_smart_folders" in names and calls == ("ok", "ok")


def ping(url: str, session: dict[str, str]) -> int:
    return mc.raw(url, body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=session)[0]


def open_sessions(k: RunningKernel) -> int:
    reply = k.client().request("frontdoor", DescribeRequest(), DescribeReply, timeout=10)
    sessions: int = reply.body.details["sessions"]
    return sessions


def test_at_the_session_cap_the_longest_idle_session_makes_room(served: Served) -> None:
    k, url = served.k, served.url
    wait_for(lambda: open_sessions(k) == 0, 10, what="no session left from another test")
    # CAP abandoned sessions; the first is used again last, so the second is the one idle longest.
    sessions = [mc.legacy_session(url, served.token) for _ in range(CAP)]
    assert ping(url, sessions[0]) == 200
    assert open_sessions(k) == CAP

    async def newcomer() -> str:
        async with mc.http_client(url, served.token, mode="legacy") as client:
            assert client.session.initialize_result is not None
            return await folders(client)

    assert mc.run(newcomer) == "ok"
    assert ping(url, sessions[1]) == 404
    assert ping(url, sessions[0]) == 200 and ping(url, sessions[2]) == 200
    log = wait_for(
        lambda: [line for line in k.home.log_file("frontdoor").read_text().splitlines() if "idle longest" in line],
        10,
        what="the eviction logged",
    )
    assert len(log) == 1 and f"{CAP} sessions are open" in log[0], log
    # Nothing a client sent or was given: no session id, no client name.
    assert not any(s["Mcp-Session-Id"] in log[0] for s in sessions) and "raw-test" not in log[0]


def open_stream(url: str, session: dict[str, str]) -> socket.socket:
    """A session's standalone GET stream, held open (a request in flight: the session is in use)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=30)
    head = [f"GET {parts.path} HTTP/1.1", f"Host: {parts.hostname}:{parts.port}", "Accept: text/event-stream"]
    sock.sendall(("\r\n".join(head + [f"{k}: {v}" for k, v in session.items()]) + "\r\n\r\n").encode())
    seen = b""
    while b"\r\n\r\n" not in seen:
        data = sock.recv(4096)
        assert data, seen
        seen += data
    assert seen.startswith(b"HTTP/1.1 200"), seen
    return sock


def test_when_every_session_is_in_use_a_new_one_is_refused_until_one_is_idle(served: Served) -> None:
    """The other side of the rule: a session with a request in flight is not idle, and is not closed."""
    url = served.url
    auth = {"Authorization": f"Bearer {served.token}"}
    sessions = [mc.legacy_session(url, served.token) for _ in range(CAP)]
    streams = [open_stream(url, s) for s in sessions]
    try:
        status, _, payload = mc.raw(url, body=mc.initialize_body(), headers=auth)
        assert status == 503 and b"Too many open sessions" in payload, (status, payload)
        assert all(ping(url, s) == 200 for s in sessions)
    finally:
        for sock in streams[1:]:
            sock.close()
    # With the other streams closed those sessions are idle again, the first still in use: a new one gets in.
    try:
        # (The server learns of the closed streams a moment later: until then the refusal stands.)
        wait_for(lambda: mc.raw(url, body=mc.initialize_body(), headers=auth)[0] == 200, 10, what="a session in")
        assert ping(url, sessions[0]) == 200
        assert [ping(url, s) for s in sessions[1:]].count(404) == 1
    finally:
        streams[0].close()
