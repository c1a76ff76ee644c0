"""What each test costs in CPU, its children's included: ``pytest --cpu-report PATH`` (any -n).

The suite is CPU-bound (two cores busy a whole run), so the figure to cut is CPU seconds, not wall. Most of a
test's CPU is spent outside its own process: a kernel started by `foldermind start` leaves the CLI's session at
once, so without help it is adopted by init and its CPU (and that of its workers, which it reaps) is counted
nowhere the test can read. With this option each pytest process becomes a child subreaper
(``PR_SET_CHILD_SUBREAPER``): an orphaned kernel, or a worker whose kernel was killed, is adopted by the pytest
process, and a thread reaps it when it exits, so its whole tree's CPU lands in the pytest process's
``os.times()`` children fields. A zombie is reaped here only when no ``subprocess.Popen`` of this process owns
its pid (a test waiting on its own child still gets the real exit status); Popen's spawn and the reaper's scan
take one lock, so a just-forked child is never taken for an orphan.

Each test appends one JSON line to PATH: its node id, the test process's own CPU and its reaped children's
over the test's setup, call and teardown (a module-scoped kernel is paid by the test whose teardown stops
it), and the wall time. ``python -m tests.cpu_report PATH`` ranks the files. Without the option nothing here
runs: a run of the suite is as it always was.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import psutil
import pytest

_PR_SET_CHILD_SUBREAPER = 36
_spawn_lock = threading.Lock()
_popens: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-report", metavar="PATH", help="append each test's CPU seconds (children included) to PATH")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--cpu-report")
    if path:
        config.pluginmanager.register(_Recorder(Path(path)), "cpu-report")


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        spawn = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def execute_child(popen: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
            with _spawn_lock:
                spawn(popen, *args, **kwargs)
                _popens.add(popen)

        subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
        threading.Thread(target=self._reap, name="cpu-report-reaper", daemon=True).start()

    def _reap(self) -> None:
        while True:
            time.sleep(0.1)
            self.reap_orphans()

    @staticmethod
    def reap_orphans() -> None:
        with _spawn_lock:
            owned = {p.pid for p in list(_popens) if p.returncode is None}
            for child in psutil.Process().children():
                try:
                    zombie = child.status() == psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    continue
                if zombie and child.pid not in owned:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(child.pid, os.WNOHANG)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        own, children = _cpu()
        wall = time.monotonic()
        yield
        self.reap_orphans()  # a kernel stopped in teardown is a zombie by now: counted with its test
        own_after, children_after = _cpu()
        line = {
            "test": item.nodeid,
            "file": item.nodeid.split("::")[0],
            "own": round(own_after - own, 2),
            "children": round(children_after - children, 2),
            "wall": round(time.monotonic() - wall, 2),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
        }
        with self.path.open("a") as out:
            out.write(json.dumps(line) + "\n")


def main(argv: list[str]) -> None:
    """Rank the files of a report by CPU seconds (own + children)."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for raw in Path(argv[0]).read_text().splitlines():
        rec = json.loads(raw)
        row = files[rec["file"]]
        row[0] += rec["own"] + rec["children"]
        row[1] += rec["own"]
        row[2] += rec["wall"]
        row[3] += 1
    total = sum(r[0] for r in files.values())
    print(f"{'file':44} {'tests':>5} {'CPU-s':>8} {'own':>7} {'wall-s':>7}")
    for name, (cpu, own, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:44} {int(n):5} {cpu:8.1f} {own:7.1f} {wall:7.1f}")
    print(f"{'all':44} {sum(int(r[3]) for r in files.values()):5} {total:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
