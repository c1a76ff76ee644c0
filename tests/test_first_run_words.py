"""The commands foldermind prints for a new user (after `make run`, `foldermind start`, in hints) can be typed
as they are: plain ``foldermind`` only when that name on the user's PATH is this install, else this install's
script by its path, since a venv's bin/ is on no PATH outside the venv."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest

from foldermind.kernel.cli import common
from foldermind.protocol.runtime.home import Home
from tests.config import merge
from tests.helpers import FAST_RESTART, cli_process, only_workers, wait_for, with_model_cache

BIN = Path(sys.executable).parent


def test_outside_the_venv_the_printed_command_is_the_scripts_path_and_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    home = Home.resolve(tmp_path / "fm")
    line = common.typed(home, "config", "snippet", "--client", "generic", "--stdio")
    words = shlex.split(line)
    assert words[0] == str(BIN / "foldermind") and words[1:3] == ["--home", str(tmp_path / "fm")]
    # Typed as printed, in a shell whose PATH has no venv on it.
    ran = subprocess.run(line, shell=True, capture_output=True, text=True, env={**os.environ}, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert '"transport": "stdio"' in ran.stdout
    hint = common.activate_hint()
    assert hint == f"(or run `source {BIN / 'activate'}` once in your shell, then type `foldermind` alone)"


def test_with_the_venv_on_path_the_printed_command_is_plain_foldermind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}:/usr/bin:/bin")
    assert common.prog() == ["foldermind"]
    assert common.typed(Home.resolve(None), "search", "restart") == "foldermind search restart"
    assert common.activate_hint() is None


def test_another_foldermind_on_path_does_not_pass_for_this_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "foldermind"
    other.write_text("#!/bin/sh\necho other\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert common.prog() == [str(BIN / "foldermind")]


def test_a_home_with_a_space_is_quoted_so_the_line_still_pastes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    root = tmp_path / "my home"
    line = common.typed(Home.resolve(root), "token", "show")
    assert shlex.split(line)[1:] == ["--home", str(root), "token", "show"]


def test_the_foreground_sign_in_link_stands_on_a_line_of_its_own_between_blank_lines(home_dir: Path) -> None:
    """`make run` logs to the same terminal: the link at the end of a long line among the log lines was missed."""
    home = Home.resolve(home_dir / "home")
    home.ensure()
    config = merge(FAST_RESTART, only_workers("frontdoor", "console"), {"mcp": {"port": 0}, "console": {"port": 0}})
    home.supervisor_override.write_text(with_model_cache(config))
    fg = cli_process(home_dir / "home", "start", "--foreground", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[str] = []

    def read() -> None:
        assert fg.stdout is not None
        lines.extend(line.rstrip("\n") for line in fg.stdout)

    threading.Thread(target=read, daemon=True).start()
    try:
        at = (
            wait_for(
                lambda: next(
                    (i + 1 for i, x in enumerate(lines[:-2]) if x.startswith("console: open this link")), None
                ),
                120,
                what="the sign-in link",
            )
            - 1
        )
        assert lines[at - 1] == "" and lines[at + 2] == "", lines
        assert lines[at].endswith("opens it signed in):"), lines[at]
        link = lines[at + 1]
        assert link.startswith("http://127.0.0.1:") and " " not in link, link  # the line is the link, nothing more
        # And it signs in: the console answers it (a redirect with a session cookie), once.
        first = httpx2.get(link, follow_redirects=False, timeout=30)
        assert first.status_code in (302, 303, 307) and first.cookies, first
    finally:
        fg.send_signal(signal.SIGINT)
        fg.wait(timeout=60)
