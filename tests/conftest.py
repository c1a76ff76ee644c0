from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FAST_RESTART, LIGHT_MAP, TESTWORKER, RunningKernel, remove_tree, short_tmpdir

pytest_plugins = ("tests.cpu_report",)

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "light_map: the `kernel` fixture leaves out the model and MCP workers (tests.helpers.LIGHT_MAP)"
    )


@pytest.fixture
def kernel(home_dir: Path, request: pytest.FixtureRequest) -> Iterator[RunningKernel]:
    """The default process map plus the fault-injection test worker, fast restarts; a test marked
    ``light_map`` gets the map without the embedder, indexer, llm and front door."""
    light = request.node.get_closest_marker("light_map") is not None
    k = RunningKernel(home_dir, FAST_RESTART + TESTWORKER + (LIGHT_MAP if light else ""))
    try:
        yield k.start()
    finally:
        k.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs tests side by side (pytest-xdist, ``--dist loadgroup``). A module whose tests share
    a module-scoped fixture (one indexed kernel for the file) runs on one worker, so the fixture starts
    once; every other test goes to whichever worker is free. Each test has its own home and ports."""
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(d.scope == "module" for chain in defs.values() for d in chain):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
