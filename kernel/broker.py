"""The broker: routes requests to workers by service name and fails callers fast.

The Majordomo idea from the ZeroMQ Guide (a ROUTER that knows which workers serve which service),
plus a table of jobs in flight: every request handed to a worker is remembered with its caller and
deadline, so when the worker dies, misses heartbeats or overruns the deadline, the caller gets
``worker_lost`` / ``deadline_exceeded`` at once instead of waiting forever.

The broker reads only envelopes; bodies and buffer frames are forwarded untouched.

Workers on other machines reach it over a second ROUTER, the kernel's CURVE-only tcp socket (:mod:`.curve`):
their identities get :data:`REMOTE_PREFIX` (ZeroMQ reserves identities that start with a zero byte and makes
up 5-byte ones itself; an ipc peer that picks such an identity anyway is refused), so both sockets share one
table of peers and jobs and a reply always leaves by the socket its peer came in on. A remote peer may only
be a worker: READY, heartbeats, replies to its own jobs, goodbye; anything else is refused, so an admitted key
serves jobs but cannot search the index, read documents or stop the kernel.

Its length (~540 lines): routing and the job table are one set of rules (every row of protocol.md's
job table is a branch here) and are read together.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, Fault, ProtocolError
from foldermind.protocol.messages import Disconnect, Envelope, Heartbeat, JobCancel, WorkerReady
from foldermind.protocol.runtime.config import BusPolicy

log = logging.getLogger("foldermind.broker")

HB_SUFFIX = b"/hb"
REMOTE_PREFIX = b"\x00tcp/"
"""Prepended to the identity of every peer on the tcp socket: see the module docstring."""
SPEED_WEIGHT = 0.3
"""How much the latest job moves a member's running averages, its time per job and its share of jobs done."""
UNPROVEN_S = 1e6
"""How long a member that has failed every job of a kind it was given is taken to need for one: it is sent
one only when no member that answers them is left or would be free sooner."""
MEMBER_FAULTS = frozenset((Fault.LOST, Fault.UNAVAILABLE))
"""Error replies that are the member's failure, not the request's (its handler crashed, its model is not
loaded): another member may do the job. The rest (a corrupt file, a bad request, a refusal that asks for the
file's bytes) would fail anywhere and say nothing of the member."""


class Membership(Protocol):
    """What the broker asks of the supervisor."""

    def accept_ready(self, name: str, service: str, pid: int) -> bool: ...

    def worker_gone(self, name: str, pid: int, reason: str, kill: bool) -> None: ...

    def may_serve(self, target: str) -> bool: ...

    def demand(self, target: str) -> None:
        """A job for ``target`` is queued with no free worker: start an on-demand one if there is one to start."""
        ...

    def went_idle(self, name: str, pid: int) -> bool:
        """An on-demand worker with nothing in hand asks to go; True: let it."""
        ...


class RemoteMembership(Protocol):
    """What the broker asks of the kernel's registry of remote members (:mod:`.remote`)."""

    def admit(self, name: str, service: str, pid: int, key: str) -> str | None:
        """None if a READY from a tcp peer admitted under ``key`` may join; else why not."""
        ...

    def lost(self, name: str, reason: str) -> None: ...


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
    key: str | None = None  # a remote member: the allow-list name of its key
    took: dict[str, float] = field(default_factory=dict)  # by kind: seconds per job, a moving average
    done_share: dict[str, float] = field(default_factory=dict)  # by kind: jobs done (1) or failed by it (0), averaged
    last_reply: float = 0.0  # monotonic

    @property
    def free(self) -> bool:
        return len(self.jobs) < self.capacity

    def finishes_in(self, kind: str) -> float:
        """When one more job of ``kind`` would be done here, from its measured time per job done: a worker runs
        its jobs one after another, so those it holds come first, and a member that fails a share of its jobs
        needs that many more tries per job done. 0 until one is measured (a new member is tried); a member
        that has only failed them, :data:`UNPROVEN_S` (a fast failure must not look like a fast member)."""
        share = self.done_share.get(kind, 1.0)
        took = self.took.get(kind)
        if took is None:
            return 0.0 if share >= 1.0 else UNPROVEN_S
        return took / max(share, 1 / UNPROVEN_S) * (len(self.jobs) + 1)

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
class _Overrun:
    """A worker still busy with a job whose caller was already told ``deadline_exceeded``."""

    peer: Peer
    until: float  # monotonic: if it has not answered by then, it is stuck


class _RateLimitedLog:
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


class Broker:
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
        self.control: ControlHandler | None = None
        self.peers: dict[bytes, Peer] = {}
        self._dropped: OrderedDict[bytes, str] = OrderedDict()
        self.by_name: dict[str, Peer] = {}
        self.by_service: dict[str, list[Peer]] = {}
        self.jobs: dict[str, Job] = {}
        self.queues: dict[str, deque[Job]] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._overruns: dict[str, _Overrun] = {}  # by job id
        self._next_liveness_check = 0.0
        self._bad = _RateLimitedLog()
        self.accepting = True
        self.stats = {"routed": 0, "dropped_bad": 0}

    # ---------------------------------------------------------------------------------------
    # incoming

    def on_readable(self, remote: bool = False) -> None:
        """Drain the bus socket (``remote``: the tcp one)."""
        sock = self.remote_sock if remote and self.remote_sock is not None else self.sock
        # Ask before reading: ending each drain on a failed recv would raise zmq.Again every time.
        while frames.readable(sock):
            raw = frames.recv_frames(sock)
            if sock is self.remote_sock and not self._admit_remote(raw):
                continue
            try:
                packet = frames.parse(raw, 1, self.policy.max_message_bytes)
            except ProtocolError as exc:
                self.stats["dropped_bad"] += 1
                sender = frames.identity_of(raw[0]) if raw else b"?"
                if sock is self.remote_sock:
                    sender = REMOTE_PREFIX + sender
                self._bad.warn("dropped a bad message from %r: %s", sender, exc)
                env = getattr(exc, "env", None)
                if isinstance(env, Envelope):
                    self._refuse_oversized(sender, env, str(exc))
                continue
            ident = frames.identity_of(packet.route[0])
            if sock is self.remote_sock:
                ident = REMOTE_PREFIX + ident
            elif ident.startswith(REMOTE_PREFIX):
                self.stats["dropped_bad"] += 1
                self._bad.warn("dropped a message from an ipc peer whose identity passes for a remote one")
                continue
            try:
                self._dispatch(ident, packet)
            except Exception as exc:
                # A well-framed message whose body holds the wrong types (a dict where a name goes, ...)
                # must cost its sender a refusal, not the kernel its life (and every worker with it).
                self.stats["dropped_bad"] += 1
                self._bad.warn("could not handle %s from %r: %s", packet.env.kind, ident, type(exc).__name__)
                log.debug("could not handle %s", packet.env.kind, exc_info=True)
                if not packet.env.kind.endswith(".reply") and packet.env.status == "ok":
                    info = ErrorInfo(ErrorCode.BAD_REQUEST, f"the kernel could not handle this {packet.env.kind}")
                    with contextlib.suppress(Exception):
                        self.reply_error(ident, packet.env, info)

    def _admit_remote(self, raw: list[Any]) -> bool:
        """A message from the tcp socket: only what a worker sends goes on (see the module docstring)."""
        ident = frames.identity_of(raw[0]) if raw else b""
        if ident.endswith(HB_SUFFIX):
            return True
        try:
            env = frames.parse(raw, 1, self.policy.max_message_bytes).env
        except ProtocolError:
            return True  # on_readable refuses it, with the usual log
        if env.kind in (WorkerReady.KIND, Disconnect.KIND) or env.kind.endswith(".reply") or env.status == "partial":
            return True
        self.stats["dropped_bad"] += 1
        self._bad.warn("refused %s from a remote peer: a remote worker may only serve jobs", env.kind)
        if env.status == "ok" and env.kind != JobCancel.KIND:
            info = ErrorInfo(ErrorCode.BAD_REQUEST, "a remote worker may only serve jobs")
            self._send(REMOTE_PREFIX + ident, env.reply("kernel", status="error", error=info), {})
        return False

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

    def _dispatch(self, ident: bytes, packet: frames.Packet) -> None:
        env = packet.env
        kind = env.kind
        if ident.endswith(HB_SUFFIX):
            self._on_heartbeat(ident, packet)
            return
        peer = self.peers.get(ident)
        if peer is not None:
            peer.last_seen = time.monotonic()
        if kind == WorkerReady.KIND:
            self._on_ready(ident, packet)
        elif kind == Disconnect.KIND:
            if peer is not None and _reason(packet) == Disconnect.IDLE:
                self._on_idle(peer)
            elif peer is not None:
                self.drop(peer, "disconnected", ErrorCode.WORKER_LOST)
                self.membership.worker_gone(peer.name, peer.pid, "disconnected", kill=False)
        elif kind.endswith(".reply") or env.status == "partial":  # a partial's kind is its body's
            self._on_reply(peer, packet)
        elif kind == JobCancel.KIND:
            self._on_cancel(ident, packet)
        elif env.to == "kernel":
            if self.control is not None:
                self.control(ident, packet)
        else:
            self._on_request(ident, packet)

    def _refuse_oversized(self, sender: bytes, env: Envelope, why: str) -> None:
        info = ErrorInfo(ErrorCode.MESSAGE_TOO_LARGE, why)
        if not env.kind.endswith(".reply"):
            self.reply_error(sender, env, info)
            return
        # A reply too big to carry: its caller learns so now, and the worker, which did its job,
        # is not mistaken for a hung one when the deadline would have passed.
        job = self.jobs.get(env.cid)
        peer = self.peers.get(sender)
        if job is None or job.done or peer is None or job.worker is not peer:
            return
        self.reply_error(job.client, job.env, ErrorInfo(ErrorCode.MESSAGE_TOO_LARGE, f"the reply was too large: {why}"))
        self._finish(job)
        self._pump(peer.name)  # first: jobs sent to this very worker can go nowhere else
        self._pump(peer.service)

    def _on_heartbeat(self, hb_ident: bytes, packet: frames.Packet) -> None:
        env = packet.env
        job_ident = hb_ident[: -len(HB_SUFFIX)]
        peer = self.peers.get(job_ident)
        if peer is not None:
            peer.last_seen = time.monotonic()
            try:
                beat = packet.body()
            except ProtocolError as exc:
                self._bad.warn("bad heartbeat from %s: %s", peer.name, exc)
            else:
                if isinstance(beat, Heartbeat):
                    peer.note = beat.note[:300]  # room for a fault's path and its fix
                    peer.loading = beat.loading
                    if beat.progress != peer.progress:
                        peer.progress = beat.progress
                        if peer.jobs:
                            peer.progressed = peer.last_seen
        elif job_ident in self._dropped:
            # Declared lost (say, a GIL stall in a `worker run` copy) yet alive after all: it must
            # not linger unrouted, so tell it to go.
            self._send_disconnect(job_ident, self._dropped[job_ident], Disconnect.DROPPED)
            return
        # Answer every other heartbeat, READY or not yet: a worker still in setup() must not
        # think the kernel has died.
        reply = Envelope(kind=Heartbeat.KIND, src="kernel", cid=env.id)
        self._send(hb_ident, reply, Heartbeat("kernel", 0))

    def _on_ready(self, ident: bytes, packet: frames.Packet) -> None:
        try:
            body = packet.body()
        except ProtocolError as exc:
            self._bad.warn("bad READY from %r: %s", ident, exc)
            return
        assert isinstance(body, WorkerReady)
        key: str | None = None
        if ident.startswith(REMOTE_PREFIX):
            key = frames.user_id(packet.body_frame) or "?"
            taken = self.by_name.get(body.name)
            why: str | None = "no remote members" if self.remote is None else None
            # The same key may take its name back (a member joining again after a link went down, before the
            # kernel noticed: the old connection is dropped first); another key may not take it over.
            if taken is not None and taken.key != key:
                why = "that name is taken"
            if why is None and self.remote is not None:
                if taken is not None:
                    self.drop(taken, "replaced by a new READY", ErrorCode.WORKER_LOST, replaced=True)
                why = self.remote.admit(body.name, body.service, body.pid, key)
            if why is not None:
                log.warning("refused a remote READY (key %s): %s", key, why)
                self._send_disconnect(ident, body.name, Disconnect.REFUSED)
                return
        elif not self.membership.accept_ready(body.name, body.service, body.pid):
            log.warning("refused READY from %s (pid %d): not a slot the supervisor runs", body.name, body.pid)
            self._send_disconnect(ident, body.name, Disconnect.REFUSED)
            return
        old = self.by_name.get(body.name)
        if old is not None:
            self.drop(old, "replaced by a new READY", ErrorCode.WORKER_LOST, replaced=True)
        peer = Peer(body.name, body.service, body.pid, ident, max(1, body.capacity), time.monotonic(), key=key)
        self.peers[ident] = peer
        self.by_name[peer.name] = peer
        self.by_service.setdefault(peer.service, []).append(peer)
        where = f", remote, key {key}" if key is not None else ""
        log.info("%s ready (pid %d, service %s%s)", peer.name, peer.pid, peer.service, where)
        self._pump(peer.name)  # first: jobs sent to this very worker can go nowhere else
        self._pump(peer.service)
        if self.queues.get(peer.service):
            self.membership.demand(peer.service)  # jobs still wait: the next on-demand member of a pool starts

    def _on_idle(self, peer: Peer) -> None:
        """An on-demand worker asks to go idle. With a job routed to it meanwhile (it will arrive) it stays, and
        asks again after another idle while; else it leaves routing first, so nothing can be sent to it after
        the answer, and is told it may go. A remote member has no slot to go idle in."""
        if peer.jobs or peer.key is not None or not self.membership.went_idle(peer.name, peer.pid):
            return
        self.drop(peer, "idle", ErrorCode.WORKER_LOST)  # holds no job: fails none
        self._dropped.pop(peer.ident, None)  # let go, not lost: its last heartbeats are answered, not dismissed
        self._send(peer.ident, Envelope(kind=Disconnect.KIND, src="kernel"), Disconnect(peer.name, Disconnect.IDLE))

    def _on_reply(self, peer: Peer | None, packet: frames.Packet) -> None:
        env = packet.env
        job = self.jobs.get(env.cid)
        if job is None or job.done or peer is None or job.worker is not peer:
            if env.status != "partial":
                self._overrun_ended(peer, env.cid)
            return  # answered after its deadline, or by a worker already declared lost
        self._forward(job.client, packet)
        self.stats["routed"] += 1
        if env.status == "partial":
            return
        now = time.monotonic()
        if env.status == "ok":
            peer.measured(job.env.kind, job.assigned, now)
        elif env.error is not None and env.error.code.fault in MEMBER_FAULTS:
            peer.measured(job.env.kind, job.assigned, now, done=False)
        else:  # the request's own failure (or a refusal that comes at once): nothing of the member's speed
            peer.last_reply = now
        self._finish(job)
        self._pump(peer.name)  # first: jobs sent to this very worker can go nowhere else
        self._pump(peer.service)

    def _on_cancel(self, client: bytes, packet: frames.Packet) -> None:
        job = self.jobs.get(packet.env.cid)
        if job is None or job.done or job.client != client:
            return  # finished already, or not this caller's job to cancel
        if job.worker is None:
            self.reply_error(client, job.env, ErrorInfo(ErrorCode.CANCELLED, "cancelled while queued"))
            self._finish(job)
            return
        # The job socket's thread is busy with this very job; the heartbeat thread is listening.
        self._forward(job.worker.ident + HB_SUFFIX, packet)

    def _on_request(self, client: bytes, packet: frames.Packet) -> None:
        env = packet.env
        now = time.monotonic()
        if not self.accepting:
            self.reply_error(client, env, ErrorInfo(ErrorCode.SHUTTING_DOWN, "foldermind is stopping"))
            return
        target = env.to
        peers = self.by_service.get(target)
        if peers is None:
            peer = self.by_name.get(target)
            peers = [peer] if peer is not None else None
        if peers is None and (not target or not self.membership.may_serve(target)):
            self.reply_error(
                client,
                env,
                ErrorInfo(ErrorCode.SERVICE_UNAVAILABLE, f"no worker serves {target!r}", retryable=False),
            )
            return
        budget = env.deadline - time.time() if env.deadline else self.policy.default_deadline_s
        job = Job(env=env, client=client, packet=packet, target=target, deadline=now + budget, budget=budget)
        if budget <= 0:
            self.reply_error(client, env, ErrorInfo(ErrorCode.DEADLINE_EXCEEDED, "deadline already passed"))
            return
        self.jobs[env.id] = job
        heapq.heappush(self._deadlines, (job.deadline, env.id))
        if peers and not self.queues.get(target):
            # The common case, without a queue: straight to the free worker that will be done first.
            best = _pick(peers, env.kind)
            if best is not None:
                self._assign(job, best)
                return
        self.queues.setdefault(target, deque()).append(job)
        self._pump(target)
        if self.queues[target]:
            self.membership.demand(target)  # an on-demand worker, IDLE, is started for it

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
        """Hand queued jobs for ``target`` to free workers, the one that will be done first first."""
        queue = self.queues.get(target)
        if not queue:
            return
        candidates = self._candidates(target)
        while queue:
            if queue[0].done:
                queue.popleft()
                continue
            best = _pick(candidates, queue[0].env.kind, len(queue))
            if best is None:
                return
            self._assign(queue.popleft(), best)

    def _assign(self, job: Job, peer: Peer) -> None:
        job.worker = peer
        job.assigned = time.monotonic()
        peer.jobs.add(job.env.id)
        self._forward(peer.ident, job.packet)

    def _finish(self, job: Job) -> None:
        job.done = True
        self.jobs.pop(job.env.id, None)
        if job.worker is not None:
            job.worker.jobs.discard(job.env.id)

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
        # A job held back for this member (see _pick) goes to one still here.
        self._pump(peer.service)

    def dismiss_keys(self, allowed: set[str], reason: str) -> None:
        """Drop every remote member whose key name is not in ``allowed`` (a ``bus deny``) and tell it to go.
        Its connection stays open (ZeroMQ cannot close one peer of a bound socket), but nothing it sends is
        routed any more: replies from a dropped peer are ignored, and a new READY needs an allowed key."""
        for peer in [p for p in self.peers.values() if p.key is not None and p.key not in allowed]:
            self.drop(peer, reason, ErrorCode.WORKER_LOST)
            self._send_disconnect(peer.ident, peer.name, reason)

    def drop_name(self, name: str, pid: int, reason: str) -> None:
        peer = self.by_name.get(name)
        if peer is not None and peer.pid == pid:
            self.drop(peer, reason, ErrorCode.WORKER_LOST)

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

    def _overran(self, worker: Peer, job_id: str, now: float) -> None:
        """The caller has its ``deadline_exceeded``; the worker gets ``overrun_grace_s`` to notice.

        A worker past a deadline is usually slow, not hung: a CPU-starved model call that checks its
        deadline between slices can overshoot by a slice. Killing it would cost a model reload and
        fail every caller meanwhile, so it is sent a ``job.cancel`` and keeps the slot busy until it
        answers (the answer is dropped) or the grace runs out (then it is stuck: killed, replaced)."""
        grace = self.policy.overrun_grace_s
        if grace <= 0:
            self._stuck(worker, "missed a job deadline")
            return
        worker.jobs.add(job_id)  # its job thread is still busy: nothing new goes there meanwhile
        self._overruns[job_id] = _Overrun(worker, now + grace)
        cancel = Envelope(kind=JobCancel.KIND, src="kernel", to=worker.name, cid=job_id)
        self._send(worker.ident + HB_SUFFIX, cancel, JobCancel("deadline"))
        log.warning("%s overran a job deadline; cancelled, %g s to answer before it is replaced", worker.name, grace)

    def _overrun_ended(self, peer: Peer | None, job_id: str) -> None:
        overrun = self._overruns.get(job_id)
        if overrun is None or overrun.peer is not peer:
            return
        del self._overruns[job_id]
        overrun.peer.jobs.discard(job_id)
        log.info("%s answered a job after its deadline; kept", overrun.peer.name)
        self._pump(overrun.peer.name)
        self._pump(overrun.peer.service)

    def _stuck(self, worker: Peer, reason: str) -> None:
        """Declared lost while its process may still run: dropped from routing, killed, replaced."""
        self.drop(worker, reason, ErrorCode.WORKER_LOST)
        self.membership.worker_gone(worker.name, worker.pid, reason, kill=True)

    # ---------------------------------------------------------------------------------------
    # timers

    def next_due(self) -> float:
        due = self._next_liveness_check
        while self._deadlines and self._deadlines[0][1] not in self.jobs:
            heapq.heappop(self._deadlines)
        if self._deadlines:
            due = min(due, self._deadlines[0][0])
        for overrun in self._overruns.values():
            due = min(due, overrun.until)
        return due

    def tick(self, now: float) -> None:
        while self._deadlines and self._deadlines[0][0] <= now:
            _, job_id = heapq.heappop(self._deadlines)
            job = self.jobs.get(job_id)
            if job is None or job.done:
                continue
            worker = job.worker
            if worker is not None and now - worker.progressed < job.budget and worker.progressed > job.assigned:
                # Slow, not hung: it reported progress on this job within the time the job was given.
                job.deadline = worker.progressed + job.budget
                heapq.heappush(self._deadlines, (job.deadline, job_id))
                continue
            where = f"at {worker.name}" if worker else "waiting for a free worker"
            missed = f"{job.env.kind} missed its deadline {where}"
            if worker is not None and worker.progress:  # a worker that counts progress: it counted none
                missed = f"{job.env.kind} made no progress for {job.budget:.3g} s {where}"
            # Retryable only if no worker ever started on it: then nothing ran and nothing is suspect.
            info = ErrorInfo(ErrorCode.DEADLINE_EXCEEDED, missed, worker is None)
            self.reply_error(job.client, job.env, info)
            self._finish(job)
            if worker is not None:
                self._overran(worker, job_id, now)
        for job_id, overrun in list(self._overruns.items()):
            if self.peers.get(overrun.peer.ident) is not overrun.peer:
                del self._overruns[job_id]  # lost meanwhile, for another reason
            elif overrun.until <= now:
                del self._overruns[job_id]
                self._stuck(
                    overrun.peer, f"missed a job deadline and was still busy {self.policy.overrun_grace_s:g} s later"
                )
        if now >= self._next_liveness_check:
            self._next_liveness_check = now + self.policy.heartbeat_interval_s / 2
            limit, loading_limit = now - self.policy.liveness_s, now - self.policy.loading_liveness_s
            for peer in [p for p in self.peers.values() if p.last_seen < (loading_limit if p.loading else limit)]:
                if peer.loading:
                    reason = f"missed {self.policy.loading_liveness} heartbeats while loading a model"
                else:
                    reason = f"missed {self.policy.heartbeat_liveness} heartbeats"
                self._stuck(peer, reason)


def _reason(packet: frames.Packet) -> str:
    """A ``worker.disconnect``'s reason ('' if its body cannot be read)."""
    try:
        body = packet.body()
    except ProtocolError:
        return ""
    return body.reason if isinstance(body, Disconnect) else ""


def _pick(peers: Sequence[Peer], kind: str, waiting: int = 1) -> Peer | None:
    """The free member that will be done with one more job of ``kind`` first (by capacity and measured speed;
    among members not measured yet, the least loaded), or None when none is free, or when the busy members
    would be done with the ``waiting`` jobs before that one finishes this job alone: a slower machine takes its
    share of a batch while the faster ones are full, but not the last jobs, which they would finish sooner."""
    best: Peer | None = None
    for p in peers:
        if p.free and (best is None or (p.finishes_in(kind), len(p.jobs)) < (best.finishes_in(kind), len(best.jobs))):
            best = p
    if best is None:
        return None
    alone = best.finishes_in(kind)
    sooner = 0  # jobs the busy members would finish, beyond those they hold, before `best` is done
    for p in peers:
        took = p.took.get(kind)
        if not p.free and took:
            sooner += max(0, int(alone / took) - len(p.jobs))
    return None if alone > 0 and sooner >= waiting else best
