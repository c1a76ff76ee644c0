"""A real foldermind kernel in a throw-away home, started and stopped with the CLI."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from types import TracebackType

import psutil

from foldermind.kernel.config import default_text
from foldermind.kernel.home import Home
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import StatusReply, StatusRequest
from tests.bench.transports import BenchError


def default_workers() -> list[str]:
    """The worker sections of the packaged supervisor.toml (watcher, parser, embedder, ...)."""
    return list(tomllib.loads(default_text()).get("workers", {}))


def echo_only_config() -> str:
    """A home override that disables every default worker and runs only the echo test worker."""
    disabled = "".join(f"[workers.{name}]\nenabled = false\n\n" for name in default_workers())
    return (
        disabled
        + """[workers.testworker]
module = "foldermind.workers.testworker"
env = { FOLDERMIND_CAPACITY = "64" }
"""
    )


class BenchKernel:
    """``with BenchKernel(config) as k:`` runs ``foldermind start`` / ``stop`` around the block.

    ``config`` is written to ``<home>/config/supervisor.toml``; empty means the default process map.
    ``strict``: every worker must reach RUNNING; otherwise workers that settle FAILED or EXITED are
    listed in ``not_running`` and the rest is used. The home is removed afterwards unless something
    failed (then its logs are kept and named).
    """

    def __init__(self, config: str = "", label: str = "kernel", strict: bool = True) -> None:
        self.label = label
        self.strict = strict
        self.not_running: dict[str, str] = {}
        self.root = Path(tempfile.mkdtemp(prefix="fmb-"))
        self.home = Home.resolve(self.root)
        self.home.ensure()
        if config:
            self.home.supervisor_override.write_text(config, encoding="utf-8")
        self.kernel_pid = 0
        self.start_s = 0.0
        self.ready_s = 0.0
        self.failed = False

    def _cli(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(self.root), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

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
        settled = ("RUNNING",) if self.strict else ("RUNNING", "FAILED", "EXITED")
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
        self.not_running = {name: state for name, state in states.items() if state != "RUNNING"}
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
