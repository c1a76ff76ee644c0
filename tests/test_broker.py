"""The broker's job table, row by row (docs/protocol.md, "The job table" and "Routing"), in-process.

A real ``Broker`` on a real ZeroMQ ROUTER (inproc), with DEALER sockets standing in for workers and callers
and a membership object standing in for the supervisor. Time is passed to ``tick`` explicitly, so a deadline,
an overrun grace or a heartbeat liveness runs out without waiting for it: each test takes milliseconds. The
process-level tests (test_faults.py, test_process_map.py) prove the same rules end to end with real workers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from foldermind.kernel.bus.broker import Broker
from foldermind.kernel.bus.identities import HB_SUFFIX, REMOTE_PREFIX
from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo
from foldermind.protocol.messages import (
    Disconnect,
    EchoReply,
    EchoRequest,
    Envelope,
    JobCancel,
    Message,
    WorkerReady,
)
from foldermind.protocol.runtime.config import BusPolicy
from tests.helpers import wait_for


class Membership:
    """The supervisor's side: which names may serve, and what the broker reported gone."""

    def __init__(self) -> None:
        self.serving: set[str] = set()
        self.refused: set[str] = set()
        self.gone: list[tuple[str, str, bool]] = []
        self.on_demand: set[str] = set()
        self.demanded: list[str] = []
        self.idle_asked: list[str] = []

    def accept_ready(self, name: str, service: str, pid: int) -> bool:
        return name not in self.refused

    def worker_gone(self, name: str, pid: int, reason: str, kill: bool) -> None:
        self.gone.append((name, reason, kill))

    def may_serve(self, target: str) -> bool:
        return target in self.serving

    def demand(self, target: str) -> None:
        self.demanded.append(target)

    def went_idle(self, name: str, pid: int) -> bool:
        self.idle_asked.append(name)
        return name in self.on_demand


class Worker:
    """A worker's two sockets: jobs, and heartbeats (where a ``job.cancel`` arrives)."""

    def __init__(self, bus: Bus, name: str, service: str, capacity: int, background: tuple[str, ...] = ()) -> None:
        self.name, self.ident = name, f"{name}.1.{uuid.uuid4().hex[:6]}".encode()
        self.jobs = bus.socket(self.ident)
        self.hb = bus.socket(self.ident + HB_SUFFIX)
        ready = WorkerReady(name, service, 1, capacity, background=list(background))
        frames.send(self.jobs, Envelope(kind=WorkerReady.KIND, src=name), ready)
        bus.step()

    def answer(self, bus: Bus, job: frames.Packet, data: bytes = b"done") -> None:
        frames.send(self.jobs, job.env.reply(self.name), EchoReply(data))
        bus.step()

    def fail(self, bus: Bus, job: frames.Packet, code: ErrorCode) -> None:
        frames.send(self.jobs, job.env.reply(self.name, status="error", error=ErrorInfo(code, "failed here")), {})
        bus.step()


class Bus:
    def __init__(self, policy: BusPolicy) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context.instance()
        self.address = f"inproc://broker-test-{uuid.uuid4().hex}"
        self.router: zmq.Socket[Any] = self.ctx.socket(zmq.ROUTER)
        self.router.bind(self.address)
        self.membership = Membership()
        self.broker = Broker(self.router, policy, self.membership)
        self.sockets: list[zmq.Socket[Any]] = [self.router]

    def socket(self, identity: bytes) -> zmq.Socket[Any]:
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.address)
        self.sockets.append(sock)
        return sock

    def step(self) -> None:
        """Let the broker read what was sent to it (inproc delivers at once; poll so it has arrived)."""
        if self.router.poll(1000):
            self.broker.on_readable()

    def worker(
        self, name: str, service: str | None = None, capacity: int = 1, background: tuple[str, ...] = ()
    ) -> Worker:
        self.membership.serving.update({name, service or name})
        return Worker(self, name, service or name, capacity, background)

    def request(
        self, caller: zmq.Socket[Any], to: str, deadline_s: float | None = 30.0, msg: Message | None = None
    ) -> Envelope:
        msg = msg or EchoRequest(b"x")
        env = Envelope(kind=msg.KIND, src="test", to=to, deadline=time.time() + deadline_s if deadline_s else 0)
        frames.send(caller, env, msg)
        self.step()
        return env

    def tick(self, ahead_s: float, *beating: Worker) -> None:
        """Run the broker's timers ``ahead_s`` from now; the ``beating`` workers' heartbeats went on meanwhile
        (a heartbeat stamps the real clock, so the fake one is stamped here instead)."""
        at = time.monotonic() + ahead_s
        for w in beating:
            self.broker.peers[w.ident].last_seen = at
        self.broker.tick(at)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close(0)


def received(sock: zmq.Socket[Any], timeout_s: float = 1.0) -> frames.Packet:
    assert sock.poll(int(timeout_s * 1000)), "nothing arrived"
    return frames.recv(sock, 0)


def nothing_for(sock: zmq.Socket[Any]) -> bool:
    return not sock.poll(50)


def error_of(packet: frames.Packet) -> tuple[str, bool, str]:
    assert packet.env.status == "error", packet.env
    info = packet.env.error
    assert info is not None
    return info.code, info.retryable, info.message


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(BusPolicy(overrun_grace_s=10.0, heartbeat_interval_s=1.0, heartbeat_liveness=3))
    yield b
    b.close()


def test_a_reply_reaches_its_caller_unchanged_and_the_worker_takes_the_next_queued_job(bus: Bus) -> None:
    worker, caller = bus.worker("indexer"), bus.socket(b"caller")
    first, second = bus.request(caller, "indexer"), bus.request(caller, "indexer")
    job = received(worker.jobs)
    assert job.env.id == first.id and nothing_for(worker.jobs)  # capacity 1: the second waits in the queue
    worker.answer(bus, job, b"first answer")
    reply = received(caller)
    assert (reply.env.cid, reply.env.status, reply.body()) == (first.id, "ok", EchoReply(b"first answer"))
    assert received(worker.jobs).env.id == second.id


def test_a_worker_that_disconnects_fails_its_jobs_with_a_retryable_worker_lost_at_once(bus: Bus) -> None:
    worker, caller = bus.worker("parser#1", "parser"), bus.socket(b"caller")
    env = bus.request(caller, "parser")
    received(worker.jobs)
    frames.send(worker.jobs, Envelope(kind=Disconnect.KIND, src="parser#1"), Disconnect("parser#1", "bye"))
    bus.step()
    reply = received(caller)
    assert reply.env.cid == env.id
    assert error_of(reply)[:2] == (ErrorCode.WORKER_LOST, True)
    assert bus.membership.gone == [("parser#1", "disconnected", False)]


def _ask_idle(bus: Bus, worker: Worker) -> None:
    env = Envelope(kind=Disconnect.KIND, src=worker.name, to="kernel")
    frames.send(worker.jobs, env, Disconnect(worker.name, Disconnect.IDLE))
    bus.step()


def test_an_idle_on_demand_worker_is_let_go_out_of_routing_and_the_next_job_asks_for_a_start(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    bus.membership.on_demand.add("llm")
    _ask_idle(bus, worker)
    answer = received(worker.jobs)
    assert (answer.env.kind, answer.body()) == (Disconnect.KIND, Disconnect("llm", Disconnect.IDLE))
    assert "llm" not in bus.broker.by_name and bus.membership.gone == []  # let go, not lost
    bus.request(caller, "llm")
    assert bus.membership.demanded == ["llm"] and nothing_for(caller)  # queued for the worker to be started
    new = bus.worker("llm")
    assert received(new.jobs).env.to == "llm" and nothing_for(worker.jobs)


def test_jobs_left_queued_when_an_on_demand_pool_member_is_ready_ask_for_the_next_member(bus: Bus) -> None:
    caller = bus.socket(b"caller")
    bus.membership.serving.add("parser")
    for _ in range(3):
        bus.request(caller, "parser")
    assert bus.membership.demanded == ["parser"] * 3  # the supervisor starts one at a time
    first = bus.worker("parser#1", "parser")
    assert received(first.jobs) and bus.membership.demanded == ["parser"] * 4  # two still wait


def test_an_idle_request_from_a_worker_a_job_was_routed_to_is_ignored_and_the_job_is_served(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    bus.membership.on_demand.add("llm")
    env = bus.request(caller, "llm")
    _ask_idle(bus, worker)  # crossed the job on the wire
    job = received(worker.jobs)
    assert job.env.id == env.id and nothing_for(worker.jobs)  # no idle answer behind it
    assert bus.membership.idle_asked == [] and "llm" in bus.broker.by_name
    worker.answer(bus, job)
    assert received(caller).env.cid == env.id


def test_a_worker_the_supervisor_does_not_let_go_idle_stays_in_routing(bus: Bus) -> None:
    worker, caller = bus.worker("indexer"), bus.socket(b"caller")
    _ask_idle(bus, worker)
    assert bus.membership.idle_asked == ["indexer"] and nothing_for(worker.jobs)
    bus.request(caller, "indexer")
    assert received(worker.jobs).env.to == "indexer" and bus.membership.demanded == []


def test_a_new_ready_for_the_same_name_fails_the_old_ones_jobs_with_worker_lost(bus: Bus) -> None:
    old, caller = bus.worker("embedder"), bus.socket(b"caller")
    bus.request(caller, "embedder")
    received(old.jobs)
    new = bus.worker("embedder")
    assert error_of(received(caller))[:2] == (ErrorCode.WORKER_LOST, True)
    bus.request(caller, "embedder")
    assert received(new.jobs).env.to == "embedder" and nothing_for(old.jobs)


def test_a_worker_that_misses_its_heartbeats_is_dropped_killed_and_its_callers_told_worker_lost(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    bus.request(caller, "llm")
    received(worker.jobs)
    bus.tick(1.0)  # within liveness: nothing happens
    assert bus.membership.gone == [] and nothing_for(caller)
    bus.tick(bus.broker.policy.liveness_s + 1.0)
    code, retryable, message = error_of(received(caller))
    assert (code, retryable) == (ErrorCode.WORKER_LOST, True) and "missed 3 heartbeats" in message
    assert bus.membership.gone == [("llm", "missed 3 heartbeats", True)]


def test_a_worker_loading_a_model_gets_the_longer_loading_liveness(bus: Bus) -> None:
    from foldermind.protocol.messages import Heartbeat

    worker = bus.worker("indexer")
    frames.send(worker.hb, Envelope(kind=Heartbeat.KIND, src="indexer"), Heartbeat("indexer", 0, loading=True))
    bus.step()
    received(worker.hb)  # the kernel answers every heartbeat
    bus.tick(bus.broker.policy.liveness_s + 1.0)
    assert bus.membership.gone == []
    bus.tick(bus.broker.policy.loading_liveness_s + 1.0)
    assert bus.membership.gone == [("indexer", "missed 15 heartbeats while loading a model", True)]


def test_a_deadline_at_the_worker_tells_the_caller_at_once_cancels_the_job_and_keeps_the_slot_busy(bus: Bus) -> None:
    worker, caller = bus.worker("parser"), bus.socket(b"caller")
    env = bus.request(caller, "parser", deadline_s=5.0)
    job = received(worker.jobs)
    later = bus.request(caller, "parser", deadline_s=60.0)
    bus.tick(6.0, worker)
    code, retryable, message = error_of(received(caller))
    assert (code, retryable) == (ErrorCode.DEADLINE_EXCEEDED, False) and "at parser" in message
    cancel = received(worker.hb)
    assert (cancel.env.kind, cancel.env.cid, cancel.body()) == (JobCancel.KIND, env.id, JobCancel("deadline"))
    assert nothing_for(worker.jobs)  # its job thread is still busy with the old job: nothing new goes there
    worker.answer(bus, job)  # the late answer is dropped, and the slot is free again
    assert received(worker.jobs).env.id == later.id
    assert nothing_for(caller) and bus.membership.gone == []


def test_a_worker_still_busy_when_the_overrun_grace_ends_is_presumed_stuck_and_killed(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    bus.request(caller, "llm", deadline_s=5.0)
    received(worker.jobs)
    bus.tick(6.0, worker)
    error_of(received(caller))
    bus.tick(15.0, worker)  # heartbeats go on (slow, not hung) while the grace lasts
    assert bus.membership.gone == []
    bus.tick(16.5, worker)
    assert bus.membership.gone == [("llm", "missed a job deadline and was still busy 10 s later", True)]


def test_with_no_overrun_grace_a_worker_past_a_deadline_is_replaced_at_once() -> None:
    b = Bus(BusPolicy(overrun_grace_s=0.0))
    try:
        worker, caller = b.worker("parser"), b.socket(b"caller")
        b.request(caller, "parser", deadline_s=5.0)
        received(worker.jobs)
        b.tick(6.0, worker)
        assert error_of(received(caller))[0] == ErrorCode.DEADLINE_EXCEEDED
        assert b.membership.gone == [("parser", "missed a job deadline", True)]
    finally:
        b.close()


def test_a_deadline_while_queued_is_deadline_exceeded_retryable_and_the_worker_is_left_alone(bus: Bus) -> None:
    worker, caller = bus.worker("embedder"), bus.socket(b"caller")
    bus.request(caller, "embedder", deadline_s=60.0)
    received(worker.jobs)
    queued = bus.request(caller, "embedder", deadline_s=5.0)
    bus.tick(6.0, worker)
    reply = received(caller)
    code, retryable, message = error_of(reply)
    assert (reply.env.cid, code, retryable) == (queued.id, ErrorCode.DEADLINE_EXCEEDED, True)
    assert "waiting for a free worker" in message
    assert nothing_for(worker.hb) and bus.membership.gone == []


def test_queued_jobs_fail_service_unavailable_when_their_target_can_no_longer_be_served(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    bus.request(caller, "llm")
    received(worker.jobs)
    queued = bus.request(caller, "llm")
    bus.broker.fail_unservable()
    assert nothing_for(caller)  # still servable: it waits
    bus.membership.serving.discard("llm")
    bus.broker.fail_unservable()
    reply = received(caller)
    assert (reply.env.cid, error_of(reply)[0]) == (queued.id, ErrorCode.SERVICE_UNAVAILABLE)


def test_a_cancel_while_queued_answers_cancelled_at_once_and_the_job_never_runs(bus: Bus) -> None:
    worker, caller = bus.worker("parser"), bus.socket(b"caller")
    bus.request(caller, "parser")
    running = received(worker.jobs)
    queued = bus.request(caller, "parser")
    frames.send(caller, Envelope(kind=JobCancel.KIND, src="test", cid=queued.id), JobCancel("caller gone"))
    bus.step()
    reply = received(caller)
    assert (reply.env.cid, error_of(reply)[0]) == (queued.id, ErrorCode.CANCELLED)
    worker.answer(bus, running)
    assert received(caller).env.status == "ok" and nothing_for(worker.jobs)


def test_a_cancel_while_a_worker_holds_the_job_goes_to_its_heartbeat_socket(bus: Bus) -> None:
    worker, caller = bus.worker("llm"), bus.socket(b"caller")
    env = bus.request(caller, "llm")
    received(worker.jobs)
    frames.send(caller, Envelope(kind=JobCancel.KIND, src="test", cid=env.id), JobCancel("caller gone"))
    bus.step()
    cancel = received(worker.hb)
    assert (cancel.env.kind, cancel.env.cid) == (JobCancel.KIND, env.id) and nothing_for(caller)


def test_only_the_caller_of_a_job_may_cancel_it(bus: Bus) -> None:
    worker, caller, stranger = bus.worker("llm"), bus.socket(b"caller"), bus.socket(b"stranger")
    env = bus.request(caller, "llm")
    received(worker.jobs)
    frames.send(stranger, Envelope(kind=JobCancel.KIND, src="x", cid=env.id), JobCancel("not mine"))
    bus.step()
    assert nothing_for(worker.hb)


@pytest.mark.parametrize(
    ("setup", "to", "deadline_s", "code"),
    [
        ("none", "nobody", 30.0, ErrorCode.SERVICE_UNAVAILABLE),
        ("none", "", 30.0, ErrorCode.SERVICE_UNAVAILABLE),
        ("stopping", "indexer", 30.0, ErrorCode.SHUTTING_DOWN),
        ("none", "indexer", -1.0, ErrorCode.DEADLINE_EXCEEDED),
    ],
    ids=["unknown target", "empty target", "kernel stopping", "deadline already passed"],
)
def test_a_request_that_cannot_be_served_is_refused_at_once(
    bus: Bus, setup: str, to: str, deadline_s: float, code: ErrorCode
) -> None:
    worker, caller = bus.worker("indexer"), bus.socket(b"caller")
    if setup == "stopping":
        bus.broker.accepting = False
    env = bus.request(caller, to, deadline_s=deadline_s)
    reply = received(caller)
    assert (reply.env.cid, error_of(reply)[0]) == (env.id, code)
    assert nothing_for(worker.jobs)


def test_a_request_for_a_restarting_worker_waits_for_it_instead_of_failing(bus: Bus) -> None:
    caller = bus.socket(b"caller")
    bus.membership.serving.add("watcher")  # its slot is STARTING: no READY yet
    env = bus.request(caller, "watcher")
    assert nothing_for(caller)
    worker = Worker(bus, "watcher", "watcher", 1)
    assert received(worker.jobs).env.id == env.id


def test_an_exact_worker_name_routes_to_that_worker_and_a_service_to_the_least_loaded(bus: Bus) -> None:
    one, two, caller = bus.worker("parser#1", "parser", 2), bus.worker("parser#2", "parser", 2), bus.socket(b"c")
    bus.request(caller, "parser#2")
    assert received(two.jobs) and nothing_for(one.jobs)
    bus.request(caller, "parser")
    assert received(one.jobs) and nothing_for(two.jobs)  # parser#2 holds one job, parser#1 none
    bus.request(caller, "parser")
    bus.request(caller, "parser")
    assert received(one.jobs) and received(two.jobs)  # both now hold two: capacity reached
    bus.request(caller, "parser")
    assert nothing_for(one.jobs) and nothing_for(two.jobs)


def test_a_reply_from_a_worker_that_does_not_hold_the_job_is_dropped(bus: Bus) -> None:
    holder, other, caller = bus.worker("a#1", "a"), bus.worker("a#2", "a"), bus.socket(b"caller")
    bus.request(caller, "a")
    job = received(holder.jobs)
    other.answer(bus, job, b"forged")
    assert nothing_for(caller)
    holder.answer(bus, job, b"real")
    assert received(caller).body() == EchoReply(b"real")


def test_a_request_over_the_size_limit_is_refused_with_message_too_large() -> None:
    b = Bus(BusPolicy(max_message_mb=1))
    try:
        worker, caller = b.worker("indexer"), b.socket(b"caller")
        env = Envelope(kind=EchoRequest.KIND, src="test", to="indexer", deadline=time.time() + 30)
        frames.send(caller, env, EchoRequest(b"x" * (2 * 1024 * 1024)))
        b.step()
        reply = received(caller)
        assert (reply.env.cid, error_of(reply)[0]) == (env.id, ErrorCode.MESSAGE_TOO_LARGE)
        assert nothing_for(worker.jobs)
    finally:
        b.close()


def test_a_ready_the_supervisor_did_not_start_is_refused_with_a_disconnect(bus: Bus) -> None:
    bus.membership.refused.add("intruder")
    sock = bus.socket(b"intruder.1.x")
    frames.send(sock, Envelope(kind=WorkerReady.KIND, src="intruder"), WorkerReady("intruder", "indexer", 1))
    bus.step()
    bye = received(sock)
    assert bye.env.kind == Disconnect.KIND and "intruder" not in bus.broker.by_name


def test_an_ipc_peer_whose_identity_passes_for_a_remote_one_is_dropped(bus: Bus) -> None:
    # Remote peers' identities carry REMOTE_PREFIX inside the broker; one chosen locally must not blur the two.
    worker, spoof = bus.worker("indexer"), bus.socket(REMOTE_PREFIX + b"caller")
    bus.request(spoof, "indexer")
    assert nothing_for(worker.jobs) and nothing_for(spoof)
    assert bus.broker.stats["dropped_bad"] == 1


# ------------------------------------------------------------------------------------------------
# scheduling: a pool of members of different speeds (a local one and one on another machine, say)


def _measured(
    bus: Bus, fast: Worker, slow: Worker, caller: zmq.Socket[Any], slow_s: float, service: str = "embedder"
) -> None:
    """One job each (neither measured yet: the least loaded takes it), the slow one taking ``slow_s``."""
    bus.request(caller, service)
    bus.request(caller, service)
    fast_job, slow_job = received(fast.jobs), received(slow.jobs)
    fast.answer(bus, fast_job)
    time.sleep(slow_s)
    slow.answer(bus, slow_job)
    received(caller), received(caller)


def test_a_pool_sends_the_next_job_to_the_member_measured_fastest(bus: Bus) -> None:
    fast, slow = bus.worker("embedder", "embedder"), bus.worker("embedder@box:1", "embedder")
    caller = bus.socket(b"caller")
    _measured(bus, fast, slow, caller, 0.3)
    took = {p.name: p.took[EchoRequest.KIND] for p in bus.broker.peers.values()}
    assert took["embedder@box:1"] >= 0.3 > took["embedder"]
    for _ in range(3):  # both free each time: the fast one, not the least recently used or the first listed
        bus.request(caller, "embedder")
        fast.answer(bus, received(fast.jobs))
        received(caller)
    assert nothing_for(slow.jobs)


def test_a_slower_member_takes_its_share_of_a_long_queue_but_not_the_last_jobs_of_a_batch(bus: Bus) -> None:
    fast, slow = bus.worker("embedder", "embedder"), bus.worker("embedder@box:1", "embedder")
    caller = bus.socket(b"caller")
    _measured(bus, fast, slow, caller, 0.3)
    bus.request(caller, "embedder")
    held = received(fast.jobs)
    bus.request(caller, "embedder")  # the fast one, busy, would still be done with it before the slow one
    assert nothing_for(slow.jobs)
    fast.answer(bus, held)
    fast.answer(bus, received(fast.jobs))  # it was held back for the fast one, which took it when free
    received(caller), received(caller)
    took = {p.name: p.took[EchoRequest.KIND] for p in bus.broker.peers.values()}
    # A queue longer than the fast one gets through in the slow one's time: the slow one takes a job too.
    for _ in range(int(took["embedder@box:1"] / took["embedder"]) + 3):
        bus.request(caller, "embedder")
    assert received(fast.jobs) and received(slow.jobs)


def test_a_job_held_back_for_a_fast_member_goes_to_a_free_one_once_the_fast_ones_job_in_hand_outlasts_it(
    bus: Bus,
) -> None:
    # walk2: parser#1, fast on text files, OCR'd an image for a minute while parser#2, measured slow on an image
    # before, sat idle, and the parse window's other files waited for parser#1 (files indexed stood still).
    fast, slow = bus.worker("parser", "parser"), bus.worker("parser@box:1", "parser")
    caller = bus.socket(b"caller")
    _measured(bus, fast, slow, caller, 0.3, "parser")
    bus.request(caller, "parser")
    in_hand = received(fast.jobs)  # the slow file, as it turns out
    queued = bus.request(caller, "parser")
    assert nothing_for(slow.jobs)  # held back: the fast one's job is young, and it would be done first

    def handed_on() -> bool:
        bus.tick(0.0, fast, slow)  # the broker's timers, both members beating
        return bool(slow.jobs.poll(50))

    wait_for(handed_on, 30, 0.05, "the held job handed to the free member")
    assert received(slow.jobs).env.id == queued.id
    fast.answer(bus, in_hand)
    assert received(caller).env.cid != queued.id


def test_a_member_that_fails_its_jobs_at_once_is_not_taken_for_the_fastest_but_serves_when_alone(bus: Bus) -> None:
    good, broken = bus.worker("parser", "parser"), bus.worker("parser@box:1", "parser")
    caller = bus.socket(b"caller")
    bus.request(caller, "parser")
    bus.request(caller, "parser")  # neither measured yet: one each
    good_job, broken_job = received(good.jobs), received(broken.jobs)
    broken.fail(bus, broken_job, ErrorCode.INTERNAL)  # its handler crashed, at once
    time.sleep(0.05)
    good.answer(bus, good_job)
    received(caller), received(caller)
    for _ in range(3):  # both free each time: the one that does the jobs, though the other answered sooner
        bus.request(caller, "parser")
        good.answer(bus, received(good.jobs))
        received(caller)
    assert nothing_for(broken.jobs)
    held = bus.request(caller, "parser")
    queued = bus.request(caller, "parser")  # waits for the busy good member rather than go to the broken one
    assert nothing_for(broken.jobs)
    frames.send(good.jobs, Envelope(kind=Disconnect.KIND, src="parser"), Disconnect("parser", "bye"))
    bus.step()
    assert received(caller).env.cid == held.id  # worker_lost
    assert received(broken.jobs).env.id == queued.id  # alone now, it is tried again


def test_a_job_that_fails_for_its_own_reasons_says_nothing_against_the_member(bus: Bus) -> None:
    one, other = bus.worker("parser", "parser"), bus.worker("parser@box:1", "parser")
    caller = bus.socket(b"caller")
    bus.request(caller, "parser")
    bus.request(caller, "parser")
    first, second = received(one.jobs), received(other.jobs)
    one.fail(bus, first, ErrorCode.PARSE_FAILED)  # a corrupt file fails on any member
    other.fail(bus, second, ErrorCode.FILE_CONTENT_NEEDED)  # a refusal that asks for the bytes
    received(caller), received(caller)
    shares = {p.name: p.finishes_in(EchoRequest.KIND) for p in bus.broker.peers.values()}
    assert shares == {"parser": 0.0, "parser@box:1": 0.0}  # both still untried, not failing
    bus.request(caller, "parser")
    bus.request(caller, "parser")
    assert received(one.jobs) and received(other.jobs)


def test_a_job_held_back_for_a_busy_member_goes_to_another_at_once_when_that_member_is_lost(bus: Bus) -> None:
    fast, slow = bus.worker("embedder", "embedder"), bus.worker("embedder@box:1", "embedder")
    caller = bus.socket(b"caller")
    _measured(bus, fast, slow, caller, 0.3)
    lost = bus.request(caller, "embedder")
    received(fast.jobs)
    held = bus.request(caller, "embedder")
    assert nothing_for(slow.jobs)
    frames.send(fast.jobs, Envelope(kind=Disconnect.KIND, src="embedder"), Disconnect("embedder", "bye"))
    bus.step()
    assert received(caller).env.cid == lost.id
    assert received(slow.jobs).env.id == held.id


def test_jobs_queued_for_a_lost_remote_member_by_name_fail_at_once_not_at_their_deadline(bus: Bus) -> None:
    local, member = bus.worker("parser", "parser"), bus.worker("parser@box:1", "parser")
    caller = bus.socket(b"caller")
    bus.request(caller, "parser")
    bus.request(caller, "parser")
    received(local.jobs)
    held = received(member.jobs)
    named = bus.request(caller, "parser@box:1", deadline_s=60.0)  # its bytes, say: only that member can take it
    assert nothing_for(member.jobs) and nothing_for(caller)
    bus.membership.serving.discard("parser@box:1")  # no slot of the supervisor's brings a remote member back
    bus.tick(bus.broker.policy.liveness_s + 1.0, local)  # the link went down: its heartbeats stop
    replies = {r.env.cid: error_of(r) for r in (received(caller), received(caller))}
    assert replies[held.env.id][0] == ErrorCode.WORKER_LOST
    assert replies[named.id][0] == ErrorCode.SERVICE_UNAVAILABLE and "parser@box:1" in replies[named.id][2]


def test_a_job_sent_to_a_worker_by_name_goes_before_its_pools_queue_when_it_frees(bus: Bus) -> None:
    worker, caller = bus.worker("parser@box:1", "parser"), bus.socket(b"caller")
    first = bus.request(caller, "parser")
    bus.request(caller, "parser")
    bus.request(caller, "parser")  # the pool's queue: two jobs any member could take
    named = bus.request(caller, "parser@box:1")  # only this worker can
    job = received(worker.jobs)
    assert job.env.id == first.id
    worker.answer(bus, job)
    assert received(worker.jobs).env.id == named.id


def _beat(bus: Bus, worker: Worker, progress: int, at_s: float) -> None:
    """A heartbeat with the progress count ``progress``, taken as sent ``at_s`` from now (see ``Bus.tick``)."""
    from foldermind.protocol.messages import Heartbeat

    peer = bus.broker.peers[worker.ident]
    before = peer.progressed
    frames.send(worker.hb, Envelope(kind=Heartbeat.KIND, src=worker.name), Heartbeat(worker.name, 0, progress=progress))
    bus.step()
    received(worker.hb)  # the kernel answers every heartbeat
    peer.last_seen = time.monotonic() + at_s
    if peer.progressed != before:
        peer.progressed = peer.last_seen


def test_a_worker_reporting_progress_keeps_its_job_past_the_deadline_until_its_progress_stops(bus: Bus) -> None:
    worker, caller = bus.worker("parser"), bus.socket(b"caller")
    bus.request(caller, "parser", deadline_s=5.0)
    job = received(worker.jobs)
    _beat(bus, worker, 1, at_s=4.0)
    bus.tick(6.0, worker)  # past the deadline, 2 s after its last progress: slow, not hung
    assert nothing_for(caller) and nothing_for(worker.hb)  # no deadline_exceeded, no cancel
    _beat(bus, worker, 2, at_s=8.0)
    bus.tick(12.0, worker)  # 4 s after its last progress: within the job's 5 s
    assert nothing_for(caller)
    _beat(bus, worker, 2, at_s=12.5)  # the same count: alive, but no progress
    bus.tick(13.5, worker)  # 5.5 s after its last progress
    code, retryable, message = error_of(received(caller))
    assert (code, retryable) == (ErrorCode.DEADLINE_EXCEEDED, False)
    assert message == "echo.request made no progress for 5 s at parser"
    assert received(worker.hb).env.kind == JobCancel.KIND  # then as any overrun: cancelled, a grace, replaced
    assert bus.membership.gone == []
    worker.answer(bus, job)


def test_progress_a_worker_reported_before_it_held_the_job_does_not_extend_its_deadline(bus: Bus) -> None:
    worker, caller = bus.worker("parser"), bus.socket(b"caller")
    _beat(bus, worker, 7, at_s=0.0)  # between jobs: nothing to extend
    bus.request(caller, "parser", deadline_s=5.0)
    received(worker.jobs)
    bus.tick(6.0, worker)
    code, _, message = error_of(received(caller))
    assert code == ErrorCode.DEADLINE_EXCEEDED and message == "echo.request made no progress for 5 s at parser"
