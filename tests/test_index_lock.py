"""One index, one kernel: on the platform's own home the sockets' folder follows XDG_RUNTIME_DIR, which a client's
launched `foldermind mcp` may not inherit (the MCP SDK's stdio client passes HOME and PATH, not it), so a second
`start` looking in another folder must find the running kernel's lock beside the index instead of starting a
second kernel on the same files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.config import merge
from tests.helpers import FAST_RESTART, MODEL_CACHE, only_workers, with_model_cache


def platform_env(user: Path, runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "FOLDERMIND_HOME"}
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {**env, "HOME": str(user), "XDG_RUNTIME_DIR": str(runtime)}


def foldermind(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_start_whose_sockets_folder_differs_is_refused_while_a_kernel_serves_the_same_index(home_dir: Path) -> None:
    user = home_dir / "user"
    config = user / ".config" / "foldermind" / "supervisor.toml"
    config.parent.mkdir(parents=True)
    config.write_text(with_model_cache(merge(FAST_RESTART, only_workers("watcher")), MODEL_CACHE))
    shell, client = platform_env(user, home_dir / "rt-a"), platform_env(user, home_dir / "rt-b")
    try:
        first = foldermind(shell, "start")
        assert first.returncode == 0, first.stdout + first.stderr

        second = foldermind(client, "start")
        assert second.returncode == 1, second.stdout + second.stderr  # on main: a second kernel started
        assert "another foldermind kernel already serves this index" in second.stderr
        assert str(home_dir / "rt-a" / "foldermind") in second.stderr  # where the running kernel's sockets are
        lines = foldermind(client, "status").stdout.splitlines()
        assert lines[0] == "foldermind is not running."  # no second kernel
        assert lines[1:] == [  # and where the one serving this index is
            f"(another foldermind kernel serves this index with its sockets in {home_dir / 'rt-a' / 'foldermind'})"
        ]
        repair = foldermind(client, "repair")  # never on an index a kernel is writing
        assert repair.returncode == 1 and "foldermind is running with its sockets in" in repair.stderr, repair
        assert "RUNNING" in foldermind(shell, "status").stdout  # the first kernel kept serving
    finally:
        for env in (client, shell):
            foldermind(env, "stop")
