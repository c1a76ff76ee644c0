"""The lines a stdio MCP client writes to the bridge, judged one at a time before any reaches the front door.

stdio carries one JSON-RPC message per line. What is not one is answered here, so that nothing a client
sends vanishes and nothing it sends stops the bridge (JSON-RPC 2.0, section 5):

- a line that is not JSON text (binary, cut off, not UTF-8): ``-32700`` Parse error, id null;
- JSON that is not a JSON-RPC message: ``-32600`` Invalid Request, with its id when it has a usable one;
- a batch (a JSON array): one ``-32600`` per request in it, sent back as one array (notifications get
  none, an empty batch one error with id null). MCP dropped JSON-RPC batching in its 2025-06-18 revision,
  and neither the SDK nor the front door reads one;
- a message longer than the front door takes (``[mcp] max_body_mb``): ``-32600`` for its id, instead of a
  413 and a reset. A line past :data:`READ_FACTOR` times that is not kept whole: its id is read from its
  head when the id is the message's first member (after ``"jsonrpc"``), else the error's id is null.

A notification that cannot be relayed has no id to answer: the bridge says so on stderr.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError

READ_FACTOR = 4
"""Lines up to this many times the size limit are read whole (to answer with their id); longer ones are
skipped to their end after that many bytes, so a runaway line cannot take the bridge's memory."""
PARSE = "Parse error: the line is not JSON text"
BATCHES_REFUSED = "Invalid Request: JSON-RPC batches are not part of MCP since 2025-06-18; send one message a line"

_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one line: relay ``message``, or write ``reply`` back to the client; ``note`` for stderr."""

    message: JSONRPCMessage | None = None
    reply: bytes | None = None
    note: str = ""


def read_line(stream: BinaryIO, cap: int) -> tuple[bytes, int] | None:
    """The next line (at most ``cap`` bytes of it, without its line end) and its whole length; None at EOF.
    Blocking: run it in a thread."""
    head = stream.readline(cap)
    if not head:
        return None
    total, last = len(head), head
    if len(head) == cap and not head.endswith(b"\n"):
        while chunk := stream.readline(1 << 20):  # the rest of a runaway line, read and dropped
            total, last = total + len(chunk), chunk
            if chunk.endswith(b"\n"):
                break
    ending = len(last) - len(last.rstrip(b"\r\n"))
    return (head[: len(head) - ending] if last is head else head), total - ending


def judge(line: bytes, total: int, max_bytes: int) -> Verdict:
    """The verdict on one line whose whole length is ``total`` (``line`` holds all of it unless it ran past
    the reading cap)."""
    if not line.strip():
        return Verdict(note="skipped an empty line")
    if total > len(line):
        return _too_large(_head_id(line), False, total, max_bytes)
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return _error(None, PARSE_ERROR, PARSE, "answered a line that is not JSON")
    if isinstance(value, list):
        return _batch(value)
    if not isinstance(value, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message", "answered a non-message")
    rid = _id_of(value)
    if total > max_bytes:
        return _too_large(rid, "method" in value and "id" not in value, total, max_bytes)
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        return _error(rid, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message", "answered a non-message")
    return Verdict(message=message)


def error_line(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    """One JSON-RPC error response, as a line."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _line({"jsonrpc": "2.0", "id": rid, "error": error})


def _line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _error(rid: Any, code: int, message: str, note: str) -> Verdict:
    return Verdict(reply=error_line(rid, code, message), note=note)


def _too_large(rid: Any, notification: bool, total: int, max_bytes: int) -> Verdict:
    what = f"a message of {total:,} bytes, over the front door's limit of {max_bytes:,} ([mcp] max_body_mb)"
    if notification:
        return Verdict(note=f"dropped a notification: {what}")
    message = f"Invalid Request: {what}; it was not sent"
    return Verdict(
        reply=error_line(rid, INVALID_REQUEST, message, {"bytes": total, "max_bytes": max_bytes}),
        note=f"refused {what}",
    )


def _batch(items: list[Any]) -> Verdict:
    if not items:
        return _error(None, INVALID_REQUEST, "Invalid Request: an empty batch", "answered an empty batch")
    replies: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict) and "method" in item and "id" not in item:
            continue  # a notification: JSON-RPC answers none
        if isinstance(item, dict) and "method" not in item and ("result" in item or "error" in item):
            continue  # a response the client owed: nothing to answer either
        rid = _id_of(item) if isinstance(item, dict) else None
        replies.append({"jsonrpc": "2.0", "id": rid, "error": {"code": INVALID_REQUEST, "message": BATCHES_REFUSED}})
    note = f"refused a batch of {len(items)} (MCP has no batches)"
    return Verdict(reply=_line(replies) if replies else None, note=note)


def _id_of(value: dict[str, Any]) -> str | int | None:
    rid = value.get("id")
    return rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None


def _head_id(head: bytes) -> str | int | None:
    m = _HEAD_ID.match(head)
    if m is None:
        return None
    value = json.loads(m.group(1))
    return value if isinstance(value, str | int) else None
