"""The two HTTP faces: the MCP front door ([mcp]) with its record of what each client did ([activity]), and the
web console ([console])."""

from __future__ import annotations

from pydantic import Field

from foldermind.protocol.runtime.config.strict import Strict


class McpPolicy(Strict):
    """The MCP front door (streamable HTTP). Loopback only unless you change host on purpose."""

    host: str = Field("127.0.0.1", description="The address the front door binds.")
    port: int = Field(
        53827,
        ge=0,
        le=65535,
        description="FOLDERMIND_MCP_PORT or `foldermind start --port N` override it; if it is taken, an"
        " OS-assigned port is bound instead and `foldermind status` shows it.",
    )
    path: str = Field("/mcp", description="The URL path of the MCP endpoint.")
    max_body_mb: float = Field(
        5.0,
        gt=0,
        description="Request bodies over this size, or without Content-Length, are refused before parsing (413 / 411).",
    )
    rate_per_minute: int = Field(
        60,
        ge=1,
        description="Requests per minute per client, in bursts up to this size (over it: 429). A client is its own"
        " key (`foldermind token add`); with the owner's token, its MCP session, else its TCP connection.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins allowed besides the loopback ones (http://127.0.0.1:PORT,"
        " http://localhost:PORT). A request without Origin (a non-browser client) is allowed.",
    )
    tool_deadline_s: float = Field(
        10.0,
        gt=0,
        description="Deadline of each tool call's bus request to the workers (seconds): past it, SERVICE_UNAVAILABLE.",
    )
    max_response_mb: float = Field(
        2.0, gt=0, description="Largest tool response (MiB); bigger results are cut and say so."
    )
    session_idle_timeout_s: float = Field(3600.0, gt=0, description="MCP sessions idle this long are closed ...")
    max_sessions: int = Field(
        100,
        ge=1,
        description="... and at most this many are open at once: a new one closes the session idle longest (one"
        " with a request or stream open is not idle; if every one is, the new one gets 503).",
    )
    request_timeout_s: float = Field(
        10.0,
        gt=0,
        description="A request (headers and body) must arrive within this many seconds of the connection opening or"
        " of its first byte, else the connection is closed: idle and half-sent connections cannot pile up"
        " (slowloris).",
    )


class ConsolePolicy(Strict):
    """The web console (`foldermind console`): HTTP on 127.0.0.1 only, signed in through one-time links."""

    port: int = Field(
        53828,
        ge=0,
        le=65535,
        description="The console's port on 127.0.0.1; if it is taken, an OS-assigned port is bound instead and"
        " `foldermind status` shows it.",
    )
    link_ttl_s: float = Field(
        60.0, gt=0, le=600, description="A sign-in link from `foldermind console` works once, within this time."
    )
    session_idle_s: float = Field(
        1800.0, gt=0, description="A signed-in browser is signed out after this long without a request (seconds)."
    )
    refresh_s: float = Field(
        1.0, gt=0, description="How often an open page's live parts (workers, folders) are refreshed (seconds)."
    )
    deadline_s: float = Field(
        10.0, gt=0, description="Deadline of each bus request a page makes to the workers (seconds)."
    )
    max_body_kb: int = Field(64, ge=1, description="Form posts over this size are refused before they are read.")
    stall_s: float = Field(
        30.0,
        gt=0,
        description="The console exits, and the kernel restarts it, when its web server's event loop has not run"
        " for this long (a page stuck in it would hold every other page).",
    )


class ActivityPolicy(Strict):
    """What each MCP client did: one row per tool call or resource read (`foldermind activity` shows them)."""

    keep_days: float = Field(30.0, gt=0, description="Rows older than this many days are deleted.")
    max_rows: int = Field(100_000, ge=100, description="At most this many rows are kept; the oldest go first.")
    record_queries: bool = Field(
        False, description="Also keep each call's arguments (queries, questions); off: only what it returned."
    )
