"""The web console over real HTTP against a real kernel: sign-in links, sessions, the Host/Origin/CSRF checks,
the overview and search pages, `status`, the logs, and the console killed -9 while MCP clients search.

Raw HTTP (http.client) for what a browser would never send (a foreign Host, a cross-site post); the browser's
own view is tests/test_console_browser.py."""

from __future__ import annotations

import contextlib
import html
import http.client
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from PIL import Image

from foldermind.protocol.messages import ConsoleLinkReply, ConsoleLinkRequest, RestartReply, RestartRequest
from tests import mcpclient as mc
from tests.config import Config, merge
from tests.filemakers import make_pdf
from tests.helpers import (
    FAST_RESTART,
    ONE_PARSER,
    RunningKernel,
    cli,
    kill9,
    only_workers,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
)

MARKER = "zebracorn"
"""A word only the tests' queries and one document hold, to look for in the logs."""
PDF_WORD = "quasarfold"
"""A word on the second page of report.pdf only."""
LINK_TTL_S = 8.0
CONFIG = merge(
    FAST_RESTART,
    ONE_PARSER,
    only_workers("watcher", "parser", "indexer", "frontdoor", "console"),
    {"mcp": {"port": 0, "rate_per_minute": 6000}, "console": {"port": 0, "link_ttl_s": LINK_TTL_S, "stall_s": 5}},
)
HANG = "hang"
"""The file (beside the home) that FOLDERMIND_TEST_CONSOLE_HANG watches: while it exists a search page blocks."""


def write_docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(f"# Setup\n\nInstall the package, then search your notes for a {MARKER}.\n")
    (docs / "fox.txt").write_text("The quick brown fox jumps over the lazy dog.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (docs / "layers.psd").write_bytes(b"8BPS\x00\x01" * 50)  # a format no parser reads
    make_pdf(docs / "report.pdf", [["Cover page of the report"], [f"The {PDF_WORD} figures are on this page."]])
    (root / "outside.txt").write_text("secret text outside every Smart Folder\n")
    (docs / "escape.txt").symlink_to(root / "outside.txt")
    return docs


@contextlib.contextmanager
def serving(config: Callable[[Path], Config]) -> Iterator[tuple[RunningKernel, Path]]:
    """A kernel on a new home (its config made from the home's parent) with :func:`write_docs`' folder indexed."""
    root = short_tmpdir()
    k = RunningKernel(root / "home", config(root))
    docs = write_docs(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=300)
        yield k, docs
    finally:
        k.stop()
        remove_tree(root)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, Path]]:
    with serving(
        lambda root: merge(CONFIG, {"workers": {"console": {"env": {"FOLDERMIND_TEST_CONSOLE_HANG": root / HANG}}}})
    ) as k:
        yield k


def new_link(k: RunningKernel) -> str:
    with k.client() as client:
        return client.request("console", ConsoleLinkRequest(), ConsoleLinkReply, timeout=10).body.link


def request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None, body: str | None = None
) -> tuple[int, http.client.HTTPMessage, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, path or "/", body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def fetch_bytes(url: str, cookie: str) -> bytes:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}", headers={"Cookie": cookie})
        return conn.getresponse().read()
    finally:
        conn.close()


def sign_in(k: RunningKernel) -> tuple[str, str]:
    """A session: (the console's base URL, the Cookie header that carries it)."""
    link = new_link(k)
    status, headers, _ = request(link)
    assert status == 303, status
    cookie = headers["set-cookie"].split(";", 1)[0]
    return link.split("signin", 1)[0], cookie


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def test_a_link_from_the_cli_signs_in_once_with_a_strict_cookie_and_the_overview_lists_workers_and_folders(
    served: Any,
) -> None:
    k, docs = served
    link = cli(k.root, "console", "--url").stdout.strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/signin\?code=[\w-]{40,}", link), link
    status, headers, _ = request(link)
    assert (status, headers["location"]) == (303, "/")
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie, cookie
    assert "script-src 'self'" in headers["content-security-policy"]
    # Used once: the same link again signs nobody in.
    again, again_headers, page = request(link)
    assert again == 403 and "set-cookie" not in again_headers and "already used or has expired" in page
    status, headers, page = request(link.split("signin", 1)[0], headers={"Cookie": cookie.split(";", 1)[0]})
    assert status == 200 and "default-src 'none'" in headers["content-security-policy"]
    for worker in ("watcher", "parser", "indexer", "frontdoor", "console"):
        assert f'data-worker="{worker}"' in page, worker
    assert f'data-folder="{docs}"' in page
    size = re.search(r'id="index-size">Index on disk: ([\d.]+) (KiB|MiB)', page)
    assert size and float(size.group(1)) > 0, page[-1500:]
    # The file that failed, with its reason.
    assert "broken.pdf" in page and re.search(
        r'broken\.pdf</code> <span class="status">(failed|skipped)</span>: \S', page
    )
    # And the files no parser reads, as `status` counts them (on main the page did not say).
    assert '<p class="unsupported">1 not read (other formats: .psd 1)</p>' in page, page[-2500:]


def test_foldermind_console_opens_a_fresh_link_in_the_default_browser(served: Any, tmp_path: Path) -> None:
    k, _ = served
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    env = {**os.environ, "BROWSER": f"{browser} %s"}
    out = subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root), "console"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0 and "opened the console" in out.stdout, out.stdout + out.stderr
    link = opened.read_text()
    assert "/signin?code=" in link and link not in out.stdout  # the code goes to the browser, not the terminal
    assert request(link)[0] == 303


def test_without_a_session_no_page_shows_data_only_how_to_sign_in(served: Any) -> None:
    k, _ = served
    base, _cookie = sign_in(k)
    for cookie in ("", f"foldermind_console_{urlsplit(base).port}=forged"):
        for path in ("", f"search?q={MARKER}&mode=keyword", "events"):
            status, _, page = request(base + path, headers={"Cookie": cookie} if cookie else {})
            assert status == 401, (path, status)
            assert "indexer" not in page and "guide.md" not in page and "csrf" not in page, (path, page[:300])
        status, _, page = request(base + "signin?code=made-up")
        assert status == 403 and "Sign in" in page


def test_a_link_used_after_its_time_is_refused(served: Any) -> None:
    k, _ = served
    link = new_link(k)
    issued = time.monotonic()
    wait_for(lambda: time.monotonic() - issued > LINK_TTL_S + 0.5, LINK_TTL_S + 10, 0.2, "the link's time to pass")
    status, headers, page = request(link)
    assert status == 403 and "set-cookie" not in headers and "already used or has expired" in page


def test_a_foreign_host_or_origin_is_refused_even_with_a_session(served: Any) -> None:
    k, _ = served
    base, cookie = sign_in(k)
    port = urlsplit(base).port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}"):
        status, _, page = request(base, headers={"Cookie": cookie, "Host": host})
        assert status == 421 and "indexer" not in page, host
    status, _, page = request(base, headers={"Cookie": cookie, "Origin": "http://evil.example"})
    assert status == 403 and "indexer" not in page
    assert request(base, headers={"Cookie": cookie, "Host": f"localhost:{port}"})[0] == 200


def test_a_cross_site_post_or_one_without_its_csrf_token_restarts_nothing(served: Any) -> None:
    k, _ = served
    base, cookie = sign_in(k)
    origin = base.rstrip("/")
    csrf = csrf_of(request(base, headers={"Cookie": cookie})[2])
    before = k.worker("watcher")

    def post(headers: dict[str, str], form: dict[str, str]) -> int:
        body = urlencode(form)
        sent = {"Content-Type": "application/x-www-form-urlencoded", **headers}
        return request(base + "restart", "POST", sent, body)[0]

    assert post({"Cookie": cookie, "Origin": "http://evil.example"}, {"worker": "watcher", "csrf": csrf}) == 403
    assert post({"Cookie": cookie}, {"worker": "watcher", "csrf": csrf}) == 403  # no Origin at all
    assert post({"Cookie": cookie, "Origin": "null"}, {"worker": "watcher", "csrf": csrf}) == 403
    assert post({"Cookie": cookie, "Origin": origin}, {"worker": "watcher"}) == 403
    assert post({"Cookie": cookie, "Origin": origin}, {"worker": "watcher", "csrf": csrf[:-2] + "xx"}) == 403
    assert post({"Origin": origin}, {"worker": "watcher", "csrf": csrf}) == 401  # the token without its session
    after = k.worker("watcher")
    assert (after["pid"], after["restarts"]) == (before["pid"], before["restarts"])
    # The same post, from this console with its token: the watcher is restarted.
    assert post({"Cookie": cookie, "Origin": origin}, {"worker": "watcher", "csrf": csrf}) == 303
    k.wait_state("watcher", "RUNNING", 30, other_pid_than=before["pid"])


def test_search_finds_a_file_with_its_location_and_marks_the_query_words(served: Any) -> None:
    k, _ = served
    base, cookie = sign_in(k)
    query = urlencode({"q": f"{MARKER.upper()} notes", "mode": "keyword"})
    status, _, page = request(f"{base}search?{query}", headers={"Cookie": cookie})
    assert status == 200
    hits = re.findall(r'<li class="hit">.*?</li>', page, re.S)
    assert hits and "guide.md" in hits[0] and re.search(r"lines \d+-\d+", hits[0]), page[-2000:]
    assert f"<mark>{MARKER}</mark>" in hits[0] and "<mark>notes</mark>" in hits[0]
    # A query the index refuses gets its reason, not a broken page.
    refused = urlencode({"q": "fox", "after": "soon"})
    status, _, page = request(f"{base}search?{refused}", headers={"Cookie": cookie})
    assert status == 200 and 'class="problem"' in page and 'class="hit"' not in page


def test_a_hit_opens_its_document_at_the_passage_marked_with_the_text_around_it(served: Any) -> None:
    k, docs = served
    base, cookie = sign_in(k)
    page = request(f"{base}search?{urlencode({'q': MARKER, 'mode': 'keyword'})}", headers={"Cookie": cookie})[2]
    found = re.search(r'<a class="file" href="(/preview\?[^"]+)"', page)
    assert found, page[-2000:]
    href = found.group(1).replace("&amp;", "&")
    status, _, preview = request(base.rstrip("/") + href, headers={"Cookie": cookie})
    assert status == 200
    passage = re.findall(r'<li id="L(\d+)" class="passage"><mark>(.*?)</mark></li>', preview)
    assert passage and any(MARKER in text for _, text in passage), preview[-2000:]
    assert '<li id="L1">' in preview or passage[0][0] == "1"  # the lines around it, numbered as in the file
    assert str(docs / "guide.md") in preview


def test_ask_answers_as_chat_with_documents_does_and_its_citation_opens_the_passage(served: Any) -> None:
    k, _ = served
    base, cookie = sign_in(k)
    question = "What should I search my notes for?"
    status, _, page = request(f"{base}ask?{urlencode({'q': question})}", headers={"Cookie": cookie})
    assert status == 200
    found = re.search(r'<p class="answer">(.*?)</p>', page, re.S)
    assert found and MARKER in found.group(1), page[-2000:]
    cite = re.search(r'<a class="cite" href="([^"]+)"[^>]*>\[1\]</a>', found.group(1))
    assert cite, found.group(1)
    # One engine: the MCP tool gives the same answer to the same question.
    result = mc.call(str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root), "chat_with_documents", {"query": question})
    assert not result.is_error and result.structured_content is not None
    assert html.unescape(re.sub(r"<[^>]+>", "", found.group(1))) == result.structured_content["answer"]
    status, _, preview = request(
        base.rstrip("/") + html.unescape(cite.group(1)).split("#")[0], headers={"Cookie": cookie}
    )
    passage = re.findall(r'class="passage"><mark>(.*?)</mark>', preview)
    assert status == 200 and any(MARKER in line for line in passage), preview[-1500:]


def test_a_pdf_hit_shows_its_page_as_an_image_with_the_passage_marked(served: Any) -> None:
    k, docs = served
    base, cookie = sign_in(k)
    page = request(f"{base}search?{urlencode({'q': PDF_WORD, 'mode': 'keyword'})}", headers={"Cookie": cookie})[2]
    found = re.search(r'<a class="file" href="(/preview\?[^"]+)"', page)
    assert found and "page=2" in found.group(1), page[-2000:]
    status, _, preview = request(base.rstrip("/") + found.group(1).replace("&amp;", "&"), headers={"Cookie": cookie})
    assert status == 200 and 'alt="page 2 of report.pdf"' in preview and "Page 2 of 2" in preview, preview[-3000:]
    assert 'id="prev-page"' in preview and 'id="next-page"' not in preview
    src = re.search(r'<img src="(/page\?[^"]+)"', preview)
    assert src
    status, headers, _ = request(base.rstrip("/") + src.group(1).replace("&amp;", "&"), headers={"Cookie": cookie})
    assert status == 200 and headers["content-type"] == "image/png"
    png = fetch_bytes(base.rstrip("/") + src.group(1).replace("&amp;", "&"), cookie)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    rgb = image.tobytes()
    yellow = sum(1 for i in range(0, len(rgb), 3) if rgb[i] > 240 and rgb[i + 1] > 220 and rgb[i + 2] < 150)
    assert image.width > 500 and yellow > 100, (image.size, yellow)  # the passage drawn over in yellow
    # The same image URL for a file outside the folders, or without a session: nothing.
    outside = urlencode({"path": str(docs.parent / "outside.txt"), "page": "1"})
    assert request(f"{base}page?{outside}", headers={"Cookie": cookie})[0] == 404
    assert request(base.rstrip("/") + src.group(1).replace("&amp;", "&"))[0] == 401


def test_no_preview_url_serves_a_file_outside_the_folders(served: Any) -> None:
    k, docs = served
    base, cookie = sign_in(k)
    outside = docs.parent / "outside.txt"
    for path in ("/etc/passwd", str(outside), str(docs / "escape.txt"), f"{docs}/../outside.txt", "outside.txt"):
        for extra in ({"start": "1", "end": "50"}, {"chunk": "1"}):
            status, _, page = request(f"{base}preview?{urlencode({'path': path, **extra})}", headers={"Cookie": cookie})
            assert status == 404 and 'class="problem"' in page, (path, extra, status)
            assert "secret text" not in page and "root:" not in page, path
    # Without a session, not even a file of the folders.
    status, _, page = request(f"{base}preview?{urlencode({'path': str(docs / 'guide.md')})}")
    assert status == 401 and MARKER not in page


def test_a_folder_path_from_the_page_is_checked_as_the_cli_checks_it(served: Any) -> None:
    k, docs = served
    base, cookie = sign_in(k)
    origin = base.rstrip("/")
    csrf = csrf_of(request(base, headers={"Cookie": cookie})[2])

    def add(path: str, token: str = csrf) -> tuple[int, str]:
        body = urlencode({"path": path, "csrf": token})
        headers = {"Cookie": cookie, "Origin": origin, "Content-Type": "application/x-www-form-urlencoded"}
        status, _, page = request(base + "folders/add", "POST", headers, body)
        return status, page

    (docs / "sub").mkdir(exist_ok=True)
    for path, reason in (
        ("notes", "not an absolute path"),
        (str(docs / "missing"), "not a folder"),
        (str(docs / "guide.md"), "not a folder"),
        (str(docs / "sub"), "inside"),
        (str(k.root), "foldermind"),
    ):
        status, page = add(path)
        problem = re.search(r'<p class="problem" role="alert" id="problem">(.*?)</p>', page, re.S)
        assert status == 400 and problem and reason in problem.group(1), (path, status, problem)
        assert f'value="{path}"' in page  # the path stays in the field to be corrected
    assert add(str(docs.parent), token="")[0] == 403
    folders = json.loads(cli(k.root, "folders", "list", "--json").stdout)
    assert [f["path"] for f in folders] == [str(docs)]


def test_status_shows_the_console_url_it_bound(served: Any) -> None:
    k, _ = served
    info = k.home.read_console_info()
    assert info and info["state"] == "running"
    data = status_json(k.root)
    assert data["console"] == {"url": info["url"], "port": info["port"], "state": "running"}
    assert f"console running  {info['url']}" in cli(k.root, "status").stdout


def test_the_console_killed_9_is_restarted_while_mcp_searches_all_succeed(served: Any) -> None:
    k, _ = served
    url, token = str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root)
    _, cookie = sign_in(k)
    before = k.worker("console")["pid"]
    outcomes: list[bool] = []
    back = threading.Event()

    def search() -> None:
        while not back.is_set() or len(outcomes) < 3:
            result = mc.call(url, token, "search_documents", {"query": MARKER, "mode": "keyword"})
            outcomes.append(not result.is_error and MARKER in str(result.structured_content))

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        wait_for(lambda: outcomes, 30, 0.05, "a first MCP search")
        kill9(before)
        k.wait_state("console", "RUNNING", 60, other_pid_than=before)
    finally:
        back.set()
        searcher.join(60)
    assert outcomes and all(outcomes), outcomes
    # The new console serves (on another port here: port = 0); its sessions are the home's, so the old session
    # holds under the new port's cookie name (on a fixed port: tests/test_console_alone.py).
    new_base, new_cookie = sign_in(k)
    assert request(new_base, headers={"Cookie": new_cookie})[0] == 200
    kept = f"{new_cookie.split('=', 1)[0]}={cookie.split('=', 1)[1]}"
    assert request(new_base, headers={"Cookie": kept})[0] == 200


def test_a_restart_with_a_page_streaming_events_stops_the_console_cleanly(served: Any) -> None:
    k, _ = served
    base, cookie = sign_in(k)
    before = k.worker("console")["pid"]
    parts = urlsplit(base)
    stream = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    stream.request("GET", "/events", headers={"Cookie": cookie})
    response = stream.getresponse()
    assert response.status == 200 and response.readline().startswith(b"event: overview")
    restarted_with_stream_open(k, "console", before, stream)


def test_a_front_door_restart_with_an_mcp_event_stream_open_stops_it_cleanly(served: Any) -> None:
    """The same fix serves the front door (workers/framework/httpserve.py): an MCP client's GET stream held its stop."""
    k, _ = served
    url, token = str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root)
    headers = mc.legacy_session(url, token)
    parts = urlsplit(url)
    stream = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    stream.request("GET", parts.path, headers={**headers, "Accept": "text/event-stream"})
    assert stream.getresponse().status == 200
    restarted_with_stream_open(k, "frontdoor", k.worker("frontdoor")["pid"], stream)


def restarted_with_stream_open(k: RunningKernel, worker: str, before: int, stream: http.client.HTTPConnection) -> None:
    """Restart ``worker`` (pid ``before``) while ``stream`` is open; it must end by itself, not be killed when the
    stop's grace ran out: the open stream was closed."""
    try:
        with k.client() as client:
            client.request("kernel", RestartRequest(worker), RestartReply, timeout=10)
        k.wait_state(worker, "RUNNING", 60, other_pid_than=before)
    finally:
        stream.close()
    assert f"[{before}]: {worker} stopped cleanly" in k.home.log_file(worker).read_text()


def test_a_console_whose_web_server_stalls_exits_and_is_restarted(served: Any) -> None:
    k, _ = served
    flag = k.root.parent / HANG
    base, cookie = sign_in(k)
    before = k.worker("console")["pid"]

    def stuck() -> None:
        with contextlib.suppress(OSError, http.client.HTTPException):
            request(f"{base}search?{urlencode({'q': 'fox'})}", headers={"Cookie": cookie})

    flag.touch()
    try:
        threading.Thread(target=stuck, daemon=True).start()
        wait_for(Path(f"{flag}.held").exists, 30, 0.05, "the console's event loop blocked")
        k.wait_state("console", "RUNNING", 60, other_pid_than=before)
    finally:
        flag.unlink()
    assert "did not run for 5 s: exiting" in k.home.log_file("console").read_text()
    new_base, new_cookie = sign_in(k)
    assert request(new_base, headers={"Cookie": new_cookie})[0] == 200


def test_no_log_carries_a_query_or_a_sign_in_code(served: Any) -> None:
    k, _ = served
    link = new_link(k)
    request(link)
    code = link.rsplit("=", 1)[1]
    base, cookie = sign_in(k)
    request(f"{base}search?{urlencode({'q': MARKER})}", headers={"Cookie": cookie})
    request(base, headers={"Host": f"{MARKER}.example"})  # refused: logged, without the Host's value
    logs = sorted(k.home.log_file("x").parent.glob("*.log*"))
    assert logs
    for log in logs:
        text = log.read_text(errors="replace")
        assert MARKER not in text and code not in text, log.name
