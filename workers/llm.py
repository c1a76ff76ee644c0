"""The llm worker. Local generation for grounded chat and document analysis.

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "Local generation for grounded chat and document analysis."


class LlmWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {"role": ROLE, "implemented": False}


WORKER = LlmWorker
