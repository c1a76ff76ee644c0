"""The console's Clients page over real HTTP against a real kernel: each client's snippet with the real MCP URL and
the token referred to (never written out unless the client's format has no other way), `config install` shown as a
diff and written only when confirmed, a real test connection, doctor's findings with their fixes, and the token's
rotation behind a confirmation; each write refused without the session, the CSRF token or this console's Origin.

The kernel runs the command line for the console (kernel/errands.py), under a throw-away $HOME whose client files
the tests read back."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import CliReply, CliRequest
from tests.config import merge
from tests.helpers import RunningKernel, cli, only_workers, remove_tree, short_tmpdir
from tests.test_console import csrf_of, request, sign_in

CONFIG = merge(only_workers("frontdoor", "console"), {"mcp": {"port": 0}, "console": {"port": 0}})
CURSOR = ".cursor/mcp.json"
OTHER_SERVER = '{\n  "mcpServers": {\n    "other": {"command": "other-server"}\n  }\n}\n'


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, Path]]:
    """A kernel with the front door and the console, under its own $HOME (the client files live there)."""
    root = short_tmpdir()
    user = root / "user"
    (user / ".cursor").mkdir(parents=True)
    saved = {name: os.environ.get(name) for name in ("HOME", "XDG_CONFIG_HOME")}
    os.environ["HOME"] = str(user)
    os.environ.pop("XDG_CONFIG_HOME", None)
    k = RunningKernel(root / "home", CONFIG)
    try:
        k.start()
        yield k, user
    finally:
        k.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        remove_tree(root)


def mcp_url(k: RunningKernel) -> str:
    url = k.status().mcp["url"]
    assert url, k.status().mcp
    return str(url)


def owner_token(k: RunningKernel) -> str:
    return cli(k.root, "token", "show").stdout.strip()


def post(base: str, path: str, cookie: str | None, form: dict[str, str], origin: str | None = "") -> tuple[int, str]:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie is not None:
        headers["Cookie"] = cookie
    if origin is not None:
        headers["Origin"] = origin or base.rstrip("/")
    status, _, page = request(base + path, "POST", headers, urlencode(form))
    return status, page


def signed_in_with_cursor_file(k: RunningKernel, user: Path) -> tuple[str, str, str]:
    """Cursor's file holding another server only, and a session on the Clients page: (base URL, cookie, CSRF)."""
    (user / CURSOR).write_text(OTHER_SERVER)
    base, cookie = sign_in(k)
    return base, cookie, csrf_of(request(base + "clients", headers={"Cookie": cookie})[2])


def snippets(page: str) -> dict[str, str]:
    """Each snippet on the page by its id (``snippet-CLIENT-FORM``), unescaped."""
    return {m[0]: html.unescape(m[1]) for m in re.findall(r'<pre id="(snippet-[\w-]+)">(.*?)</pre>', page, re.S)}


def test_every_client_has_its_snippet_with_the_real_url_and_the_token_only_where_its_format_needs_it(
    served: Any,
) -> None:
    k, _user = served
    base, cookie = sign_in(k)
    status, _, page = request(base + "clients", headers={"Cookie": cookie})
    assert status == 200, page[-2000:]
    shown = snippets(page)
    for client in ("claude-desktop", "claude-code", "cursor", "zed", "vscode", "windsurf", "generic"):
        command = json.loads(shown[f"snippet-{client}-command"])
        assert "mcp" in json.dumps(command), (client, command)  # `foldermind ... mcp`: the stdio bridge
        assert f'data-copy="snippet-{client}-command"' in page
    assert "snippet-claude-desktop-url" not in shown  # Claude Desktop takes the command form only
    url, token = mcp_url(k), owner_token(k)
    cursor = json.loads(shown["snippet-cursor-url"])["mcpServers"]["foldermind"]
    assert cursor == {"url": url, "headers": {"Authorization": "Bearer ${env:FOLDERMIND_MCP_TOKEN}"}}
    windsurf = json.loads(shown["snippet-windsurf-url"])["mcpServers"]["foldermind"]
    assert windsurf["serverUrl"] == url
    vscode = json.loads(shown["snippet-vscode-url"])
    assert vscode["servers"]["foldermind"]["headers"]["Authorization"] == "Bearer ${input:foldermind-token}"
    # The token itself only where the client documents no way to refer to it: Zed's headers, and the facts to type
    # into any other client's form.
    holding = sorted(sid for sid, text in shown.items() if token in text)
    assert holding == ["snippet-generic-url", "snippet-zed-url"], holding
    assert page.count(token) == 2


def test_doctor_findings_are_listed_with_their_fixes(served: Any) -> None:
    k, user = served
    stale = {"mcpServers": {"foldermind": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}}}}
    (user / CURSOR).write_text(json.dumps(stale))
    try:
        base, cookie = sign_in(k)
        _, _, page = request(base + "clients", headers={"Cookie": cookie})
        assert 'data-src="/clients/doctor"' in page  # the page's script loads the findings from their own page
        status, _, page = request(base + "clients/doctor", headers={"Cookie": cookie})
        assert status == 200, page[-1500:]
        rows = re.findall(
            r'<tr class="check-(\w+)"><th scope="row">([^<]+)</th>.*?<td>(.*?)</td>\s*<td>(.*?)</td></tr>', page, re.S
        )
        found = {name: (status, html.unescape(detail), html.unescape(fix)) for status, name, detail, fix in rows}
        status, detail, fix = found["cursor"]
        assert status == "fail" and "it points at http://127.0.0.1:9/mcp" in detail, found["cursor"]
        assert "config install --client cursor --http" in fix, fix
        assert found["console"][0] == "ok" and base in found["console"][1], found["console"]
    finally:
        (user / CURSOR).unlink()


def test_install_shows_the_diff_and_writes_only_when_that_diff_is_confirmed(served: Any) -> None:
    k, user = served
    target = user / CURSOR
    base, cookie, csrf = signed_in_with_cursor_file(k, user)
    status, page = post(base, "clients/install", cookie, {"csrf": csrf, "client": "cursor"})
    assert status == 200, page[-1500:]
    diff = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<pre class="diff" id="diff">(.*?)</pre>', page, re.S)[1]))
    assert f"--- {target}" in diff and re.search(r'^\+\s+"foldermind": \{', diff, re.M), diff
    assert target.read_text() == OTHER_SERVER  # shown, not written
    digest = re.search(r'name="confirm" value="(\w+)"', page)[1]
    # The file changes meanwhile: the confirmation of the old diff writes nothing and shows the change as it is now.
    changed = OTHER_SERVER.replace("other-server", "other-server2")
    target.write_text(changed)
    status, page = post(base, "clients/install", cookie, {"csrf": csrf, "client": "cursor", "confirm": digest})
    assert status == 200 and "The file changed since" in page and target.read_text() == changed
    digest = re.search(r'name="confirm" value="(\w+)"', page)[1]
    status, page = post(base, "clients/install", cookie, {"csrf": csrf, "client": "cursor", "confirm": digest})
    assert status == 200 and "foldermind entry installed" in page, page[-1500:]
    written = json.loads(target.read_text())["mcpServers"]
    assert written["other"] == {"command": "other-server2"}
    # The entry presents a client key of its own, named after the client (config install's default).
    assert written["foldermind"]["args"][-3:] == ["mcp", "--client", "cursor"]
    # Again: nothing left to change, and no confirm button.
    status, page = post(base, "clients/install", cookie, {"csrf": csrf, "client": "cursor"})
    assert status == 200 and "nothing to change" in page and 'name="confirm"' not in page
    status, page = post(base, "clients/install", cookie, {"csrf": csrf, "client": "no-such-client"})
    assert status == 400 and "no-such-client" in html.unescape(page)
    target.unlink()


def test_install_and_rotation_are_refused_without_the_session_the_csrf_token_or_this_origin(served: Any) -> None:
    k, user = served
    target = user / CURSOR
    base, cookie, csrf = signed_in_with_cursor_file(k, user)
    token = owner_token(k)
    install = {"csrf": csrf, "client": "cursor"}
    _, page = post(base, "clients/install", cookie, install)
    install["confirm"] = re.search(r'name="confirm" value="(\w+)"', page)[1]
    rotate = {"csrf": csrf, "confirm": "rotate"}
    for path, form in (("clients/install", install), ("clients/rotate", rotate)):
        assert post(base, path, None, form)[0] == 401, path  # no session
        assert post(base, path, cookie, {**form, "csrf": ""})[0] == 403, path  # no CSRF token
        assert post(base, path, cookie, {**form, "csrf": csrf[:-2] + "xx"})[0] == 403, path
        assert post(base, path, cookie, form, origin="http://evil.example")[0] == 403, path  # cross-site
        assert post(base, path, cookie, form, origin=None)[0] == 403, path  # no Origin at all
    assert target.read_text() == OTHER_SERVER and owner_token(k) == token
    target.unlink()


def test_test_connection_makes_a_real_tools_list_round_trip_and_rotation_asks_first(served: Any) -> None:
    k, _user = served
    base, cookie = sign_in(k)
    csrf = csrf_of(request(base + "clients", headers={"Cookie": cookie})[2])
    status, page = post(base, "clients/test", cookie, {"csrf": csrf})
    assert status == 200, page[-1500:]
    said = html.unescape(re.search(r'<div id="test-result".*?</div>', page, re.S)[0])
    assert f"Connected: connected to {mcp_url(k)}" in said and "search_documents" in said, said
    old = owner_token(k)
    status, page = post(base, "clients/rotate", cookie, {"csrf": csrf})
    assert status == 200 and 'id="rotate-confirm"' in page and owner_token(k) == old  # asked, not done
    status, page = post(base, "clients/rotate", cookie, {"csrf": csrf, "confirm": "rotate"})
    assert status == 200 and "The token was rotated" in page, page[-1500:]
    new = owner_token(k)
    assert new != old
    # The front door took the new token at once: the test connection (the command line reads the store) works.
    status, page = post(base, "clients/test", cookie, {"csrf": csrf})
    assert status == 200 and "Connected" in page


def test_the_kernel_runs_only_its_named_setup_commands_for_a_known_client_name(served: Any) -> None:
    k, _user = served
    with k.client() as client:
        for request_ in (CliRequest("folders"), CliRequest("install", "../cursor"), CliRequest("install", "-x")):
            with pytest.raises(JobError) as refused:
                client.request("kernel", request_, CliReply, timeout=30)
            assert refused.value.code is ErrorCode.BAD_REQUEST, refused.value
        reply = client.request("kernel", CliRequest("install-preview", "no-such-client"), CliReply, timeout=200).body
        assert reply.exit_code == 2 and "no-such-client" in reply.stderr  # the command line's own check
