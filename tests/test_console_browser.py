"""The web console in real headless Chromium against a real kernel (tests/console_browser.mjs, driven by npm
playwright-core): sign in through `foldermind console --url`, the workers and the folder listed and kept live, a
search that finds a file with its words marked, its preview at the passage, an answer whose [1] opens its passage,
a PDF hit's page image, Restart that changes a worker's pid, a folder added and removed, a client's snippet copied
to the clipboard (read back) and a test connection that succeeds, a client key made for one folder (its token shown
once and copied, listed by the folder's name) and revoked, the link refused the second time, and a browser without a
session shown only how to sign in (on the Keys page too).

Needs Debian's /usr/bin/chromium and playwright-core (`make test` installs both, as it installs the MCP
Inspector); without them the test is skipped and says which is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config import merge
from tests.filemakers import make_pdf
from tests.helpers import (
    FAST_RESTART,
    ONE_PARSER,
    RunningKernel,
    cli,
    npm_installed,
    only_workers,
    remove_tree,
    short_tmpdir,
)

CHROMIUM = Path("/usr/bin/chromium")
PLAYWRIGHT = "1.65.2"
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "console-overview.png"
"""Where the browser's view of the overview is kept for the README, when FOLDERMIND_CONSOLE_SCREENSHOT=1."""


def test_a_browser_signs_in_sees_the_map_searches_and_restarts_a_worker() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium package): the browser tests cannot run")
    if shutil.which("node") is None:
        pytest.skip("node is missing: playwright-core cannot run")
    prefix = npm_installed("playwright", "playwright-core", PLAYWRIGHT, "FOLDERMIND_PLAYWRIGHT_DIR")
    # ESM resolves packages from the script's own directory: the script runs beside playwright-core's node_modules.
    script = prefix / "console_browser.mjs"
    shutil.copyfile(Path(__file__).with_name("console_browser.mjs"), script)
    root = short_tmpdir()
    shot = str(SCREENSHOT) if os.environ.get("FOLDERMIND_CONSOLE_SCREENSHOT") else ""
    # The README's picture shows the whole default map, chunks embedded too; the test alone leaves the embedder and
    # the llm out (~3 CPU-s).
    shown = ["embedder", "indexer", "llm"] if shot else ["indexer"]
    workers = ["watcher", "parser", *shown, "frontdoor", "console"]
    config = merge(FAST_RESTART, ONE_PARSER, only_workers(*workers), {"mcp": {"port": 0}, "console": {"port": 0}})
    k = RunningKernel(root / "home", config)
    docs = root / "docs"
    docs.mkdir()
    (docs / "fox.txt").write_text("The quick brown foxes jumped over the lazy dog in Zanzibar.\n")
    (docs / "cats.txt").write_text("Cats are small carnivorous mammals.\n")
    extra = root / "more"
    extra.mkdir()
    (extra / "notes.txt").write_text("A second folder, added from the page.\n")
    make_pdf(docs / "report.pdf", [["Cover page"], ["The quasarfold figures are on this page."]])
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=300)
        watcher = k.worker("watcher")["pid"]
        run = subprocess.run(
            [
                "node",
                str(script),
                sys.executable,
                str(k.root),
                "zanzibar",
                "watcher",
                str(extra),
                "quasarfold",
                "docs",
                shot,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        seen = json.loads(run.stdout.strip().splitlines()[-1])
        assert seen["path"] == "/"
        assert seen["workers"] == workers
        assert seen["folders"] == [str(docs)]
        assert seen["cookies"] == [{"httpOnly": True, "sameSite": "Strict"}]
        assert seen["live"] is True
        assert seen["narrow"] <= 800 and seen["light"] == "rgb(253, 253, 252)" and seen["dark"] == "rgb(22, 22, 23)"
        assert seen["hits"][0]["file"] == "fox.txt"  # (with the embedder, cats.txt follows on meaning alone)
        assert seen["hits"][0]["marks"] == ["Zanzibar"] and seen["hits"][0]["where"] == "lines 1-1"
        assert seen["preview"]["hash"] == "#L1" and seen["preview"]["lines"] == 1
        assert seen["preview"]["passage"] == ["The quick brown foxes jumped over the lazy dog in Zanzibar."]
        assert "Zanzibar" in seen["answer"] and "[1]" in seen["answer"]
        assert seen["cited"] == ["The quick brown foxes jumped over the lazy dog in Zanzibar."]
        assert seen["pdf"]["alt"] == "page 2 of report.pdf" and seen["pdf"]["width"] > 500
        assert seen["pidBefore"] == str(watcher) and seen["pidAfter"] not in ("-", str(watcher))
        assert k.worker("watcher")["pid"] == int(seen["pidAfter"])
        assert seen["added"] == [str(docs), str(extra)] and seen["removed"] == [str(docs)]
        assert [f["path"] for f in json.loads(cli(k.root, "folders", "list", "--json").stdout)] == [str(docs)]
        assert (extra / "notes.txt").exists()  # removed from the index only
        mcp_url = k.status().mcp["url"]
        assert seen["copy"]["said"] == "Copied" and seen["copy"]["clipboard"] == seen["copy"]["shown"], seen["copy"]
        copied = json.loads(seen["copy"]["clipboard"])["mcpServers"]["foldermind"]
        assert copied == {"url": mcp_url, "headers": {"Authorization": "Bearer ${env:FOLDERMIND_MCP_TOKEN}"}}
        assert {"home", "port", "console", "cursor"} <= set(seen["doctor"]), seen["doctor"]
        assert seen["tested"].startswith(f"Connected: connected to {mcp_url}"), seen["tested"]
        key = seen["key"]
        assert key["made"] == "Key agent was made; it sees docs." and key["clipboard"] == key["token"], key
        assert key["rows"] == [{"name": "agent", "sees": "docs"}] and not key["shownAgain"], key
        assert key["afterRevoke"] == 0 and json.loads(cli(k.root, "token", "list", "--json").stdout) == []
        assert seen["reused"] == 403
        assert seen["anonymous"] == {"status": 401, "heading": "Sign in", "workers": 0}
        assert seen["anonymousKeys"] == 401
        # The page's own script ran without errors; the one console error is the reused link's 403.
        assert [e for e in seen["errors"] if "403" not in e] == [], seen["errors"]
    finally:
        k.stop()
        remove_tree(root)
