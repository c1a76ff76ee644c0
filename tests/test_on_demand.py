"""On-demand workers with real processes: a slot that is not running while idle is a legal state (IDLE), not a
crash; a request for its service starts it and is answered; a crash with a job in hand is still a crash.

The fault worker runs on demand with a 1 s idle time here (the default map's llm and embedder wait minutes).
"""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import PingReply, PingRequest
from tests.config import Config, merge
from tests.faultworker import FaultRequest
from tests.helpers import FAST_RESTART, LIGHT_MAP, TESTWORKER, RunningKernel, cli, wait_for

ON_DEMAND = merge(TESTWORKER, {"workers": {"testworker": {"on_demand": True, "idle_exit_s": 1.0}}})


def on_demand_kernel(home: Path, extra: Config | None = None) -> RunningKernel:
    return RunningKernel(home, merge(FAST_RESTART, LIGHT_MAP, ON_DEMAND, extra or {})).start()


def ping(kernel: RunningKernel, timeout: float = 20.0) -> int:
    with kernel.client() as client:
        return client.request("testworker", PingRequest(), PingReply, timeout=timeout).body.pid


def test_an_on_demand_worker_waits_idle_starts_for_a_request_and_exits_idle_without_a_restart(home_dir: Path) -> None:
    kernel = on_demand_kernel(home_dir)
    try:
        w = kernel.worker("testworker")
        assert (w["state"], w["pid"], w["rss_bytes"]) == ("IDLE", None, None)  # not started with the kernel
        pid = ping(kernel)
        assert kernel.worker("testworker")["pid"] == pid
        w = kernel.wait_state("testworker", "IDLE", timeout=15)
        assert (w["pid"], w["restarts"], w["last_error"]) == (None, 0, None)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        reason = kernel.collect_reason("testworker", "IDLE")
        assert "went idle" in reason and "exited 0" in reason, reason
        rows = cli(home_dir, "status").stdout.splitlines()
        line = next(x for x in rows if x.startswith("testworker"))
        assert line.split()[1] == "IDLE" and line.endswith("on demand: starts with the first request for it"), line
        # The light map turns the llm off: status says so rather than leaving it out.
        off = next(x for x in rows if x.startswith("llm "))
        assert off.split()[1] == "DISABLED" and off.endswith("enabled = false in [workers.llm]"), off
        again = ping(kernel)  # started again for the next request
        assert again != pid and kernel.worker("testworker")["restarts"] == 0
    finally:
        kernel.stop()


def test_a_crash_of_an_on_demand_worker_with_a_job_in_hand_fails_the_job_and_restarts_it(home_dir: Path) -> None:
    kernel = on_demand_kernel(home_dir)
    try:
        first = ping(kernel)
        with pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: ") as err, kernel.client() as client:
            client.request("testworker", FaultRequest("crash"), PingReply, timeout=20)
        assert err.value.retryable
        w = kernel.wait_state("testworker", "RUNNING", other_pid_than=first)  # restarted by policy, not IDLE
        assert w["restarts"] == 1 and "signal 9" in (w["last_error"] or "")
        assert kernel.wait_state("testworker", "IDLE", timeout=15)["restarts"] == 1  # then idle as usual
    finally:
        kernel.stop()


def test_a_request_waiting_for_a_worker_to_start_still_misses_its_deadline(home_dir: Path) -> None:
    kernel = on_demand_kernel(home_dir, {"workers": {"testworker": {"env": {"FOLDERMIND_FAULT": "slow_start"}}}})
    try:
        with pytest.raises(JobError, match=f"^{ErrorCode.DEADLINE_EXCEEDED}: ") as err, kernel.client() as client:
            client.request("testworker", PingRequest(), PingReply, timeout=1.0)
        assert err.value.retryable  # no worker ever started on it
        assert ping(kernel) > 0  # the worker it started answers the next one
    finally:
        kernel.stop()


def test_restart_starts_an_idle_slot_and_stop_ends_a_kernel_whose_slot_is_idle(home_dir: Path) -> None:
    kernel = on_demand_kernel(home_dir)
    try:
        assert "testworker" in cli(home_dir, "restart", "testworker").stdout
        w = kernel.wait_state("testworker", "RUNNING")
        assert w["pid"] is not None and w["restarts"] == 1
        kernel.wait_state("testworker", "IDLE", timeout=15)
        out = cli(home_dir, "stop").stdout
        assert "testworker" in out
        wait_for(lambda: not psutil.pid_exists(kernel.kernel_pid), 20, 0.1, "the kernel gone")
    finally:
        kernel.stop()
