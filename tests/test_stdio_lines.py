"""The stdio bridge's verdict on each line a client writes (pure functions; tests/test_bridge_input.py runs
them in a real bridge against a real front door)."""

from __future__ import annotations

import io
import json
from typing import Any

from foldermind.kernel.cli.bridge import stdio_lines

LIMIT = 1000


def verdict(line: bytes, cap: int = LIMIT * stdio_lines.READ_FACTOR) -> stdio_lines.Verdict:
    got = stdio_lines.read_line(io.BytesIO(line + b"\n"), cap)
    assert got is not None
    return stdio_lines.judge(*got, LIMIT)


def reply(line: bytes) -> Any:
    v = verdict(line)
    assert v.message is None and v.reply is not None and v.reply.endswith(b"\n"), v
    return json.loads(v.reply)


def test_a_message_is_relayed_and_what_is_not_one_is_answered() -> None:
    ok = verdict(b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}')
    assert ok.message is not None and ok.reply is None
    assert reply(b"{not json")["error"]["code"] == -32700
    assert reply(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": "\xff\xfe"}')["id"] is None  # not UTF-8
    assert reply(b"[" * 3000)["error"]["code"] == -32700  # nesting past the parser's recursion
    for value, rid in ((b"42", None), (b'"x"', None), (b'{"id": 7}', 7), (b'{"id": true, "method": 1}', None)):
        assert (reply(value)["id"], reply(value)["error"]["code"]) == (rid, -32600), value
    assert verdict(b"   ").reply is None  # an empty line: nothing to answer


def test_a_batch_gets_one_error_per_request_and_none_for_notifications() -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
        "x",
    ]
    answers = reply(json.dumps(batch).encode())
    assert [(a["id"], a["error"]["code"]) for a in answers] == [(1, -32600), (None, -32600)]
    assert reply(b"[]") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request: an empty batch"},
    }
    only_notes = verdict(json.dumps([batch[1], batch[1]]).encode())
    assert only_notes.reply is None and only_notes.message is None and "batch" in only_notes.note


def test_an_oversize_message_is_answered_with_its_id_even_past_the_reading_cap() -> None:
    big = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"q": "x" * 2 * LIMIT}}
    error = reply(json.dumps(big).encode())["error"]
    assert error["code"] == -32600 and error["data"]["max_bytes"] == LIMIT and error["data"]["bytes"] > 2 * LIMIT
    runaway = json.dumps({**big, "id": "r-1", "params": {"q": "x" * 10 * LIMIT}}).encode()
    assert reply(runaway)["id"] == "r-1" and reply(runaway)["error"]["data"]["bytes"] == len(runaway)
    late_id = json.dumps({"jsonrpc": "2.0", "method": "m", "params": {"id": 3, "q": "x" * 10 * LIMIT}, "id": 4})
    assert reply(late_id.encode())["id"] is None  # its id is past the head: unknown, not guessed
    note = verdict(json.dumps({"jsonrpc": "2.0", "method": "m", "params": {"q": "x" * 2 * LIMIT}}).encode())
    assert note.reply is None and note.message is None and "notification" in note.note


def test_reading_a_runaway_line_keeps_the_next_line_whole() -> None:
    stream = io.BytesIO(b"y" * 5000 + b"\n" + b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    first = stdio_lines.read_line(stream, 100)
    assert first is not None and len(first[0]) == 100 and first[1] == 5000
    second = stdio_lines.read_line(stream, 100)
    assert second is not None and stdio_lines.judge(*second, LIMIT).message is not None
    assert stdio_lines.read_line(stream, 100) is None
