"""A real kernel (watcher, parser, embedder, indexer) indexing one folder of given files, searched over the bus:
what the tests of the keyword index's fields and languages (``tests/test_fields.py``, ``tests/test_languages.py``)
start, stop and start again (an index of older fields rebuilt)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    SearchHit,
    SearchReply,
    SearchRequest,
    WatchSyncReply,
    WatchSyncRequest,
)
from tests.helpers import FAST_RESTART, SEARCH_OVER_BUS, RunningKernel, remove_tree, short_tmpdir, wait_for


class FolderWorld:
    """The kernel in ``root`` and its folder ``root/docs`` of ``files`` (name -> text)."""

    def __init__(self, root: Path, files: Mapping[str, str], name: str = "folder-world") -> None:
        self.root, self.files, self.name = root, files, name
        self.kernel = RunningKernel(root, FAST_RESTART + SEARCH_OVER_BUS)
        self.client: BusClient | None = None

    def start(self) -> None:
        self.kernel.start()
        self.client = self.kernel.client(self.name)

    def restart(self) -> None:
        """A new kernel in the same home (the old one stopped by the caller), as a user starts it again."""
        self.kernel = RunningKernel(self.root, FAST_RESTART + SEARCH_OVER_BUS)
        self.start()

    def call(self, msg: Any, reply: type[Any], to: str = "indexer", timeout: float = 20) -> Any:
        assert self.client is not None
        return self.client.request(to, msg, reply, timeout=timeout).body

    def search(self, query: str, mode: str = "keyword") -> list[SearchHit]:
        reply: SearchReply = self.call(SearchRequest(query, mode, top_k=10), SearchReply)
        assert reply.mode_used == mode, reply.note
        return list(reply.results)

    def found(self, query: str, mode: str = "keyword") -> list[str]:
        return [r["file_name"] for r in self.search(query, mode)]

    def settled(self) -> bool:
        """Every file indexed and embedded, and every chunk in the keyword index."""
        folders = self.call(FolderListRequest(), FolderListReply).folders
        if not folders:
            return False
        f = folders[0]
        ready = f["files_total"] >= len(self.files) and f["state"] == "ready" and f["chunks_embedded"] == f["chunks"]
        details = self.call(DescribeRequest(), DescribeReply).details
        return bool(ready and details["chunks_in_bm25"] == f["chunks"])


W = TypeVar("W", bound=FolderWorld)


@contextlib.contextmanager
def folder_world(files: Mapping[str, str], prefix: str, name: str, kind: type[W]) -> Iterator[W]:
    """A started ``kind`` (a :class:`FolderWorld`) with its folder registered and settled; stopped and removed
    after."""
    root = short_tmpdir(prefix)
    w = kind(root, files, name)
    try:
        w.start()
        (root / "docs").mkdir()
        for file_name, text in files.items():
            (root / "docs" / file_name).write_text(text, encoding="utf-8")
        w.call(FolderAddRequest(str(root / "docs"), "docs"), FolderAddReply)
        w.call(WatchSyncRequest(), WatchSyncReply, to="watcher", timeout=60)
        wait_for(w.settled, 180, 0.2, "the folder indexed and embedded")
        yield w
    finally:
        w.kernel.stop()
        remove_tree(root)
