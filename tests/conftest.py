from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FAST_RESTART, TESTWORKER, RunningKernel, remove_tree, short_tmpdir

os.environ.setdefault("HF_HUB_OFFLINE", "1")


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
