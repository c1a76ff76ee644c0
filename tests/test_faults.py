"""Fault injection against real processes: the kernel keeps serving whatever a worker does."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    EchoReply,
    EchoRequest,
    PingReply,
    PingRequest,
)
from tests.config import merge
from tests.faultworker import FaultReply, FaultRequest
from tests.helpers import FAST_RESTART, LIGHT_MAP, TESTWORKER, RunningKernel, cli, kill9, wait_for

UNAVAILABLE = f"^({ErrorCode.SERVICE_UNAVAILABLE}|{ErrorCode.SHUTTING_DOWN}): "
"""What an error says when no worker can take the job (the first words of a JobError)."""


def ping(kernel: RunningKernel, target: str, timeout: float = 5.0) -> PingReply:
    with kernel.client() as client:
        return client.request(target, PingRequest(), PingReply, timeout=timeout).body


@pytest.mark.light_map
def test_kill9_mid_job_fails_the_caller_at_once_and_the_worker_comes_back(kernel: RunningKernel) -> None:
    before = kernel.pids()
    old_pid = before["testworker"]
    client = kernel.client()
    t0 = time.monotonic()
    with pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: ") as err:
        client.request("testworker", FaultRequest("crash"), PingReply, timeout=30)
    elapsed = time.monotonic() - t0
    assert elapsed < 3.0, f"worker_lost took {elapsed:.2f} s"
    assert err.value.retryable
    w = kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)
    assert w["pid"] != old_pid and w["restarts"] == 1
    assert "signal 9" in (w["last_error"] or "")
    assert ping(kernel, "testworker").pid == w["pid"]
    after = kernel.pids()
    others = {n: p for n, p in before.items() if n != "testworker"}
    assert {n: after[n] for n in others} == others, "other workers were disturbed"
    assert all(w["restarts"] == 0 for w in kernel.status().workers if w["name"] != "testworker")


def overrun(kernel: RunningKernel, fault: FaultRequest, timeout: float) -> None:
    """Send ``fault`` with a deadline ``timeout`` s away: the caller hears deadline_exceeded then."""
    t0 = time.monotonic()
    with pytest.raises(JobError, match=f"^{ErrorCode.DEADLINE_EXCEEDED}: "):
        kernel.client().request("testworker", fault, PingReply, timeout=timeout)
    assert time.monotonic() - t0 < timeout + 1.0


@pytest.mark.light_map
def test_hang_sleeping_gets_deadline_exceeded_and_is_replaced(kernel: RunningKernel) -> None:
    """Past its deadline the caller hears so at once; a worker still busy when the grace after it
    ([bus] overrun_grace_s, 10 s) runs out is stuck: killed and replaced."""
    old_pid = kernel.worker("testworker")["pid"]
    t0 = time.monotonic()
    overrun(kernel, FaultRequest("hang_sleep", seconds=60), 1.5)
    w = kernel.wait_state("testworker", "RUNNING", timeout=60, other_pid_than=old_pid)
    assert "deadline" in (w["last_error"] or "") and "still busy 10 s later" in (w["last_error"] or "")
    assert time.monotonic() - t0 >= 1.5 + 10, "replaced before its grace ran out"
    assert not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.light_map
def test_a_worker_that_overruns_a_deadline_but_answers_within_the_grace_is_kept(kernel: RunningKernel) -> None:
    """Slow is not hung (a CPU-starved model call overshoots by a slice): the caller gets
    deadline_exceeded at its deadline, the worker keeps its slot until it answers, and is kept."""
    old_pid = kernel.worker("testworker")["pid"]
    t0 = time.monotonic()
    overrun(kernel, FaultRequest("hang_sleep", seconds=4), 1)
    # The next job waits for the slot (the sleep does not look for the cancel), then runs there.
    assert ping(kernel, "testworker", timeout=20).pid == old_pid
    assert time.monotonic() - t0 >= 4.0, "a second job went to a worker whose job thread was busy"
    # One that looks for the cancel (sent to it at the deadline) stops at once and is kept too.
    t1 = time.monotonic()
    overrun(kernel, FaultRequest("wait_cancel", seconds=60), 1)
    assert ping(kernel, "testworker", timeout=20).pid == old_pid
    assert time.monotonic() - t1 < 5.0
    w = kernel.worker("testworker")
    assert (w["pid"], w["restarts"], w["state"]) == (old_pid, 0, "RUNNING")
    log = (kernel.root / "logs" / "kernel.log").read_text()
    assert log.count("testworker answered a job after its deadline; kept") == 2


@pytest.mark.light_map
def test_hang_holding_the_gil_is_detected_and_replaced(kernel: RunningKernel) -> None:
    """The heartbeat thread cannot run either: the deadline (or the missed heartbeats) catch it."""
    old_pid = kernel.worker("testworker")["pid"]
    client = kernel.client()
    with pytest.raises(JobError, match=f"^({ErrorCode.DEADLINE_EXCEEDED}|{ErrorCode.WORKER_LOST}): "):
        client.request("testworker", FaultRequest("hang_gil", seconds=120), PingReply, timeout=2)
    kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)
    assert ping(kernel, "testworker").pid != old_pid


@pytest.mark.light_map
def test_gil_hang_without_deadline_pressure_is_caught_by_missed_heartbeats(kernel: RunningKernel) -> None:
    old_pid = kernel.worker("testworker")["pid"]
    client = kernel.client()
    t0 = time.monotonic()
    with pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: ") as err:
        client.request("testworker", FaultRequest("hang_gil", seconds=120), PingReply, timeout=30)
    assert time.monotonic() - t0 < 6.0
    assert "heartbeat" in str(err.value)
    kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)


@pytest.mark.light_map
def test_a_model_load_holding_the_gil_past_the_liveness_is_not_taken_for_a_hang(kernel: RunningKernel) -> None:
    """A model load (torch, ONNX, the GGUF) can hold the GIL for seconds on a starved CPU, so the
    heartbeat thread misses beats (seen at load average 15+: restart loops). Declared as a load, it
    gets [bus] loading_liveness (15) heartbeats: a 6 s stall (twice the usual 3) is survived on both
    sides: the kernel keeps the worker, and the worker does not take its own stall for the kernel's
    silence and exit."""
    old_pid = kernel.worker("testworker")["pid"]
    reply = kernel.client().request("testworker", FaultRequest("load_gil", seconds=6), FaultReply, timeout=30).body
    assert reply.pid == old_pid
    w = kernel.worker("testworker")
    assert (w["pid"], w["restarts"], w["state"]) == (old_pid, 0, "RUNNING")
    assert ping(kernel, "testworker").pid == old_pid


@pytest.mark.light_map
def test_a_model_load_that_hangs_is_still_caught_by_the_longer_liveness(kernel: RunningKernel) -> None:
    old_pid = kernel.worker("testworker")["pid"]
    t0 = time.monotonic()
    with pytest.raises(JobError, match=f"^{ErrorCode.WORKER_LOST}: ") as err:
        kernel.client().request("testworker", FaultRequest("load_gil", seconds=120), FaultReply, timeout=60)
    took = time.monotonic() - t0
    assert "missed 15 heartbeats while loading a model" in str(err.value)
    assert 15 <= took < 25, took
    kernel.wait_state("testworker", "RUNNING", other_pid_than=old_pid)


@pytest.mark.light_map
def test_garbage_frames_and_wrong_version_do_not_stop_the_broker(kernel: RunningKernel) -> None:
    client = kernel.client()
    # From inside a worker (junk, truncated, undecodable, wrong version, no id, unknown kind) ...
    assert client.request("testworker", FaultRequest("garbage"), FaultReply, timeout=10).body.action == "garbage"
    # ... and from a raw client on the bus.
    frames.send_raw_for_tests(client.sock, [b"\x00" * 10])
    frames.send_raw_for_tests(client.sock, [b"XY", b"\x00", b"\x00", b"\x00"])
    wrong_version = frames.raw_header(v=2, kind="ping.request", id="z", to="kernel")
    frames.send_raw_for_tests(client.sock, [wrong_version, b"\x80"])
    frames.send_raw_for_tests(client.sock, [frames.MAGIC + b"\xff" * 100, b"\x80"])
    # Oversized as a whole (each frame under ZeroMQ's per-frame cap): refused, and the sender told.
    big = b"\x00" * (40 * 1024 * 1024)
    with pytest.raises(JobError) as err:
        client.request("testworker", EchoRequest(), EchoReply, buffers=[big, big], timeout=10)
    assert err.value.code == "message_too_large"
    header = frames.raw_header(v=1, kind="ping.request", id="big", to="kernel", src="t")
    # One frame over the cap: ZeroMQ drops that connection; the broker never sees it.
    with kernel.client("huge") as huge:
        frames.send_raw_for_tests(huge.sock, [header, b"\x80", b"\x00" * (65 * 1024 * 1024)])
    assert ping(kernel, "kernel").name == "kernel"
    assert ping(kernel, "parser").name.startswith("parser#")
    assert ping(kernel, "testworker").pid == kernel.worker("testworker")["pid"]
    log_file = kernel.home.log_dir / "kernel.log"
    wait_for(lambda: "oversized message" in log_file.read_text(), 10, what="oversize logged")
    log = log_file.read_text()
    assert "unsupported protocol version 2" in log
    assert "bad magic" in log
    assert "undecodable msgpack" in log
    assert "truncated message" in log
    kernel.wait_all_running(60)  # settled: on-demand workers may be starting or leaving for a moment


@pytest.mark.light_map
def test_unknown_service_and_unknown_kind_fail_fast_with_typed_errors(kernel: RunningKernel) -> None:
    client = kernel.client()
    t0 = time.monotonic()
    with pytest.raises(JobError, match=UNAVAILABLE):
        client.request("no-such-service", PingRequest(), PingReply, timeout=30)
    assert time.monotonic() - t0 < 1.0
    with pytest.raises(JobError) as err:  # parsers have no fault handler
        client.request("parser", FaultRequest("crash"), FaultReply, timeout=5)
    assert err.value.code == "unknown_kind"
    with pytest.raises(JobError) as err:
        client.request("kernel", FaultRequest("crash"), FaultReply, timeout=5)
    assert err.value.code == "unknown_kind"
    assert all(w["restarts"] == 0 for w in kernel.status().workers)


def test_crash_loop_ends_failed_with_an_event_and_restart_brings_it_back(home_dir: Path) -> None:
    switch = home_dir / "crash-switch"
    switch.write_text("on")
    flaky = {
        "module": "tests.faultworker",
        "restart": {"max_restarts": 3, "window_s": 60.0},
        "env": {"FOLDERMIND_FAULT": "crash_on_start", "FOLDERMIND_FAULT_WHILE": str(switch)},
    }
    config = merge(FAST_RESTART, LIGHT_MAP, {"workers": {"flaky": flaky}})
    k = RunningKernel(home_dir, config)
    try:
        # Subscribed before the start (ZeroMQ reconnects once the kernel binds): `start` returns only
        # once the front door serves, and the crash loop may be over by then.
        k.connect_events()
        cli(home_dir, "start")
        k.kernel_pid = int(k.home.pid_file.read_text())
        w = k.wait_state("flaky", "FAILED", timeout=30)
        assert "restart limit" in k.collect_reason("flaky", "FAILED")
        assert "status 3" in (w["last_error"] or "")
        assert w["pid"] is None and w["restarts"] == 3
        with k.client() as client, pytest.raises(JobError, match=UNAVAILABLE):
            client.request("flaky", PingRequest(), PingReply, timeout=5)
        k.wait_state("parser#1", "RUNNING")  # the rest of the map is unaffected
        switch.unlink()
        out = cli(home_dir, "restart", "flaky").stdout
        assert "flaky" in out
        w = k.wait_state("flaky", "RUNNING")
        assert ping(k, "flaky").pid == w["pid"]
    finally:
        k.stop()


@pytest.mark.light_map
def test_restart_parser_changes_only_the_parser_pids(kernel: RunningKernel) -> None:
    before = kernel.pids()
    cli(kernel.root, "restart", "parser")
    for name in ("parser#1", "parser#2"):
        kernel.wait_state(name, "RUNNING", other_pid_than=before[name])
    after = kernel.pids()
    assert after["parser#1"] != before["parser#1"] and after["parser#2"] != before["parser#2"]
    assert {n: p for n, p in after.items() if not n.startswith("parser")} == {
        n: p for n, p in before.items() if not n.startswith("parser")
    }
    cli(kernel.root, "restart", "parser#2")
    kernel.wait_state("parser#2", "RUNNING", other_pid_than=after["parser#2"])
    assert kernel.pids()["parser#1"] == after["parser#1"]
    refused = cli(kernel.root, "restart", "nope", check=False).stderr
    known = refused.split("no worker named 'nope' (known: ", 1)[1].split(")", 1)[0].split(", ")
    assert {"parser#1", "parser#2", "parser"} <= set(known) and "nope" not in known, refused  # the names it takes


def test_kill9_of_the_kernel_takes_every_worker_with_it(kernel: RunningKernel) -> None:
    workers = kernel.descendants()
    assert len(workers) == len([w for w in kernel.status().workers if w["pid"]])  # IDLE ones have no process
    kill9(kernel.kernel_pid)
    wait_for(
        lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers),
        10,
        what="every worker gone",
    )
    # The stale pid file and sockets are recognised and cleaned by the next start.
    assert kernel.home.pid_file.exists()
    k2 = RunningKernel(kernel.root, merge(FAST_RESTART, TESTWORKER)).start()
    try:
        assert k2.kernel_pid != kernel.kernel_pid
        assert ping(k2, "testworker").name == "testworker"
    finally:
        k2.stop()


def test_a_worker_that_never_sends_ready_is_killed_and_retried_with_growing_backoff(home_dir: Path) -> None:
    mute = {
        "module": "tests.faultworker",
        "restart": {"start_timeout_s": 1.5, "backoff_initial_s": 0.2, "backoff_jitter": 0.0, "max_restarts": 2},
        "env": {"FOLDERMIND_FAULT": "no_ready"},
    }
    config = merge(FAST_RESTART, LIGHT_MAP, {"workers": {"mute": mute}})
    k = RunningKernel(home_dir, config)
    try:
        k.connect_events()  # before the start, as above: the backoff events may all come before it returns
        cli(home_dir, "start")
        k.kernel_pid = int(k.home.pid_file.read_text())
        w = k.wait_state("mute", "FAILED", timeout=30)
        assert "no READY within 1.5 s" in (w["last_error"] or "")
        delays = [
            float(ev.reason.rsplit("restarting in ", 1)[1].split(" s")[0])
            for ev in k.collect_events()
            if ev.name == "mute" and ev.new == "BACKOFF"
        ]
        assert delays == [0.2, 0.4][-len(delays) :] and delays, delays
        # The bystander is unaffected: it comes up (on a loaded machine it may still be starting) and never restarts.
        assert k.wait_state("parser#1", "RUNNING", timeout=60)["restarts"] == 0
    finally:
        k.stop()


def test_a_reply_too_big_for_the_bus_fails_the_caller_and_spares_the_worker(home_dir: Path) -> None:
    k = RunningKernel(home_dir, merge(FAST_RESTART, TESTWORKER, LIGHT_MAP, {"bus": {"max_message_mb": 1}})).start()
    try:
        pid = k.worker("testworker")["pid"]
        with k.client() as client:
            # Walk down from 1 MiB until the request fits but the echoed reply, whose header is a little
            # bigger, does not: the caller must hear so at once, not after the deadline.
            seen_reply_refusal = False
            for size in range(1024 * 1024 - 32, 1024 * 1024 - 600, -4):  # one frame stays under the cap
                t0 = time.monotonic()
                try:
                    client.request("testworker", EchoRequest(data=b"x" * size), EchoReply, timeout=20)
                    break  # both fit from here on
                except JobError as exc:
                    assert exc.code == "message_too_large" and time.monotonic() - t0 < 5
                    if "reply" in str(exc):
                        seen_reply_refusal = True
                        break
            assert seen_reply_refusal
            assert client.request("testworker", PingRequest(), PingReply, timeout=5).body.pid == pid
        assert k.worker("testworker")["restarts"] == 0
    finally:
        k.stop()


@pytest.mark.light_map
def test_job_cancel_frees_a_queued_job_at_once_and_stops_a_running_one_only_for_its_caller(
    kernel: RunningKernel,
) -> None:
    """job.cancel: a queued job is answered `cancelled` by the broker; a running one is told through the
    worker's heartbeat socket and ends early, but only when its own caller cancels it."""
    kernel.wait_state("testworker", "RUNNING")
    pid = kernel.worker("testworker")["pid"]
    owner, queued_owner, stranger = kernel.client("owner"), kernel.client("queued"), kernel.client("stranger")
    running = owner.send("testworker", FaultRequest("wait_cancel", 60), timeout=30)
    wait_for(lambda: kernel.worker("testworker")["in_flight"] == 1, 10, what="the wait_cancel job in hand")
    queued = queued_owner.send("testworker", PingRequest(), timeout=30)
    queued_owner.cancel(queued)
    reply = queued_owner.receive(5)
    assert (reply.env.cid, reply.env.status) == (queued.id, "error")
    assert reply.env.error is not None and reply.env.error.code == "cancelled"

    stranger.cancel(running)  # not its job: ignored
    assert not owner.sock.poll(1000), "a stranger's cancel ended the job"
    owner.cancel(running)
    reply = owner.receive(10)  # well inside the 30 s deadline and the 60 s wait
    assert reply.env.cid == running.id and reply.env.error is not None
    error = (reply.env.error.code, reply.env.error.message)
    assert error == ("cancelled", "fault wait_cancel: cancelled by the caller")
    assert ping(kernel, "testworker").pid == pid  # the same worker, free again


@pytest.mark.light_map
def test_request_with_a_cancel_event_ends_cancelled(kernel: RunningKernel) -> None:
    import threading

    kernel.wait_state("testworker", "RUNNING")
    cancel = threading.Event()
    errors: list[JobError] = []

    def call() -> None:
        with kernel.client("cancel-event") as client:
            try:
                client.request("testworker", FaultRequest("wait_cancel", 60), FaultReply, timeout=30, cancel=cancel)
            except JobError as exc:
                errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: kernel.worker("testworker")["in_flight"] == 1, 10, what="the job in hand")
    cancel.set()
    thread.join(15)
    assert not thread.is_alive()
    assert [e.code for e in errors] == ["cancelled"]
