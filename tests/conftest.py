from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FAST_RESTART, TESTWORKER, RunningKernel, remove_tree, short_tmpdir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The fault worker (tests/faultworker.py) runs as a child of a kernel, and `foldermind worker run` imports
# it in the CLI's process: every child of a test must be able to import `tests`.
REPO = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))


@pytest.fixture
def home_dir() -> Iterator[Path]:
    path = short_tmpdir()
    yield path
    remove_tree(path)


@pytest.fixture
def kernel(home_dir: Path) -> Iterator[RunningKernel]:
    """The default process map plus the fault-injection test worker, fast restarts."""
    k = RunningKernel(home_dir, FAST_RESTART + TESTWORKER)
    try:
        yield k.start()
    finally:
        k.stop()
