"""The watcher worker. Watches every Smart Folder and reports debounced file changes.

Stands in the process map now, answering ``ping`` and ``describe``; its job arrives with the
issue that builds it.
"""

from __future__ import annotations

from typing import Any

from foldermind.workers.base import Worker

ROLE = "Watches every Smart Folder and reports debounced file changes."


class WatcherWorker(Worker):
    def details(self) -> dict[str, Any]:
        return {
            "role": "Watches every Smart Folder and reports debounced file changes.",
            "implemented": False,
        }


WORKER = WatcherWorker
