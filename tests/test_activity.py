"""The activity table on a real SQLite file: what the front door's writer keeps, how it prunes to
``[activity] keep_days`` and ``max_rows``, and that the arguments are kept only when asked for."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import click
import pytest

from foldermind.kernel.cli.clients.keys import since_time
from foldermind.protocol.runtime import activity
from foldermind.protocol.runtime.config import ActivityPolicy

INSERT = "INSERT INTO activity(at, client, tool, outcome, documents, count, duration_ms) VALUES(?, ?, ?, ?, ?, ?, ?)"


def rows_when_written(log: activity.ActivityLog, n: int) -> list[dict[str, object]]:
    for _ in range(10_000):  # the writer thread: poll until it has written them
        got = activity.read(log.path.parent)
        if len(got) >= n:
            return got
    raise AssertionError("the activity rows were not written")


def test_rows_keep_paths_and_counts_but_no_arguments_unless_asked(tmp_path: Path) -> None:
    log = activity.ActivityLog(tmp_path, ActivityPolicy())
    paths = [f"/docs/{n}.txt" for n in range(activity.MAX_PATHS + 5)]
    log.record(activity.Row("agent", "search_documents", "ok", paths, 12.5, arguments={"query": "secret words"}))
    log.record(activity.Row("owner", "read_document", "INVALID_PATH", [], 1.0, arguments={"file_path": "/x"}))
    got = rows_when_written(log, 2)
    log.close()
    assert [(r["client"], r["tool"], r["outcome"], r["count"]) for r in got] == [
        ("agent", "search_documents", "ok", len(paths)),
        ("owner", "read_document", "INVALID_PATH", 0),
    ]
    assert got[0]["documents"] == paths[: activity.MAX_PATHS] and got[0]["arguments"] is None
    assert b"secret words" not in (tmp_path / activity.FILE).read_bytes()
    assert [r["client"] for r in activity.read(tmp_path, client="owner")] == ["owner"]

    kept = tmp_path / "kept"
    kept.mkdir()
    log = activity.ActivityLog(kept, ActivityPolicy(record_queries=True))
    log.record(activity.Row("agent", "search_documents", "ok", [], 1.0, arguments={"query": "asked for"}))
    assert rows_when_written(log, 1)[0]["arguments"] == {"query": "asked for"}
    log.close()


def test_pruning_drops_rows_past_keep_days_then_the_oldest_past_max_rows(tmp_path: Path) -> None:
    db = activity.connect(tmp_path / activity.FILE)
    now = time.time()
    ages_days = [40, 35, 10, 5, 4, 3, 2, 1]
    with db:
        db.executemany(
            INSERT,
            [(now - d * 86400, "c", f"t{d}", "ok", "[]", 0, 1.0) for d in ages_days],
        )
    activity.prune(db, ActivityPolicy(keep_days=30, max_rows=100), now)
    assert [r[0] for r in db.execute("SELECT tool FROM activity ORDER BY id")] == [f"t{d}" for d in ages_days[2:]]
    activity.prune(db, ActivityPolicy(keep_days=30, max_rows=100), now)  # idempotent
    policy = ActivityPolicy(keep_days=30, max_rows=100)
    with db:
        db.executemany(
            INSERT,
            [(now, "c", f"n{i}", "ok", "[]", 0, 1.0) for i in range(150)],
        )
    activity.prune(db, policy, now)
    tools = [r[0] for r in db.execute("SELECT tool FROM activity ORDER BY id")]
    assert len(tools) == 100 and tools[-1] == "n149" and tools[0] == "n50"
    db.close()
    with pytest.raises(sqlite3.OperationalError):  # the reader opens read-only: it never writes
        ro = sqlite3.connect(f"file:{tmp_path / activity.FILE}?mode=ro", uri=True)
        ro.execute("DELETE FROM activity")


def test_since_reads_dates_times_and_ages() -> None:
    now = time.time()
    assert abs(since_time("30m") - (now - 1800)) < 5  # type: ignore[operator]
    assert abs(since_time("2d") - (now - 2 * 86400)) < 5  # type: ignore[operator]
    assert since_time("2026-01-02") == 1767312000.0
    assert since_time("2026-01-02T01:00:00+01:00") == 1767312000.0
    assert since_time(None) is None
    with pytest.raises(click.BadParameter):
        since_time("yesterday")


def test_a_recorded_row_wakes_no_thread_and_close_writes_what_is_queued(tmp_path: Path, monkeypatch: Any) -> None:
    """The front door records a row on its HTTP loop for every call: that must not wake the writer thread (a
    wake-up per call cost the loop its core under load; the writer drains every ``FLUSH_S``)."""
    log = activity.ActivityLog(tmp_path, ActivityPolicy())

    def no_wake(self: threading.Condition, n: int = 1) -> None:
        raise AssertionError("recording a row woke a thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Condition, "notify", no_wake)
        for n in range(50):
            log.record(activity.Row("agent", "search_documents", "ok", [f"/docs/{n}.txt"], 1.0))
    log.close()
    got = activity.read(tmp_path, limit=100)
    assert sorted(r["documents"][0] for r in got) == sorted(f"/docs/{n}.txt" for n in range(50))
