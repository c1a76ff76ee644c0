"""The parser worker. Turns one file into text segments with locations (pool member).

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "Turns one file into text segments with locations (pool member)."


class ParserWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {
            "role": "Turns one file into text segments with locations (pool member).",
            "implemented": False,
        }


WORKER = ParserWorker
