"""Real MCP clients over the stdio bridge (`foldermind mcp`, launched by the client once) while foldermind
changes under them: the token rotated, the supervisor stopped and started, the kernel killed with SIGKILL and
started again, a restart on another port. The client is never relaunched and keeps its session: the next
tools/call answers. With foldermind down and unable to start, a call gets the bridge's typed error within 5 s,
and once foldermind can start again, a later call of the same session brings it up and is answered.

The clients: the Python SDK's stdio client (mcp.client.stdio) in both protocol eras, and the TypeScript SDK's
(npm @modelcontextprotocol/sdk, run by tests/ts_bridge.mjs; skipped with the reason where node or npm is
missing).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from foldermind.kernel.cli.bridge.link import BridgeFailure
from foldermind.protocol.errors import ErrorCode
from tests import mcpclient as mc
from tests.config import merge, render
from tests.helpers import (
    FAST_RESTART,
    RunningKernel,
    cli,
    kill9,
    npm_installed,
    only_workers,
    remove_tree,
    short_tmpdir,
    wait_for,
)

# The front door and the indexer its tools/call reaches (list_smart_folders): nothing is indexed.
CONFIG = merge(FAST_RESTART, only_workers("frontdoor", "indexer"), {"mcp": {"port": 0}})


@pytest.fixture(scope="module")
def kernel() -> Iterator[RunningKernel]:
    root = short_tmpdir()
    k = RunningKernel(root / "home", CONFIG)
    try:
        k.start()
        yield k
    finally:
        adopt(k)
        k.stop()
        remove_tree(root)


def adopt(k: RunningKernel) -> None:
    """Teardown stops the kernel that runs now, whoever started it (the test, or the bridge)."""
    pid = k.home.running_pid()
    if pid is not None and pid > 0:
        k.kernel_pid = pid


def start(k: RunningKernel) -> None:
    cli(k.root, "start", timeout=120)
    adopt(k)


async def answers(client: Client) -> None:
    """A tools/call over the session the client holds is answered by the tool (the indexer's folder list)."""
    result = await client.call_tool("list_smart_folders", {})
    assert not result.is_error, result.content
    assert result.structured_content is not None and "folders" in result.structured_content


def survives(k: RunningKernel, mode: str, upset: Callable[[], None]) -> None:
    async def go() -> None:
        async with mc.stdio_client(k.root, mode) as client:
            await answers(client)
            await anyio.to_thread.run_sync(upset)
            async with anyio.create_task_group() as tg:  # three at once: each meets the change
                for _ in range(3):
                    tg.start_soon(answers, client)
            await answers(client)

    mc.run(go)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_stdio_client_keeps_working_after_token_rotate(kernel: RunningKernel, mode: str) -> None:
    before = mc.token_of(kernel.root)

    def rotate() -> None:
        cli(kernel.root, "token", "rotate")
        assert mc.token_of(kernel.root) != before

    survives(kernel, mode, rotate)


def _stop_start(k: RunningKernel) -> None:
    cli(k.root, "stop", timeout=120)
    assert k.home.running_pid() is None
    start(k)


def test_a_token_the_front_door_still_refuses_once_read_again_is_token_refused(kernel: RunningKernel) -> None:
    """`token rotate`, then the token store changed behind the front door's back (written here): refused with
    the old token, the bridge reads the store, is refused again, and says so; with the rotated token put back
    in the store, the next call is answered."""
    stored = kernel.home.config_dir / "mcp-token"
    if not stored.exists():
        pytest.skip("the token lives in an OS secret store here, not in a file this test can change")

    async def go() -> None:
        async with mc.stdio_client(kernel.root, "legacy") as client:
            await answers(client)
            await anyio.to_thread.run_sync(lambda: cli(kernel.root, "token", "rotate"))
            token = stored.read_text()
            stored.write_text("x" * 43)
            try:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("list_smart_folders", {})
            finally:
                stored.write_text(token)
            assert refused.value.error.code == BridgeFailure.TOKEN_REFUSED.rpc, refused.value.error
            assert refused.value.error.message.startswith("token refused"), refused.value.error
            assert refused.value.error.data == {"code": ErrorCode.TOKEN_REFUSED.mcp, "retryable": False}
            await answers(client)

    mc.run(go)


def test_a_stdio_client_keeps_working_after_stop_and_start(kernel: RunningKernel) -> None:
    survives(kernel, "legacy", lambda: _stop_start(kernel))


def test_a_stdio_client_keeps_working_after_the_kernel_is_killed_and_started_again(kernel: RunningKernel) -> None:
    def kill_start() -> None:
        front = int(mc.mcp_info(kernel.root)["pid"])
        kill9(kernel.kernel_pid)
        wait_for(lambda: kernel.home.running_pid() is None, 30, 0.05, "the kernel's lock released")
        wait_for(lambda: not _alive(front), 30, 0.05, "the front door gone with its kernel")
        start(kernel)

    survives(kernel, "legacy", kill_start)


def test_a_stdio_client_follows_a_restart_on_another_port(kernel: RunningKernel) -> None:
    override = kernel.home.supervisor_override
    config = override.read_text()

    def move() -> None:
        old = int(mc.mcp_info(kernel.root)["port"])
        cli(kernel.root, "stop", timeout=120)
        port = _free_port(old)
        kernel.configure(merge(CONFIG, {"mcp": {"port": port}}))
        start(kernel)
        assert int(mc.mcp_info(kernel.root)["port"]) == port != old

    try:
        survives(kernel, "legacy", move)
    finally:
        override.write_text(config)


def test_with_foldermind_down_a_call_gets_not_running_within_5_s_and_a_later_call_starts_it(
    kernel: RunningKernel,
) -> None:
    """`start` is made impossible by a supervisor.toml that does not parse (as a typo would): the bridge's own
    start fails, and the call gets NOT_RUNNING with why. Once the file is mended, the same session's next calls
    start foldermind (the bridge tries again, one start at a time) and are answered."""
    override = kernel.home.supervisor_override
    config = override.read_text()
    seen: dict[str, float | MCPError] = {}

    async def go() -> None:
        async with mc.stdio_client(kernel.root, "legacy") as client:
            await answers(client)
            await anyio.to_thread.run_sync(lambda: cli(kernel.root, "stop", timeout=120))
            override.write_text(config + "\n[mcp\n")  # broken: `foldermind start` refuses it
            t0 = time.monotonic()
            with pytest.raises(MCPError) as refused:
                await client.call_tool("list_smart_folders", {})
            seen["elapsed"], seen["error"] = time.monotonic() - t0, refused.value
            override.write_text(config)
            give_up = time.monotonic() + 120
            while True:
                try:
                    await answers(client)
                    return
                except MCPError as exc:
                    assert exc.error.code == BridgeFailure.NOT_RUNNING.rpc, exc.error
                    assert time.monotonic() < give_up, "foldermind never came back"
                    await anyio.sleep(0.5)

    try:
        mc.run(go)
    finally:
        override.write_text(config)
        adopt(kernel)
    error = seen["error"]
    assert isinstance(error, MCPError)
    assert error.error.code == BridgeFailure.NOT_RUNNING.rpc, error.error
    assert error.error.message.startswith("foldermind is not running"), error.error
    assert "supervisor.toml" in error.error.message, error.error  # why the start failed
    assert error.error.data == {"code": ErrorCode.NOT_RUNNING.mcp, "retryable": True}, error.error
    assert seen["elapsed"] < 5, seen
    assert kernel.home.running_pid() is not None  # the bridge started it


def test_a_bridge_launched_where_foldermind_cannot_start_answers_why() -> None:
    """A home whose supervisor.toml does not parse: `foldermind mcp` does not exit (a client would show
    "Connection closed"); the client's first request gets NOT_RUNNING with the start's own error."""
    root = short_tmpdir()
    home = root / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "supervisor.toml").write_text(render(CONFIG) + "\n[mcp\n")  # broken on purpose

    async def go() -> None:
        async with mc.stdio_client(home, "legacy"):
            raise AssertionError("the client connected to a foldermind that cannot start")

    try:
        with pytest.raises(BaseException) as failed:  # the SDK raises it out of its task group
            mc.run(go)
    finally:
        remove_tree(root)
    refused = _mcp_error(failed.value)
    assert refused is not None, failed.value
    assert refused.error.code == BridgeFailure.NOT_RUNNING.rpc, refused.error
    message = refused.error.message
    assert message.startswith("foldermind is not running") and "supervisor.toml" in message, message


def test_the_typescript_sdk_client_keeps_working_after_token_rotate_and_stop_and_start(kernel: RunningKernel) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the TypeScript SDK client cannot run here")
    prefix = npm_installed("ts-sdk", "@modelcontextprotocol/sdk", "1.32.2", "FOLDERMIND_TS_SDK")
    # ESM resolves packages from the script's own directory: the script runs beside the SDK's node_modules.
    script = prefix / "ts_bridge.mjs"
    shutil.copyfile(Path(__file__).with_name("ts_bridge.mjs"), script)
    node = subprocess.Popen(
        ["node", str(script), sys.executable, str(kernel.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert node.stdin is not None and node.stdout is not None
        first = json.loads(node.stdout.readline() or "{}")
        assert first.get("ok") is True, (first, node.stderr.read() if node.stderr else "")
        after: list[dict[str, object]] = []
        for upset in (lambda: cli(kernel.root, "token", "rotate"), lambda: _stop_start(kernel)):
            upset()
            node.stdin.write("call\n")
            node.stdin.flush()
            after.append(json.loads(node.stdout.readline() or "{}"))
        _, err = node.communicate(input="", timeout=60)  # end of its input: the script closes its client
    finally:
        node.kill()
    assert after == [{"step": "after", "ok": True, "closed": False}] * 2, (after, err)
    assert node.returncode == 0, err


def _mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError in ``exc``, or in the exception groups around it."""
    if isinstance(exc, MCPError):
        return exc
    inner = exc.exceptions if isinstance(exc, BaseExceptionGroup) else ()
    return next((found for e in inner if (found := _mcp_error(e)) is not None), None)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _free_port(other_than: int) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != other_than:
            return port
