"""A file written while the watcher scans a folder is indexed: the scan's list, sent after, does not undo it.

Real watcher, parser and indexer. The watcher holds between a folder's scan and its reconcile (test switch
``FOLDERMIND_TEST_WATCHER_HOLD``); a file written in that window is reported by the watchdog event, and the
reconcile's list, which does not hold it, must not delete it as gone (it did: the file was never indexed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldermind.protocol.messages import FolderAddReply, FolderAddRequest
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, only_workers, remove_tree, short_tmpdir, wait_for

DEBOUNCE_S = 0.2
LATE_S = 10 * DEBOUNCE_S
"""How long the scan's list is held back after the file is written: the fault's window, well past the debounce,
so the file's event reaches the indexer before the list does unless the watcher holds it."""


@pytest.fixture
def root() -> Iterator[Path]:
    root = short_tmpdir("fmw-")
    try:
        yield root
    finally:
        remove_tree(root)


def names(k: RunningKernel, word: str) -> set[str]:
    return {Path(r["file_path"]).name for r in k.search(word)["results"]}


def test_a_file_written_between_a_folders_scan_and_its_reconcile_is_indexed(root: Path) -> None:
    docs, flag = root / "docs", root / "scan-flag"
    docs.mkdir()
    (docs / "anchor.txt").write_text("An anchor file about herons, listed by the scan.\n")
    flag.write_text("hold")
    switch = {"workers": {"watcher": {"env": {"FOLDERMIND_TEST_WATCHER_HOLD": str(flag)}}}}
    config = merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"), ONE_PARSER, switch)
    k = RunningKernel(root / "home", merge(config, {"ingest": {"debounce_s": DEBOUNCE_S}}))
    try:
        k.start()
        client = k.client("scan-race")
        client.request("indexer", FolderAddRequest(str(docs), "Docs"), FolderAddReply, timeout=30)
        wait_for(Path(f"{flag}.held").exists, 60, 0.05, "the watcher holding between its scan and its reconcile")
        (docs / "late.txt").write_text("A late file about pelicans, written after the scan listed the folder.\n")
        time.sleep(LATE_S)  # the race's own timing (the fault), not a wait for a condition
        flag.unlink()
        wait_for(lambda: names(k, "herons") == {"anchor.txt"}, 60, 0.2, "the scanned file searchable")
        wait_for(lambda: names(k, "pelicans") == {"late.txt"}, 60, 0.2, "the file written during the scan searchable")
    finally:
        k.stop()
