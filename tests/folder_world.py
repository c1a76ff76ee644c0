"""A real kernel (watcher, parser, embedder, indexer) indexing one folder of given files, searched over the bus:
what the tests of the keyword index's fields and languages (``tests/test_fields.py``, ``tests/test_languages.py``)
start, stop and start again (an index of older fields rebuilt)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from foldermind.protocol.messages import (
    SearchHit,
)
from tests.config import merge
from tests.helpers import FAST_RESTART, SEARCH_OVER_BUS, RunningKernel, remove_tree, short_tmpdir, wait_for
from tests.world import KernelWorld


class FolderWorld(KernelWorld):
    """The kernel in ``root`` and its folder ``root/docs`` of ``files`` (name -> text)."""

    def __init__(self, root: Path, files: Mapping[str, str], name: str = "folder-world") -> None:
        self.files, self.world_name = files, name
        self.kernel = RunningKernel(root, merge(FAST_RESTART, SEARCH_OVER_BUS))
        self.root = root

    def start(self) -> None:
        self.kernel.start()
        super().__init__(self.kernel, self.root, self.world_name)

    def restart(self) -> None:
        """A new kernel in the same home (the old one stopped by the caller), as a user starts it again."""
        self.kernel = RunningKernel(self.root, merge(FAST_RESTART, SEARCH_OVER_BUS))
        self.start()

    def hits(self, query: str, mode: str = "keyword") -> list[SearchHit]:
        return list(self.search(query, mode).results)

    def found(self, query: str, mode: str = "keyword") -> list[str]:
        return [r["file_name"] for r in self.hits(query, mode)]

    def ready(self) -> bool:
        """Every file indexed and embedded, and every chunk in the keyword index."""
        return self.settled(len(self.files), count="files_total")


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
        w.add("docs", root / "docs")
        wait_for(w.ready, 180, 0.2, "the folder indexed and embedded")
        yield w
    finally:
        w.kernel.stop()
        remove_tree(root)
