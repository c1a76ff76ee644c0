from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.config import merge
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
    k = RunningKernel(home_dir, merge(FAST_RESTART, TESTWORKER, LIGHT_MAP if light else {}))
    try:
        yield k.start()
    finally:
        k.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs tests side by side (pytest-xdist, ``--dist loadgroup``). A module whose tests share
    a module-scoped fixture (one indexed kernel for the file) runs on one worker, so the fixture starts
    once; every other test goes to whichever worker is free. Each test has its own home and ports.

    ``tryfirst``: xdist's worker reads the ``xdist_group`` marks in its own hook of this name, which runs before
    a conftest's; without it the marks came too late, every such module was spread over both workers and its
    fixture (a kernel that indexes, 10-60 CPU-s) started on each; :func:`pytest_runtest_setup` now fails a test
    whose group was lost."""
    # Modules holding a `slow` test go first, each kept whole and in its own order. xdist's loadgroup hands out
    # its units largest first (a group counts its tests, a test outside any group is a unit of one) and units
    # of one size in collection order: a long test outside a group collected late (the short soak, 53 s; the
    # two hosts; the full disk) ran alone at the end of a parallel run while the other workers had finished.
    slow_modules = {item.module.__name__ for item in items if item.module and item.get_closest_marker("slow")}
    items.sort(key=lambda item: not (item.module and item.module.__name__ in slow_modules))
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(d.scope == "module" for chain in defs.values() for d in chain):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On an xdist worker under ``--dist loadgroup``, a test marked ``xdist_group`` carries its group in its id
    (``ID@GROUP``: all the scheduler reads), else it fails here. Grouping was lost twice without a word (the hook
    order above; pytest 9.2's ids, which xdist 3.8 cannot write to: pyproject.toml)."""
    grouped = getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
    if grouped and "@" not in item.nodeid:
        pytest.fail(
            "--dist loadgroup lost this test's group: a module sharing a module-scoped kernel would start it on"
            " every xdist worker (see tests/conftest.py)",
            pytrace=False,
        )
