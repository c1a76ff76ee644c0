"""The MCP front door's own kinds (CLI -> frontdoor)."""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.messages.envelope import Message, message


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
    port: int
    state: str
    error: str = ""
    token_mode: str = ""
    sessions: int = 0


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
