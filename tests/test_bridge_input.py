"""The stdio bridge (`foldermind mcp`, a real process) against a real running kernel's front door, fed what a
broken or hostile stdio client writes: a 6 MB message, lines that are not JSON, binary, a batch. Each gets
its JSON-RPC error, and the bridge goes on serving the next request."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from foldermind.kernel.cli.bridge import stdio_lines
from foldermind.kernel.cli.bridge.link import BridgeFailure
from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, kill9, only_workers, remove_tree, short_tmpdir, wait_for

# The front door alone: nothing here is indexed or searched.
CONFIG = merge(FAST_RESTART, only_workers("frontdoor"), {"mcp": {"port": 0}})
SIX_MB = 6 * 1024 * 1024


@pytest.fixture(scope="module")
def kernel() -> Iterator[RunningKernel]:
    root = short_tmpdir()
    k = RunningKernel(root / "home", CONFIG)
    try:
        k.start()
        yield k
    finally:
        k.stop()
        remove_tree(root)


class Bridge:
    """`foldermind mcp` as a stdio client launches it, with its stdout read line by line in a thread."""

    def __init__(self, home: Path) -> None:
        args = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), "mcp"]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 120) -> Any:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(f"no reply in {timeout} s; bridge exit {self.proc.poll()}") from None

    def request(self, rid: Any, method: str, params: dict[str, Any] | None = None) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.reply()

    def handshake(self) -> None:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert "result" in self.request(0, "initialize", params)
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def close(self) -> str:
        """Close stdin (the client leaving); the bridge's stderr once it has exited."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        return self.proc.stderr.read().decode(errors="replace")

    def still_serves(self, rid: int) -> None:
        """A plain request after the bad ones is answered, by a bridge still running."""
        reply = self.request(rid, "tools/list")
        assert reply["id"] == rid and "result" in reply, reply
        assert "search_documents" in {t["name"] for t in reply["result"]["tools"]}
        assert self.proc.poll() is None


@contextmanager
def bridge_of(home: Path) -> Iterator[Bridge]:
    """A bridge for the test's body, which must leave it running; once the client has left, it exits cleanly."""
    bridge = Bridge(home)
    try:
        yield bridge
    finally:
        stderr = bridge.close()
    assert "Traceback" not in stderr, stderr
    assert bridge.proc.returncode == 0, stderr


def huge_call(rid: int) -> bytes:
    params = {"name": "search_documents", "arguments": {"query": "x" * SIX_MB}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


def test_bad_lines_get_json_rpc_errors_and_the_bridge_keeps_serving(kernel: RunningKernel) -> None:
    with bridge_of(kernel.root) as bridge:
        bridge.handshake()
        bridge.still_serves(1)

        bridge.send(huge_call(2))  # over the front door's 5 MB: answered by the bridge, never sent
        big = bridge.reply()
        assert big["id"] == 2 and big["error"]["code"] == -32600, big
        assert big["error"]["data"]["max_bytes"] == 5 * 1024 * 1024 and big["error"]["data"]["bytes"] > SIX_MB

        bridge.send(b"this is not json {")
        assert bridge.reply() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": stdio_lines.PARSE}}
        bridge.send(b"\x00\xff\xfe\x80binary\x01\x9c")
        assert bridge.reply()["error"]["code"] == -32700

        batch = [
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            {"jsonrpc": "2.0", "id": "four", "method": "ping"},
            7,
        ]
        bridge.send(json.dumps(batch).encode())
        answers = bridge.reply()
        assert [a["id"] for a in answers] == [3, "four", None], answers
        assert {a["error"]["code"] for a in answers} == {-32600}

        bridge.send(b'{"jsonrpc": "2.0", "id": 5}')  # JSON, but no message
        assert bridge.reply()["error"] == {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}

        bridge.still_serves(6)


def test_a_message_the_front_door_refuses_is_answered_and_the_bridge_keeps_serving(kernel: RunningKernel) -> None:
    """The bridge believes the limit is 50 MB (its config says so; the running front door read 5 MB at its
    start): the 6 MB message goes out, the front door answers 413 and closes the connection."""
    override = kernel.home.supervisor_override
    before = override.read_text()
    kernel.configure(merge(CONFIG, {"mcp": {"max_body_mb": 50}}))
    with bridge_of(kernel.root) as bridge:
        try:
            bridge.handshake()  # the bridge read its config before it relayed anything
        finally:
            override.write_text(before)
        bridge.send(huge_call(1))
        refused = bridge.reply()
        assert refused["id"] == 1 and refused["error"]["code"] in (-32600, BridgeFailure.CONNECTION_LOST.rpc), refused
        assert "front door" in refused["error"]["message"] and "not sent" not in refused["error"]["message"], refused
        bridge.still_serves(2)


def test_a_client_that_closes_stdin_at_once_still_gets_its_answer(kernel: RunningKernel) -> None:
    """A one-shot client (a pipe): the request, then end of input. The answer is owed and goes out before
    the bridge exits."""
    args = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(kernel.root), "mcp"]
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    line = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": params}) + "\n"
    done = subprocess.run(args, input=line.encode() + b"not json\n", capture_output=True, timeout=120)
    replies = [json.loads(x) for x in done.stdout.splitlines()]
    assert sorted(r["id"] or 0 for r in replies) == [0, 9], done
    assert next(r for r in replies if r["id"] == 9)["result"]["serverInfo"], replies
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr


def test_a_bridge_goes_on_with_a_front_door_killed_and_restarted(kernel: RunningKernel) -> None:
    """The front door killed with SIGKILL mid-session: the supervisor starts it again, on another port (this
    home binds port 0) and with no memory of the bridge's session. The request sent meanwhile is answered
    (an error, or a result when the restart won the race), and the next one is served by the new front
    door: the bridge follows it to its port and opens a new session with the client's own initialize. A
    request the kill caught in flight gets the bridge's typed, retryable CONNECTION_LOST."""
    with bridge_of(kernel.root) as bridge:
        bridge.handshake()
        bridge.still_serves(1)
        before = mc.mcp_info(kernel.root)
        kill9(int(before["pid"]))
        meanwhile = bridge.request(2, "tools/list")
        lost = BridgeFailure.CONNECTION_LOST.error(meanwhile.get("error", {}).get("message", ""))
        assert meanwhile["id"] == 2 and ("result" in meanwhile or meanwhile["error"] == lost), meanwhile
        wait_for(lambda: mc.mcp_info(kernel.root)["pid"] != before["pid"], 60, 0.1, "the front door restarted")
        bridge.still_serves(3)
        bridge.still_serves(4)
