"""The whole process map started by the CLI, as a user runs it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import psutil
import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import DescribeReply, DescribeRequest, PingReply, PingRequest
from tests.config import merge
from tests.faultworker import FaultRequest
from tests.helpers import (
    FAST_RESTART,
    LIGHT_MAP,
    TESTWORKER,
    RunningKernel,
    cli,
    cli_process,
    only_workers,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
)

DEFAULT_MAP = ["watcher", "parser#1", "parser#2", "embedder", "indexer", "llm", "frontdoor", "console"]
ON_DEMAND = {"embedder", "llm", "parser#1", "parser#2"}
"""Started by the first request for them ([workers.NAME] on_demand): IDLE, with no process, until then."""


def test_status_json_has_the_spec_shape_and_every_worker_answers(kernel: RunningKernel) -> None:
    data = status_json(kernel.root)
    assert set(data) == {"kernel", "workers", "mcp", "folders", "console"}
    assert {"pid", "uptime_s", "version"} <= set(data["kernel"])
    assert data["kernel"]["pid"] == kernel.kernel_pid
    assert [w["name"] for w in data["workers"]] == [*DEFAULT_MAP, "testworker"]
    spec_fields = {"name", "state", "pid", "uptime_s", "restarts", "in_flight", "last_error"}
    for w in data["workers"]:
        assert spec_fields <= set(w), w
        assert w["restarts"] == 0 and w["in_flight"] == 0
        if w["name"] in ON_DEMAND:
            assert (w["state"], w["pid"], w["rss_bytes"]) == ("IDLE", None, None)
            continue
        assert w["state"] == "RUNNING"
        assert psutil.Process(w["pid"]).ppid() == kernel.kernel_pid
        assert psutil.Process(w["pid"]).nice() == 0
        assert w["rss_bytes"] > 1_000_000
    # The whole tree is at least the kernel and its workers (sampled a moment apart: a tenth of slack).
    parts = data["kernel"]["rss_bytes"] + sum(w["rss_bytes"] or 0 for w in data["workers"])
    assert data["kernel"]["tree_rss_bytes"] >= 0.9 * parts, (data["kernel"], parts)
    assert {"url", "port", "state"} <= set(data["mcp"])
    assert data["folders"] == []
    with kernel.client() as client:
        for w in data["workers"]:
            # An on-demand worker is started by this very request and answers it.
            pid = client.request(w["name"], PingRequest(), PingReply, timeout=20).body.pid
            assert pid == (w["pid"] or kernel.worker(w["name"])["pid"])
            described = client.request(w["name"], DescribeRequest(), DescribeReply, timeout=5).body
            assert described.name == w["name"] and "ping.request" in described.kinds
        # supervisor.toml's `nice`: the llm yields the CPU to searches and indexing; parsers keep it.
        for name, nice in (("llm", 5), ("parser#1", 0), ("parser#2", 0)):
            w = kernel.worker(name)
            assert w["state"] == "RUNNING" and psutil.Process(w["pid"]).nice() == nice
            assert psutil.Process(w["pid"]).ppid() == kernel.kernel_pid
        # Each worker in a process group of its own (a Ctrl-C for a foreground kernel is the kernel's alone)
        # but in the kernel's session: Linux's autogroup scheduling shares the CPU fairly between sessions
        # whatever their nice values, so a worker in a session of its own made `nice` mean nothing.
        for w in data["workers"]:
            pid = kernel.worker(w["name"])["pid"]
            assert os.getpgid(pid) == pid and os.getsid(pid) == os.getsid(kernel.kernel_pid), w["name"]
        # [ingest] ingest_nice is off by default: the ingest thread keeps the indexer's priority.
        details = client.request("indexer", DescribeRequest(), DescribeReply, timeout=5).body.details
        assert details["ingest_nice"] == "off", details
        # A pool name reaches one of its members (running: each was started by the pings above).
        assert client.request("parser", PingRequest(), PingReply, timeout=5).body.name in (
            "parser#1",
            "parser#2",
        )
    text = cli(kernel.root, "status").stdout
    for name in DEFAULT_MAP:
        assert name in text
    assert "whole tree" in text


def test_a_second_start_says_where_the_running_one_serves_and_how_to_stop_it(home_dir: Path) -> None:
    # A second `make run` in another terminal printed only "already running (pid N)".
    k = RunningKernel(
        home_dir,
        merge(
            FAST_RESTART, only_workers("indexer", "frontdoor", "console"), {"mcp": {"port": 0}, "console": {"port": 0}}
        ),
    )
    try:
        k.start()
        mcp = k.status().mcp["url"]
        console = wait_for(lambda: (k.status().console or {}).get("url"), 60, what="the console's URL in status")
        for args in (("start",), ("start", "--foreground")):
            out = cli(k.root, *args).stdout.splitlines()
            assert out[0] == f"foldermind is already running (pid {k.kernel_pid}).", out
            assert f"MCP: {mcp}" in out and any(line.startswith(f"console: {console}") for line in out), out
            assert out[-1].endswith("stop` stops it."), out
    finally:
        k.stop()


@pytest.mark.light_map
def test_second_start_refuses_a_twin(kernel: RunningKernel) -> None:
    out = cli(kernel.root, "start").stdout
    assert f"already running (pid {kernel.kernel_pid})" in out
    assert kernel.status().kernel["pid"] == kernel.kernel_pid
    assert len(kernel.descendants()) == len([w for w in kernel.status().workers if w["pid"]])


def test_runtime_folder_and_sockets_are_private_and_only_the_front_door_and_the_console_listen(
    kernel: RunningKernel,
) -> None:
    run_dir = kernel.home.runtime_dir
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    for sock in kernel.home.socket_files:
        mode = sock.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) & 0o077 == 0, oct(mode)
    frontdoor, console = kernel.worker("frontdoor")["pid"], kernel.worker("console")["pid"]
    mcp = wait_for(lambda: kernel.status().mcp["port"], 20, 0.1, "the MCP port in status")
    web = wait_for(lambda: kernel.status().console["port"], 20, 0.1, "the console's port in status")
    listening = {frontdoor: [("127.0.0.1", mcp)], console: [("127.0.0.1", web)]}
    for proc in [psutil.Process(kernel.kernel_pid), *kernel.descendants()]:
        inet = [c for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        # One TCP socket each for the MCP endpoint and the console, on loopback, at the ports status reports.
        assert [(c.laddr.ip, c.laddr.port) for c in inet] == listening.get(proc.pid, []), proc.pid


def test_stop_is_orderly_and_reports_every_worker(home_dir: Path) -> None:
    k = RunningKernel(home_dir, FAST_RESTART).start()
    procs = [psutil.Process(k.kernel_pid), *k.descendants()]
    out = cli(home_dir, "stop").stdout
    for name in DEFAULT_MAP:
        assert f"{name}" in out and "exited 0" in out
    assert "foldermind stopped." in out
    wait_for(
        lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs),
        10,
        what="all processes gone",
    )
    assert not k.home.pid_file.exists() and not any(p.exists() for p in k.home.socket_files)
    assert cli(home_dir, "status", check=False).returncode == 3
    assert "not running" in cli(home_dir, "stop").stdout


def test_stop_kills_a_worker_that_ignores_sigterm(home_dir: Path) -> None:
    """The grace period ends in SIGKILL: a worker hung in C code cannot hold the stop up."""
    grace = {"workers": {"testworker": {"restart": {"stop_grace_s": 1.0}}}}
    # The hung worker must still be the one holding the job when the stop comes: with the default liveness
    # (3 s) a `foldermind stop` slow to start on a loaded machine found it dropped and a fresh copy running.
    patient = {"bus": {"heartbeat_liveness": 60}}
    k = RunningKernel(home_dir, merge(patient, FAST_RESTART, LIGHT_MAP, TESTWORKER, grace)).start()
    with k.client() as client:
        running = home_dir / "hang-started"
        client.send("testworker", FaultRequest("hang_gil", seconds=300, started=str(running)), timeout=120)
        wait_for(running.exists, 20, what="the hang under way")
    out = cli(home_dir, "stop").stdout
    assert "testworker" in out and "killed after 1 s grace" in out
    assert "parser#1" in out


@pytest.mark.light_map
def test_two_homes_run_side_by_side(kernel: RunningKernel) -> None:
    other_root = short_tmpdir()
    other = RunningKernel(other_root, merge(FAST_RESTART, LIGHT_MAP))
    try:
        other.start()
        assert other.kernel_pid != kernel.kernel_pid
        mine, theirs = kernel.pids(), other.pids()
        assert not set(mine.values()) & set(theirs.values())
        with other.client() as client:
            assert client.request("kernel", PingRequest(), PingReply, timeout=5).body.pid == other.kernel_pid
        other.stop()
        assert kernel.pids() == mine
    finally:
        other.stop()
        remove_tree(other_root)


@pytest.mark.light_map
def test_logs_show_each_worker_and_pool_members(kernel: RunningKernel) -> None:
    out = cli(kernel.root, "logs", "parser").stdout
    assert "parser#1.log" in out and "parser#2.log" in out and "parser#2 READY" in out
    assert "kernel" in cli(kernel.root, "logs", "kernel").stdout
    assert "no worker named" in cli(kernel.root, "logs", "nope", check=False).stderr
    follow = cli_process(kernel.root, "logs", "testworker", "-f", stdout=subprocess.PIPE)
    try:
        cli(kernel.root, "restart", "testworker")
        assert follow.stdout is not None
        wait_for(lambda: "stopped cleanly" in (follow.stdout.readline() or ""), 15, 0, "followed log line")
    finally:
        follow.kill()
        follow.wait()


@pytest.mark.light_map
def test_worker_run_takes_a_worker_into_the_foreground_and_gives_it_back(kernel: RunningKernel) -> None:
    old_pid = kernel.worker("testworker")["pid"]
    fg = cli_process(kernel.root, "worker", "run", "testworker", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        w = kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)
        assert w["pid"] == fg.pid
        wait_for(
            lambda: not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == psutil.STATUS_ZOMBIE,
            10,
            what="supervisor's copy gone",
        )
        with kernel.client() as client:
            assert client.request("testworker", PingRequest(), PingReply, timeout=5).body.pid == fg.pid
        fg.send_signal(signal.SIGINT)
        assert fg.wait(timeout=15) == 0
        back = kernel.wait_state("testworker", "RUNNING", other_pid_than=fg.pid)
        assert psutil.Process(back["pid"]).ppid() == kernel.kernel_pid
        # Stopped in its terminal, the copy said goodbye: a handover back, no error (was "disconnected").
        assert (back["last_error"], back.get("past_error")) == (None, None), back
        line = next(x for x in cli(kernel.root, "status").stdout.splitlines() if x.startswith("testworker"))
        assert "disconnected" not in line, line
        with kernel.client() as client:
            assert client.request("testworker", PingRequest(), PingReply, timeout=5).body.pid == back["pid"]
    finally:
        if fg.poll() is None:
            fg.kill()
        fg.wait()


@pytest.mark.light_map
def test_worker_run_killed_hard_is_taken_back_at_once(kernel: RunningKernel) -> None:
    old_pid = kernel.worker("testworker")["pid"]
    fg = cli_process(kernel.root, "worker", "run", "testworker", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)
        assert kernel.worker("testworker")["pid"] == fg.pid
        os.kill(fg.pid, signal.SIGKILL)
        fg.wait()
        back = kernel.wait_state("testworker", "RUNNING", other_pid_than=fg.pid, timeout=5)
        assert psutil.Process(back["pid"]).ppid() == kernel.kernel_pid
    finally:
        if fg.poll() is None:
            fg.kill()


@pytest.mark.light_map
def test_a_dropped_worker_run_copy_that_wakes_up_is_told_to_go(kernel: RunningKernel) -> None:
    """A GIL stall longer than the heartbeat liveness: the kernel takes the worker back, and the
    stalled foreground copy, once it wakes, is dismissed instead of lingering unrouted."""
    old_pid = kernel.worker("testworker")["pid"]
    fg = cli_process(kernel.root, "worker", "run", "testworker", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)
        assert kernel.worker("testworker")["pid"] == fg.pid
        with kernel.client() as client, pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: "):
            client.request("testworker", FaultRequest("hang_gil", seconds=6), PingReply, timeout=30)
        back = kernel.wait_state("testworker", "RUNNING", other_pid_than=fg.pid)
        assert psutil.Process(back["pid"]).ppid() == kernel.kernel_pid
        assert fg.wait(timeout=20) == 0
        assert kernel.worker("testworker")["pid"] == back["pid"]
        # A dismissal of a lost worker is a fault, and its log says so (a requested restart's stop does not).
        ours = [line for line in kernel.home.log_file("testworker").read_text().splitlines() if f"[{fg.pid}]:" in line]
        assert any(" WARNING " in line and "dismissed this worker" in line for line in ours), ours
    finally:
        if fg.poll() is None:
            fg.kill()
        fg.wait()


def test_restart_is_refused_while_stopping_and_stop_still_completes(home_dir: Path) -> None:
    # The stop stays under way for the testworker's whole grace (10 s): its job sleeps on (a graceful stop
    # lets the job in hand finish) while its heartbeats go on. A job holding the GIL would not do: its
    # missed heartbeats get it dropped after 3 s, and a CLI slow to start on a loaded machine then found the
    # stop already done and the kernel gone.
    grace = {"workers": {"testworker": {"restart": {"stop_grace_s": 10.0}}}}
    k = RunningKernel(home_dir, merge(FAST_RESTART, LIGHT_MAP, TESTWORKER, grace)).start()
    with k.client() as client:
        running = home_dir / "sleep-started"
        client.send("testworker", FaultRequest("hang_sleep", seconds=30, started=str(running)), timeout=60)
        wait_for(running.exists, 20, what="the job under way")
    stopper = cli_process(home_dir, "stop", stdout=subprocess.PIPE)
    wait_for(lambda: k.worker("parser#1")["state"] != "RUNNING", 10, what="stop under way")
    refused = cli(home_dir, "restart", "parser", check=False)
    assert refused.returncode != 0 and "stopping" in refused.stderr
    out, _ = stopper.communicate(timeout=30)
    assert stopper.returncode == 0 and "foldermind stopped." in out


def test_a_requested_restart_stops_the_worker_without_a_warning(home_dir: Path) -> None:
    """A restart a person asks for is no fault: the old process's heartbeats, going on while its job in hand
    finishes (a graceful stop), are answered, not met with a dismissal it would log as a WARNING."""
    grace = {"workers": {"testworker": {"restart": {"stop_grace_s": 60.0}}}}
    k = RunningKernel(home_dir, merge(FAST_RESTART, LIGHT_MAP, TESTWORKER, grace)).start()
    try:
        old = k.worker("testworker")["pid"]
        with k.client() as client:
            running = home_dir / "sleep-started"
            # Three heartbeats go by while the job sleeps on after the restart's SIGTERM.
            client.send("testworker", FaultRequest("hang_sleep", seconds=3, started=str(running)), timeout=60)
            wait_for(running.exists, 20, what="the job under way")
            cli(home_dir, "restart", "testworker")
            k.wait_state("testworker", "RUNNING", timeout=60, other_pid_than=old)
        log = k.home.log_file("testworker")
        wait_for(lambda: f"[{old}]: testworker stopped cleanly" in log.read_text(), 60, what="the old one's stop")
        ours = [line for line in log.read_text().splitlines() if f"[{old}]:" in line]
        warned = [line for line in ours if " WARNING " in line and "fault requested" not in line]
        assert warned == [], warned
    finally:
        k.stop()
