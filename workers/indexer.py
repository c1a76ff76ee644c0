"""The indexer worker. The only writer of the Tantivy index, the usearch file and SQLite; answers searches.

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "The only writer of the Tantivy index, the usearch file and SQLite; answers searches."


class IndexerWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {
            "role": "The only writer of the Tantivy index, the usearch file and SQLite; answers searches.",
            "implemented": False,
        }


WORKER = IndexerWorker
