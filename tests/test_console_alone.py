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

from foldermind.workers.console.views import marked
from foldermind.workers.indexer.query import parse
from foldermind.workers.indexer.snippets import marks
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, only_workers, wait_for
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


def test_snippet_marks_come_from_the_index_stemmer_and_leave_function_words_and_exclusions_out() -> None:
    text = "The files were indexed by the indexer; a draft filed, profiles."
    spans = marks(text, parse('the indexing "Files" -draft x').text)  # as the search marks: its operators parsed
    assert [text[a:b] for a, b in spans] == ["files", "indexed", "indexer", "filed"]
    parts = marked(text, spans)
    assert "".join(part for part, _ in parts) == text
    assert [part for part, mark in parts if mark] == ["files", "indexed", "indexer", "filed"]
    assert marked("short", [[2, 40]]) == [("short", False)]  # a span past the snippet marks nothing


def test_search_marks_what_the_index_matched_as_it_stems_it(alone: Any) -> None:
    k, docs = alone
    (docs / "stems.txt").write_text("The reports were indexed overnight by the indexer of the archive.\n")
    base, cookie = sign_in(k)

    def hit() -> str | None:
        query = urlencode({"q": "the indexing of reports", "mode": "keyword"})
        page = request(f"{base}search?{query}", headers={"Cookie": cookie})[2]
        return next((h for h in re.findall(r'<li class="hit">.*?</li>', page, re.S) if "stems.txt" in h), None)

    found = wait_for(hit, 120, 0.2, "stems.txt found by a search")
    assert re.findall(r"<mark>(.*?)</mark>", found) == ["reports", "indexed", "indexer"], found
