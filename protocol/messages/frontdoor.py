"""The MCP front door's own kinds (CLI -> frontdoor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the MCP front door"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


@message("mcp.info.request")
@dataclass(slots=True)
class McpInfoRequest(Message):
    """-> frontdoor: where the MCP server listens and its state."""


@message("mcp.info.reply")
@dataclass(slots=True)
class McpInfoReply(Message):
    """``url``, ``port`` (the one actually bound), ``state`` (starting, running, error), ``error``, the
    token's storage ``token_mode`` (keyring or file) and open ``sessions``."""

    url: str
    """The MCP endpoint, e.g. `http://127.0.0.1:53827/mcp`."""
    port: int
    """The port actually bound: the configured one, or an OS-assigned one when it was taken."""
    state: str
    """`starting`, `running` or `error`."""
    error: str = ""
    """Why the HTTP server is not running, when `state` is `error`."""
    token_mode: str = ""
    """Where the bearer token is stored: `keyring` or `file`."""
    sessions: int = 0
    """MCP sessions open (handshake-era clients; stateless 2026-07-28 requests have none)."""


@message("mcp.token.rotate.request")
@dataclass(slots=True)
class TokenRotateRequest(Message):
    """-> frontdoor: make a new bearer token, persist it atomically and use it at once; if persisting
    fails the old token stays in use (error ``token_persist_failed``)."""


@message("mcp.token.rotate.reply")
@dataclass(slots=True)
class TokenRotateReply(Message):
    """The storage mode the new token went to (never the token itself: the CLI reads the store)."""

    token_mode: str
    """Where the new token was stored (`keyring` or `file`); the token itself never travels on the bus."""


@message("mcp.activity.request")
@dataclass(slots=True)
class ActivityRequest(Message):
    """-> frontdoor: what MCP clients did, as `foldermind activity` shows it (the console's Activity page)."""

    client: str = ""
    """Only this client key's rows (`owner`: the owner's token); `""` every client's."""
    since: float = 0.0
    """Only rows from this time on (epoch seconds); 0 any time."""
    limit: int = 200
    """At most this many rows, the latest (1 to 1000)."""


@message("mcp.activity.reply")
@dataclass(slots=True)
class ActivityReply(Message):
    """The rows, latest first, and the names to filter by."""

    rows: list[dict[str, Any]]
    """Each: `at` (epoch seconds), `client`, `tool` (or `resources/read`), `outcome` (`ok` or the error code),
    `documents` (paths returned or read), `count`, `duration_ms`, and `arguments`: null unless `[activity]
    record_queries` is on."""
    clients: list[str]
    """The client keys registered now and every name in the activity kept, sorted."""
