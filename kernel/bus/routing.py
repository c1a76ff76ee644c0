"""What the broker does to its peers and jobs, apart from reading messages.

Sending to a peer by the socket it came in on; handing queued jobs to the member that will be done first
(:func:`.members.pick`); losing a member, which fails every job it held at once and the jobs queued for it that
nothing else can serve; a job past its deadline at a worker (an *overrun*: the caller is answered, the worker
gets a grace to notice, then is declared stuck, killed and replaced); and the clock: deadlines, overrun graces
and heartbeat liveness, checked by :meth:`Routing.tick`. The broker (:mod:`.broker`) is this plus the loop that
reads each message and acts on it.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from foldermind.kernel.bus.identities import HB_SUFFIX, REMOTE_PREFIX
from foldermind.kernel.bus.jobs import Job, JobTable
from foldermind.kernel.bus.members import Peer, pick
from foldermind.kernel.bus.membership import Membership, RemoteMembership
from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo
from foldermind.protocol.messages import Disconnect, Envelope, JobCancel
from foldermind.protocol.runtime.config import BusPolicy

log = logging.getLogger("foldermind.broker")


class RateLimitedLog:
    """Garbage can arrive by the thousand: log the first few per minute, then count."""

    def __init__(self, per_minute: int = 20) -> None:
        self.per_minute, self.window_start, self.count, self.suppressed = per_minute, 0.0, 0, 0

    def warn(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.window_start > 60:
            if self.suppressed:
                log.warning("%d more bad messages were dropped in the last minute", self.suppressed)
            self.window_start, self.count, self.suppressed = now, 0, 0
        self.count += 1
        if self.count <= self.per_minute:
            log.warning(msg, *args)
        else:
            self.suppressed += 1


ControlHandler = Callable[[bytes, frames.Packet], None]


class Routing:
    """The tables of peers, queues and jobs, and the moves on them that every message handler shares."""

    def __init__(
        self,
        sock: zmq.Socket[Any],
        policy: BusPolicy,
        membership: Membership,
        remote_sock: zmq.Socket[Any] | None = None,
        remote: RemoteMembership | None = None,
    ) -> None:
        self.sock = sock
        self.remote_sock = remote_sock
        self.remote = remote
        self.policy = policy
        self.membership = membership
        self.peers: dict[bytes, Peer] = {}
        self._dropped: OrderedDict[bytes, str] = OrderedDict()
        self.by_name: dict[str, Peer] = {}
        self.by_service: dict[str, list[Peer]] = {}
        self.jobs = JobTable()
        self.queues: dict[str, deque[Job]] = {}
        self._next_liveness_check = 0.0
        self.control: ControlHandler | None = None  # where messages to "kernel" go: the control API
        self._bad = RateLimitedLog()
        self.accepting = True
        self.stats = {"routed": 0, "dropped_bad": 0}

    def _route(self, ident: bytes) -> tuple[zmq.Socket[Any], bytes]:
        """The socket a peer is reached by, and its identity there."""
        if self.remote_sock is not None and ident.startswith(REMOTE_PREFIX):
            return self.remote_sock, ident[len(REMOTE_PREFIX) :]
        return self.sock, ident

    def _send(self, ident: bytes, env: Envelope, body: Any, buffers: Sequence[frames.Buffer] = ()) -> None:
        sock, route = self._route(ident)
        frames.send(sock, env, body, buffers, route=[route])

    def _forward(self, ident: bytes, packet: frames.Packet) -> None:
        sock, route = self._route(ident)
        frames.forward(sock, [route], packet)

    # ---------------------------------------------------------------------------------------
    # routing

    def _candidates(self, target: str) -> list[Peer]:
        # The service first, as _on_request does: a one-slot pool's slot has the service's own name, and its
        # remote members must be candidates for its queue too.
        peers = self.by_service.get(target)
        if peers is not None:
            return list(peers)
        peer = self.by_name.get(target)
        return [peer] if peer is not None else []

    def _pump(self, target: str) -> None:
        """Hand queued jobs for ``target`` to free workers, the one that will be done first first. In order, lane by
        lane: a job that waits for a member's job thread does not hold back one for its background lane."""
        queue = self.queues.get(target)
        if not queue:
            return
        candidates = self._candidates(target)
        lanes = 2 if any(p.background for p in candidates) else 1
        blocked: set[bool] = set()  # the lanes whose next job found no free member
        kept: deque[Job] = deque()
        while queue and len(blocked) < lanes:
            job = queue.popleft()
            if job.done:
                continue
            lane = any(job.env.kind in p.background for p in candidates)
            best = None if lane in blocked else pick(candidates, job.env.kind, len(queue) + 1)
            if best is None:
                blocked.add(lane)
                kept.append(job)
            else:
                self._assign(job, best)
        queue.extendleft(reversed(kept))

    def _assign(self, job: Job, peer: Peer) -> None:
        job.worker = peer
        job.assigned = time.monotonic()
        if not peer.held(job.env.kind):
            peer.began = job.assigned
        peer.jobs.add(job.env.id)
        if job.env.kind in peer.background:
            peer.behind.add(job.env.id)
        self._forward(peer.ident, job.packet)

    def _finish(self, job: Job) -> None:
        self.jobs.finish(job)

    def reply_error(self, client: bytes, env: Envelope, info: ErrorInfo) -> None:
        self._send(client, env.reply("kernel", status="error", error=info), {})

    def reply(self, client: bytes, env: Envelope, body: Any) -> None:
        reply = env.reply("kernel")
        reply.kind = body.KIND
        self._send(client, reply, body)

    def _send_disconnect(self, ident: bytes, name: str, reason: str) -> None:
        env = Envelope(kind=Disconnect.KIND, src="kernel")
        self._send(ident, env, Disconnect(name, reason))
        self._send(ident + HB_SUFFIX, env, Disconnect(name, reason))

    # ---------------------------------------------------------------------------------------
    # losing workers

    def drop(self, peer: Peer, reason: str, code: ErrorCode, replaced: bool = False) -> None:
        """Forget ``peer``; every job it held fails with ``code`` at once. ``replaced``: a new READY of the same
        name takes its place, and the jobs queued for that name go to it."""
        if self.peers.get(peer.ident) is not peer:
            return
        del self.peers[peer.ident]
        self._dropped[peer.ident] = peer.name
        while len(self._dropped) > 256:
            self._dropped.popitem(last=False)
        if self.by_name.get(peer.name) is peer:
            del self.by_name[peer.name]
        same = self.by_service.get(peer.service, [])
        if peer in same:
            same.remove(peer)
            if not same:
                del self.by_service[peer.service]
        for job_id in list(peer.jobs):
            job = self.jobs.get(job_id)
            if job is not None:
                retryable = code == ErrorCode.WORKER_LOST
                self.reply_error(
                    job.client,
                    job.env,
                    ErrorInfo(code, f"{peer.name} {reason} during {job.env.kind}", retryable),
                )
                self._finish(job)
        log.info("%s dropped from routing: %s", peer.name, reason)
        if peer.key is not None and self.remote is not None:
            self.remote.lost(peer.name, reason)
        # Jobs queued for this very name wait for a restart of its slot, but no slot brings back a remote
        # member: they fail now, as a new request for the name would, not at their deadline (a file's bytes
        # sent to a remote parser that was busy when its link went down waited out the 60 s parse deadline).
        if not replaced:
            self._fail_unservable(peer.name)
        # A job held back for this member (see members.pick) goes to one still here.
        self._pump(peer.service)

    def dismiss_keys(self, allowed: set[str], reason: str) -> None:
        """Drop every remote member whose key name is not in ``allowed`` (a ``bus deny``) and tell it to go.
        Its connection stays open (ZeroMQ cannot close one peer of a bound socket), but nothing it sends is
        routed any more: replies from a dropped peer are ignored, and a new READY needs an allowed key."""
        for peer in [p for p in self.peers.values() if p.key is not None and p.key not in allowed]:
            self.drop(peer, reason, ErrorCode.WORKER_LOST)
            self._send_disconnect(peer.ident, peer.name, reason)

    def drop_name(self, name: str, pid: int, reason: str) -> None:
        """The supervisor ends process ``pid`` of ``name`` itself (a requested restart, a stand-down for `worker
        run`) or saw it exit: it is let go, not lost. Heartbeats it sends while stopping gracefully are answered,
        not met with a dismissal it would log as a fault; the supervisor kills it if it outstays its grace."""
        peer = self.by_name.get(name)
        if peer is not None and peer.pid == pid:
            self.drop(peer, reason, ErrorCode.WORKER_LOST)
            self._dropped.pop(peer.ident, None)

    def fail_unservable(self) -> None:
        """Fail queued jobs whose target can no longer be served (all its workers FAILED/stopped)."""
        for target in list(self.queues):
            self._fail_unservable(target)

    def _fail_unservable(self, target: str) -> None:
        queue = self.queues.get(target)
        if not queue or self.membership.may_serve(target):
            return
        while queue:
            job = queue.popleft()
            if not job.done:
                self.reply_error(
                    job.client, job.env, ErrorInfo(ErrorCode.SERVICE_UNAVAILABLE, f"no worker serves {target!r}")
                )
                self._finish(job)

    def note(self, name: str) -> str:
        peer = self.by_name.get(name)
        return peer.note if peer is not None else ""

    def in_flight(self, name: str) -> int:
        peer = self.by_name.get(name)
        return len(peer.jobs) if peer is not None else 0

    # ---------------------------------------------------------------------------------------
    # overruns: a job past its deadline at a worker

    def _overran(self, worker: Peer, job: Job, now: float) -> None:
        """The caller has its ``deadline_exceeded``; the worker gets ``overrun_grace_s`` to notice.

        A worker past a deadline is usually slow, not hung: a CPU-starved model call that checks its
        deadline between slices can overshoot by a slice. Killing it would cost a model reload and
        fail every caller meanwhile, so it is sent a ``job.cancel`` and keeps the slot busy until it
        answers (the answer is dropped) or the grace runs out (then it is stuck: killed, replaced)."""
        grace = self.policy.overrun_grace_s
        if grace <= 0:
            self._stuck(worker, "missed a job deadline", bystanders=job.env.kind not in worker.background)
            return
        self.jobs.overran(worker, job.env.id, now + grace, job.env.kind in worker.background)
        cancel = Envelope(kind=JobCancel.KIND, src="kernel", to=worker.name, cid=job.env.id)
        self._send(worker.ident + HB_SUFFIX, cancel, JobCancel("deadline"))
        log.warning("%s overran a job deadline; cancelled, %g s to answer before it is replaced", worker.name, grace)

    def _overrun_ended(self, peer: Peer | None, job_id: str) -> None:
        overrun = self.jobs.overrun_answered(peer, job_id)
        if overrun is None:
            return
        log.info("%s answered a job after its deadline; kept", overrun.peer.name)
        self._pump(overrun.peer.name)
        self._pump(overrun.peer.service)

    def _stuck(self, worker: Peer, reason: str, bystanders: bool = False) -> None:
        """Declared lost while its process may still run: dropped from routing, killed, replaced. ``bystanders``: it
        is stuck on a job of its own slot, so the background job beside it did not cause it and waits for the
        replacement at the head of the queue (a summary beside a hung chat is not the summary's failure)."""
        for job_id in list(worker.behind) if bystanders else ():
            worker.jobs.discard(job_id)
            worker.behind.discard(job_id)
            job = self.jobs.get(job_id)
            if job is not None and not job.done:
                job.worker = None
                self.queues.setdefault(job.target, deque()).appendleft(job)
        self.drop(worker, reason, ErrorCode.WORKER_LOST)
        self.membership.worker_gone(worker.name, worker.pid, reason, kill=True)

    # ---------------------------------------------------------------------------------------
    # timers

    def next_due(self) -> float:
        return min(self._next_liveness_check, self.jobs.next_due())

    def tick(self, now: float) -> None:
        self._fail_missed_deadlines(now)
        self._replace_stuck_workers(now)
        if now >= self._next_liveness_check:
            self._next_liveness_check = now + self.policy.heartbeat_interval_s / 2
            self._drop_silent_workers(now)
            # A job held back for a busy member goes elsewhere once that member's job in hand outlasts it (pick).
            for target in [t for t, queue in self.queues.items() if queue]:
                self._pump(target)

    def _fail_missed_deadlines(self, now: float) -> None:
        for job in self.jobs.missed(now):
            worker = job.worker
            where = f"at {worker.name}" if worker else "waiting for a free worker"
            missed = f"{job.env.kind} missed its deadline {where}"
            if worker is not None and worker.progress:  # a worker that counts progress: it counted none
                missed = f"{job.env.kind} made no progress for {job.budget:.3g} s {where}"
            # Retryable only if no worker ever started on it: then nothing ran and nothing is suspect.
            info = ErrorInfo(ErrorCode.DEADLINE_EXCEEDED, missed, worker is None)
            self.reply_error(job.client, job.env, info)
            self._finish(job)
            if worker is not None:
                self._overran(worker, job, now)

    def _replace_stuck_workers(self, now: float) -> None:
        for overrun in self.jobs.stuck(now, lambda peer: self.peers.get(peer.ident) is peer):
            grace = self.policy.overrun_grace_s
            reason = f"missed a job deadline and was still busy {grace:g} s later"
            self._stuck(overrun.peer, reason, bystanders=not overrun.background)

    def _drop_silent_workers(self, now: float) -> None:
        limit, loading_limit = now - self.policy.liveness_s, now - self.policy.loading_liveness_s
        for peer in [p for p in self.peers.values() if p.last_seen < (loading_limit if p.loading else limit)]:
            if peer.loading:
                reason = f"missed {self.policy.loading_liveness} heartbeats while loading a model"
            else:
                reason = f"missed {self.policy.heartbeat_liveness} heartbeats"
            self._stuck(peer, reason)
