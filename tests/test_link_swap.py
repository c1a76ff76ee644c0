"""A file swapped for a symlink between its event and its read: the outside text never enters the index.

The helper every reader of a user's file goes through (:mod:`foldermind.workers.userfiles`) is tested on real
files, links, folders and a FIFO; then the race is run many times against a real watcher, indexer and parser:
a file is written and appended to, then atomically replaced by a link to a file outside every Smart Folder.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import (
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    IndexStatusReply,
    IndexStatusRequest,
    SearchReply,
    SearchRequest,
)
from foldermind.workers import userfiles
from foldermind.workers.userfiles import LINK_OUTSIDE
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, only_workers, remove_tree, short_tmpdir, wait_for

SECRET = "quillwortsecret"
"""The outside file's word: the index must never hold it."""
TRIES = 24
# Swap delays after the append: most at the 0.15 s of the report (before the watcher's 0.5 s debounce ends),
# some around and after the debounce, so the swap also lands while the indexer reads or the parser parses.
DELAYS = (0.15, 0.15, 0.15, 0.05, 0.3, 0.45, 0.55, 0.7, 0.9, 1.2)
PIPELINE = merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"), ONE_PARSER)


def inside_of(*roots: Path) -> Callable[[str], bool]:
    folders = [str(r.resolve()) for r in roots]
    return lambda real: any(real == f or real.startswith(f + "/") for f in folders)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, Path]:
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    docs.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(f"outside text {SECRET}\n")
    return docs, outside


# ------------------------------------------------------------------------------------------------
# the helper


def test_a_regular_file_inside_is_opened_and_read_from_its_descriptor(folder: tuple[Path, Path]) -> None:
    docs, _outside = folder
    (docs / "a.txt").write_text("inside text\n")
    with userfiles.open_file(str(docs / "a.txt"), inside_of(docs)) as opened:
        assert opened.real == str(docs.resolve() / "a.txt")
        (docs / "a.txt").unlink()  # the name goes; the descriptor still reads what was opened
        assert opened.read(100) == b"inside text\n"
        assert opened.read(6) == b"inside"


def test_a_link_to_a_file_outside_is_refused_and_one_inside_is_opened_at_its_target(folder: tuple[Path, Path]) -> None:
    docs, outside = folder
    (docs / "escape.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(userfiles.Outside) as refused:
        userfiles.open_file(str(docs / "escape.txt"), inside_of(docs))
    assert refused.value.strerror == LINK_OUTSIDE
    (docs / "notes.txt").write_text("notes\n")
    (docs / "alias.txt").symlink_to(docs / "notes.txt")
    with userfiles.open_file(str(docs / "alias.txt"), inside_of(docs)) as opened:
        assert opened.real == str(docs.resolve() / "notes.txt") and opened.read(10) == b"notes\n"


def test_a_folder_on_the_way_swapped_for_a_link_outside_is_refused(folder: tuple[Path, Path]) -> None:
    docs, outside = folder
    (docs / "sub").mkdir()
    (docs / "sub" / "secret.txt").write_text("inside\n")
    assert userfiles.stat_file(str(docs / "sub" / "secret.txt"), inside_of(docs)).st_size == 7
    (docs / "sub").rename(docs / ".old")
    (docs / ".link").symlink_to(outside, target_is_directory=True)
    os.rename(docs / ".link", docs / "sub")  # the open now follows sub/ out of the folder
    with pytest.raises(userfiles.Outside):
        userfiles.open_file(str(docs / "sub" / "secret.txt"), inside_of(docs))


def test_a_fifo_a_folder_and_a_link_loop_are_not_regular_files_and_nothing_blocks(folder: tuple[Path, Path]) -> None:
    docs, _outside = folder
    os.mkfifo(docs / "pipe.txt")
    (docs / "dir.txt").mkdir()
    (docs / "loop.txt").symlink_to("loop.txt")
    for name in ("pipe.txt", "dir.txt", "loop.txt"):
        with pytest.raises(userfiles.NotRegular):
            userfiles.open_file(str(docs / name), inside_of(docs))
    with pytest.raises(FileNotFoundError):
        userfiles.open_file(str(docs / "missing.txt"), inside_of(docs))


def test_a_file_replaced_since_the_stat_that_queued_it_is_refused(folder: tuple[Path, Path]) -> None:
    docs, _outside = folder
    path = docs / "a.txt"
    path.write_text("first\n")
    queued = userfiles.identity(userfiles.stat_file(str(path), inside_of(docs)))
    assert userfiles.stat_file(str(path), inside_of(docs), queued).st_size == 6
    (docs / "a.tmp").write_text("second\n")
    os.rename(docs / "a.tmp", path)  # an atomic save: a new inode under the same name
    with pytest.raises(userfiles.Replaced):
        userfiles.open_file(str(path), inside_of(docs), queued)


def test_a_hardlink_to_an_outside_file_cannot_be_told_apart_and_is_read(folder: tuple[Path, Path]) -> None:
    """The stated limit (docs/security.md): a hardlink is the file itself, at a path inside the folder."""
    docs, outside = folder
    try:
        os.link(outside / "secret.txt", docs / "hard.txt")
    except OSError as exc:
        pytest.skip(f"no hardlink here: {exc}")
    with userfiles.open_file(str(docs / "hard.txt"), inside_of(docs)) as opened:
        assert SECRET.encode() in opened.read(100)


# ------------------------------------------------------------------------------------------------
# the race, against real processes


def keyword(client: BusClient, word: str) -> list[str]:
    reply = client.request("indexer", SearchRequest(word, "keyword", top_k=50), SearchReply, timeout=30).body
    return [Path(h["file_path"]).name for h in reply.results]


def stored_secret(home: Path) -> int:
    """Chunks in SQLite holding the outside word (committed, whether Tantivy has them yet or not)."""
    db = sqlite3.connect(f"file:{home / 'data' / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM chunks WHERE text LIKE ?", (f"%{SECRET}%",)).fetchone()[0])
    finally:
        db.close()


def reasons(client: BusClient) -> dict[str, tuple[str, str]]:
    reply = client.request("indexer", IndexStatusRequest(max_failures=200), IndexStatusReply, timeout=30).body
    return {Path(f["path"]).name: (f["status"], f["error"]) for f in reply.recent_failures}


@dataclass
class Swapping:
    kernel: RunningKernel
    client: BusClient
    docs: Path
    outside: Path
    flag: Path
    """While it exists, the indexer's ingest thread holds before it opens a pending file (a test switch)."""

    def never_the_secret(self) -> None:
        found = keyword(self.client, SECRET)
        assert not found, f"the outside text was returned under {found}"
        assert stored_secret(self.kernel.root) == 0, "the outside text was stored in the index"

    def left_with_the_reason(self, name: str) -> bool:
        self.never_the_secret()
        return reasons(self.client).get(name) in (("failed", LINK_OUTSIDE), ("skipped", LINK_OUTSIDE))


@pytest.fixture(scope="module")
def swapping() -> Iterator[Swapping]:
    root = short_tmpdir("fml-")
    docs, outside, flag = root / "docs", root / "outside.txt", root / "read-flag"
    docs.mkdir()
    outside.write_text(f"Outside every Smart Folder: the {SECRET} ledger.\n" * 5)
    (docs / "anchor.txt").write_text("An anchor file about herons, indexed as usual.\n")
    switch = {"workers": {"indexer": {"env": {"FOLDERMIND_TEST_INDEXER_HOLD": f"read:{flag}"}}}}
    k = RunningKernel(root / "home", merge(PIPELINE, switch))
    try:
        k.start()
        client = k.client("link-swap")
        client.request("indexer", FolderAddRequest(str(docs), "Docs"), FolderAddReply, timeout=30)
        wait_for(lambda: keyword(client, "herons") == ["anchor.txt"], 60, 0.2, "the anchor file searchable")
        yield Swapping(k, client, docs, outside, flag)
    finally:
        k.stop()
        remove_tree(root)


def test_a_file_swapped_for_a_link_outside_never_gets_the_outside_text_into_the_index(swapping: Swapping) -> None:
    docs, outside, client = swapping.docs, swapping.outside, swapping.client
    for i in range(TRIES):
        victim, tmp = docs / f"victim{i}.txt", docs / f".v{i}.tmp"
        victim.write_text(f"Victim {i} starts with its own words about pelicans.\n")
        with victim.open("a") as fh:
            fh.write("An appended line: a real modify event.\n")
        time.sleep(DELAYS[i % len(DELAYS)])  # the race's own timing (the fault), not a wait for a condition
        os.symlink(outside, tmp)
        os.rename(tmp, victim)  # atomic: `ln -s OUTSIDE .v.tmp && mv -T .v.tmp victim.txt`
        wait_for(partial(swapping.left_with_the_reason, victim.name), 60, 0.1, f"{victim.name} left unindexed")

    def ready() -> bool:  # nothing pending, and no swapped file's earlier text left in the keyword index
        swapping.never_the_secret()
        folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=30).body.folders
        return folders[0]["state"] == "ready" and keyword(client, "pelicans") == []

    wait_for(ready, 60, 0.2, "the queue empty")
    swapped = sorted(n for n, (_s, e) in reasons(client).items() if n.startswith("victim") and e == LINK_OUTSIDE)
    assert swapped == sorted(f"victim{i}.txt" for i in range(TRIES))
    assert keyword(client, "herons") == ["anchor.txt"]


def test_a_file_swapped_while_the_indexer_is_about_to_read_it_fails_with_the_reason(swapping: Swapping) -> None:
    """The window after the event was recorded, before the indexer opens the file, hit every time: its ingest
    thread holds there (test switch) while the file is swapped."""
    docs, held = swapping.docs, swapping.docs / "held.txt"
    swapping.flag.write_text("hold")
    held.write_text("Held file text about cormorants.\n")
    wait_for(lambda: Path(f"{swapping.flag}.held").exists(), 60, 0.05, "the indexer holding before its read")
    os.symlink(swapping.outside, docs / ".h.tmp")
    os.rename(docs / ".h.tmp", held)
    swapping.flag.unlink()  # before the watcher's event for the swap is delivered: the read itself refuses it
    wait_for(lambda: swapping.left_with_the_reason("held.txt"), 60, 0.1, "held.txt left unindexed")
    logged = "".join(p.read_text(errors="replace") for p in swapping.kernel.home.log_dir.glob("indexer.log*"))
    assert f"{LINK_OUTSIDE}; left unindexed" in logged, "the indexer's read did not refuse the link"
    assert keyword(swapping.client, "cormorants") == []
    swapping.never_the_secret()
