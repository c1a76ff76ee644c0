"""The broker: routes requests to workers by service name and fails callers fast.

The Majordomo idea from the ZeroMQ Guide: a ROUTER that knows which workers serve which service. It reads only
envelopes; bodies and buffer frames are forwarded untouched. Each request goes to the member that will be done
first (:mod:`.members`), or waits in its target's queue; the table of jobs in flight (:mod:`.jobs`) lets it tell
a caller ``worker_lost`` / ``deadline_exceeded`` at once when the worker dies, goes silent or overruns.
Every row of protocol.md's job table is a branch here. Processes are the supervisor's business: the broker
asks and tells it (:mod:`.membership`).

Workers on other machines reach it over a second ROUTER, the kernel's CURVE-only tcp socket, under identities
that start with :data:`~.identities.REMOTE_PREFIX`: both sockets share one table of peers and jobs, and a reply
leaves by the socket its peer came in on. A remote peer may only be a worker: READY, heartbeats, replies to its
own jobs, goodbye; anything else is refused, so an admitted key serves jobs but cannot search the index, read
documents or stop the kernel.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from typing import Any

from foldermind.kernel.bus.identities import HB_SUFFIX, REMOTE_PREFIX
from foldermind.kernel.bus.jobs import Job
from foldermind.kernel.bus.members import MEMBER_FAULTS, Peer, pick
from foldermind.kernel.bus.routing import Routing
from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, ErrorInfo, OversizedMessage, ProtocolError
from foldermind.protocol.messages import Disconnect, Envelope, Heartbeat, JobCancel, WorkerReady

log = logging.getLogger("foldermind.broker")


class Broker(Routing):
    """Reads each message from the bus sockets and routes it (the module docstring says how)."""

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
                if isinstance(exc, OversizedMessage) and isinstance(exc.env, Envelope):
                    self._refuse_oversized(sender, exc.env, str(exc))
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
        peer.background = frozenset(body.background)
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
        self.jobs.add(job)
        if peers and not self.queues.get(target):
            # The common case, without a queue: straight to the free worker that will be done first.
            best = pick(peers, env.kind)
            if best is not None:
                self._assign(job, best)
                return
        self.queues.setdefault(target, deque()).append(job)
        self._pump(target)
        if self.queues[target]:
            self.membership.demand(target)  # an on-demand worker, IDLE, is started for it


def _reason(packet: frames.Packet) -> str:
    """A ``worker.disconnect``'s reason ('' if its body cannot be read)."""
    try:
        body = packet.body()
    except ProtocolError:
        return ""
    return body.reason if isinstance(body, Disconnect) else ""
