"""A worker asked to stop while it is still starting stops cleanly (workers/__main__.py): it exits 0, where it ended
"killed by signal 15" (SIGTERM's default action, before its job loop had taken the signal over).

Real kernel, real processes. The fault worker (tests/faultworker.py, ``FOLDERMIND_FAULT=held_import``) holds in the
import of its own module, where a front door spends seconds importing its libraries (mcp, uvicorn, pydantic) on a
busy machine; then the real front door, stopped while it still imports them (it has used more CPU time than an
interpreter's own start, and has not said READY).
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

import psutil

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import StopReply, StopRequest
from tests.config import merge
from tests.helpers import FAST_RESTART, LIGHT_MAP, TESTWORKER, RunningKernel, cli_process, only_workers, wait_for

INTERPRETER_START_CPU_S = 0.15
"""More CPU time than a Python interpreter's own start (~0.03 s here): a worker past it is importing its modules."""


def started(root: Path, config: dict[str, Any]) -> tuple[RunningKernel, subprocess.Popen[str]]:
    """A kernel in the foreground of a child process, not waited for: one of its workers is still starting."""
    k = RunningKernel(root, config)
    proc = cli_process(root, "start", "--foreground", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: k.home.pid_file.exists() and k.home.pid_file.read_text().strip(), 60, what="the kernel's pid")
    k.kernel_pid = int(k.home.pid_file.read_text())
    return k, proc


def stop_report(k: RunningKernel) -> dict[str, str]:
    with BusClient(k.home.bus_endpoint, name="stopper") as client:
        return dict(client.request("kernel", StopRequest(), StopReply, timeout=120).body.report)


def ended(k: RunningKernel, proc: subprocess.Popen[str]) -> None:
    """The kernel gone: it exits after its stop report (waited for: a stop asked again meanwhile waits it out)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(60)
    k.stop()


def starting_pid(k: RunningKernel, name: str) -> int | None:
    w = k.worker(name)
    return int(w["pid"]) if w["state"] == "STARTING" and w["pid"] else None


def test_a_worker_stopped_while_it_imports_its_modules_exits_cleanly(home_dir: Path) -> None:
    flag = home_dir / "import-held"
    flag.touch()
    worker = {"env": {"FOLDERMIND_FAULT": "held_import", "FOLDERMIND_FAULT_WHILE": str(flag)}}
    config = merge(FAST_RESTART, LIGHT_MAP, TESTWORKER, {"workers": {"testworker": worker}})
    k, proc = started(home_dir, config)
    try:
        wait_for(lambda: Path(f"{flag}.held").exists(), 60, 0.05, "the test worker held in its import")
        assert starting_pid(k, "testworker"), k.worker("testworker")
        report = stop_report(k)
        assert report["testworker"] == "exited 0", report  # was: killed by signal 15
    finally:
        flag.unlink(missing_ok=True)
        ended(k, proc)


def test_a_front_door_stopped_while_it_starts_exits_cleanly(home_dir: Path) -> None:
    config = merge(FAST_RESTART, only_workers("frontdoor"), {"mcp": {"port": 0}})
    k, proc = started(home_dir, config)
    try:
        pid = wait_for(lambda: starting_pid(k, "frontdoor"), 60, 0.02, "the front door spawned")
        cpu = psutil.Process(pid)
        wait_for(lambda: sum(cpu.cpu_times()[:2]) > INTERPRETER_START_CPU_S, 60, 0.01, "the front door importing")
        assert starting_pid(k, "frontdoor") == pid, k.worker("frontdoor")  # no READY yet: still starting
        report = stop_report(k)
        assert report["frontdoor"] == "exited 0", report  # was: killed by signal 15
    finally:
        ended(k, proc)
