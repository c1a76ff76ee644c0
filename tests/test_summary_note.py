"""While the llm writes background summaries, `status` says so and how far it is, not just "JOBS 1"."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, only_workers, wait_for

FILES = 4


@pytest.mark.slow  # ~55 s alone (its module then goes first: tests/conftest.py)
def test_status_shows_which_summary_of_how_many_the_llm_is_writing(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    for i in range(FILES):
        (docs / f"report{i}.txt").write_text(f"Report {i}: the harbour crane number {i} was repaired in spring.\n" * 8)
    config = merge(FAST_RESTART, ONE_PARSER, only_workers("watcher", "parser", "embedder", "indexer", "llm"))
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        seen: set[tuple[int, int]] = set()

        def summarising() -> bool:
            note = k.worker("llm").get("note") or ""
            found = re.search(r"summarising document (\d+) of (\d+) in the background", note)
            if found:
                seen.add((int(found[1]), int(found[2])))
            return len(seen) >= 2

        wait_for(summarising, 300, 0.1, "the llm's note naming its summaries")
        assert all(of == FILES and 1 <= n <= FILES for n, of in seen), seen
        line = next(x for x in cli(home_dir, "status").stdout.splitlines() if x.startswith("llm"))
        assert "summarising document" in line or "ready" in line, line

        # Once every summary is written the note is the model's state again.
        def all_written() -> bool:
            db = sqlite3.connect(home_dir / "data" / "index.sqlite")
            try:
                waiting = db.execute("SELECT COUNT(*) FROM analysis WHERE enriched = 0").fetchone()[0]
            finally:
                db.close()
            return waiting == 0

        wait_for(all_written, 300, 0.5, "every summary written")
        wait_for(lambda: "summarising" not in (k.worker("llm").get("note") or ""), 10, 0.2, "the note after them")
    finally:
        k.stop()
