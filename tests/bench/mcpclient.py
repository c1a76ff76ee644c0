"""The bench's MCP client: the real ``mcp`` SDK client over streamable HTTP with the bearer token, with
httpx hooks that count the HTTP requests and time when a request left and its response headers arrived;
and a blocking face on one such client, for code that is not async (the retrieval bench's query
functions)."""

from __future__ import annotations

import contextlib
import time
import tomllib
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from foldermind.protocol.runtime.config import SearchPolicy
from tests import mcpclient
from tests.bench.kernels import BenchFailure
from tests.config import Config, merge


def kernel_config(
    search: Mapping[str, Any] | None = None,
    llm: Mapping[str, Any] | None = None,
    ingest: Mapping[str, Any] | None = None,
) -> Config:
    """The home's override for the search benches: the front door on an OS-assigned port, the rate limit
    raised, the model's background analysis off, and the indexer's query-vector cache off (where it has
    one), so that every search encodes its query (the latency rounds ask each query of several sessions and
    modes in turn, and a cache would answer all but the first). ``search``, ``llm`` and ``ingest``: more keys of
    those tables (``{"fusion": "rrf"}``), over these."""
    table = {"query_cache_size": 0} if "query_cache_size" in SearchPolicy.model_fields else {}
    # The model's background summaries would share the CPU with the searches measured here; their
    # effect on search is measured on its own by tests.bench.llm.
    return merge(
        {"mcp": {"port": 0, "rate_per_minute": 1000000}, "llm": {"analysis": False}},
        {"llm": llm or {}},
        {"search": {**table, **(search or {})}} if table or search else {},
        {"ingest": ingest} if ingest else {},
    )


def settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` command-line pairs (VALUE in TOML: ``fusion="rrf"``, ``exact_search_vectors=0``) as a table
    for :func:`kernel_config`."""
    return {k.strip(): tomllib.loads(f"value = {v.strip()}")["value"] for k, v in (kv.split("=", 1) for kv in pairs)}


SEARCH = "search_documents"
MODES = ("keyword", "semantic", "hybrid")
PROTOCOLS = ("auto", "legacy")
"""``auto``: the SDK's default negotiation (the stateless 2026-07-28 revision: no session id);
``legacy``: the initialize handshake and an ``Mcp-Session-Id``."""


def front_door(home: Path) -> tuple[str, str]:
    """(URL, bearer token) of the front door of the kernel running on ``home``, once it serves."""
    return str(mcpclient.mcp_info(home)["url"]), mcpclient.token_of(home)


def search_args(query: str, mode: str, top_k: int = 10) -> dict[str, Any]:
    return {"query": query, "mode": mode, "top_k": top_k}


@dataclass(slots=True)
class Wire:
    """What one client put on the wire: HTTP requests by method, and the session id it was given."""

    requests: Counter[str] = field(default_factory=Counter)
    session_id: str = ""
    sent_at: float = 0.0  # perf_counter when the last request was handed to httpx (its request hook)
    answered_at: float = 0.0  # when the last response's headers arrived (its response hook)


@contextlib.asynccontextmanager
async def http_client(url: str, token: str, protocol: str, wire: Wire | None = None) -> AsyncIterator[Client]:
    """tests/mcpclient.py's ``http_client``, with hooks that fill ``wire``."""
    wire = wire if wire is not None else Wire()

    async def on_request(request: httpx2.Request) -> None:
        wire.sent_at = time.perf_counter()
        wire.requests[request.method] += 1

    async def on_response(response: httpx2.Response) -> None:
        wire.answered_at = time.perf_counter()
        sid = response.headers.get("mcp-session-id")
        if sid:
            wire.session_id = sid

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(60.0),
            event_hooks={"request": [on_request], "response": [on_response]},
        ) as http,
        Client(streamable_http_client(url, http_client=http), mode=protocol) as client,
    ):
        yield client


class BlockingClient:
    """``with BlockingClient(url, token) as c: c.search(query, mode, top_k)``: one MCP client (one HTTP
    connection; with ``legacy``, one session) on an event loop in a thread of its own."""

    def __init__(self, url: str, token: str, protocol: str = "auto") -> None:
        self.url, self.token, self.protocol = url, token, protocol
        self.wire = Wire()
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._client: Client | None = None

    def __enter__(self) -> BlockingClient:
        try:
            self._portal = self._stack.enter_context(start_blocking_portal())
            cm = self._portal.wrap_async_context_manager(http_client(self.url, self.token, self.protocol, self.wire))
            self._client = self._stack.enter_context(cm)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()

    @property
    def negotiated(self) -> str:
        assert self._client is not None
        return str(self._client.protocol_version)

    def max_top_k(self) -> int:
        """``search_documents``' bound on top_k, from its input schema in ``tools/list``."""
        assert self._portal is not None and self._client is not None
        tools = self._portal.call(self._client.list_tools).tools
        schema = next(t.input_schema for t in tools if t.name == SEARCH)
        return int(schema["properties"]["top_k"]["maximum"])

    def search(self, query: str, mode: str, top_k: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result's structuredContent; a tool error, or another mode answering, fails the run. ``extra``:
        more arguments (the filters)."""
        assert self._portal is not None and self._client is not None
        args = {**search_args(query, mode, top_k), **(extra or {})}
        result = self._portal.call(self._client.call_tool, SEARCH, args)
        body = result.structured_content
        if result.is_error or not body:
            raise BenchFailure(f"search_documents failed: {result.content}")
        if body.get("mode_used") != mode:
            raise BenchFailure(f"{mode} answered as {body.get('mode_used')}: {body.get('note')}")
        return dict(body)
