"""A conversation's turns in the home's SQLite (workers/answers/conversations.py), on a real file: what a new process
finds, when a conversation ends (counted across restarts), the bound per caller kind, the file's privacy, and a store
that cannot be used (memory only, a warning that quotes nothing). The restarts of real processes are in
tests/test_conversation_restart.py."""

from __future__ import annotations

import logging
import sqlite3
import stat
from pathlib import Path

import pytest

from foldermind.protocol.messages import ChatTurn
from foldermind.workers.answers.conversations import FILE, Conversations
from foldermind.workers.answers.engine import HISTORY_TURNS, Sessions

SECRET_Q = "what does my tax letter say about 4711?"
SECRET_A = "The letter says 4711 is owed [1]."


def turns(n: int) -> list[ChatTurn]:
    return [{"question": f"q{i} {SECRET_Q}", "answer": f"a{i} {SECRET_A}"} for i in range(n)]


def test_a_new_process_finds_the_turns_an_earlier_one_kept_under_the_same_key_only(tmp_path: Path) -> None:
    path = tmp_path / FILE
    first = Sessions(600, 10, prefix="mcp", kept=Conversations(path, "mcp", 600, 10))
    s = first.open("abc")
    s.history.extend(turns(2))
    first.keep(s)
    first.kept.close()  # the process ends
    second = Sessions(600, 10, prefix="mcp", kept=Conversations(path, "mcp", 600, 10))
    assert second.open("abc").history == turns(2)
    assert second.open("abd").history == []  # another id
    console = Sessions(600, 10, prefix="console", kept=Conversations(path, "console", 600, 10))
    assert console.open("abc").history == []  # another caller kind's key: console::abc, not mcp::abc
    assert second.open(None).history == []  # a new conversation reads nothing


def test_a_kept_conversation_ends_its_idle_time_after_its_last_turn_counted_across_restarts(tmp_path: Path) -> None:
    now = [10_000.0]
    path = tmp_path / FILE
    kept = Conversations(path, "mcp", 60, 10, clock=lambda: now[0])
    kept.save("mcp::a", turns(1))
    now[0] += 59
    assert Conversations(path, "mcp", 60, 10, clock=lambda: now[0]).load("mcp::a") == turns(1)
    kept.save("mcp::b", turns(1))
    now[0] += 2
    assert Conversations(path, "mcp", 60, 10, clock=lambda: now[0]).load("mcp::a") == []  # ended: a start deletes it
    assert sqlite3.connect(path).execute("SELECT key FROM conversations").fetchall() == [("mcp::b",)]
    now[0] += 59
    kept.save("mcp::c", turns(1))  # and so does any turn
    assert sqlite3.connect(path).execute("SELECT key FROM conversations").fetchall() == [("mcp::c",)]


def test_beyond_the_bound_a_caller_kind_s_oldest_conversations_go_and_another_kind_s_stay(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / FILE
    console = Conversations(path, "console", 600, 2, clock=lambda: now[0])
    console.save("console::x", turns(1))
    mcp = Conversations(path, "mcp", 600, 3, clock=lambda: now[0])
    for i in range(5):
        now[0] += 1
        mcp.save(f"mcp::k{i}", turns(1))
    keys = {k for (k,) in sqlite3.connect(path).execute("SELECT key FROM conversations")}
    assert keys == {"mcp::k2", "mcp::k3", "mcp::k4", "console::x"}


def test_a_session_keeps_its_latest_turns_only_and_the_file_is_the_user_s_alone(tmp_path: Path) -> None:
    path = tmp_path / FILE
    sessions = Sessions(600, 10, kept=Conversations(path, "mcp", 600, 10))
    s = sessions.open("abc")
    s.history.extend(turns(HISTORY_TURNS))
    sessions.keep(s)
    assert Conversations(path, "mcp", 600, 10).load("mcp::abc") == turns(HISTORY_TURNS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_store_that_cannot_be_opened_keeps_conversations_in_memory_and_its_warning_quotes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the data folder should be")
    sessions = Sessions(600, 10, kept=Conversations(blocked / FILE, "mcp", 600, 10))
    s = sessions.open("abc")
    s.history.extend(turns(1))
    sessions.keep(s)
    assert sessions.open("abc").history == turns(1)  # this process still goes on with it
    assert "conversations kept in memory only" in caplog.text
    assert "4711" not in caplog.text and "tax" not in caplog.text


def test_a_store_failing_mid_way_loses_no_answer_and_warns_without_the_turns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE
    kept = Conversations(path, "mcp", 600, 10)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the file past the store's busy timeout
    kept_timeout = 0.2
    assert kept._db is not None
    kept._db.execute(f"PRAGMA busy_timeout = {int(kept_timeout * 1000)}")
    caplog.set_level(logging.INFO)
    kept.save("mcp::a", turns(1))  # returns: the answer is not held up by the store
    assert "were not read or kept (OperationalError)" in caplog.text
    assert "4711" not in caplog.text and "mcp::a" not in caplog.text
    holder.execute("ROLLBACK")
    kept.save("mcp::a", turns(2))  # the next turn tries again
    assert Conversations(path, "mcp", 600, 10).load("mcp::a") == turns(2)


def test_a_row_that_is_not_a_list_of_turns_reads_as_no_conversation(tmp_path: Path) -> None:
    path = tmp_path / FILE
    kept = Conversations(path, "mcp", 600, 10)
    kept.save("mcp::a", turns(1))
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE conversations SET turns = ? WHERE key = 'mcp::a'", ('[{"q": 1}]',))
    assert kept.load("mcp::a") == []
