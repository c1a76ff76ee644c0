"""The broker's background lane (docs/protocol.md, "Routing"): a worker's background kinds (the llm worker's
summaries) take no slot of its capacity, one at a time, pumped lane by lane; a summary beside a chat that hangs
the worker waits for its replacement instead of failing. In-process, as test_broker.py (its bus and stand-ins)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from foldermind.protocol.errors import ErrorCode
from foldermind.protocol.messages import EchoRequest, PingRequest
from foldermind.protocol.runtime.config import BusPolicy
from tests.test_broker import Bus, error_of, nothing_for, received


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(BusPolicy(overrun_grace_s=10.0, heartbeat_interval_s=1.0, heartbeat_liveness=3))
    yield b
    b.close()


def test_a_background_job_goes_beside_the_job_in_hand_and_never_holds_back_a_foreground_one(bus: Bus) -> None:
    """A worker's background kind (the llm's summaries) takes no slot of its capacity: one goes beside the job in
    hand, a second waits for the first, and a foreground job queued behind that second one is not held back."""
    worker, caller = bus.worker("llm", background=(PingRequest.KIND,)), bus.socket(b"caller")
    chat = bus.request(caller, "llm")
    summary = bus.request(caller, "llm", msg=PingRequest())
    got = [received(worker.jobs), received(worker.jobs)]
    assert [p.env.id for p in got] == [chat.id, summary.id]
    second = bus.request(caller, "llm", msg=PingRequest())
    question = bus.request(caller, "llm")
    assert nothing_for(worker.jobs)  # the chat holds the slot, the first summary the background lane
    worker.answer(bus, got[0])
    assert received(worker.jobs).env.id == question.id  # past the summary waiting in the queue before it
    worker.answer(bus, got[1])
    assert received(worker.jobs).env.id == second.id
    assert [received(caller).env.cid for _ in range(2)] == [chat.id, summary.id]


def test_a_background_job_past_its_deadline_keeps_its_lane_busy_not_the_job_slot(bus: Bus) -> None:
    worker, caller = bus.worker("llm", background=(PingRequest.KIND,)), bus.socket(b"caller")
    bus.request(caller, "llm", deadline_s=5.0, msg=PingRequest())
    summary = received(worker.jobs)
    bus.tick(6.0, worker)
    assert error_of(received(caller))[0] == ErrorCode.DEADLINE_EXCEEDED
    later = bus.request(caller, "llm", msg=PingRequest())
    chat = bus.request(caller, "llm")
    assert received(worker.jobs).env.id == chat.id and nothing_for(worker.jobs)
    worker.answer(bus, summary)  # the late answer ends the overrun: the lane is free again
    assert received(worker.jobs).env.id == later.id


def test_a_worker_stuck_on_a_chat_is_replaced_and_the_summary_beside_it_waits_for_the_new_one(bus: Bus) -> None:
    """The summary did not hang the worker: it is not failed with it (its caller would count it against the
    document), but handed to the replacement. A worker stuck on its summary fails the summary, as any job."""
    worker, caller = bus.worker("llm", background=(PingRequest.KIND,)), bus.socket(b"caller")
    bus.request(caller, "llm", deadline_s=5.0)
    summary = bus.request(caller, "llm", deadline_s=600.0, msg=PingRequest())
    assert [received(worker.jobs).env.kind for _ in range(2)] == [EchoRequest.KIND, PingRequest.KIND]
    bus.tick(6.0, worker)
    assert error_of(received(caller))[0] == ErrorCode.DEADLINE_EXCEEDED
    bus.tick(17.0, worker)  # past the overrun grace: stuck, killed
    assert [(name, kill) for name, _, kill in bus.membership.gone] == [("llm", True)]
    assert nothing_for(caller)  # the summary is not failed
    again = bus.worker("llm", background=(PingRequest.KIND,))
    redo = received(again.jobs)
    assert redo.env.id == summary.id
    again.answer(bus, redo)
    assert received(caller).env.cid == summary.id
    stuck = bus.request(caller, "llm", deadline_s=5.0, msg=PingRequest())
    assert received(again.jobs).env.id == stuck.id
    bus.tick(6.0, again)
    assert error_of(received(caller))[0] == ErrorCode.DEADLINE_EXCEEDED
    bus.tick(17.0, again)
    assert len(bus.membership.gone) == 2
