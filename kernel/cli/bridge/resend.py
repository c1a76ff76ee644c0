"""Which requests the stdio bridge sends again when their answer was lost, and how.

A request whose connection broke, or whose answer stream ended, before its answer came (the front door restarted,
crashed or stopped under it) may or may not have run there. The bridge sends it again, to the front door serving
next, only when running it twice does no harm:

- a method that only reads or negotiates (:data:`REPEATABLE`);
- ``tools/call`` of a tool the server marks ``readOnlyHint`` or ``idempotentHint`` (MCP ``ToolAnnotations``), as
  the ``tools/list`` answers the bridge relays say, or one it asks for itself when none named the tool.

Any other is answered ``CONNECTION_LOST`` saying that it may or may not have run. A request goes again for at most
:data:`RESEND_FOR_S` after its first loss, after a pause that grows (a front door that is stopping may still take
it and cut it again); waiting for the new front door is the transport's (:class:`~.transport.Guarded`), which
never starts the supervisor for a request sent again. A request the client cancelled (``notifications/cancelled``)
is not sent again.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp.types import ListToolsResult
from mcp_types import CONNECTION_CLOSED, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, RequestId
from pydantic import ValidationError

from foldermind.kernel.cli.bridge.link import BROKE, BridgeFailure
from foldermind.kernel.cli.bridge.transport import RESENT

REPEATABLE = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
)
"""Methods that change nothing on the server but the session they open (initialize): sent again whatever they are."""
RESEND_FOR_S = 60.0
"""How long after its first loss a request may still be sent again (the transport waits for a front door meanwhile:
a restart takes seconds, more on a busy machine)."""
OWN_ID = "foldermind-bridge-tools-list-"
LOST = frozenset({CONNECTION_CLOSED, BridgeFailure.CONNECTION_LOST.rpc})
"""The SDK's word for an answer stream that ended without the answer, and the transport's for a broken connection."""

Owe = Callable[[RequestId, bytes], Awaitable[None]]
"""Answer the client's request ``id`` with a JSON-RPC line (it is no longer owed)."""


@dataclass
class InFlight:
    request: JSONRPCRequest
    lost_at: float | None = None
    tries: int = 0
    recovering: bool = False
    answer: JSONRPCResponse | JSONRPCError | None = None
    done: anyio.Event | None = None
    """Set for the bridge's own requests: their answer goes here, not to the client."""


class Resends:
    """The requests in flight, what the server says of its tools, and the loss of one (:meth:`recover`)."""

    def __init__(self, owe: Owe, error_line: Callable[[RequestId, str], bytes]) -> None:
        self.owe = owe
        self.error_line = error_line
        self.inflight: dict[RequestId, InFlight] = {}
        self.repeatable_tools: dict[str, bool] = {}
        self.learnt = False
        """Whether a tools/list answer was read (a tool it did not name is not marked)."""
        self.upstream: Callable[[SessionMessage], Awaitable[None]] | None = None
        """Sends into the SDK transport of the connection open now."""
        self.tasks: TaskGroup | None = None
        self._asked = 0

    def sent(self, message: JSONRPCRequest | JSONRPCNotification) -> None:
        """Note a message the client sent up."""
        if isinstance(message, JSONRPCRequest):
            self.inflight[message.id] = InFlight(message)
        elif message.method == "notifications/cancelled" and isinstance(message.params, dict):
            self.inflight.pop(message.params.get("requestId", object()), None)

    def lost(self, reply: JSONRPCError) -> InFlight | None:
        """The request ``reply`` says was lost on its way, or None (an error of the server's, a request unknown)."""
        return self.inflight.get(reply.id) if reply.id is not None and reply.error.code in LOST else None

    def answered(self, reply: JSONRPCResponse | JSONRPCError) -> bool:
        """Note an answer; True when it is the bridge's own request's (not for the client)."""
        flight = self.inflight.pop(reply.id, None) if reply.id is not None else None
        if flight is None:
            return False
        if flight.request.method == "tools/list" and isinstance(reply, JSONRPCResponse):
            self._learn(reply.result)
        if flight.done is None:
            return False
        flight.answer = reply
        flight.done.set()
        return True

    def start(self, flight: InFlight, reply: JSONRPCError) -> None:
        """Recover ``flight`` in the background (the relay goes on meanwhile)."""
        assert self.tasks is not None
        if not flight.recovering:
            flight.recovering = True
            self.tasks.start_soon(self.recover, flight, reply)

    async def recover(self, flight: InFlight, reply: JSONRPCError) -> None:
        """Send a lost request again while that is safe and its time lasts, or answer why it was not."""
        request = flight.request
        flight.lost_at = flight.lost_at or time.monotonic()
        tool = _tool(request)
        while time.monotonic() - flight.lost_at < RESEND_FOR_S and await self._repeatable(request):
            await anyio.sleep(min(0.1 * 2**flight.tries, 2.0))
            flight.tries += 1
            if self.inflight.get(request.id) is not flight:
                return  # cancelled by the client, or answered meanwhile
            if await self._send(request):
                flight.recovering = False
                what = f"tools/call {tool}" if isinstance(tool, str) else request.method
                print(f"foldermind: sent a {what} again, its answer was lost", file=sys.stderr, flush=True)
                return
        if self.inflight.pop(request.id, None) is not flight:
            return
        if isinstance(tool, str) and not self.repeatable_tools.get(tool, False):
            marks = "does not mark" if self.learnt else "could not be asked whether it marks"
            why = (
                f"{BROKE} ({reply.error.message}): the call "
                f"may or may not have run; the server {marks} {tool!r} read-only or idempotent, so the bridge did "
                "not send it again"
            )
        else:
            why = f"{BROKE} ({reply.error.message}); ask again"
        if flight.done is not None:
            flight.answer = reply
            flight.done.set()
        else:
            await self.owe(request.id, self.error_line(request.id, why))

    async def _send(self, request: JSONRPCRequest) -> bool:
        if self.upstream is None:
            return False
        try:
            await self.upstream(SessionMessage(request, metadata=ClientMessageMetadata(headers={RESENT: "1"})))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the connection is being opened again: the next try uses the new one
        return True

    async def _repeatable(self, request: JSONRPCRequest) -> bool:
        if request.method in REPEATABLE:
            return True
        name = _tool(request)
        if not isinstance(name, str):
            return False
        if name not in self.repeatable_tools:
            await self._ask_tools(request)
        return self.repeatable_tools.get(name, False)

    async def _ask_tools(self, like: JSONRPCRequest) -> None:
        """Ask the front door for its tools (all pages), with the ``_meta`` the client's own request carried."""
        meta = (like.params or {}).get("_meta")
        if isinstance(meta, dict):
            meta = {k: v for k, v in meta.items() if k != "progressToken"}
        cursor: str | None = None
        for _ in range(20):
            self._asked += 1
            params: dict[str, Any] = {"_meta": meta} if isinstance(meta, dict) else {}
            if cursor is not None:
                params["cursor"] = cursor
            own = JSONRPCRequest(jsonrpc="2.0", id=f"{OWN_ID}{self._asked}", method="tools/list", params=params)
            done = anyio.Event()
            flight = self.inflight[own.id] = InFlight(own, done=done)
            if not await self._send(own):
                self.inflight.pop(own.id, None)
                return
            with anyio.move_on_after(RESEND_FOR_S):
                await done.wait()
            self.inflight.pop(own.id, None)
            if not isinstance(flight.answer, JSONRPCResponse):
                return
            cursor = flight.answer.result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return

    def _learn(self, result: dict[str, Any]) -> None:
        try:
            tools = ListToolsResult.model_validate(result).tools
        except ValidationError:
            return
        self.learnt = True
        for tool in tools:
            marks = tool.annotations
            self.repeatable_tools[tool.name] = bool(marks and (marks.read_only_hint or marks.idempotent_hint))


def _tool(request: JSONRPCRequest) -> Any:
    """The tool a ``tools/call`` names (whatever the client wrote there), or None for any other request."""
    return request.params.get("name") if request.method == "tools/call" and request.params else None
