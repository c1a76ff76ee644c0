"""The supervisor: one OS process per worker slot, explicit states, a named restart policy.

States (supervisord's, made explicit; :mod:`foldermind.kernel.states`)::

    STARTING --READY--> RUNNING --exit/lost--> BACKOFF --delay--> STARTING
        |                  |                       \\--too many restarts--> FAILED
        |                  \\--stop/restart--> STOPPING --exit--> EXITED (or STARTING again)
        |                  \\--idle (on demand)--> STOPPING --exit--> IDLE --a request--> STARTING
        \\--no READY within start_timeout_s (CPU-s while working: .grace): killed, a failure

FAILED stays FAILED until ``foldermind restart``. Every change is published as an
``event.worker_state``.

On demand (``[workers.NAME] on_demand``): such a slot starts IDLE, with no process; the broker's first request
for its service has it spawned (:meth:`Supervisor.demand`) and waits in the queue for its READY. After its idle
time with nothing in hand the worker asks to go (``worker.disconnect``, reason ``idle``); the broker, having
routed it nothing meanwhile, takes it out of routing and lets it go (:meth:`Supervisor.went_idle`), and its exit
makes the slot IDLE again: not a crash, so no backoff and no restart counted. It saves each such worker's
interpreter and imports while idle (the embedder ~105 MiB, the llm ~80 MiB with no model loaded:
docs/benchmarks/llm.md).

The states and their legal changes are declared in :mod:`foldermind.kernel.states`; this module makes them.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO

import psutil

from foldermind.kernel.grace import Grace
from foldermind.kernel.slot import AFTER_STOP_EXTERNAL, AFTER_STOP_IDLE, AFTER_STOP_RESPAWN, AFTER_STOP_REST, Slot
from foldermind.kernel.states import IDLE_NOTE, TRANSITIONS, IllegalTransition, State
from foldermind.protocol.runtime import logs
from foldermind.protocol.runtime.config import SupervisorConfig
from foldermind.protocol.runtime.context import WorkerContext
from foldermind.protocol.runtime.home import Home

log = logging.getLogger("foldermind.supervisor")


START_FIRST = frozenset({"indexer", "frontdoor"})
"""Services spawned before the others, which follow once none of these is STARTING any more (RUNNING, or
given up on): the indexer answers keyword searches and the front door takes MCP clients, and on 2 cores
eight interpreters importing at once delay both: ``start`` returns and keyword search answers ~0.6 s sooner
(measured: docs/tuning.md#worker-start-order)."""


StateListener = Callable[[Slot, State, str], None]


class Supervisor:
    def __init__(self, home: Home, config: SupervisorConfig, on_state: StateListener) -> None:
        self.home = home
        self.config = config
        self.on_state = on_state
        self.slots: dict[str, Slot] = {}
        for name, service in config.instances():
            self.slots[name] = Slot(name, service, config.workers[service], config.restart_policy_for(service))
        self.services = {slot.service for slot in self.slots.values()}
        self.stopping_all = False
        self.held: list[Slot] = []
        """Slots :meth:`start_all` has not spawned yet: they wait for the :data:`START_FIRST` ones."""
        # Set by the kernel: drop a worker from routing, failing its jobs at once.
        self.on_gone: Callable[[str, int, str], None] = lambda name, pid, reason: None
        self.on_fd_change: Callable[[int, bool], None] = lambda fd, add: None

    # ---------------------------------------------------------------------------------------
    # state changes

    def _set(self, slot: Slot, new: State, reason: str) -> None:
        old = slot.state
        if new not in TRANSITIONS[old]:
            raise IllegalTransition(f"{slot.name}: {old} -> {new} is not a legal change ({reason})")
        slot.state = new
        level = logging.WARNING if new in (State.BACKOFF, State.FAILED) else logging.INFO
        log.log(level, "%s: %s -> %s (%s)", slot.name, old, new, reason)
        self.on_state(slot, old, reason)
        if self.held and old is State.STARTING and slot.service in START_FIRST:
            self._release_held()

    def start_all(self) -> None:
        """Spawn the :data:`START_FIRST` slots, and the rest once those have started (or failed to); on-demand
        slots wait IDLE for their first request."""
        idle = [s for s in self.slots.values() if self.config.starts_idle(s.service)]
        for slot in idle:
            self._set(slot, State.IDLE, IDLE_NOTE)
        waiting = [s for s in self.slots.values() if s not in idle]
        first = [s for s in waiting if s.service in START_FIRST]
        self.held = [s for s in waiting if s.service not in START_FIRST]
        for slot in first:
            self.spawn(slot)
        self._release_held()

    def _release_held(self) -> None:
        if any(s.state is State.STARTING for s in self.slots.values() if s.service in START_FIRST):
            return
        held, self.held = self.held, []
        for slot in held:
            if slot.state is State.EXITED and slot.proc is None and slot.external_pid is None:
                self.spawn(slot)

    def spawn(self, slot: Slot) -> None:
        ctx = WorkerContext(
            name=slot.name,
            service=slot.service,
            bus_endpoint=self.home.bus_endpoint,
            heartbeat_interval_s=self.config.bus.heartbeat_interval_s,
            heartbeat_liveness=self.config.bus.heartbeat_liveness,
            max_message_bytes=self.config.bus.max_message_bytes,
            kernel_pid=os.getpid(),
            log_file=str(self.home.log_file(slot.name)),
            log_max_mb=self.config.kernel.log_max_mb,
            log_backups=self.config.kernel.log_backups,
            home=str(self.home.root or ""),
            idle_exit_s=self.config.idle_exit_for(slot.service),
        )
        # A worker's own `env` table wins over the [ingest] defaults.
        env = {**os.environ, **self.config.ingest_env(), **slot.spec.env, **ctx.to_env()}
        if not self.home.root:
            env.pop("FOLDERMIND_HOME", None)
        stderr_log = self._stderr_file(slot.name)
        slot.stderr_at = stderr_log.seek(0, os.SEEK_END)
        try:
            slot.proc = subprocess.Popen(
                [sys.executable, "-m", "foldermind.workers", slot.spec.module],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stderr_log,
                stderr=stderr_log,
                close_fds=True,
                # Its own process group: a Ctrl-C meant for a foreground kernel reaches the kernel only,
                # which then stops the workers in order. Not its own session: Linux's autogroup scheduling
                # shares the CPU fairly between sessions whatever their nice values, so a parser or the
                # indexer's ingest thread in a session of its own took the embedder's cores as an equal.
                process_group=0,
            )
        except OSError as exc:
            slot.failed_with(f"could not start: {exc}")
            self._failed_exit(slot, time.monotonic())
            return
        finally:
            stderr_log.close()
        if slot.spec.nice:
            try:
                os.setpriority(os.PRIO_PROCESS, slot.proc.pid, slot.spec.nice)
            except OSError as exc:
                log.warning("%s: could not lower its priority: %s", slot.name, exc)
        slot.external_pid = None
        slot.started_at = time.monotonic()
        slot.running_since = None
        slot.grace = Grace(slot.proc.pid, slot.policy.start_timeout_s, slot.started_at)  # slow is not hung
        slot.due = slot.grace.due
        slot.after_stop = AFTER_STOP_REST
        slot.stop_report = ""
        slot.kill_reason = None
        self._watch(slot)
        self._set(slot, State.STARTING, f"spawned pid {slot.proc.pid}")

    def _stderr_file(self, name: str) -> IO[bytes]:
        # Anything a worker prints outside logging (an interpreter crash, a C library abort) lands here.
        return open(self.home.log_dir / f"{name}.stderr.log", "ab")

    def _watch(self, slot: Slot) -> None:
        """Get a pidfd so the event loop hears of the exit at once instead of polling for it."""
        slot.pidfd = None
        if slot.proc is None or not hasattr(os, "pidfd_open"):
            return
        try:
            slot.pidfd = os.pidfd_open(slot.proc.pid)
        except OSError:
            return
        self.on_fd_change(slot.pidfd, True)

    def _unwatch(self, slot: Slot) -> None:
        if slot.pidfd is not None:
            self.on_fd_change(slot.pidfd, False)
            os.close(slot.pidfd)
            slot.pidfd = None

    def on_fd(self, fd: int) -> None:
        """A pidfd became readable: that process has exited."""
        for slot in self.slots.values():
            if slot.pidfd == fd:
                self.reap(slot)
            elif slot.ext_pidfd == fd:
                self._external_ended(slot, "process ended")

    # ---------------------------------------------------------------------------------------
    # answers to the broker (Membership)

    def accept_ready(self, name: str, service: str, pid: int) -> bool:
        slot = self.slots.get(name)
        if slot is None or slot.service != service or slot.pid != pid:
            return False
        if slot.state is not State.STARTING:
            return False
        slot.running_since = time.monotonic()
        slot.due, slot.grace = None, None
        self._set(slot, State.RUNNING, "ready")
        return True

    def may_serve(self, target: str) -> bool:
        if self.stopping_all:
            return False
        live = (State.STARTING, State.RUNNING, State.BACKOFF, State.IDLE)
        slot = self.slots.get(target)
        if slot is not None:
            going_idle = slot.state is State.STOPPING and slot.after_stop == AFTER_STOP_IDLE
            return slot.state in live or going_idle or slot.external_pid is not None or slot in self.held
        return any(
            s.service == target
            and (s.state in live or (s.state is State.STOPPING and s.after_stop != AFTER_STOP_REST) or s in self.held)
            for s in self.slots.values()
        )

    def demand(self, target: str) -> None:
        """A job for ``target`` waits with no free worker: start an IDLE slot of it, unless one is starting
        already (it will take the queue; a longer queue starts the next one once it is READY and full)."""
        if self.stopping_all:
            return
        slots = self.targets(target)
        if any(s.state is State.STARTING for s in slots):
            return
        for slot in slots:
            if slot.state is State.IDLE:
                self.spawn(slot)
                return
        for slot in slots:
            if slot.state is State.STOPPING and slot.after_stop == AFTER_STOP_IDLE:
                slot.after_stop = AFTER_STOP_RESPAWN  # on its way out idle: start it again once gone
                return

    def went_idle(self, name: str, pid: int) -> bool:
        """An on-demand worker with no job in hand asks to go: True (the broker lets it go) if it is our RUNNING
        child; its exit makes the slot IDLE. Anything else stays as it is (a foreground copy is the developer's)."""
        slot = self.slots.get(name)
        if slot is None or self.stopping_all or not slot.spec.on_demand or slot.state is not State.RUNNING:
            return False
        if slot.external_pid is not None or slot.pid != pid or slot.proc is None:
            return False  # `slot.pid` is our child's only while it lives
        slot.after_stop = AFTER_STOP_IDLE
        self._give_grace(slot)  # it exits by itself; killed if it does not
        self._set(slot, State.STOPPING, "idle: exits until a request needs it")
        return True

    def worker_gone(self, name: str, pid: int, reason: str, kill: bool) -> None:
        slot = self.slots.get(name)
        if slot is None:
            return
        if slot.external_pid == pid:
            # A goodbye (kill=False) is the developer stopping `worker run`: a handover back, not a failure.
            if kill:
                slot.failed_with(reason)
            self._external_ended(slot, reason)
        elif slot.proc is not None and slot.proc.returncode is None and slot.proc.pid == pid:
            if slot.state is State.STOPPING:
                return  # on its way out as asked
            slot.kill_reason = reason
            if kill:
                slot.proc.kill()  # the exit is handled when the pidfd fires (or on the next poll)
            else:
                # It said goodbye on its own: give it the grace period to exit, then kill it.
                self._give_grace(slot)

    # ---------------------------------------------------------------------------------------
    # exits

    def reap(self, slot: Slot) -> None:
        """Handle the exit of ``slot``'s process, if it has exited."""
        proc = slot.proc
        if proc is None or proc.poll() is None:
            return
        self._unwatch(slot)
        code = proc.returncode
        how = "exited 0" if code == 0 else (f"killed by signal {-code}" if code < 0 else f"exited with status {code}")
        if code > 0 and (cause := logs.last_line(self.home.log_dir / f"{slot.name}.stderr.log", slot.stderr_at)):
            how = f"{how}: {cause}"
        now = time.monotonic()
        slot.proc, slot.grace = None, None
        self.on_gone(slot.name, proc.pid, how)
        if slot.state is State.STOPPING:
            slot.stop_report = slot.stop_report or (f"{slot.kill_reason} ({how})" if slot.kill_reason else how)
            if slot.after_stop == AFTER_STOP_RESPAWN and not self.stopping_all:
                self.spawn(slot)
            elif slot.after_stop == AFTER_STOP_EXTERNAL and not self.stopping_all:
                slot.due = now + slot.policy.start_timeout_s
                self._set(slot, State.STARTING, f"stood down for `worker run` pid {slot.external_pid}")
            elif slot.after_stop == AFTER_STOP_IDLE and not self.stopping_all:
                slot.due = None
                self._set(slot, State.IDLE, f"went idle ({slot.stop_report})")
            else:
                self._set(slot, State.EXITED, slot.stop_report)
            return
        ended = f"{slot.kill_reason} ({how})" if slot.kill_reason else how
        slot.failed_with(ended)
        if self.stopping_all or slot.policy.policy == "never" or (code == 0 and slot.policy.policy == "on-failure"):
            self._set(slot, State.EXITED, ended)
            return
        self._failed_exit(slot, now)

    def _failed_exit(self, slot: Slot, now: float) -> None:
        policy = slot.policy
        if slot.running_since is not None and now - slot.running_since >= policy.stable_after_s:
            slot.consecutive_failures = 0
        slot.running_since = None
        slot.recent_restarts.append(now)
        while slot.recent_restarts and now - slot.recent_restarts[0] > policy.window_s:
            slot.recent_restarts.popleft()
        if len(slot.recent_restarts) > policy.max_restarts:
            slot.due = None
            self._set(
                slot,
                State.FAILED,
                f"restart limit: {len(slot.recent_restarts)} exits in {policy.window_s:g} s; last: {slot.last_error}",
            )
            return
        delay = min(policy.backoff_initial_s * 2**slot.consecutive_failures, policy.backoff_max_s)
        delay *= 1 + random.uniform(-policy.backoff_jitter, policy.backoff_jitter)
        slot.consecutive_failures += 1
        slot.due = now + delay
        self._set(slot, State.BACKOFF, f"{slot.last_error}; restarting in {delay:.2f} s")

    # ---------------------------------------------------------------------------------------
    # timers

    def next_due(self) -> float:
        dues = [s.due for s in self.slots.values() if s.due is not None]
        # Without pidfds, poll for exits twice a second.
        poll_exits = time.monotonic() + 0.5 if not hasattr(os, "pidfd_open") else float("inf")
        return min([*dues, poll_exits])

    def tick(self, now: float) -> None:
        for slot in self.slots.values():
            if slot.pidfd is None:
                self.reap(slot)
            if slot.due is None or slot.due > now:
                continue
            slot.due = None
            if slot.state is State.BACKOFF:
                slot.restarts += 1
                self.spawn(slot)
            elif slot.state is State.STARTING:
                if self._still_working(slot, now):
                    continue
                reason = f"no READY within {slot.policy.start_timeout_s:g} s{self._spent(slot)}"
                if slot.external_pid is not None:
                    slot.failed_with(reason)
                    self._external_ended(slot, reason)
                elif slot.proc is not None:
                    slot.kill_reason = reason
                    slot.proc.kill()
            elif slot.state is State.STOPPING and slot.proc is not None and not self._still_working(slot, now):
                slot.stop_report = f"killed after {slot.policy.stop_grace_s:g} s grace{self._spent(slot)}"
                log.warning("%s: %s", slot.name, slot.stop_report)
                slot.proc.kill()
            elif slot.state is State.RUNNING and slot.proc is not None and not self._still_working(slot, now):
                grace = f"{slot.policy.stop_grace_s:g} s{self._spent(slot)}"
                slot.kill_reason = f"{slot.kill_reason}, then did not exit within {grace}"
                slot.proc.kill()

    def _give_grace(self, slot: Slot) -> None:
        """Its process was asked to stop (or said it would): killed at ``slot.due`` unless it is still working."""
        assert slot.proc is not None
        slot.grace = Grace(slot.proc.pid, slot.policy.stop_grace_s, time.monotonic())
        slot.due = slot.grace.due

    def _still_working(self, slot: Slot, now: float) -> bool:
        """A look at a stopping worker (:mod:`.grace`): True, with its next due time, unless it is to be killed."""
        grace = slot.grace
        if grace is None or slot.proc is None or grace.pid != slot.proc.pid:
            return False
        extended = grace.extended
        if not grace.step(now):
            return False
        slot.due = grace.due
        if extended == 0 and grace.extended == 1:
            what = "start" if slot.state is State.STARTING else "stop"
            log.info("%s: slow to %s but working (%.2f CPU-s so far): its time goes on", slot.name, what, grace.used())
        return True

    @staticmethod
    def _spent(slot: Slot) -> str:
        grace = slot.grace
        return f", still working after {grace.used():.1f} CPU-s" if grace is not None and grace.spent else ""

    # ---------------------------------------------------------------------------------------
    # commands

    def _terminate(self, slot: Slot, after: str, reason: str) -> None:
        slot.after_stop = after
        if slot.proc is None or slot.proc.returncode is not None:
            return
        slot.proc.send_signal(signal.SIGTERM)
        self._give_grace(slot)
        self._set(slot, State.STOPPING, reason)

    def targets(self, target: str) -> list[Slot]:
        if target in self.slots:
            return [self.slots[target]]
        return [s for s in self.slots.values() if s.service == target]

    def restart(self, target: str) -> list[str]:
        """Restart a worker or a pool, FAILED ones included; returns the names restarted."""
        if self.stopping_all:
            return []
        restarted: list[str] = []
        for slot in self.targets(target):
            slot.recent_restarts.clear()
            slot.consecutive_failures = 0
            slot.failed_with(None)
            if slot.external_pid is not None:
                continue  # a `worker run` copy is the developer's to stop
            restarted.append(slot.name)
            slot.restarts += 1
            if slot.proc is not None and slot.proc.returncode is None:
                self.on_gone(slot.name, slot.proc.pid, "restarted by request")
                self._terminate(slot, AFTER_STOP_RESPAWN, "restart requested")
            else:
                self.spawn(slot)
        return restarted

    def attach(self, name: str, pid: int) -> Slot | None:
        """Stand our copy of ``name`` down for a foreground ``worker run`` process ``pid``."""
        slot = self.slots.get(name)
        if slot is None or slot.external_pid is not None:
            return None
        slot.external_pid = pid
        if hasattr(os, "pidfd_open"):
            # Not our child, but a pidfd still tells us the moment it exits (even by kill -9).
            try:
                slot.ext_pidfd = os.pidfd_open(pid)
                self.on_fd_change(slot.ext_pidfd, True)
            except OSError:
                slot.ext_pidfd = None
        if slot.proc is not None and slot.proc.returncode is None:
            self.on_gone(name, slot.proc.pid, "stood down for `worker run`")
            self._terminate(slot, AFTER_STOP_EXTERNAL, f"stood down for `worker run` pid {pid}")
        else:
            slot.due = time.monotonic() + slot.policy.start_timeout_s
            self._set(slot, State.STARTING, f"waiting for `worker run` pid {pid}")
        return slot

    def _external_ended(self, slot: Slot, reason: str) -> None:
        if slot.external_pid is None:
            return
        log.info("%s: `worker run` copy ended (%s); taking it back", slot.name, reason)
        self.on_gone(slot.name, slot.external_pid, reason)
        self._release_external(slot)
        if self.stopping_all:
            return
        if slot.proc is not None and slot.proc.returncode is None:
            slot.after_stop = AFTER_STOP_RESPAWN  # our copy is still stopping: respawn once it has gone
        else:
            self.spawn(slot)

    def _release_external(self, slot: Slot) -> None:
        slot.external_pid = None
        if slot.ext_pidfd is not None:
            self.on_fd_change(slot.ext_pidfd, False)
            os.close(slot.ext_pidfd)
            slot.ext_pidfd = None

    def stop_all(self) -> None:
        self.stopping_all = True
        self.held = []
        for slot in self.slots.values():
            slot.due = None if slot.state is not State.STOPPING else slot.due
            if slot.proc is not None and slot.proc.returncode is None:
                self._terminate(slot, AFTER_STOP_REST, "stop requested")
            elif slot.state is not State.EXITED:
                slot.stop_report = slot.stop_report or f"was {slot.state}"
                self._release_external(slot)
                self._set(slot, State.EXITED, "stop requested")

    @property
    def all_stopped(self) -> bool:
        return all(s.proc is None or s.proc.returncode is not None for s in self.slots.values())

    def report(self) -> dict[str, str]:
        return {s.name: s.stop_report or "not running" for s in self.slots.values()}

    def rss(self, slot: Slot) -> int | None:
        pid = slot.pid
        if pid is None:
            return None
        try:
            return int(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            return None
