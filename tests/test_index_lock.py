"""One index, one kernel: on the platform's own home the sockets' folder follows XDG_RUNTIME_DIR, which a client's
launched `foldermind mcp` may not inherit (the MCP SDK's stdio client passes HOME and PATH, not it), so a command
looking in another folder must find the running kernel's lock beside the index and reach that kernel's sockets
(if they are safe), instead of starting a second kernel on the same files or saying none runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from tests import mcpclient as mc
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


def test_commands_from_another_sockets_folder_reach_the_kernel_that_serves_the_index(home_dir: Path) -> None:
    user = home_dir / "user"
    config = user / ".config" / "foldermind" / "supervisor.toml"
    config.parent.mkdir(parents=True)
    config.write_text(with_model_cache(merge(FAST_RESTART, only_workers("watcher", "indexer")), MODEL_CACHE))
    shell, client = platform_env(user, home_dir / "rt-a"), platform_env(user, home_dir / "rt-b")
    sockets = home_dir / "rt-a" / "foldermind"
    try:
        first = foldermind(shell, "start")
        assert first.returncode == 0, first.stdout + first.stderr
        pid = int((sockets / "kernel.pid").read_text())

        second = foldermind(client, "start")  # finds the kernel, never starts a second one
        assert second.returncode == 0, second.stdout + second.stderr
        assert second.stdout.splitlines()[0] == f"foldermind is already running (pid {pid}).", second.stdout
        status = foldermind(client, "status")  # on main: "foldermind is not running."
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.startswith(f"kernel  pid {pid} "), status.stdout
        found = foldermind(client, "search", "anything", "--mode", "keyword", "--json")
        assert found.returncode == 0, found.stdout + found.stderr  # answered over the running kernel's bus
        assert json.loads(found.stdout)["results"] == []  # (no folder registered: nothing to find)
        repair = foldermind(client, "repair")  # never on an index a kernel is writing
        assert repair.returncode == 1 and "foldermind is running:" in repair.stderr, repair
        assert not (home_dir / "rt-b" / "foldermind" / "kernel.pid").exists()  # no second kernel's files

        sockets.chmod(0o755)  # a folder others may reach is not followed
        refused = foldermind(client, "status")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert f"the running kernel's sockets are in {sockets}, which others may reach (mode 755" in refused.stderr
        assert foldermind(shell, "status").stdout.startswith(f"kernel  pid {pid} ")  # the first kernel kept serving
        sockets.chmod(0o700)
        assert json.loads(foldermind(client, "status", "--json").stdout)["kernel"]["pid"] == pid
    finally:
        sockets.chmod(0o700)
        for env in (client, shell):
            foldermind(env, "stop")


def test_a_bridge_launched_with_only_the_sdks_environment_reaches_the_kernel_a_shell_started(home_dir: Path) -> None:
    user = home_dir / "user"
    config = user / ".config" / "foldermind" / "supervisor.toml"
    config.parent.mkdir(parents=True)
    keep = only_workers("watcher", "indexer", "frontdoor")
    config.write_text(with_model_cache(merge(FAST_RESTART, keep, {"mcp": {"port": 0}}), MODEL_CACHE))
    shell = platform_env(user, home_dir / "rt-a")
    (home_dir / "rt-b").mkdir(mode=0o700)
    # What the MCP SDK's stdio client gives a server it launches (HOME, PATH, ...), with the client's own
    # XDG_RUNTIME_DIR, which is not the shell's.
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "foldermind.kernel.cli", "mcp"],
        env={"HOME": str(user), "XDG_RUNTIME_DIR": str(home_dir / "rt-b")},
    )

    async def listed() -> CallToolResult:
        async with Client(params, read_timeout_seconds=120) as client:
            result = await client.call_tool("list_smart_folders", {})
            assert isinstance(result, CallToolResult)
            return result

    try:
        first = foldermind(shell, "start")
        assert first.returncode == 0, first.stdout + first.stderr
        result = mc.run(listed)
        assert not result.is_error, result.content  # on main: not running, and the start it tried refused
        assert json.loads(result.content[0].text)["folders"] == []  # type: ignore[union-attr]
        assert not (home_dir / "rt-b" / "foldermind" / "kernel.pid").exists()  # no second kernel
    finally:
        foldermind(shell, "stop")
