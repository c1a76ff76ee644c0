"""A worker in routing, and the choice of the one that will be done first.

A member is a worker that sent READY and has not been lost: its identity, its capacity, the jobs it holds (a job of
one of its background kinds beside them: it takes no slot of the capacity, and a member holds one at most), what
its last heartbeat said, and, by kind of job, a moving average of its time per job done and of its share of jobs
done. From those :func:`pick` chooses, among the free members, the one that will be done with one more job
first, and holds a job back from a slow member when the busy fast ones would finish it sooner: a slower machine
takes its share of a batch, but not the last jobs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from foldermind.protocol.errors import Fault

SPEED_WEIGHT = 0.3
"""How much the latest job moves a member's running averages, its time per job and its share of jobs done."""
UNPROVEN_S = 1e6
"""How long a member that has failed every job of a kind it was given is taken to need for one: it is sent
one only when no member that answers them is left or would be free sooner."""
MEMBER_FAULTS = frozenset((Fault.LOST, Fault.UNAVAILABLE))
"""Error replies that are the member's failure, not the request's (its handler crashed, its model is not
loaded): another member may do the job. The rest (a corrupt file, a bad request, a refusal that asks for the
file's bytes) would fail anywhere and say nothing of the member."""


@dataclass(eq=False, slots=True)
class Peer:
    """A worker that sent READY and has not been lost."""

    name: str
    service: str
    pid: int
    ident: bytes
    capacity: int
    last_seen: float
    note: str = ""
    loading: bool = False  # its last heartbeat said it is loading a model
    progress: int = 0  # its last heartbeat's progress count
    progressed: float = 0.0  # monotonic: when that count last moved while it held a job
    jobs: set[str] = field(default_factory=set)
    background: frozenset[str] = frozenset()  # kinds it runs beside its other jobs, one at a time, giving way to them
    behind: set[str] = field(default_factory=set)  # the jobs of those kinds it holds (also in ``jobs``)
    key: str | None = None  # a remote member: the allow-list name of its key
    took: dict[str, float] = field(default_factory=dict)  # by kind: seconds per job, a moving average
    done_share: dict[str, float] = field(default_factory=dict)  # by kind: jobs done (1) or failed by it (0), averaged
    last_reply: float = 0.0  # monotonic
    began: float = 0.0  # monotonic: when it was last handed a job while it held none (in that job's lane)

    def held(self, kind: str) -> int:
        """The jobs it holds in ``kind``'s lane: its background job, or the others."""
        return len(self.behind) if kind in self.background else len(self.jobs) - len(self.behind)

    def free_for(self, kind: str) -> bool:
        return self.held(kind) < (1 if kind in self.background else self.capacity)

    def finishes_in(self, kind: str) -> float:
        """When one more job of ``kind`` would be done here, from its measured time per job done: a worker runs
        its jobs one after another, so those it holds come first, and a member that fails a share of its jobs
        needs that many more tries per job done. 0 until one is measured (a new member is tried); a member
        that has only failed them, :data:`UNPROVEN_S` (a fast failure must not look like a fast member)."""
        share = self.done_share.get(kind, 1.0)
        took = self.took.get(kind)
        if took is None:
            return 0.0 if share >= 1.0 else UNPROVEN_S
        return took / max(share, 1 / UNPROVEN_S) * (self.held(kind) + 1)

    def measured(self, kind: str, assigned: float, now: float, done: bool = True) -> None:
        """A job of ``kind`` answered: done, or failed by this member (:data:`MEMBER_FAULTS`)."""
        # Its jobs run one after another: this one started when it was handed over or when the one before it
        # was answered, whichever came later (time queued at the worker is not its speed).
        seconds = now - max(assigned, self.last_reply)
        self.last_reply = now
        share = self.done_share.get(kind, 1.0)
        self.done_share[kind] = share + SPEED_WEIGHT * ((1.0 if done else 0.0) - share)
        if done:  # how fast it fails is not how fast it works
            before = self.took.get(kind)
            self.took[kind] = seconds if before is None else before + SPEED_WEIGHT * (seconds - before)


def pick(peers: Sequence[Peer], kind: str, waiting: int = 1, now: float | None = None) -> Peer | None:
    """The free member that will be done with one more job of ``kind`` first (by capacity and measured speed;
    among members not measured yet, the least loaded), or None when none is free, or when the busy members
    would be done with the ``waiting`` jobs before that one finishes this job alone: a slower machine takes its
    share of a batch while the faster ones are full, but not the last jobs, which they would finish sooner.

    A busy member is free after what is left of the jobs it holds, from its time per job; but one whose job has
    already run longer than that (an image read by OCR among text files) is taken to need as long again: a
    job's time is the file's as much as the member's, and waiting on a fast member stuck in a slow job held
    every other job back (docs/benchmarks/ingest.md, "A slow file held the parser pool back")."""
    now = time.monotonic() if now is None else now
    best: Peer | None = None
    for p in peers:
        if p.free_for(kind) and (
            best is None or (p.finishes_in(kind), p.held(kind)) < (best.finishes_in(kind), best.held(kind))
        ):
            best = p
    if best is None:
        return None
    alone = best.finishes_in(kind)
    sooner = 0  # jobs the busy members would finish, beyond those they hold, before `best` is done
    for p in peers:
        took = p.took.get(kind)
        if not p.free_for(kind) and took:
            running = max(0.0, now - max(p.began, p.last_reply))  # its job in hand has run this long
            busy = max(took * p.held(kind) - running, running)
            sooner += max(0, int((alone - busy) / took))
    return None if alone > 0 and sooner >= waiting else best
