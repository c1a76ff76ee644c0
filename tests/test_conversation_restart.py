"""A chat_with_documents conversation goes on after its front door restarts (`foldermind restart frontdoor`) or is
killed -9 (the kernel starts another): the follow-up keeps the previous turn's subject, over HTTP with the mcp
SDK's client and through the stdio bridge (`foldermind mcp`, one client session across the restart); so does a
conversation on the console's Ask page after the console is killed -9.

A real kernel indexes two real manual pages (chage(1) and passwd(1) of shadow-utils 4.13, tests/manpages/), both of
which have an --inactive option: "and what does --inactive do?" is answered from the page the conversation is about
(tests/test_answer_relevance.py shows it within one front door). Two conversations, one about each page, are
followed up after the restart, so a follow-up that lost its subject cannot pass: both would get the same page. The
answers are extractive (the quotes; the llm worker is left out, so the model never reads them).
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from mcp.client import Client
from mcp.types import CallToolResult

from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, kill9, only_workers, short_tmpdir, wait_for
from tests.test_answers import chat, kernel_with_folder
from tests.test_console import request, sign_in
from tests.test_console_alone import free_port

PAGES = Path(__file__).with_name("manpages")
OPENERS = {"chage.txt": "What does chage -E do?", "passwd.txt": "What does passwd -l do?"}
FOLLOW_UP = "and what does --inactive do?"
HOW = ["restart", "kill -9"]


@pytest.fixture(scope="module")
def served() -> Iterator[RunningKernel]:
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        only_workers("watcher", "parser", "embedder", "indexer", "frontdoor", "console"),
        {"mcp": {"port": 0, "rate_per_minute": 6000}, "console": {"port": free_port()}},
    )
    with kernel_with_folder(short_tmpdir(), config, "", 120, pages) as (k, _docs, _url, _token):
        yield k


def pages(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for name in OPENERS:
        shutil.copyfile(PAGES / name, docs / name)
    return docs


def ask(query: str, session: str) -> dict[str, Any]:
    return {"query": query, "answer_mode": "extractive", "session_id": session}


def new_front_door(k: RunningKernel, how: str) -> None:
    """`foldermind restart frontdoor`, or kill -9 of the front door; back when another one serves."""
    old = int(mc.mcp_info(k.root)["pid"])
    if how == "restart":
        cli(k.root, "restart", "frontdoor")
    else:
        kill9(old)
    wait_for(lambda: int(mc.mcp_info(k.root)["pid"]) != old, 60, 0.05, "another front door serving")


def followed(out: dict[str, Any], page: str) -> bool:
    first = out["citations"][0] if out["citations"] else {}
    return first.get("file_name") == page and "inactiv" in first.get("quote", "").lower()


@pytest.mark.parametrize("how", HOW)
def test_a_follow_up_over_http_keeps_its_subject_after_the_front_door_restarts(served: RunningKernel, how: str) -> None:
    k = served
    url, token = str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root)
    for page, opener in OPENERS.items():
        opened = chat(url, token, ask(opener, f"http-{how}-{page}"))
        assert opened["citations"][0]["file_name"] == page, opened
    new_front_door(k, how)
    url = str(mc.mcp_info(k.root)["url"])  # port 0: the new front door may serve on another port
    for page in OPENERS:
        follow = chat(url, token, ask(FOLLOW_UP, f"http-{how}-{page}"))
        assert follow["session_id"] == f"http-{how}-{page}"
        assert followed(follow, page), (page, follow["answer"], follow["citations"][:1])


async def chat_over(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool("chat_with_documents", args, read_timeout_seconds=120)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize("how", HOW)
def test_a_follow_up_through_the_stdio_bridge_keeps_its_subject_after_the_front_door_restarts(
    served: RunningKernel, how: str
) -> None:
    k = served
    got: dict[str, dict[str, Any]] = {}

    async def go() -> None:
        async with mc.stdio_client(k.root) as client:  # one bridge, one client session, across the restart
            for page, opener in OPENERS.items():
                opened = await chat_over(client, ask(opener, f"stdio-{how}-{page}"))
                assert opened["citations"][0]["file_name"] == page, opened
            await anyio.to_thread.run_sync(lambda: new_front_door(k, how))
            for page in OPENERS:
                got[page] = await chat_over(client, ask(FOLLOW_UP, f"stdio-{how}-{page}"))

    mc.run(go)
    for page, follow in got.items():
        assert followed(follow, page), (page, follow["answer"], follow["citations"][:1])


def test_a_follow_up_on_the_console_s_ask_page_keeps_its_subject_after_the_console_is_killed_9(
    served: RunningKernel,
) -> None:
    k = served
    base, cookie = sign_in(k)

    def ask_page(question: str, session: str = "") -> tuple[str, str]:
        """(the session the page carries for the next question, the first citation's file and quote)."""
        query = urlencode({"q": question, **({"session": session} if session else {})})
        status, _, page = request(f"{base}ask?{query}", headers={"Cookie": cookie})
        assert status == 200 and 'class="problem"' not in page, page[-2000:]
        carried = re.search(r'name="session" value="(console-[\w-]+)"', page)
        first = re.search(r'<ol class="citations">\s*<li value="1"><a href="[^"]*">([^<]+)</a>: (.*?)</li>', page, re.S)
        assert carried and first, page[-2000:]
        return carried.group(1), html.unescape(f"{first.group(1)} {first.group(2)}")

    sessions = {}
    for page, opener in OPENERS.items():
        sessions[page], cited = ask_page(opener)
        assert cited.startswith(page), cited
    before = k.worker("console")["pid"]
    kill9(before)
    k.wait_state("console", "RUNNING", 60, other_pid_than=before)
    for page, session in sessions.items():
        carried, cited = ask_page(FOLLOW_UP, session)
        assert carried == session and cited.startswith(page) and "inactiv" in cited.lower(), (page, cited)
