"""The console's Activity page over real HTTP against a real kernel: real MCP clients (the owner and a client key)
call tools, and the page, asked of the front door over the bus, lists each call (time, client, tool, outcome,
documents, duration) newest first, filters by client and since a time, and never shows a query, since
``[activity] record_queries`` is off. The style and helpers of tests/test_console.py."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import RunningKernel, cli, remove_tree, short_tmpdir
from tests.test_console import CONFIG, MARKER, request, sign_in, write_docs

SECRET = "wombatquery"
"""In every query the test sends; it must never reach the page."""


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Any]]:
    root = short_tmpdir()
    k = RunningKernel(root / "home", CONFIG)
    docs = write_docs(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=300)
        url = str(mc.mcp_info(k.root)["url"])
        agent = json.loads(cli(k.root, "token", "add", "agent", "--json").stdout)["token"]
        owner = mc.token_of(k.root)
        mc.call(url, owner, "search_documents", {"query": f"{MARKER} {SECRET}", "mode": "keyword"})
        mc.call(url, agent, "search_documents", {"query": f"{MARKER} {SECRET}", "mode": "keyword"})
        mc.call(url, agent, "read_document", {"file_path": str(docs / "guide.md")})
        mc.call(url, agent, "read_document", {"file_path": str(root / "outside.txt")})  # refused: INVALID_PATH
        for _ in range(300):  # the front door's writer thread: poll until the four rows are there
            if len(json.loads(cli(k.root, "activity", "--json").stdout)) >= 4:
                break
        yield {"kernel": k, "docs": docs, "root": root}
    finally:
        k.stop()
        remove_tree(root)


def rows_of(page: str) -> list[dict[str, str]]:
    """Each row of the activity table: its cells' text by class."""
    out = []
    for row in re.findall(r'<tr class="call">(.*?)</tr>', page, re.S):
        cells = re.findall(r'<td class="([\w ]+)">(.*?)</td>', row, re.S)
        out.append({cls.split()[0]: html.unescape(re.sub(r"<[^>]+>", "", text)).strip() for cls, text in cells})
    return out


def get(base: str, cookie: str, **params: str) -> tuple[int, str]:
    status, _, page = request(f"{base}activity?{urlencode(params)}", headers={"Cookie": cookie})
    return status, page


def test_the_activity_page_lists_every_call_newest_first_from_the_nav(served: dict[str, Any]) -> None:
    k, docs = served["kernel"], served["docs"]
    base, cookie = sign_in(k)
    overview = request(base, headers={"Cookie": cookie})[2]
    assert '<a href="/activity"' in overview  # reachable from every page's nav
    status, page = get(base, cookie)
    assert status == 200 and 'aria-current="page">Activity' in page
    rows = rows_of(page)
    assert [(r["client"], r["tool"], r["outcome"]) for r in rows] == [
        ("agent", "read_document", "INVALID_PATH"),
        ("agent", "read_document", "ok"),
        ("agent", "search_documents", "ok"),
        ("owner", "search_documents", "ok"),
    ], rows
    assert rows[1]["documents"] == f"1: {docs / 'guide.md'}" and rows[0]["documents"] == "0", rows
    assert rows[2]["documents"].startswith("1: ") and str(docs / "guide.md") in rows[2]["documents"], rows
    assert all(re.fullmatch(r"\d+ ms", r["duration"]) for r in rows), rows
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["when"]) for r in rows), rows
    assert [r["when"] for r in rows] == sorted((r["when"] for r in rows), reverse=True)
    # A document opens its preview; no query anywhere on the page, and it says queries are not recorded.
    assert f'href="/preview?{urlencode({"path": str(docs / "guide.md")})}"' in page
    assert SECRET not in page and MARKER not in page and "record_queries" in page
    # The same rows as the command line's.
    cli_rows = json.loads(cli(k.root, "activity", "--json").stdout)
    assert [(r["client"], r["tool"]) for r in cli_rows[::-1]] == [(r["client"], r["tool"]) for r in rows]


def test_the_page_filters_by_client_and_since_and_says_what_a_bad_since_means(served: dict[str, Any]) -> None:
    k = served["kernel"]
    base, cookie = sign_in(k)
    status, page = get(base, cookie, client="owner")
    assert status == 200 and [r["client"] for r in rows_of(page)] == ["owner"], rows_of(page)
    assert re.search(r'<option value="agent"\s*>agent</option>', page), page
    assert re.search(r'<option value="owner" selected>owner</option>', page), page
    assert len(rows_of(get(base, cookie, client="agent", since="1h")[1])) == 3
    status, page = get(base, cookie, since="2999-01-01")
    assert status == 200 and rows_of(page) == [] and "No calls match" in page
    status, page = get(base, cookie, client="nobody")
    assert status == 200 and rows_of(page) == []
    status, page = get(base, cookie, since="last tuesday")
    assert status == 400 and 'class="problem"' in page and "30m, 12h, 7d" in page and rows_of(page) == []


def test_without_a_session_the_activity_page_shows_nothing(served: dict[str, Any]) -> None:
    base, _cookie = sign_in(served["kernel"])
    status, _, page = request(base + "activity")
    assert status == 401 and "read_document" not in page and "agent" not in page


def test_with_record_queries_on_the_page_shows_each_calls_arguments() -> None:
    """Its own kernel: the setting is read at start."""
    root = short_tmpdir()
    k = RunningKernel(root / "home", merge(CONFIG, {"activity": {"record_queries": True}}))
    docs = write_docs(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=300)
        url = str(mc.mcp_info(k.root)["url"])
        mc.call(url, mc.token_of(k.root), "search_documents", {"query": f"{MARKER} {SECRET}", "mode": "keyword"})
        for _ in range(300):  # the front door's writer thread: poll until the row is there
            if json.loads(cli(k.root, "activity", "--json").stdout):
                break
        base, cookie = sign_in(k)
        status, page = get(base, cookie)
        rows = rows_of(page)
        assert status == 200 and [r["tool"] for r in rows] == ["search_documents"], rows
        assert SECRET in rows[0]["note"] and "Arguments" in page and "not recorded" not in page, rows
    finally:
        k.stop()
        remove_tree(root)
