"""Crash consistency: the short soak (tests/soak.py, `make soak` runs the long one) and regression tests
for the bugs it found, each against a real kernel."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from foldermind.protocol.messages import ChangeEvent, ChangesReply, ChangesRequest
from tests.config import merge
from tests.helpers import FAST_RESTART, SEARCH_OVER_BUS, RunningKernel, cli, kill9, wait_for
from tests.soak import run_soak


@pytest.mark.slow
def test_short_soak_ends_with_the_index_a_fresh_build_makes(tmp_path: Path) -> None:
    """~160 files, about 30 s of random worker kills, one kernel kill and file operations in between
    (some while the kernel is down): zero discrepancies against the fresh index of the final folder."""
    report = run_soak(
        files=160, seconds=30, seed=11, kernel_kills=1, ops_log=tmp_path / "ops.log", short=True, min_worker_kills=4
    )
    print(report.markdown())
    assert report.kernel_kills == 1
    assert sum(report.worker_kills.values()) >= 4, report.worker_kills
    assert sum(report.ops.values()) >= 20, report.ops
    assert report.final["indexed"] > 100
    assert report.discrepancies == [], "\n".join(report.discrepancies)


def _chunks(home: Path, name: str) -> list[tuple[str | None, str]]:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    try:
        rows = db.execute(
            "SELECT c.heading, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.path LIKE ? AND d.status = 'indexed' ORDER BY c.ordinal",
            (f"%/{name}",),
        ).fetchall()
    finally:
        db.close()
    return [(r[0], r[1]) for r in rows]


def test_a_rename_that_changes_the_extension_parses_the_file_again(home_dir: Path) -> None:
    """Found by the soak: notes.md renamed notes.txt kept the chunks the Markdown parser cut (headings
    and all), where a fresh index parses it as plain text. The same bytes twice, as twin.txt, show what
    the plain-text parse gives."""
    docs = home_dir / "docs"
    docs.mkdir()
    text = "# Setup\n\nIntro about herons.\n\n## Windows\n\nInstall the frobnicator.\n\n## Linux\n\nUse quokkas.\n"
    (docs / "guide.md").write_text(text)
    (docs / "twin.txt").write_text(text)
    k = RunningKernel(home_dir, merge(FAST_RESTART, SEARCH_OVER_BUS)).start()  # read from the index's SQLite
    try:
        cli(home_dir, "folders", "add", str(docs), "--wait", timeout=120)
        as_markdown, as_text = _chunks(home_dir, "guide.md"), _chunks(home_dir, "twin.txt")
        assert as_markdown and as_text and as_markdown != as_text  # the two parses differ
        (docs / "guide.md").rename(docs / "guide.txt")
        wait_for(lambda: _chunks(home_dir, "guide.txt") == as_text, 30, 0.2, "guide.txt parsed as text")
        (docs / "guide.txt").rename(docs / "guide.markdown")
        wait_for(lambda: _chunks(home_dir, "guide.markdown") == as_markdown, 30, 0.2, "parsed as Markdown again")
    finally:
        k.stop()


def test_a_move_applied_after_a_newer_change_of_its_destination_indexes_the_file_as_it_is(home_dir: Path) -> None:
    """Found reading the soak's delivery path: a batch the watcher could not deliver (the indexer was
    killed) is re-queued behind newer events, so the indexer can get "b modified" before "a moved to b".
    The move then replaced the new document at b with a's old chunks, and b's new text was never
    indexed. The watcher is stopped here (restart policy never) so that this test is the only sender."""
    docs = home_dir / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The first file talks about ospreys and their nests.\n")
    (docs / "b.txt").write_text("The second file talks about pumas.\n")
    config = merge(
        FAST_RESTART,
        SEARCH_OVER_BUS,
        {"workers": {"watcher": {"module": "foldermind.workers.watcher", "restart": {"policy": "never"}}}},
    )
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs), "--wait", timeout=120)
        kill9(int(k.worker("watcher")["pid"]))
        k.wait_state("watcher", "EXITED")
        os.replace(docs / "a.txt", docs / "b.txt")  # a renamed over b ...
        (docs / "b.txt").write_text(
            "Rewritten after the rename: now it is all about wombats, at length.\n"
        )  # ... then edited
        a, b = str(docs / "a.txt"), str(docs / "b.txt")
        events = [ChangeEvent(kind="modified", path=b, dest=None), ChangeEvent(kind="moved", path=a, dest=b)]
        with k.client() as client:
            client.request("indexer", ChangesRequest(events), ChangesReply, timeout=30)

        def texts() -> list[str]:
            return [t for _, t in _chunks(home_dir, "b.txt")]

        wait_for(lambda: any("wombats" in t for t in texts()), 30, 0.2, "b.txt indexed with its new text")
        assert not any("ospreys" in t for t in texts())
        assert _chunks(home_dir, "a.txt") == []
    finally:
        k.stop()
