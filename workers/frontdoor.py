"""The frontdoor worker. The MCP server: streamable HTTP on 127.0.0.1 and the stdio bridge's endpoint.

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "The MCP server: streamable HTTP on 127.0.0.1 and the stdio bridge's endpoint."


class FrontdoorWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {
            "role": "The MCP server: streamable HTTP on 127.0.0.1 and the stdio bridge's endpoint.",
            "implemented": False,
        }


WORKER = FrontdoorWorker
