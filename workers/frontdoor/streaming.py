"""An answer's progress notifications, in order.

The chat reports its answer as it goes (:class:`.chat.Shown`): the answer's text from the event loop, the
model's progress from the bus thread. Each notification here waits for the one before it, so the pieces of
text reach the client in the order they make the answer, and :meth:`Progress.flush` lets the last one go
before the tool's result (a client reading the notifications then has the whole answer when the result comes).
"""

from __future__ import annotations

import asyncio
import logging

import anyio.from_thread
from mcp.server.mcpserver import Context

from foldermind.protocol.messages import ChatPartial

log = logging.getLogger("foldermind.frontdoor")


class Progress:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.last: asyncio.Task[None] | None = None

    async def _send(self, value: float, total: float, text: str | None, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
        await self.ctx.report_progress(value, total, text)

    def __call__(self, part: ChatPartial) -> None:
        args = float(part.completion_tokens), float(part.max_tokens), part.delta or None, self.last
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            self.last = asyncio.ensure_future(self._send(*args))
            return
        try:
            anyio.from_thread.run(self._send, *args)
        except Exception as exc:  # a client that went away must not fail the answer
            log.warning("progress notification not sent: %s", type(exc).__name__)
            log.debug("progress notification not sent", exc_info=True)

    async def flush(self) -> None:
        if self.last is not None:
            await asyncio.wait([self.last])
