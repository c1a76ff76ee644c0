"""A chat turn is saved to the conversations file on a thread, not in the front door's event loop
(workers/answers/engine.py ``Chat._done``): a save that waits for the file's write lock holds no other work back.

A real kernel (no llm: the answers are the quotes) and real SQLite. The test holds the write lock of the home's
``data/conversations.sqlite`` from a connection of its own, as another process that writes that file holds it for a
moment (the console's Ask page, a backup), asks a question with a progress token, and lets the lock go when the
answer's streamed text reaches it. Before, the event loop sat in SQLite's busy wait (5 s) inside the save, so nothing
reached any client until the save had given up: the turn was lost (a warning in the log), and a follow-up after a
restart would have lost its subject. Now the answer streams while the save waits, and the save goes through as soon
as the lock is free.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult

from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, only_workers, short_tmpdir
from tests.test_answers import kernel_with_folder

QUESTION = "What is the budget for the obsidianwave project?"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, str, str]]:
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        only_workers("watcher", "parser", "embedder", "indexer", "frontdoor"),
        {"mcp": {"port": 0}},
    )
    with kernel_with_folder(short_tmpdir(), config, "", 120) as (k, _docs, url, token):
        yield k, url, token


def kept_turns(data: Path, session: str) -> list[dict[str, str]]:
    with sqlite3.connect(data / "conversations.sqlite") as db:
        row = db.execute("SELECT turns FROM conversations WHERE key LIKE ?", (f"%:{session}",)).fetchone()
    return list(json.loads(row[0])) if row else []


def test_a_turn_saved_while_another_process_holds_the_file_streams_its_answer_and_is_kept(
    served: tuple[RunningKernel, str, str],
) -> None:
    k, url, token = served
    holder = sqlite3.connect(k.home.data_dir / "conversations.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, until the answer's text arrives
    streamed: list[str] = []

    async def ask() -> CallToolResult:
        async def report(value: float, total: float | None, message: str | None) -> None:
            if message and holder.in_transaction:
                streamed.append(message)
                holder.execute("ROLLBACK")

        async with mc.http_client(url, token) as client:
            args = {"query": QUESTION, "answer_mode": "extractive", "session_id": "held"}
            result = await client.call_tool(
                "chat_with_documents", args, read_timeout_seconds=120, progress_callback=report
            )
        assert isinstance(result, CallToolResult)
        return result

    try:
        result = mc.run(ask)
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    out: dict[str, Any] = result.structured_content or {}
    assert "forty thousand" in out.get("answer", ""), result
    assert streamed and "forty thousand" in streamed[0], streamed
    turns = kept_turns(k.home.data_dir, "held")
    assert [t["question"] for t in turns] == [QUESTION], turns  # was: none (the save gave up in the event loop)
    assert "were not read or kept" not in k.home.log_file("frontdoor").read_text()
