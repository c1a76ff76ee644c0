"""Workers on another machine: a kernel listening on loopback tcp with CURVE ([bus] listen_tcp), and a test
worker from a second home (its own keys) joining it with `foldermind worker run testworker --connect`.

Real processes throughout; the second home stands for the second machine (what crosses between them is the
tcp port and the two public keys, as between hosts)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import Envelope, ParseReply, ParseRequest, PingReply, PingRequest
from foldermind.protocol.runtime.config import ConfigError, load
from foldermind.protocol.runtime.context import WorkerContext
from foldermind.protocol.runtime.home import Home
from foldermind.workers.framework.base import Request
from foldermind.workers.framework.heartbeat import EXIT_KEY_REFUSED
from foldermind.workers.parser import ParserWorker
from tests.config import merge, render
from tests.faultworker import FaultReply, FaultRequest
from tests.filemakers import make_docx
from tests.helpers import (
    FAST_RESTART,
    TESTWORKER,
    RunningKernel,
    cli,
    cli_process,
    kill9,
    only_workers,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
)

ONLY_TESTWORKER = only_workers()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def tcp_kernel() -> Iterator[RunningKernel]:
    """A kernel with only the test worker, listening for remote workers on a loopback port."""
    root = short_tmpdir()
    port = free_port()
    k = RunningKernel(
        root, merge(FAST_RESTART, TESTWORKER, ONLY_TESTWORKER, {"bus": {"listen_tcp": f"127.0.0.1:{port}"}})
    )
    k.port = port  # type: ignore[attr-defined]
    try:
        yield k.start()
    finally:
        k.stop()
        remove_tree(root)


@pytest.fixture
def remote_home() -> Iterator[Path]:
    """The other machine: a home of its own that has the test worker in its map and no kernel."""
    root = short_tmpdir("fm-r-")
    home = Home.resolve(root)
    home.ensure()
    home.supervisor_override.write_text(render(TESTWORKER))
    yield root
    remove_tree(root)


def public_key(home: Path, group: str) -> str:
    key: str = json.loads(cli(home, group, "keys", "--json").stdout)["public_key"]
    return key


def endpoint(kernel: RunningKernel) -> str:
    return f"tcp://127.0.0.1:{kernel.port}"  # type: ignore[attr-defined]


def run_remote(kernel: RunningKernel, home: Path) -> subprocess.Popen[str]:
    server_key = public_key(kernel.root, "bus")
    return cli_process(
        home,
        *("worker", "run", "testworker", "--connect", endpoint(kernel), "--server-key", server_key),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def remote_members(kernel: RunningKernel, via_cli: bool = False) -> list[dict[str, Any]]:
    """The remote members in the kernel's status: asked over the bus from this process (what a poll asks: a CLI
    process is ~0.75 CPU-s), or what `foldermind status --json` prints."""
    workers = status_json(kernel.root)["workers"] if via_cli else kernel.status().workers
    return [dict(w) for w in workers if w.get("remote")]


def member_of(kernel: RunningKernel, pid: int, state: str) -> dict[str, Any] | None:
    for w in remote_members(kernel):
        if w["pid"] == pid and w["state"] == state:
            return w
    return None


def kernel_log(kernel: RunningKernel) -> str:
    return kernel.home.log_file("kernel").read_text(errors="replace")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


# ------------------------------------------------------------------------------------------------
# configuration and keys, no kernel


def test_a_wildcard_listen_tcp_is_refused_unless_listen_tcp_any_spells_it_out(tmp_path: Path) -> None:
    config = tmp_path / "supervisor.toml"
    for host in ("0.0.0.0", "[::]", "*"):
        config.write_text(f'[bus]\nlisten_tcp = "{host}:7000"\n')
        with pytest.raises(ConfigError, match="listen_tcp_any"):
            load(config)
    config.write_text('[bus]\nlisten_tcp = "0.0.0.0:7000"\nlisten_tcp_any = true\n')
    assert load(config).bus.listen_tcp == "0.0.0.0:7000"
    config.write_text('[bus]\nlisten_tcp = "127.0.0.1"\n')
    with pytest.raises(ConfigError, match="HOST:PORT"):
        load(config)
    assert load(None).bus.listen_tcp == ""  # off by default


def test_bus_and_worker_keys_are_made_once_in_private_files_and_printed_as_json(home_dir: Path) -> None:
    bus_key = public_key(home_dir, "bus")
    worker_key = public_key(home_dir, "worker")
    assert len(bus_key) == len(worker_key) == 40 and bus_key != worker_key
    assert public_key(home_dir, "bus") == bus_key  # the same keypair, not a new one per call
    assert cli(home_dir, "worker", "keys").stdout.strip() == worker_key
    keys = Home.resolve(home_dir).keys_dir
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    files = [p for p in keys.rglob("*") if p.is_file()]
    assert len(files) == 4 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), files


def test_bus_allow_takes_only_a_public_key_and_bus_deny_removes_the_name(home_dir: Path) -> None:
    key = public_key(home_dir, "worker")
    bad = cli(home_dir, "bus", "allow", "laptop", "not-a-key", check=False)
    assert bad.returncode != 0 and "not a CURVE public key" in bad.stderr
    cli(home_dir, "bus", "allow", "gpu-box", key)
    allowed = Home.resolve(home_dir).allowed_keys_file
    assert json.loads(allowed.read_text()) == {"gpu-box": key}
    assert stat.S_IMODE(allowed.stat().st_mode) == 0o600
    cli(home_dir, "bus", "deny", "gpu-box")
    assert json.loads(allowed.read_text()) == {}
    assert cli(home_dir, "bus", "deny", "gpu-box", check=False).returncode != 0
    # Z85's alphabet has "-": a key that begins with it is a key, not an option (a CI run drew one).
    dash = next(k for k in iter(lambda: zmq.curve_keypair()[0].decode(), None) if k.startswith("-"))
    cli(home_dir, "bus", "allow", "dash-box", dash)
    assert json.loads(allowed.read_text()) == {"dash-box": dash}


# ------------------------------------------------------------------------------------------------
# a remote worker against a running kernel


def test_a_remote_worker_is_refused_until_allowed_then_joins_answers_its_service_and_shows_as_remote(
    tcp_kernel: RunningKernel, remote_home: Path
) -> None:
    refused = run_remote(tcp_kernel, remote_home)
    try:
        # Not on the allow list: the handshake is refused, and the worker exits saying so.
        assert refused.wait(30) == EXIT_KEY_REFUSED
        assert "refused a tcp bus handshake" in kernel_log(tcp_kernel)
        assert member_of(tcp_kernel, refused.pid, "REMOTE") is None
    finally:
        stop(refused)
    cli(tcp_kernel.root, "bus", "allow", "box-a", public_key(remote_home, "worker"))
    proc = run_remote(tcp_kernel, remote_home)
    try:
        wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the remote member")
        member = next(w for w in remote_members(tcp_kernel, via_cli=True) if w["pid"] == proc.pid)
        assert member["state"] == "REMOTE"
        assert member["name"].startswith("testworker@") and member["service"] == "testworker"
        assert member["key"] == "box-a" and member["remote"] is True
        local = tcp_kernel.worker("testworker")
        assert local["remote"] is False and local["key"] is None
        with tcp_kernel.client() as client, tcp_kernel.client("busy") as busy:
            # By name, and by service while the local member is busy: the free remote one takes it.
            assert client.request(member["name"], PingRequest(), PingReply, timeout=10).body.pid == proc.pid
            busy.send("testworker", FaultRequest("hang_sleep", seconds=3), timeout=20)
            wait_for(lambda: tcp_kernel.worker("testworker")["in_flight"] == 1, 10, 0.05, "the local member busy")
            reply = client.request("testworker", FaultRequest("hang_sleep", seconds=0), FaultReply, timeout=10)
            assert reply.body.pid == proc.pid
        assert "remote, key box-a" in cli(tcp_kernel.root, "status").stdout
    finally:
        stop(proc)


def test_bus_deny_drops_a_connected_member_and_it_goes(tcp_kernel: RunningKernel, remote_home: Path) -> None:
    cli(tcp_kernel.root, "bus", "allow", "box-c", public_key(remote_home, "worker"))
    proc = run_remote(tcp_kernel, remote_home)
    try:
        wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the remote member")
        cli(tcp_kernel.root, "bus", "deny", "box-c")
        lost = wait_for(lambda: member_of(tcp_kernel, proc.pid, "LOST"), 10, 0.1, "the member LOST")
        assert lost["last_error"] == "its key was denied"
        assert proc.wait(15) == 0  # told to go, it stops cleanly
    finally:
        stop(proc)


def test_a_remote_worker_killed_mid_job_is_dropped_lost_and_its_job_fails_worker_lost(
    tcp_kernel: RunningKernel, remote_home: Path, tmp_path: Path
) -> None:
    cli(tcp_kernel.root, "bus", "allow", "box-b", public_key(remote_home, "worker"))
    proc = run_remote(tcp_kernel, remote_home)
    try:
        member = wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the remote member")
        started = tmp_path / "started"
        with tcp_kernel.client() as client:
            job = client.send(member["name"], FaultRequest("hang_sleep", seconds=60, started=str(started)), timeout=60)
            wait_for(started.exists, 10, 0.05, "the remote job running")
            kill9(proc.pid)
            t0 = time.monotonic()
            packet = client.receive(30)
            assert packet.env.cid == job.id
            with pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: "):
                client._unwrap(packet, FaultReply)
            # Heartbeat liveness (3 s by default), not the job's 60 s deadline.
            assert time.monotonic() - t0 < 10
        lost = wait_for(lambda: member_of(tcp_kernel, proc.pid, "LOST"), 10, 0.1, "the member LOST")
        assert "missed" in (lost["last_error"] or "") and lost["key"] == "box-b"
        assert tcp_kernel.worker("testworker")["state"] == "RUNNING"  # the local member was never touched
    finally:
        stop(proc)


def _dealer(kernel: RunningKernel, curve_keys: tuple[bytes, bytes] | None) -> zmq.Socket[Any]:
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    # A DEALER whose every handshake is refused has no peer, and a send without a peer blocks for ever (a CI
    # run hung here): a bounded send, and a send that times out counts as no answer.
    sock.setsockopt(zmq.SNDTIMEO, 2000)
    if curve_keys is not None:
        sock.curve_publickey, sock.curve_secretkey = curve_keys
        sock.curve_serverkey = public_key(kernel.root, "bus").encode()
    sock.connect(endpoint(kernel))
    return sock


def _kernel_ping(sock: zmq.Socket[Any], wait_s: float) -> frames.Packet | None:
    try:
        frames.send(
            sock, Envelope(kind=PingRequest.KIND, src="probe", to="kernel", deadline=time.time() + 5), PingRequest()
        )
    except zmq.Again:
        return None  # not even connected: refused
    return frames.recv(sock) if sock.poll(int(wait_s * 1000)) else None


def test_unknown_keys_plaintext_and_garbage_on_the_tcp_port_are_refused_and_everything_keeps_running(
    tcp_kernel: RunningKernel,
) -> None:
    before = tcp_kernel.pids()
    unknown = _dealer(tcp_kernel, zmq.curve_keypair())
    plaintext = _dealer(tcp_kernel, None)
    try:
        assert _kernel_ping(unknown, 2) is None
        assert _kernel_ping(plaintext, 1) is None
        for junk in (b"\xff" * 64, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 64):
            with socket.create_connection(("127.0.0.1", tcp_kernel.port)) as raw:  # type: ignore[attr-defined]
                raw.sendall(junk)
        wait_for(lambda: "refused a tcp bus handshake" in kernel_log(tcp_kernel), 10, 0.1, "the refusal logged")
    finally:
        unknown.close(0)
        plaintext.close(0)
    assert tcp_kernel.pids() == before
    with tcp_kernel.client() as client:
        assert client.request("kernel", PingRequest(), PingReply, timeout=5).body.pid == tcp_kernel.kernel_pid
        assert client.request("testworker", PingRequest(), PingReply, timeout=5).body.pid == before["testworker"]


def test_an_admitted_key_may_serve_jobs_but_not_send_requests(tcp_kernel: RunningKernel, home_dir: Path) -> None:
    keys = zmq.curve_keypair()
    cli(tcp_kernel.root, "bus", "allow", "probe", keys[0].decode())
    sock = _dealer(tcp_kernel, keys)
    try:
        packet = wait_for(lambda: _kernel_ping(sock, 1), 15, 0, "an answer to an admitted key")
        assert packet.env.status == "error" and packet.env.error is not None
        assert packet.env.error.code == "bad_request" and "may only serve jobs" in packet.env.error.message
    finally:
        sock.close(0)
        cli(tcp_kernel.root, "bus", "deny", "probe")


class _Recorder(threading.Thread):
    """A tcp relay in front of the kernel's port that keeps what the client sent: a captured session."""

    def __init__(self, upstream: int) -> None:
        super().__init__(daemon=True)
        self.upstream, self.sent = upstream, bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]

    def run(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.upstream))

        def relay(src: socket.socket, dst: socket.socket, keep: bytearray | None) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    if keep is not None:
                        keep.extend(data)
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=relay, args=(server, client, None), daemon=True)
        back.start()
        relay(client, server, self.sent)
        back.join(5)
        client.close()
        server.close()
        self.listener.close()


def test_a_replayed_curve_session_is_refused_and_what_it_carried_never_reaches_the_kernel(
    tcp_kernel: RunningKernel,
) -> None:
    before = tcp_kernel.pids()
    keys = zmq.curve_keypair()
    cli(tcp_kernel.root, "bus", "allow", "replayed", keys[0].decode())
    recorder = _Recorder(tcp_kernel.port)  # type: ignore[attr-defined]
    recorder.start()
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, 2000)
    sock.curve_publickey, sock.curve_secretkey = keys
    sock.curve_serverkey = public_key(tcp_kernel.root, "bus").encode()
    sock.connect(f"tcp://127.0.0.1:{recorder.port}")
    refused = "refused ping.request from a remote peer"
    try:
        # The genuine session: handshake, then a request the kernel reads (and refuses: a remote peer is a worker).
        packet = _kernel_ping(sock, 10)
        assert packet is not None and packet.env.error is not None and packet.env.error.code == "bad_request"
    finally:
        sock.close(0)
        cli(tcp_kernel.root, "bus", "deny", "replayed")
    recorder.join(10)
    assert len(recorder.sent) > 200  # greeting, HELLO, INITIATE and the request, as they went over the wire
    seen = kernel_log(tcp_kernel).count(refused)
    cli(tcp_kernel.root, "bus", "allow", "replayed", keys[0].decode())  # the key itself is still welcome
    try:
        # The same bytes again on a new connection: the server's half of the handshake is new every time
        # (its short-term key and cookie), so the old INITIATE does not open and the kernel closes the link.
        with socket.create_connection(("127.0.0.1", tcp_kernel.port), timeout=10) as raw:  # type: ignore[attr-defined]
            with contextlib.suppress(OSError):
                raw.sendall(bytes(recorder.sent))
            received = bytearray()
            with contextlib.suppress(OSError):
                while data := raw.recv(65536):
                    received.extend(data)
        assert len(received) < 400, "more than a greeting and a WELCOME came back"
        # A genuine session after it, as a barrier: its request is read after anything the replay carried.
        genuine = _dealer(tcp_kernel, keys)
        try:
            assert wait_for(lambda: _kernel_ping(genuine, 1), 15, 0, "an answer to the genuine session")
        finally:
            genuine.close(0)
    finally:
        cli(tcp_kernel.root, "bus", "deny", "replayed")
    assert kernel_log(tcp_kernel).count(refused) == seen + 1  # the genuine one's; the replayed one never read
    assert tcp_kernel.pids() == before
    with tcp_kernel.client() as client:
        assert client.request("testworker", PingRequest(), PingReply, timeout=5).body.pid == before["testworker"]


# ------------------------------------------------------------------------------------------------
# a parser on another machine: the file's bytes travel in the job


def _parse(worker: ParserWorker, body: ParseRequest, buffers: list[bytes]) -> ParseReply:
    reply = worker.on_parse(Request(Envelope(kind=ParseRequest.KIND), body, buffers))
    assert isinstance(reply, ParseReply)
    return reply


def test_a_parser_on_another_machine_asks_for_the_bytes_and_parses_them_never_the_path(tmp_path: Path) -> None:
    ctx = WorkerContext(name="parser@box:1", service="parser", bus_endpoint="tcp://10.0.0.1:1", curve_server_key="k")
    remote_parser = ParserWorker(ctx)
    here = make_docx(tmp_path / "report.docx", "Quarterly", [("Findings", ["The okapi count rose."])], [["a", "b"]])
    with pytest.raises(JobError) as asked:
        _parse(remote_parser, ParseRequest(path=str(here)), [])  # a readable path, yet it is not read
    assert asked.value.info.code == ErrorCode.FILE_CONTENT_NEEDED
    # The bytes, under a path that means nothing on this machine: its suffix picks the format.
    reply = _parse(remote_parser, ParseRequest(path="/elsewhere/report.docx", content=True), [here.read_bytes()])
    assert reply.format == "docx" and "okapi count rose" in " ".join(c["text"] for c in reply.chunks)
    with pytest.raises(JobError) as large:
        _parse(remote_parser, ParseRequest(path="/elsewhere/report.docx", max_bytes=100, content=True), [b"x" * 101])
    assert large.value.info.code == ErrorCode.FILE_TOO_LARGE
    with pytest.raises(JobError) as missing:
        _parse(remote_parser, ParseRequest(path="/elsewhere/report.docx", content=True), [])
    assert missing.value.info.code == ErrorCode.BAD_REQUEST
    # A local parser reads no path either (the indexer sends every file's bytes), and parses the same bytes alike.
    local = ParserWorker(WorkerContext(name="parser#1", service="parser", bus_endpoint="ipc:///nowhere"))
    with pytest.raises(JobError) as local_asked:
        _parse(local, ParseRequest(path=str(here)), [])
    assert local_asked.value.info.code == ErrorCode.FILE_CONTENT_NEEDED
    assert _parse(local, ParseRequest(path=str(here), content=True), [here.read_bytes()]).chunks == reply.chunks


def test_a_remote_member_declared_lost_while_alive_joins_again_instead_of_exiting(
    tcp_kernel: RunningKernel, remote_home: Path
) -> None:
    """A member whose heartbeats stopped for longer than the liveness (here: SIGSTOP; in life a starved CPU or
    a stalled link) is dropped by the kernel; its next heartbeat is answered with a dismissal. The kernel cannot
    restart a remote member, so it must join again (same process, same name), not stop for good."""
    cli(tcp_kernel.root, "bus", "allow", "box-s", public_key(remote_home, "worker"))
    proc = run_remote(tcp_kernel, remote_home)
    try:
        member = wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the remote member")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            lost = wait_for(lambda: member_of(tcp_kernel, proc.pid, "LOST"), 15, 0.1, "the stopped member LOST")
            assert "missed" in (lost["last_error"] or "")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        back = wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the member back")
        assert back["name"] == member["name"] and proc.poll() is None
        with tcp_kernel.client() as client:
            assert client.request(back["name"], PingRequest(), PingReply, timeout=10).body is not None
    finally:
        stop(proc)


def test_a_member_whose_key_is_denied_while_it_is_away_exits_saying_so_when_it_comes_back(
    tcp_kernel: RunningKernel, remote_home: Path
) -> None:
    """Away (SIGSTOP here; in life a link down) it cannot be told its key was denied; back, it finds its
    handshakes refused. Before, it took that for silence and joined again every few seconds for good."""
    cli(tcp_kernel.root, "bus", "allow", "box-d", public_key(remote_home, "worker"))
    proc = run_remote(tcp_kernel, remote_home)
    try:
        wait_for(lambda: member_of(tcp_kernel, proc.pid, "REMOTE"), 30, 0.1, "the remote member")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: member_of(tcp_kernel, proc.pid, "LOST"), 15, 0.1, "the stopped member LOST")
            cli(tcp_kernel.root, "bus", "deny", "box-d")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(60) == EXIT_KEY_REFUSED
        out = proc.stdout.read() if proc.stdout else ""
        assert "refused this worker's key" in out, out[-2000:]
    finally:
        stop(proc)
