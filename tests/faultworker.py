"""A worker that misbehaves on request: the fault-injection worker of the kernel's tests
(``module = "tests.faultworker"``, service ``testworker``).

Like jupyter_client's test kernel, its faults are switched on by environment variables (at start)
or by a ``fault.request`` (mid-job). It lives in tests/ with its two message kinds: they exist only in
a process that imports this module (a test, a benchmark, this worker), never in a user's install. Never
part of the default process map; tests and benchmarks add it through a home's ``supervisor.toml``, and
put the repository on the children's ``PYTHONPATH`` (``tests/conftest.py``) so its process can import it.

Environment:

- ``FOLDERMIND_FAULT=crash_on_start``: exit with status 3 before READY (a crash loop).
- ``FOLDERMIND_FAULT=no_ready``: never send READY (the start timeout fires).
- ``FOLDERMIND_FAULT=raise_on_start``: raise before READY, as a worker whose setup fails does (a crash loop
  with a cause).
- ``FOLDERMIND_FAULT=slow_start``: wait ``FOLDERMIND_FAULT_SECONDS`` (default 3) before READY.
- ``FOLDERMIND_FAULT=starved_start``: compute ``FOLDERMIND_FAULT_SECONDS`` CPU-seconds on a starved CPU (as the
  ``starve`` action) before READY: a start that is slow on a busy machine, not hung.
- ``FOLDERMIND_FAULT=held_import``: the import of this module waits while ``FOLDERMIND_FAULT_WHILE``'s file exists
  (at most 60 s), having made ``<file>.held``: a worker still starting, as a front door importing its libraries.
- ``FOLDERMIND_FAULT=slow_stop``: its teardown computes for ``FOLDERMIND_FAULT_SECONDS`` CPU-seconds (a stop that
  works for ever, or slowly after the ``starve`` action).
- ``FOLDERMIND_FAULT_WHILE=PATH``: apply ``FOLDERMIND_FAULT`` only while PATH exists, so a test
  can end a crash loop by deleting the file and then ``foldermind restart`` the worker.
- ``FOLDERMIND_CAPACITY=N``: take up to N jobs at once (benchmarks pipeline requests).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import Message, message
from foldermind.workers.framework import faults
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route
from foldermind.workers.framework.heartbeat import model_loads

log = logging.getLogger("foldermind.testworker")

SERVED_BY = "the test worker, in tests only"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


@message("fault.request")
@dataclass(slots=True)
class FaultRequest(Message):
    """Test worker only: misbehave on purpose.

    ``action``: ``crash`` (SIGKILL itself mid-job), ``hang_gil`` (block ``seconds`` in C code that
    holds the GIL, so even its heartbeat thread stops), ``load_gil`` (the same, inside a declared model
    load, after a heartbeat has said so), ``hang_sleep`` (sleep ``seconds``; the
    heartbeat goes on), ``wait_cancel`` (wait up to ``seconds`` for a ``job.cancel``, then answer
    ``cancelled``), ``garbage`` (send non-protocol frames and a wrong-version message, then answer),
    ``exit`` (answer, then stop gracefully with status 0), ``linger`` (start a thread that is no daemon and
    never ends, as a library's pool left running by a teardown: the interpreter would wait for it at exit),
    ``starve`` (hold the job thread and a CPU hog child of its own to one CPU, the thread at nice 19: it gets ~1.4%
    of that CPU while runnable; the hog is its own child because Linux's autogroups share the CPU between sessions
    whatever the nice values; the hog ends with the teardown or the process).
    """

    action: str
    """What to do (see below)."""
    seconds: float = 0.0
    """Duration for the `hang_*` actions."""
    started: str = ""
    """A file the worker creates just before the action, so a test can wait for the job to be running
    (the broker's in_flight only says it was handed over)."""


@message("fault.reply")
@dataclass(slots=True)
class FaultReply(Message):
    """The action the test worker performed (only when it survives it)."""

    action: str
    """The action performed."""
    pid: int
    """The test worker's pid."""


class TestWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.capacity = int(os.environ.get("FOLDERMIND_CAPACITY", "1"))
        self.hog: subprocess.Popen[bytes] | None = None

    def setup(self) -> None:
        fault = os.environ.get("FOLDERMIND_FAULT", "")
        switch = os.environ.get("FOLDERMIND_FAULT_WHILE")
        if switch and not os.path.exists(switch):
            fault = ""
        if fault == "crash_on_start":
            log.error("FOLDERMIND_FAULT=crash_on_start: exiting before READY")
            os._exit(3)
        if fault == "raise_on_start":
            raise RuntimeError("FOLDERMIND_FAULT=raise_on_start: the setup failed on purpose")
        if fault == "slow_start":
            time.sleep(float(os.environ.get("FOLDERMIND_FAULT_SECONDS", "3")))
        if fault == "starved_start":
            hog = _starve()
            until = time.thread_time() + float(os.environ.get("FOLDERMIND_FAULT_SECONDS", "0.06"))
            while time.thread_time() < until:
                pass
            hog.kill()
        if fault == "no_ready":
            log.error("FOLDERMIND_FAULT=no_ready: never sending READY")
            while True:
                time.sleep(3600)

    def handlers(self) -> dict[str, Handler]:
        return dict([*super().handlers().items(), route(FaultRequest, self.on_fault)])

    def teardown(self) -> None:
        if os.environ.get("FOLDERMIND_FAULT") == "slow_stop":
            seconds = float(os.environ.get("FOLDERMIND_FAULT_SECONDS", "3"))
            log.warning("FOLDERMIND_FAULT=slow_stop: computing for %g CPU-s before the stop ends", seconds)
            until = time.thread_time() + seconds
            while time.thread_time() < until:
                pass
        if self.hog is not None:
            self.hog.kill()
            self.hog.wait()

    def details(self) -> dict[str, Any]:
        return {"fault": os.environ.get("FOLDERMIND_FAULT", "")}

    def on_fault(self, req: Request[FaultRequest]) -> Result:
        action, seconds = req.body.action, req.body.seconds
        log.warning("fault requested: %s", action)
        if req.body.started:
            Path(req.body.started).touch()
        if action == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        elif action == "hang_gil":
            _hold_gil(seconds)
        elif action == "load_gil":
            with model_loads.loading():
                time.sleep(1.5 * self.ctx.heartbeat_interval_s)  # a heartbeat says "loading" first
                _hold_gil(seconds)
        elif action == "hang_sleep":
            time.sleep(seconds)
        elif action == "wait_cancel":
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                if req.cancelled():
                    raise JobError(ErrorCode.CANCELLED, "fault wait_cancel: cancelled by the caller")
                time.sleep(0.02)
        elif action == "garbage":
            self._send_garbage()
        elif action == "exit":
            signal.raise_signal(signal.SIGTERM)
        elif action == "starve":
            self.hog = _starve()
        elif action == "linger":
            threading.Thread(target=threading.Event().wait, name="lingering", daemon=False).start()
        else:
            raise JobError(ErrorCode.BAD_REQUEST, f"unknown fault action {action!r}")
        return FaultReply(action=action, pid=os.getpid())

    def _send_garbage(self) -> None:
        """Junk straight onto the bus from a socket of our own: the broker must shrug it off."""
        import zmq

        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.connect(self.ctx.bus_endpoint)
        for junk in (
            [b"not a foldermind message"],
            [b"three", b"junk", b"frames"],
            [frames.MAGIC],
            [frames.MAGIC + b"\xc1\xc1\xc1", b"\x80"],
            [frames.raw_header(v=99, kind="ping.request", id="x1", to="kernel"), b"\x80"],
            [frames.raw_header(v=1, kind="ping.request"), b"\x80"],
            [frames.raw_header(v=1, kind="no.such.request", id="x2", to="kernel"), b"\x80"],
        ):
            frames.send_raw_for_tests(sock, junk)
        sock.close()


def _starve() -> subprocess.Popen[bytes]:
    """Hold this thread and a CPU hog (dying with this process) to one CPU, the hog spinning, this thread at nice 19."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    code = f"import ctypes, os\nctypes.CDLL(None).prctl(1, 9)\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    hog = subprocess.Popen([sys.executable, "-c", code])
    hog_cpu = psutil.Process(hog.pid)
    while sum(hog_cpu.cpu_times()[:2]) < 0.05:  # spinning: its interpreter has started
        time.sleep(0.01)
    os.setpriority(os.PRIO_PROCESS, 0, 19)  # this thread (Linux)
    return hog


def _hold_gil(seconds: float) -> None:
    """Block in C code that keeps the GIL (PyDLL), so the heartbeat thread cannot run either. A signal
    interrupts sleep(3), so sleep again: SIGTERM is ignored meanwhile, as by a hung worker."""
    libc_sleep = ctypes.PyDLL(None).sleep
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        libc_sleep(max(1, int(left)))


WORKER = TestWorker


def _held_import() -> None:
    """``FOLDERMIND_FAULT=held_import`` (a test's worker environment only; a test importing this module has none)."""
    flag = os.environ.get("FOLDERMIND_FAULT_WHILE", "")
    if os.environ.get("FOLDERMIND_FAULT") != "held_import" or not flag:
        return
    faults.hold_while(flag, 60)


_held_import()
