"""The console's Keys page over real HTTP against a real kernel: the client keys listed with the folders each sees
by name, a scoped key made from the page (its token shown once, accepted by the real front door for its folder
only), a taken name and a key without folders refused, a key revoked (the front door refuses it next); the same
keys as `foldermind token list`, since the kernel runs that very command. Every write is refused without the
session, its CSRF token or this console's Origin, and a client key in place of the session opens nothing.

The browser's view is tests/test_console_browser.py."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import CliReply, CliRequest
from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import ONE_PARSER, RunningKernel, cli, only_workers, remove_tree, short_tmpdir
from tests.test_console import csrf_of, request, sign_in
from tests.test_console_clients import post

CONFIG = merge(
    ONE_PARSER,
    only_workers("watcher", "parser", "indexer", "frontdoor", "console"),
    {"mcp": {"port": 0, "rate_per_minute": 6000}, "console": {"port": 0}},
)


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Any]]:
    """A kernel with two Smart Folders, `ledger` and `diary` (named unlike their directories)."""
    root = short_tmpdir()
    k = RunningKernel(root / "home", CONFIG)
    ids = {}
    try:
        k.start()
        for name, directory in (("ledger", "a"), ("diary", "b")):
            (root / directory).mkdir()
            (root / directory / f"{name}.txt").write_text(f"The {name} of this folder.\n")
            cli(k.root, "folders", "add", str(root / directory), "--name", name, "--wait", timeout=300)
        ids = {f["name"]: f["id"] for f in json.loads(cli(k.root, "folders", "list", "--json").stdout)}
        yield {"kernel": k, "ids": ids, "url": str(mc.mcp_info(k.root)["url"])}
    finally:
        k.stop()
        remove_tree(root)


def rows(page: str) -> dict[str, str]:
    """Each key's row on the Keys page: its name -> what it sees, as the page says it."""
    found = re.findall(r'<tr data-key="([^"]+)">.*?<td class="sees">(.*?)</td>', page, re.S)
    return {name: html.unescape(sees) for name, sees in found}


def listed(k: RunningKernel) -> dict[str, Any]:
    return {key["name"]: key["folders"] for key in json.loads(cli(k.root, "token", "list", "--json").stdout)}


def seen_folders(url: str, token: str) -> list[str]:
    result = mc.call(url, token, "list_smart_folders")
    assert not result.is_error, result
    return sorted(f["name"] for f in (result.structured_content or {})["folders"])


def test_keys_are_listed_by_folder_name_and_a_scoped_key_is_made_shown_once_and_revoked(served: Any) -> None:
    k, ids, url = served["kernel"], served["ids"], served["url"]
    cli(k.root, "token", "add", "laptop", "--folders", "ledger,diary")
    base, cookie = sign_in(k)
    status, _, page = request(base + "keys", headers={"Cookie": cookie})
    assert status == 200, page[-1500:]
    assert rows(page)["laptop"] == "ledger, diary"  # names, never the ids
    assert not any(i in page.split('<section aria-labelledby="add-key-h">')[0] for i in ids.values())
    csrf = csrf_of(page)

    status, page = post(base, "keys/add", cookie, {"csrf": csrf, "name": "cursor", "folder": ids["diary"]})
    assert status == 200, page[-1500:]
    token = html.unescape(re.search(r'<pre id="key-token">([^<]+)</pre>', page)[1])
    assert "it sees diary." in html.unescape(page)
    assert listed(k)["cursor"] == [ids["diary"]]  # made by `token add`: the command line lists it
    assert seen_folders(url, token) == ["diary"]  # the real front door takes it, for its folder only
    assert seen_folders(url, mc.token_of(k.root)) == ["diary", "ledger"]
    status, _, page = request(base + "keys", headers={"Cookie": cookie})
    assert rows(page) == {"cursor": "diary", "laptop": "ledger, diary"}
    assert token not in page  # shown once

    # Two folders at once (checkboxes), a taken name, no folder, a name `token add` refuses: its own words.
    two = f"csrf={csrf}&name=both&folder={ids['ledger']}&folder={ids['diary']}"
    status, _, page = request(
        base + "keys/add",
        "POST",
        {"Cookie": cookie, "Origin": base.rstrip("/"), "Content-Type": "application/x-www-form-urlencoded"},
        two,
    )
    assert status == 200 and sorted(listed(k)["both"]) == sorted(ids.values()), page[-1500:]
    status, page = post(base, "keys/add", cookie, {"csrf": csrf, "name": "cursor", "folder": ids["ledger"]})
    assert status == 400 and "a key named 'cursor' exists" in html.unescape(page), page[-1500:]
    assert listed(k)["cursor"] == [ids["diary"]]
    status, page = post(base, "keys/add", cookie, {"csrf": csrf, "name": "nofolder"})
    assert status == 400 and "choose at least one Smart Folder" in page and "nofolder" not in listed(k)
    status, page = post(base, "keys/add", cookie, {"csrf": csrf, "name": "Bad Name", "folder": ids["ledger"]})
    assert status == 400 and "key name" in html.unescape(page) and len(listed(k)) == 3

    status, page = post(base, "keys/revoke", cookie, {"csrf": csrf, "name": "cursor"})
    assert status == 303, page[-1500:]
    assert set(listed(k)) == {"both", "laptop"}
    status, _, _ = mc.raw(url, body=mc.initialize_body(), headers={"Authorization": f"Bearer {token}"})
    assert status == 401  # the front door refuses the revoked key
    status, page = post(base, "keys/revoke", cookie, {"csrf": csrf, "name": "cursor"})
    assert status == 400 and "no key named 'cursor'" in html.unescape(page)
    for name in ("both", "laptop"):
        cli(k.root, "token", "revoke", name)


def test_keys_are_managed_only_by_a_signed_in_session_never_by_a_client_key(served: Any) -> None:
    k, ids = served["kernel"], served["ids"]
    key = json.loads(cli(k.root, "token", "add", "agent", "--folders", "ledger", "--json").stdout)["token"]
    try:
        base, cookie = sign_in(k)
        csrf = csrf_of(request(base + "keys", headers={"Cookie": cookie})[2])
        bearer = {"Authorization": f"Bearer {key}"}
        status, _, page = request(base + "keys", headers=bearer)
        assert status == 401 and "agent" not in page  # a client key opens no session: shown how to sign in
        add = {"csrf": csrf, "name": "agent2", "folder": ids["diary"]}
        revoke = {"csrf": csrf, "name": "agent"}
        for path, form in (("keys/add", add), ("keys/revoke", revoke)):
            status, _, _ = request(
                base + path,
                "POST",
                {**bearer, "Origin": base.rstrip("/"), "Content-Type": "application/x-www-form-urlencoded"},
                "&".join(f"{n}={v}" for n, v in form.items()),
            )
            assert status == 401, path
            assert post(base, path, None, form)[0] == 401, path  # no session
            assert post(base, path, cookie, {**form, "csrf": ""})[0] == 403, path  # no CSRF token
            assert post(base, path, cookie, form, origin="http://evil.example")[0] == 403, path  # cross-site
            assert post(base, path, cookie, form, origin=None)[0] == 403, path  # no Origin at all
        assert listed(k) == {"agent": [ids["ledger"]]}
        # A scoped key cannot reach the console's pages over MCP either: no tool manages keys.
        tools = mc.run(lambda: _tool_names(served["url"], key))
        assert not [t for t in tools if "key" in t or "token" in t], tools
    finally:
        cli(k.root, "token", "revoke", "agent")


async def _tool_names(url: str, token: str) -> list[str]:
    async with mc.http_client(url, token) as client:
        return [t.name for t in (await client.list_tools()).tools]


def test_the_kernel_runs_the_key_commands_only_for_a_key_name_and_folder_ids(served: Any) -> None:
    k = served["kernel"]
    with k.client() as client:
        for asked in (
            CliRequest("key-add", "-x", [served["ids"]["ledger"]]),
            CliRequest("key-add", "fine", []),  # a key made here is scoped
            CliRequest("key-add", "fine", ["ledger"]),  # ids only: a name could be anything
            CliRequest("key-add", "fine", ["x,y"]),
            CliRequest("key-revoke", "../x"),
        ):
            with pytest.raises(JobError) as refused:
                client.request("kernel", asked, CliReply, timeout=30)
            assert refused.value.code is ErrorCode.BAD_REQUEST, refused.value
        reply = client.request("kernel", CliRequest("key-revoke", "no-such-key"), CliReply, timeout=200).body
        assert reply.exit_code == 1 and "no key named 'no-such-key'" in reply.stderr  # the command line's own check
