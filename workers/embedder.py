"""The embedder worker. Turns batches of chunks into normalised float32 vectors.

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "Turns batches of chunks into normalised float32 vectors."


class EmbedderWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {"role": ROLE, "implemented": False}


WORKER = EmbedderWorker
