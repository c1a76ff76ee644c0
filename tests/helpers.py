"""Shared test helpers: a real kernel in a throw-away home, and polling instead of sleeping."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest
import zmq

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import (
    FolderListReply,
    FolderListRequest,
    SearchReply,
    SearchRequest,
    StatusReply,
    StatusRequest,
    StopReply,
    StopRequest,
    WorkerStateEvent,
)
from foldermind.protocol.runtime.config import PROCESS_MAP
from foldermind.protocol.runtime.home import Home
from tests.config import Config, merge, render

T = TypeVar("T")

MODEL_CACHE = Path(tempfile.gettempdir()) / f"foldermind-test-models-{os.getuid()}"
"""The model cache every test kernel shares (``[ingest] model_cache_dir``, written into each test home's
supervisor.toml by :class:`RunningKernel` unless the test sets its own): the checked ONNX export is made
once per machine, so a test kernel's embedder and indexer load it without importing torch (~9 CPU-s less
per start). Safe to share: a file is named by its model's digest and verified against its check record on
every load. Tests of the export itself use a cache of their own."""
# Quick restarts so fault tests do not wait on production backoff.
FAST_RESTART: Config = {
    "restart": {
        "backoff_initial_s": 0.1,
        "backoff_max_s": 1.0,
        "stable_after_s": 5.0,
        "start_timeout_s": 20.0,
        "stop_grace_s": 3.0,
    }
}


def with_model_cache(config: Mapping[str, Any] | str, cache: Path = MODEL_CACHE) -> str:
    """supervisor.toml text of ``config`` (parts merged by :func:`tests.config.merge`) with ``[ingest]
    model_cache_dir`` set to ``cache`` unless it sets one. Text is kept as the test wrote it, the line added."""
    if isinstance(config, Mapping):
        return render(merge({"ingest": {"model_cache_dir": cache}}, config))
    try:
        data = tomllib.loads(config)
    except tomllib.TOMLDecodeError:
        return config  # a test of a broken config file: left as the test wrote it
    ingest = data.get("ingest", {})
    if "model_cache_dir" in ingest:
        return config
    line = f"model_cache_dir = {json.dumps(str(cache))}"
    header = re.search(r"^\[ingest\][ \t]*$", config, re.MULTILINE)
    if header:
        return config[: header.end()] + "\n" + line + config[header.end() :]
    if ingest:  # an inline table: not rewritten
        return config
    return config.rstrip("\n") + f"\n\n[ingest]\n{line}\n"


TESTWORKER: Config = {"workers": {"testworker": {"module": "tests.faultworker"}}}


def only_workers(*keep: str) -> Config:
    """supervisor.toml tables that leave every worker of the default map out but ``keep`` (a test home's map
    trimmed to what the test uses: each worker left out is a process start less, ~0.6-2.4 CPU-s)."""
    return {"workers": {name: {"enabled": False} for name in PROCESS_MAP if name not in keep}}


LIGHT_MAP = merge(only_workers("watcher", "parser"), {"workers": {"parser": {"on_demand": False}}})
"""The default map without its model and MCP workers, for a test of the kernel's handling of one worker (the
fault worker) that the others only watch: the watcher and the parser pool stay as bystanders, running (not on
demand), so "the rest of the map is unaffected" is still checked. The four left out cost ~8 of ~13 CPU-s of a
test kernel's start (psutil on the process tree, 2026-12-02: embedder 2.4, indexer 2.3, frontdoor 2.4, llm 0.6)."""


ONE_PARSER: Config = {"workers": {"parser": {"count": 1}}}
"""A parser pool of one (its instance is then named ``parser``, not ``parser#1``), for a test home whose
subject is not the pool: the second parser's start is ~0.6 CPU-s (psutil on the process tree, 2026-12-02)."""

AUTO_ASKS_THE_MODEL: Config = {"llm": {"auto_model_shapes": ["yes-no", "default", "figure", "name", "entity", "other"]}}
"""Auto mode asks the model after the quotes for every question, for a test of the model's path through auto (by
default auto answers with the quotes alone)."""

NO_LLM = only_workers("watcher", "parser", "embedder", "indexer", "frontdoor")
"""The default map without the llm, for a test home that searches and reads but never chats or reads a model
summary: whenever the ingest queue is idle the llm summarises every indexed file (6-25 CPU-s a test home,
psutil on the process tree, 2026-12-02), which competes with the tests for the CPU. The deterministic analysis
a summary test reads is the indexer's."""

STALL_NEEDLE = "stalled-"
"""A file whose name holds this stalls its parse, by :func:`stalling_parser`'s switch."""


def stalling_parser(flag: Path, parse_timeout_s: float = 0.5) -> Config:
    """The ingestion pipeline (watcher, one parser, indexer, fast restarts) whose parser holds a parse of a file
    named with :data:`STALL_NEEDLE` while ``flag`` exists (``FOLDERMIND_TEST_PARSER_HOLD``: no page read, no CPU
    used): cut off at its deadline twice, the file is quarantined."""
    parser = {"count": 1, "env": {"FOLDERMIND_TEST_PARSER_HOLD": f"{STALL_NEEDLE}:{flag}"}}
    return merge(
        FAST_RESTART,
        only_workers("watcher", "parser", "indexer"),
        {"workers": {"parser": parser}, "ingest": {"parse_timeout_s": parse_timeout_s}, "bus": {"overrun_grace_s": 1}},
    )


SEARCH_OVER_BUS = merge(only_workers("watcher", "parser", "embedder", "indexer"), ONE_PARSER)
"""The ingestion pipeline alone, for a test home searched and read over the bus or through the CLI: no front
door, no llm (see :data:`NO_LLM`), one parser."""


def wait_for(cond: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05, what: str = "") -> T:
    """Poll ``cond`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    give_up = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < give_up:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what or cond} (last: {last!r})")


def cli(home: Path, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"foldermind {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_process(home: Path, *args: str, **popen: Any) -> subprocess.Popen[str]:
    """`foldermind --home HOME ARGS` running in the background (for -f, worker run, a concurrent stop)."""
    return subprocess.Popen(
        [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), *args], text=True, **popen
    )


class RunningKernel:
    """A kernel started with `foldermind start` in its own home, torn down however the test ended."""

    def __init__(self, root: Path, config: Mapping[str, Any] | str | None = None) -> None:
        self.root = root
        self.home = Home.resolve(root)
        self.home.ensure()
        self.configure({} if config is None else config)
        self._clients: list[BusClient] = []
        self.events: list[WorkerStateEvent] = []
        self._sub: zmq.Socket[bytes] | None = None

    def configure(self, config: Mapping[str, Any] | str) -> None:
        """Write the home's supervisor.toml (a kernel reads it at its next start), as :func:`with_model_cache`."""
        self.home.supervisor_override.write_text(with_model_cache(config))

    def start(self, *args: str) -> RunningKernel:
        try:
            cli(self.root, "start", *args)
            self.kernel_pid = int(self.home.pid_file.read_text())
            self.connect_events()
            self.wait_all_running()
        except BaseException:
            # Callers often start outside their try/finally: a failed start must not leak a kernel.
            self._stop_after_failed_start()
            raise
        return self

    def _stop_after_failed_start(self) -> None:
        with contextlib.suppress(Exception):
            if not hasattr(self, "kernel_pid"):
                self.kernel_pid = int(self.home.pid_file.read_text())
        if hasattr(self, "kernel_pid"):
            with contextlib.suppress(Exception):
                self.stop()

    def connect_events(self) -> None:
        # Subscribed after start, so the first STARTING events may be missed; tests look for later ones.
        self._sub = zmq.Context.instance().socket(zmq.SUB)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"event.")
        self._sub.connect(self.home.events_endpoint)

    def collect_reason(self, name: str, state: str, timeout: float = 10.0) -> str:
        """The reason of the published event that moved ``name`` to ``state``."""

        def found() -> str | None:
            for ev in self.collect_events():
                if ev.name == name and ev.new == state:
                    return ev.reason
            return None

        return wait_for(found, timeout, 0.05, f"event {name} -> {state}")

    def client(self, name: str = "test") -> BusClient:
        client = BusClient(self.home.bus_endpoint, name=name)
        self._clients.append(client)
        return client

    def status(self) -> StatusReply:
        with BusClient(self.home.bus_endpoint, name="status") as client:
            return client.request("kernel", StatusRequest(), StatusReply, timeout=10).body

    def folders(self) -> list[dict[str, Any]]:
        """What `foldermind folders list --json` prints, asked over the bus from this process. For a poll: a CLI
        process costs ~0.75 CPU-s, so a test polls with this and checks the CLI's own answer once."""
        with BusClient(self.home.bus_endpoint, name="folders") as client:
            reply = client.request("indexer", FolderListRequest(), FolderListReply, timeout=10).body
        return [dict(f) for f in reply.folders]

    def search(self, query: str, mode: str = "keyword", **request: Any) -> dict[str, Any]:
        """What `foldermind search QUERY --mode MODE --json` prints (``modified_at`` left a number), asked over the
        bus from this process: for a poll, as :meth:`folders`."""
        with BusClient(self.home.bus_endpoint, name="search") as client:
            reply = client.request("indexer", SearchRequest(query, mode, **request), SearchReply, timeout=30).body
        return reply.to_body()

    def worker(self, name: str) -> dict[str, Any]:
        for w in self.status().workers:
            if w["name"] == name:
                return dict(w)
        raise KeyError(name)

    def pids(self) -> dict[str, int | None]:
        return {w["name"]: w["pid"] for w in self.status().workers}

    def wait_all_running(self, timeout: float = 30.0) -> StatusReply:
        """Every worker RUNNING, or IDLE: an on-demand one ([workers.NAME] on_demand) waits for its first request."""

        def all_running() -> StatusReply | None:
            st = self.status()
            return st if all(w["state"] in ("RUNNING", "IDLE") for w in st.workers) else None

        return wait_for(all_running, timeout, 0.1, "every worker RUNNING or IDLE")

    def wait_state(
        self, name: str, state: str, timeout: float = 20.0, other_pid_than: int | None = None
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            w = self.worker(name)
            if w["state"] == state and (other_pid_than is None or w["pid"] != other_pid_than):
                return w
            return None

        return wait_for(reached, timeout, 0.05, f"{name} {state}")

    def collect_events(self) -> list[WorkerStateEvent]:
        assert self._sub is not None
        while self._sub.poll(0):
            packet = frames.recv(self._sub, route_frames=1)
            body = packet.body()
            assert isinstance(body, WorkerStateEvent)
            self.events.append(body)
        return self.events

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.kernel_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        if self._sub is not None:
            self._sub.close(0)
        procs = self.descendants()
        # Not pid_exists: a kernel stopped before (a second stop, a test that killed it) can be a zombie
        # that init has not reaped yet, and its stop request then waited out its whole 60 s timeout.
        if not _gone(self.kernel_pid, 0):
            self._stop_kernel()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()

    def _stop_kernel(self) -> None:
        """What `foldermind stop` does, sent from this process (a CLI process costs ~0.75 CPU-s to start, and a
        test kernel is stopped ~150 times a run; tests of the stop command run it themselves): the kernel's
        stop request, then SIGTERM, then SIGKILL to a kernel that lingers."""
        with contextlib.suppress(Exception), BusClient(self.home.bus_endpoint, name="teardown") as client:
            client.request("kernel", StopRequest(), StopReply, timeout=60)
        for sig in (signal.SIGTERM, signal.SIGKILL, None):
            if _gone(self.kernel_pid, 10):
                return
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.kernel_pid, sig)


def found(home: Path, query: str) -> set[str]:
    """The names of the files `foldermind search QUERY --mode keyword --json` finds in ``home``."""
    hits = json.loads(cli(home, "search", query, "--mode", "keyword", "--json").stdout)
    return {Path(r["file_path"]).name for r in hits["results"]}


def wait_found(k: RunningKernel, query: str, names: set[str], timeout: float, what: str) -> None:
    """Until a keyword search for ``query`` finds exactly the files ``names``; then `foldermind search` must say
    the same (:func:`found`). Polled over the bus: a poll through the CLI ran a process (~0.75 CPU-s) every
    0.1-0.5 s, taking the CPU from the kernel it waited for."""
    wait_for(lambda: {Path(r["file_path"]).name for r in k.search(query)["results"]} == names, timeout, 0.1, what)
    assert found(k.root, query) == names


def indexer_note(k: RunningKernel) -> str:
    """The indexer's status note once its query model has settled. The note rides on the next heartbeat, so
    right after describe says the model is ready, status may still show the note of the loading state."""
    return str(
        wait_for(lambda: (n := k.worker("indexer")["note"]) and not n.startswith("queries: model") and n, 10, 0.1)
    )


def _gone(pid: int, timeout: float) -> bool:
    """``pid`` exited (or is a zombie nobody has reaped yet) within ``timeout`` s."""

    def ended() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    give_up = time.monotonic() + timeout
    while not ended():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.05)
    return True


def status_json(home: Path) -> dict[str, Any]:
    out = cli(home, "status", "--json", check=False)
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def short_tmpdir(prefix: str = "fm-") -> Path:
    """A home with a short path (unix socket paths are limited to ~100 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def require_bundled_model() -> None:
    """Skip the calling test module unless the llm worker's default backend and model are installed."""
    import importlib.metadata

    import pytest

    from foldermind.workers.llm.model_file import BUNDLED_DISTRIBUTION

    pytest.importorskip("ctransformers", reason="the llm worker's default backend is not installed")
    try:
        importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{BUNDLED_DISTRIBUTION} (the default model) is not installed", allow_module_level=True)


def npm_installed(name: str, package: str, version: str, env: str = "") -> Path:
    """The npm prefix (``.cache/NAME``, or ``$ENV``) holding ``package@version``, as the Makefile installs it
    for `make test`; installed here when missing and npm exists, else the test is skipped."""
    repo = Path(__file__).resolve().parent.parent
    prefix = Path(os.environ.get(env, "") or repo / ".cache" / name)
    if (prefix / "node_modules" / package / "package.json").exists():
        return prefix
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed: {package} cannot run here")
    subprocess.run(
        ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"{package}@{version}"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return prefix
