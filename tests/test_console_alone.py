"""The console with no front door in the map, against a real kernel: its Ask page answers with the answer engine
over its own bus (no `mcp.*` kind is sent).

Raw HTTP as in tests/test_console.py, whose helpers these tests share."""

from __future__ import annotations

import html
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, only_workers
from tests.test_console import MARKER, request, serving, sign_in


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def alone() -> Iterator[tuple[RunningKernel, Path]]:
    config = FAST_RESTART + ONE_PARSER + only_workers("watcher", "parser", "indexer", "console")
    with serving(lambda _: config + f"[console]\nport = {free_port()}\n") as k:
        yield k


def test_ask_answers_with_the_front_door_absent_and_its_citation_opens_the_passage(alone: Any) -> None:
    k, docs = alone
    assert "frontdoor" not in {w["name"] for w in k.status().workers}
    base, cookie = sign_in(k)
    question = "What should I search my notes for?"
    status, _, page = request(f"{base}ask?{urlencode({'q': question})}", headers={"Cookie": cookie})
    assert status == 200 and 'class="problem"' not in page, page[-2000:]
    found = re.search(r'<p class="answer">(.*?)</p>', page, re.S)
    assert found and MARKER in found.group(1), page[-2000:]
    cite = re.search(r'<a class="cite" href="([^"]+)"[^>]*>\[1\]</a>', found.group(1))
    assert cite, found.group(1)
    # The session goes on: the page carries the engine's own console session id for the next question.
    session = re.search(r'name="session" value="(console-[\w-]+)"', page)
    assert session, page[-2000:]
    status, _, preview = request(
        base.rstrip("/") + html.unescape(cite.group(1)).split("#")[0], headers={"Cookie": cookie}
    )
    passage = re.findall(r'class="passage"><mark>(.*?)</mark>', preview)
    assert status == 200 and any(MARKER in line for line in passage), preview[-1500:]
    assert str(docs / "guide.md") in preview
