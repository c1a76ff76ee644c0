"""A release stops the releaser's background job in hand and is answered only once it ended
(workers/framework/base.py): the model it held is then freed before the releaser loads another. Real threads, a
plain Worker, no process (the llm worker and the indexer's hand-over are tested end to end in test_model_turns.py).
"""

from __future__ import annotations

import threading
import time

from foldermind.protocol.messages import Envelope, ReleaseReply, ReleaseRequest
from foldermind.protocol.runtime.context import WorkerContext
from foldermind.workers.framework.base import Request, Worker
from tests.helpers import wait_for


def worker() -> Worker:
    return Worker(WorkerContext(name="llm", service="llm", bus_endpoint="inproc://unused"))


def release(w: Worker, caller: str, deadline: float = 0.0) -> ReleaseReply:
    env = Envelope(kind=ReleaseRequest.KIND, src=caller, to="llm", deadline=deadline)
    reply = w.on_release(Request(env, ReleaseRequest(), []))
    assert isinstance(reply, ReleaseReply)
    return reply


def summary(w: Worker, job: str, steps: list[str], deaf: threading.Event | None = None) -> threading.Thread:
    """A background job that makes steps until it is withdrawn (if ``deaf``: until that is set), then ends."""

    def run() -> None:
        try:
            while not (deaf.is_set() if deaf else w.withdrawn(job)):
                steps.append("token")
                time.sleep(0.01)
            steps.append("stopped")
        finally:
            w.background_ended(job)

    return threading.Thread(target=run, daemon=True)


def test_a_release_withdraws_the_releaser_s_background_job_and_answers_after_it_ended() -> None:
    w, steps = worker(), list[str]()
    w.background_began("s1", "indexer.ingest")
    job = summary(w, "s1", steps)
    job.start()
    wait_for(lambda: steps, 30, 0.01, "the summary making tokens")
    reply = release(w, "indexer.ingest")
    assert reply.released, reply
    assert steps[-1] == "stopped", "the release was answered while the summary still ran"
    assert not w.withdrawn("s1")  # forgotten once it ended
    job.join(30)


def test_a_background_job_of_another_caller_is_left_to_run() -> None:
    w, steps = worker(), list[str]()
    w.background_began("s2", "someone.else")
    job = summary(w, "s2", steps)
    job.start()
    assert release(w, "indexer.ingest").released
    assert not w.withdrawn("s2") and "stopped" not in steps
    assert release(w, "someone.else").released  # its own caller's release stops it
    assert steps[-1] == "stopped"
    job.join(30)


def test_a_job_that_does_not_stop_before_the_release_s_deadline_keeps_the_model_and_says_so() -> None:
    w, steps, deaf = worker(), list[str](), threading.Event()
    w.background_began("s4", "indexer.ingest")
    job = summary(w, "s4", steps, deaf)
    job.start()
    try:
        reply = release(w, "indexer.ingest", deadline=time.time() + 1.5)
        assert not reply.released and "did not stop in time" in reply.reason, reply
        assert not w.released and "stopped" not in steps  # nothing freed, the worker does not go
    finally:
        deaf.set()
        job.join(30)


def test_a_stop_withdraws_every_background_job_in_hand_whoever_asked_for_it() -> None:
    # On main a summary in hand at Ctrl-C ran to its end, past the kernel's 5 s grace: the llm was SIGKILLed.
    w, steps = worker(), list[str]()
    jobs = []
    for job_id, caller in (("s5", "indexer.ingest"), ("s6", "someone.else")):
        w.background_began(job_id, caller)
        jobs.append(summary(w, job_id, steps))
        jobs[-1].start()
    wait_for(lambda: steps, 30, 0.01, "the summaries making tokens")
    w.withdraw_all()
    for job in jobs:
        job.join(30)
    assert steps.count("stopped") == 2, steps
    assert not w.withdrawn("s5") and not w.withdrawn("s6")  # forgotten once they ended
