"""A real foldermind kernel, started and stopped with the CLI: ``BenchKernel`` for the bus bench (a
throw-away home, any process map), ``Kernel`` for the SciFact benches (the default process map, in a
throw-away home or a kept one whose index is reused)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderListReply,
    FolderListRequest,
    StatusReply,
    StatusRequest,
)
from foldermind.protocol.runtime.config import PROCESS_MAP, IngestPolicy, load
from foldermind.protocol.runtime.home import Home
from tests.bench.cpu import cpu_seconds
from tests.bench.transports import BenchError
from tests.config import Config, merge, render

REPO = Path(__file__).resolve().parents[2]
# The fault worker (tests/faultworker.py) of the bus bench runs as a child of the kernel: the kernel's
# children must be able to import `tests`, wherever the bench is started from.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))


class BenchFailure(Exception):
    """The run cannot go on; the message says why."""


def say(line: str) -> None:
    """Progress, on stderr (the report goes to stdout)."""
    print(line, file=sys.stderr, flush=True)


def foldermind(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``foldermind --home ROOT ARGS...`` in a child process, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(root), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def default_workers() -> list[str]:
    """The workers of the default process map (watcher, parser, embedder, ...)."""
    return list(PROCESS_MAP)


def echo_only_config() -> Config:
    """A home override that disables every default worker and runs only the echo test worker."""
    return merge(
        {"workers": {name: {"enabled": False} for name in default_workers()}},
        {"workers": {"testworker": {"module": "tests.faultworker", "env": {"FOLDERMIND_CAPACITY": "64"}}}},
    )


def _cpu_of(pids: list[int]) -> float:
    """The CPU seconds the processes ``pids`` have used so far (those that have ended count nothing)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


class BenchKernel:
    """``with BenchKernel(config) as k:`` runs ``foldermind start`` / ``stop`` around the block.

    ``config`` (a dict, :mod:`tests.config`) is written to ``<home>/config/supervisor.toml``; empty means the
    default process map.
    ``strict``: every worker must reach RUNNING; otherwise workers that settle FAILED or EXITED are
    listed in ``not_running`` and the rest is used. The home is removed afterwards unless something
    failed (then its logs are kept and named).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, label: str = "kernel", strict: bool = True) -> None:
        self.label = label
        self.strict = strict
        self.not_running: dict[str, str] = {}
        self.root = Path(tempfile.mkdtemp(prefix="fmb-"))
        self.home = Home.resolve(self.root)
        self.home.ensure()
        if config:
            self.home.supervisor_override.write_text(render(config), encoding="utf-8")
        self.kernel_pid = 0
        self.start_s = 0.0
        self.ready_s = 0.0
        self.failed = False

    def _cli(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return foldermind(self.root, *args, timeout=timeout)

    def __enter__(self) -> BenchKernel:
        try:
            self.start()
        except BaseException:
            self.failed = True
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.failed = self.failed or kind is not None
        self.stop()

    def start(self, timeout: float = 60.0) -> None:
        t0 = time.monotonic()
        out = self._cli("start")
        if out.returncode != 0:
            raise BenchError(f"{self.label}: foldermind start exited {out.returncode}:\n{out.stdout}{out.stderr}")
        self.kernel_pid = int(self.home.pid_file.read_text().strip())
        self.start_s = time.monotonic() - t0
        give_up = time.monotonic() + timeout
        # IDLE: an on-demand worker ([workers.NAME] on_demand) waits for its first request, by design.
        settled = ("RUNNING", "IDLE") if self.strict else ("RUNNING", "IDLE", "FAILED", "EXITED")
        while True:
            states = {w["name"]: w["state"] for w in self.status().workers}
            if states and all(s in settled for s in states.values()):
                break
            if time.monotonic() > give_up:
                if self.strict:
                    raise BenchError(f"{self.label}: workers not all RUNNING after {timeout:g} s: {states}")
                break
            time.sleep(0.05)
        self.ready_s = time.monotonic() - t0
        self.not_running = {name: state for name, state in states.items() if state not in ("RUNNING", "IDLE")}
        if self.not_running:
            self.failed = True  # keep the logs
            print(f"{self.label}: not RUNNING: {self.not_running}", file=sys.stderr)

    def status(self) -> StatusReply:
        with BusClient(self.home.bus_endpoint, name="bench-status") as client:
            return client.request("kernel", StatusRequest(), StatusReply, timeout=10).body

    def processes(self) -> list[psutil.Process]:
        """The kernel and every process under it."""
        try:
            kernel = psutil.Process(self.kernel_pid)
            return [kernel, *kernel.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        procs = self.processes() if self.kernel_pid else []
        try:
            out = self._cli("stop")
            if out.returncode != 0:
                self.failed = True
                print(f"{self.label}: foldermind stop exited {out.returncode}: {out.stderr}", file=sys.stderr)
        except (subprocess.TimeoutExpired, BusError) as exc:
            self.failed = True
            print(f"{self.label}: foldermind stop failed: {exc}", file=sys.stderr)
        # Whatever the CLI managed, leave nothing of ours behind.
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if self.failed:
            print(f"{self.label}: logs kept in {self.home.log_dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)


class Kernel:
    """``foldermind start`` / ``stop`` with the default process map, in a fresh home
    (``tempfile.mkdtemp(prefix="fmi-")``) or in ``root``, a home that is kept (and whose index the next
    run reuses).

    ``config`` (a dict, :mod:`tests.config`) is written to the home's supervisor.toml override (before the
    start). ``stop()`` also kills whatever of the kernel's process tree is left, by pid; a fresh home is removed
    by ``cleanup()`` unless ``keep`` is set (a failed stop sets it: the logs stay for inspection).
    """

    def __init__(self, label: str, config: Mapping[str, Any] | None = None, root: Path | None = None) -> None:
        self.label = label
        self.keep = root is not None
        self.root = root if root is not None else Path(tempfile.mkdtemp(prefix="fmi-"))
        self.home = Home.resolve(self.root)
        self.home.ensure()
        if config or self.home.supervisor_override.exists():  # a kept home: its last run's override goes
            self.home.supervisor_override.write_text(render(config or {}), encoding="utf-8")
        self.policy: IngestPolicy = load(self.home.supervisor_override).ingest
        self.kernel_pid = 0
        self.pids: set[int] = set()
        self.running = False

    @property
    def db_path(self) -> Path:
        return self.home.data_dir / "index.sqlite"

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return foldermind(self.root, *args, timeout=timeout)

    def client(self, name: str) -> BusClient:
        return BusClient(self.home.bus_endpoint, name=name)

    def start(self, timeout: float = 90.0, until_running: bool = True) -> None:
        """``foldermind start``, then (``until_running``) wait until every worker is RUNNING."""
        self.running = True  # from here on, stop() has something to do
        out = self.cli("start")
        if out.returncode != 0:
            raise BenchFailure(f"{self.label}: foldermind start exited {out.returncode}:\n{out.stdout}{out.stderr}")
        self.kernel_pid = int(self.home.pid_file.read_text().strip())
        self.pids.add(self.kernel_pid)
        if until_running:
            self.wait_running(timeout)

    def wait_running(self, timeout: float = 90.0) -> None:
        """Wait until every worker is RUNNING (or IDLE: on demand). Slow is not hung: a worker still starting that
        used CPU in the last ``timeout`` seconds keeps the wait going (a busy machine starts a front door in minutes),
        up to ten times ``timeout`` in all."""
        started = time.monotonic()
        progress, used = started, 0.0
        with self.client("bench-start") as client:
            while True:
                try:
                    st = self.status(client, timeout=5)
                    states = {w["name"]: w["state"] for w in st.workers}
                    self.pids.update(w["pid"] for w in st.workers if w["pid"])
                    if states and all(s in ("RUNNING", "IDLE") for s in states.values()):  # IDLE: on demand
                        return
                    starting = [w["pid"] for w in st.workers if w["pid"] and w["state"] not in ("RUNNING", "IDLE")]
                    now_used = _cpu_of(starting)
                    if now_used != used:
                        progress, used = time.monotonic(), now_used
                except BusError:
                    states = {}
                now = time.monotonic()
                if now - progress > timeout or now - started > 10 * timeout:
                    raise BenchFailure(f"{self.label}: workers not all RUNNING after {now - started:.0f} s: {states}")
                time.sleep(0.1)

    def remember_tree(self) -> None:
        if self.kernel_pid <= 0:
            return  # never pid 0: its "children" are the whole machine
        with contextlib.suppress(psutil.Error):
            kernel = psutil.Process(self.kernel_pid)
            self.pids.update(p.pid for p in kernel.children(recursive=True))

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self.remember_tree()
        procs: list[psutil.Process] = []
        for pid in sorted(p for p in self.pids if p > 1 and p != os.getpid()):
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        try:
            out = self.cli("stop", timeout=90)
            if out.returncode != 0:
                self.keep = True
                say(f"{self.label}: foldermind stop exited {out.returncode}: {out.stderr.strip()}")
        except subprocess.TimeoutExpired as exc:
            self.keep = True
            say(f"{self.label}: foldermind stop timed out: {exc}")
        # Whatever the CLI managed, leave none of this kernel's processes behind (by pid, ours only).
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                if proc.is_running():
                    proc.kill()
                    say(f"{self.label}: killed leftover pid {proc.pid}")

    def cleanup(self) -> None:
        if self.keep:
            say(f"{self.label}: home kept: {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- probes --------------------------------------------------------------------------

    def status(self, client: BusClient, timeout: float = 10) -> StatusReply:
        return client.request("kernel", StatusRequest(), StatusReply, timeout=timeout).body

    def folders(self, client: BusClient) -> list[dict[str, Any]]:
        reply = client.request("indexer", FolderListRequest(), FolderListReply, timeout=30).body
        return [dict(f) for f in reply.folders]

    def folder(self, client: BusClient) -> dict[str, Any] | None:
        folders = self.folders(client)
        return folders[0] if folders else None

    def describe(self, client: BusClient, worker: str) -> dict[str, Any]:
        return dict(client.request(worker, DescribeRequest(), DescribeReply, timeout=30).body.details)

    def processes(self, client: BusClient) -> dict[str, psutil.Process]:
        """The kernel (the broker runs in it) and every worker, by name."""
        procs = {"kernel": psutil.Process(self.kernel_pid)}
        for w in self.status(client).workers:
            if w["pid"]:
                self.pids.add(w["pid"])
                procs[w["name"]] = psutil.Process(w["pid"])
        return procs

    def cpu_by_worker(self, client: BusClient) -> dict[str, tuple[int, float]]:
        """worker name (and ``kernel``) -> (pid, CPU seconds so far)."""
        out: dict[str, tuple[int, float]] = {}
        st = self.status(client)
        targets = [("kernel", self.kernel_pid)] + [(w["name"], w["pid"]) for w in st.workers if w["pid"]]
        for name, pid in targets:
            self.pids.add(pid)
            with contextlib.suppress(psutil.Error):
                out[name] = (pid, cpu_seconds(psutil.Process(pid)))
        return out
