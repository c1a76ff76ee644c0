"""The console's Activity page: what each MCP client called and which documents it was given, asked of the front
door over the bus (``mcp.activity``, which reads the table it writes), filtered by client and since a time.

A row shows its time, client, tool, outcome, how many documents and which (each opening its preview) and how long
it took. A call's arguments (a query, a question) exist only with ``[activity] record_queries = true``; the page
shows them then, and never otherwise, as ``foldermind activity`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import ActivityReply, ActivityRequest
from foldermind.protocol.messages.indexer import iso_time
from foldermind.protocol.runtime.activity import SINCE_HELP, since_time
from foldermind.workers.framework.asyncbus import Bus

ROWS = 200
"""Rows on the page: the latest."""
SHOWN_PATHS = 5
"""Document paths listed per row (the count says how many there were)."""


@dataclass(slots=True)
class ActivityForm:
    client: str = ""
    since: str = ""

    @classmethod
    def parse(cls, params: Any) -> ActivityForm:
        return cls(str(params.get("client", "")).strip()[:63], str(params.get("since", "")).strip()[:40])


@dataclass(slots=True)
class ActivityView:
    form: ActivityForm
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Latest first, each with ``when`` (ISO 8601 UTC), ``links`` ((path, preview href) of the first documents)
    and the reply's fields."""
    clients: list[str] = field(default_factory=list)
    error: str = ""
    arguments: bool = False
    """Whether any row carries its arguments (``record_queries`` was on when it was written)."""


def preview_href(path: str) -> str:
    return f"/preview?{urlencode({'path': path})}"


async def activity(bus: Bus, params: Any) -> ActivityView:
    """The rows the form asks for; a ``since`` that names no time, or a front door that does not answer, costs
    the table a note."""
    form = ActivityForm.parse(params)
    out = ActivityView(form)
    since = 0.0
    if form.since:
        try:
            since = since_time(form.since)
        except ValueError:
            out.error = f"since: {SINCE_HELP}"
            return out
    try:
        reply = await bus.call("frontdoor", ActivityRequest(form.client, since, ROWS), ActivityReply, timeout=10)
    except JobError as exc:
        out.error = f"the front door did not answer: {exc.message}"
        return out
    out.clients = reply.clients
    for row in reply.rows:
        paths = [str(p) for p in row.get("documents") or []]
        links = [(p, preview_href(p)) for p in paths[:SHOWN_PATHS]]
        out.rows.append({**row, "when": iso_time(float(row["at"])), "links": links})
    out.arguments = any(row.get("arguments") for row in out.rows)
    return out
