"""A running kernel's indexer seen over the bus: the harness the search, filter, criteria, field, language and
busy-search tests share (each adds what only it needs in a subclass).

``settled`` is the one definition of "indexed": every folder named has at least that many files counted,
reads ``ready``, has every chunk embedded (unless ``embedded=False``) and, SQLite being ahead of Tantivy
(commits are folded), Tantivy holds every chunk (unless ``keyword=False``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    Message,
    SearchReply,
    SearchRequest,
)
from tests.helpers import RunningKernel


class KernelWorld:
    """The kernel ``kernel`` (home ``root``) and a bus client named ``name`` of its own."""

    def __init__(self, kernel: RunningKernel, root: Path, name: str) -> None:
        self.kernel, self.root, self.name = kernel, root, name
        self.client: BusClient = kernel.client(name)
        self.folder_ids: dict[str, str] = {}

    def call(self, msg: Message, reply: type[Any], to: str = "indexer", timeout: float = 20) -> Any:
        return self.client.request(to, msg, reply, timeout=timeout).body

    def error(self, msg: Message, reply: type[Any]) -> JobError:
        """The error ``msg`` must fail with."""
        with pytest.raises(JobError) as info:
            self.call(msg, reply)
        return info.value

    def code(self, msg: Message, reply: type[Any]) -> str:
        """The error code ``msg`` must fail with."""
        return str(self.error(msg, reply).code)

    def search(self, query: str, mode: str = "hybrid", check_mode: bool = True, **kw: Any) -> SearchReply:
        """A search; ``check_mode``: it must have run in ``mode`` (no fallback)."""
        reply: SearchReply = self.call(SearchRequest(query, mode, **kw), SearchReply)
        if check_mode:
            assert reply.mode_used == mode, reply.note
        return reply

    def add(self, name: str, path: Path) -> str:
        """Register ``path`` as the Smart Folder ``name`` (the indexer has the watcher pick it up); returns its id."""
        folder_id = str(self.call(FolderAddRequest(str(path), name), FolderAddReply).folder["id"])
        self.folder_ids[name] = folder_id
        return folder_id

    def folders(self) -> dict[str, Any]:
        """The path folders by name."""
        return {f["name"]: f for f in self.call(FolderListRequest(), FolderListReply).folders}

    def settled(
        self,
        expected: Mapping[str, int] | int,
        count: str = "files_indexed",
        embedded: bool = True,
        keyword: bool = True,
    ) -> bool:
        """Whether the folders named in ``expected`` (an int: the only folder) hold at least that many files
        by ``count`` and are indexed (see the module's docstring)."""
        folders = self.folders()
        if isinstance(expected, int):
            if not folders:
                return False
            expected = {next(iter(folders)): expected}
        if not all(
            name in folders
            and folders[name][count] >= n
            and folders[name]["state"] == "ready"
            and (folders[name]["chunks_embedded"] == folders[name]["chunks"] or not embedded)
            for name, n in expected.items()
        ):
            return False
        if not keyword:
            return True
        details = self.call(DescribeRequest(), DescribeReply).details
        return bool(details["chunks_in_bm25"] == sum(f["chunks"] for f in folders.values()))
