"""One worker slot (``parser#2``): its state, the process filling it, its restart bookkeeping and its error.

The supervisor (:mod:`foldermind.kernel.supervisor`) owns the slots and makes every state change; a slot only
records, and tells whether its last error is still the worker's state now (:meth:`Slot.error_now`).
"""

from __future__ import annotations

import subprocess
import time
from collections import deque
from dataclasses import dataclass, field

from foldermind.kernel.grace import Grace
from foldermind.kernel.states import State
from foldermind.protocol.runtime.config import RestartPolicy, WorkerSpec

# What to do once a STOPPING worker is gone.
AFTER_STOP_REST = "rest"  # stay EXITED
AFTER_STOP_RESPAWN = "respawn"  # `foldermind restart`
AFTER_STOP_EXTERNAL = "external"  # `foldermind worker run`
AFTER_STOP_IDLE = "idle"  # an on-demand worker with nothing to do: IDLE until a request needs it


@dataclass(eq=False)
class Slot:
    """One worker name (``parser#2``) and the process currently filling it."""

    name: str
    service: str
    spec: WorkerSpec
    policy: RestartPolicy
    state: State = State.EXITED
    proc: subprocess.Popen[bytes] | None = None
    pidfd: int | None = None
    external_pid: int | None = None
    started_at: float = 0.0
    running_since: float | None = None
    restarts: int = 0
    recent_restarts: deque[float] = field(default_factory=deque)
    consecutive_failures: int = 0
    due: float | None = None
    after_stop: str = AFTER_STOP_REST
    last_error: str | None = None
    error_at: float | None = None
    """When ``last_error`` happened (wall clock); see :meth:`error_now`."""
    kill_reason: str | None = None
    stop_report: str = ""
    stderr_at: int = 0
    """Where the stderr log ended when the process started: what it wrote is after."""

    ext_pidfd: int | None = None
    grace: Grace | None = None
    """The stop grace of the process asked to stop (:mod:`foldermind.kernel.grace`)."""

    def failed_with(self, reason: str | None) -> None:
        self.last_error, self.error_at = reason, (time.time() if reason else None)

    def error_now(self) -> tuple[str | None, str | None]:
        """(last_error, past_error): the error is past once a process READY after it has run ``stable_after_s``
        (or gone idle as asked), so `status` no longer shows an old kill as the worker's state now."""
        if self.last_error is None or self.error_at is None:
            return self.last_error, None
        since = self.running_since
        ready_after = since is not None and time.time() - (time.monotonic() - since) > self.error_at
        stable = since is not None and time.monotonic() - since >= self.policy.stable_after_s
        healthy = ready_after and (self.state is State.IDLE or (self.state is State.RUNNING and stable))
        if not healthy:
            return self.last_error, None
        return None, f"{self.last_error} at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.error_at))}"

    @property
    def pid(self) -> int | None:
        """The process filling the slot now: our child while it lives, else a `worker run` one."""
        if self.proc is not None and self.proc.returncode is None:
            return self.proc.pid
        return self.external_pid
