"""The two-folder world of tests/test_client_keys.py: a folder a client key sees, a private one whose documents
match every query the tests send (a leak shows as a hit), and the helpers that read results and refusals."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import anyio
from mcp.types import CallToolResult, TextContent

from tests import mcpclient as mc

SECRET_WORD = "quokkasecret"
"""In every query the tests send; it must never reach the activity table or a log."""
TEXT = (
    "The zebra budget report lists the quarterly spending of the zebra project.\n"
    "Each zebra budget line names its owner and the quarterly total.\n"
)


def write_folders(root: Path) -> tuple[Path, Path]:
    work, private = root / "work", root / "private"
    work.mkdir()
    private.mkdir()
    (work / "budget.txt").write_text("Work notes. " + TEXT)
    (work / "plan.md").write_text("# Plan\n\n" + TEXT)
    (private / "taxes.txt").write_text("Private tax notes. " + TEXT)
    (private / "health.md").write_text("# Health\n\n" + TEXT)
    (private / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    return work, private


def embedded(url: str, token: str) -> None:
    """Until every folder's chunks have their vectors (a semantic search sees them all): ``--wait`` waits for
    the keyword index only, and embedding trails it on a busy machine."""
    for _ in range(3000):
        folders = structured(mc.call(url, token, "index_status"))["folders"]
        if folders and all(f["chunks"] and f["chunks_embedded"] >= f["chunks"] for f in folders):
            return
    raise AssertionError(f"not embedded: {folders}")


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def paths_in(body: Any) -> set[str]:
    """Every absolute path anywhere in a result."""
    text = json.dumps(body)
    return set(re.findall(r'"(/[^"]+)"', text))


def leaked(body: Any, private: Path) -> list[str]:
    return sorted(p for p in paths_in(body) if p.startswith(str(private)))


def refusal(result: CallToolResult) -> tuple[str, str]:
    assert result.is_error, result.structured_content
    assert isinstance(result.content[0], TextContent)
    body = json.loads(result.content[0].text)
    return body["code"], body["message"]


def fuzzed(world: dict[str, Any]) -> list[str]:
    """Paths naming the private folder's file in other shapes; a symlink from the scoped folder into it."""
    private, work = world["private"], world["work"]
    link = work.parent / "link-into-private"
    if not link.exists():
        os.symlink(private, link)
    inside = work / "alias.txt"
    if not inside.is_symlink():
        os.symlink(private / "taxes.txt", inside)
    target = str(private / "taxes.txt")
    return [
        target,
        target.replace("/taxes.txt", "//taxes.txt"),
        target.replace("/taxes.txt", "/./taxes.txt"),
        str(link / "taxes.txt"),
        str(inside),
        str(private / "health.md"),
        str(private / "broken.pdf"),
        str(private / "nonexistent.txt"),
    ]


def same_as_outside(result: CallToolResult, asked: str, outside: tuple[str, str], outside_path: str) -> None:
    code, message = refusal(result)
    assert (code, message.replace(asked, "P")) == (outside[0], outside[1].replace(outside_path, "P")), (asked, message)


async def announce_private_then_work(log: list[str], private: Path, work: Path) -> None:
    """Three changes of the private folder, each heard by the owner; then changes of the work folder until the
    scoped client hears one. ``log`` gets "owner" / "scoped" per list_changed heard, and "wrote-work"."""
    with anyio.fail_after(180):
        for n in range(3):
            heard = log.count("owner")
            while log.count("owner") == heard:
                (private / f"new{n}-{len(log)}.txt").write_text("zebra budget news\n")
                with anyio.move_on_after(3):
                    while log.count("owner") == heard:
                        await anyio.sleep(0.05)
        log.append("wrote-work")
        while "scoped" not in log:
            (work / f"new-{len(log)}.txt").write_text("zebra budget news\n")
            with anyio.move_on_after(3):
                while "scoped" not in log:
                    await anyio.sleep(0.05)
