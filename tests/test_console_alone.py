"""The console with no front door in the map, against a real kernel: its Ask page answers with the answer engine
over its own bus (no `mcp.*` kind is sent); snippet marks come from the index's stemmer; a signed-in browser stays
signed in when the console is killed -9 and restarted on its port.

Raw HTTP as in tests/test_console.py, whose helpers these tests share."""

from __future__ import annotations

import html
import re
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from foldermind.workers.console.auth import SEEN_EVERY_S, SESSIONS_FILE, Sessions, csrf_of, digest
from foldermind.workers.console.views import marked
from foldermind.workers.indexer.search.query import parse
from foldermind.workers.indexer.search.snippets import marks
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, kill9, only_workers, wait_for
from tests.test_console import MARKER, request, serving, sign_in
from tests.test_console import csrf_of as csrf_of_page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def alone() -> Iterator[tuple[RunningKernel, Path]]:
    config = merge(FAST_RESTART, ONE_PARSER, only_workers("watcher", "parser", "indexer", "console"))
    with serving(lambda _: merge(config, {"console": {"port": free_port()}})) as k:
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


def test_sessions_are_kept_as_digests_and_outlive_the_store_that_opened_them(tmp_path: Path) -> None:
    """A second store on the same file is the console after a restart (the real one: the next test)."""
    now = [1000.0]
    path = tmp_path / SESSIONS_FILE
    first = Sessions(60, path, clock=lambda: now[0])
    kept, closed, idle = first.open(), first.open(), first.open()
    csrf = first.get(kept)
    first.close(closed)
    assert csrf is not None and path.stat().st_mode & 0o777 == 0o600
    now[0] += SEEN_EVERY_S - 10
    assert first.get(kept) is not None  # touched at 1020 in memory; written only SEEN_EVERY_S after its last write
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert all(sid.encode() not in raw for sid in (kept, idle)) and digest(kept).encode() in raw
    now[0] = 1070.0  # idle's last request was 70 s ago; kept's 50 s ago, but 70 s in the store
    second = Sessions(60, path, clock=lambda: now[0])
    assert second.get(closed) is None and second.get(idle) is None
    assert second.get(kept) is None  # a restart can end a session up to SEEN_EVERY_S early, never late
    fresh = second.open()
    now[0] += SEEN_EVERY_S
    again = second.get(fresh)
    assert again is not None and again.csrf == csrf_of(fresh)
    now[0] += 59
    third = Sessions(60, path, clock=lambda: now[0])
    session = third.get(fresh)
    assert session is not None and session.csrf == again.csrf
    assert third.get("made-up") is None and len(third) == 1


def test_a_signed_in_browser_stays_signed_in_after_the_console_is_killed_9(alone: Any) -> None:
    k, _ = alone
    base, cookie = sign_in(k)
    _, idle_cookie = sign_in(k)
    _, out_cookie = sign_in(k)

    def sign_out(cookie: str, csrf: str) -> int:
        headers = {"Cookie": cookie, "Origin": base.rstrip("/"), "Content-Type": "application/x-www-form-urlencoded"}
        return request(f"{base}signout", "POST", headers, urlencode({"csrf": csrf}))[0]

    assert sign_out(out_cookie, csrf_of_page(request(base, headers={"Cookie": out_cookie})[2])) == 303
    csrf = csrf_of_page(request(base, headers={"Cookie": cookie})[2])
    # One browser idle past session_idle_s: its last request's time set back in the store, as time passing would.
    store = k.home.data_dir / SESSIONS_FILE
    with sqlite3.connect(store) as db:
        idle = digest(idle_cookie.split("=", 1)[1])
        assert db.execute("UPDATE sessions SET seen = seen - 7200 WHERE digest = ?", (idle,)).rowcount == 1
    before = k.worker("console")["pid"]
    kill9(before)
    k.wait_state("console", "RUNNING", 60, other_pid_than=before)
    assert k.home.read_console_info()["url"] == base  # the same port, so the browser sends the same cookie
    status, _, page = request(base, headers={"Cookie": cookie})
    assert status == 200 and 'data-worker="indexer"' in page and csrf_of_page(page) == csrf
    for refused in (idle_cookie, out_cookie, cookie[:-4] + "AAAA"):
        assert request(base, headers={"Cookie": refused})[0] == 401, refused
    # A form of a page loaded before the restart still posts (here: signing out, after which the cookie is refused).
    assert sign_out(cookie, "not-the-token") == 403
    assert sign_out(cookie, csrf) == 303 and request(base, headers={"Cookie": cookie})[0] == 401


def test_search_lists_criteria_folders_as_scopes_and_a_scope_keeps_to_its_documents(alone: Any) -> None:
    k, _ = alone
    cli(k.root, "folders", "add-criteria", "--name", "Markdown", "--types", "md")
    base, cookie = sign_in(k)

    def search(**form: str) -> tuple[str, set[str]]:
        page = request(f"{base}search?{urlencode({'mode': 'keyword', **form})}", headers={"Cookie": cookie})[2]
        return page, set(re.findall(r'<a class="file" href="/preview[^"]*">([^<]+)</a>', page))

    page, everywhere = search(q="the")
    criteria = re.search(r'<optgroup label="Criteria folders">(.*?)</optgroup>', page, re.S)
    option = re.search(
        r'<option value="([^"]+)" >Markdown \(1 document\)</option>', criteria.group(1) if criteria else ""
    )
    assert option, page
    assert re.search(r'<optgroup label="Folders">\s*<option value="[^"]+" >docs \(\d+ documents\)', page), page
    assert "guide.md" in everywhere and len(everywhere) > 1, everywhere
    page, scoped = search(q="the", folder=option.group(1))
    assert scoped == {"guide.md"}, page[-2000:]
    assert f'<option value="{option.group(1)}" selected>' in page
