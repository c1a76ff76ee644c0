"""The table of jobs in flight: every request handed on, with its caller and its deadline.

Because the broker remembers each request until it is answered, a caller whose worker dies, misses heartbeats
or overruns the deadline is told ``worker_lost`` / ``deadline_exceeded`` at once instead of waiting forever.
The deadlines sit in a heap, so finding the next one due costs nothing per job. A worker that reports progress
on its job is slow, not hung: its job's deadline moves to a full budget after each report. A job whose caller
was told ``deadline_exceeded`` while its worker still works on it is an *overrun*: the worker keeps the slot
until it answers or a grace runs out (the broker decides what to do then).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from foldermind.kernel.bus.members import Peer
from foldermind.protocol import frames
from foldermind.protocol.messages import Envelope


@dataclass(eq=False, slots=True)
class Job:
    """A request accepted from a caller and not yet answered."""

    env: Envelope
    client: bytes
    packet: frames.Packet
    target: str
    deadline: float  # monotonic
    budget: float = 0.0  # the time it was given: a worker that reports progress has it again from each report
    worker: Peer | None = None
    done: bool = False
    assigned: float = 0.0  # monotonic


@dataclass(eq=False, slots=True)
class Overrun:
    """A worker still busy with a job whose caller was already told ``deadline_exceeded``."""

    peer: Peer
    until: float  # monotonic: if it has not answered by then, it is stuck
    background: bool = False  # the job is one of the peer's background kinds


class JobTable:
    """The jobs in flight by id, their deadlines, and the overruns by job id."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._overruns: dict[str, Overrun] = {}

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def add(self, job: Job) -> None:
        self._jobs[job.env.id] = job
        heapq.heappush(self._deadlines, (job.deadline, job.env.id))

    def finish(self, job: Job) -> None:
        """Answered (or failed): out of the table, and out of its worker's hands."""
        job.done = True
        self._jobs.pop(job.env.id, None)
        if job.worker is not None:
            job.worker.jobs.discard(job.env.id)
            job.worker.behind.discard(job.env.id)

    def next_due(self) -> float:
        """The monotonic time of the next deadline or overrun grace (infinity when there is none)."""
        while self._deadlines and self._deadlines[0][1] not in self._jobs:
            heapq.heappop(self._deadlines)
        due = self._deadlines[0][0] if self._deadlines else math.inf
        for overrun in self._overruns.values():
            due = min(due, overrun.until)
        return due

    def missed(self, now: float) -> Iterator[Job]:
        """The jobs past their deadline at ``now``, one at a time (the caller may finish each before the next).
        A job whose worker reported progress on it within its budget gets its deadline moved instead."""
        while self._deadlines and self._deadlines[0][0] <= now:
            _, job_id = heapq.heappop(self._deadlines)
            job = self._jobs.get(job_id)
            if job is None or job.done:
                continue
            worker = job.worker
            if worker is not None and now - worker.progressed < job.budget and worker.progressed > job.assigned:
                # Slow, not hung: it reported progress on this job within the time the job was given.
                job.deadline = worker.progressed + job.budget
                heapq.heappush(self._deadlines, (job.deadline, job_id))
                continue
            yield job

    def overran(self, peer: Peer, job_id: str, until: float, background: bool = False) -> None:
        """``peer`` is still busy with a job its caller gave up on: it keeps the slot (``background``: its background
        lane) until ``until``."""
        peer.jobs.add(job_id)  # its job thread is still busy: nothing new goes there meanwhile
        if background:
            peer.behind.add(job_id)
        self._overruns[job_id] = Overrun(peer, until, background)

    def overrun_answered(self, peer: Peer | None, job_id: str) -> Overrun | None:
        """A late answer from ``peer``: the overrun it ends (its slot freed), or None if it ends none."""
        overrun = self._overruns.get(job_id)
        if overrun is None or overrun.peer is not peer:
            return None
        del self._overruns[job_id]
        overrun.peer.jobs.discard(job_id)
        overrun.peer.behind.discard(job_id)
        return overrun

    def stuck(self, now: float, routed: Callable[[Peer], bool]) -> Iterator[Overrun]:
        """The overruns whose grace ran out at ``now``, one at a time; those whose worker is no longer
        ``routed`` (lost meanwhile, for another reason) are forgotten."""
        for job_id, overrun in list(self._overruns.items()):
            if not routed(overrun.peer):
                del self._overruns[job_id]
            elif overrun.until <= now:
                del self._overruns[job_id]
                yield overrun
