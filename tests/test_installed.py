"""foldermind installed like a real tool: the wheel `python -m build` makes, installed into a new venv
outside the checkout, run from a directory that is not the checkout.

The new venv gets foldermind's dependencies the way pip installs any package's: pip resolves every one of
them (no ``--no-deps``) and finds them installed. To stay offline and fast they are this checkout's venv's
(a ``.pth`` line puts its site-packages on the new venv's path, and ``--no-index`` keeps pip off the
network), while foldermind itself, its packaged ``supervisor.toml`` defaults included, comes from the wheel
only: the source tree is on no path of the new venv. The embedding model is a dependency (a package), so a
search by meaning proves it is found; ``foldermind mcp`` (the stdio bridge) answers a client there too.

Selected with ``-m installed`` (about a minute on the 2-core machine, most of it the first start's model
export); ``make test`` runs it with the rest.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from foldermind.protocol.runtime.home import Home
from tests.helpers import remove_tree, short_tmpdir

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.installed


@pytest.fixture
def place() -> Iterator[Path]:
    path = short_tmpdir("fm-installed-")
    yield path
    remove_tree(path)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_installed_in_a_new_venv_starts_indexes_searches_and_stops_from_any_directory(
    place: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FOLDERMIND_HOME")}
    env["HF_HUB_OFFLINE"] = "1"
    dist = place / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)], ROOT, env)
    wheel = next(dist.glob("foldermind-*.whl"))

    venv = place / "venv"
    # Without a pip of its own (ensurepip's copy, and the older setuptools it bundles that would shadow the
    # one torch asks for: ~3 CPU-s): this checkout's pip installs into it (`pip --python`), resolving every
    # dependency against the new venv's own paths as its own pip would (~1.0 CPU-s against ~2.5).
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], place, env)
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], place, env).strip())
    (site / "checkout-venv-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    run([*pip, "install", "--quiet", "--no-index", str(wheel)], place, env)

    elsewhere = place / "elsewhere"
    elsewhere.mkdir()
    # The installed copy answers, not the checkout (whose editable install the .pth line also reaches).
    where = run([str(python), "-c", "import foldermind.kernel.cli as c; print(c.__file__)"], elsewhere, env)
    assert Path(where.strip()).is_relative_to(venv), where
    defaults = run([str(python), "-c", "import foldermind.protocol.runtime as r; print(r.__file__)"], elsewhere, env)
    assert (Path(defaults.strip()).parent / "supervisor.toml").is_file()

    foldermind = str(venv / "bin" / "foldermind")
    home = place / "home"
    docs = place / "docs"
    docs.mkdir()
    (docs / "fox.txt").write_text("The quick brown fox jumps over the lazy dog.\nFoxes are small omnivores.\n")
    (docs / "cats.txt").write_text("Cats are small carnivorous mammals.\nA cat sleeps most of the day.\n")

    def fm(*args: str) -> str:
        """The installed command, from a directory that is not the checkout."""
        return run([foldermind, "--home", str(home), *args], elsewhere, env)

    try:
        started = fm("start")
        assert "foldermind" in started
        fm("folders", "add", str(docs), "--wait")
        for mode in ("keyword", "semantic"):  # semantic: the bundled embedding model was found
            found = run(
                [foldermind, "--home", str(home), "search", "what do foxes eat", "--mode", mode], elsewhere, env
            )
            assert "fox.txt" in found, (mode, found)
        status = fm("status")
        for worker in ("indexer", "embedder", "frontdoor", "watcher", "console"):  # the packaged default process map
            assert worker in status, status
        # `foldermind mcp`, as a stdio-only client launches it, from the same elsewhere.
        bridge = StdioServerParameters(
            command=foldermind, args=["--home", str(home), "mcp"], cwd=str(elsewhere), env=env
        )

        async def tools() -> set[str]:
            async with Client(bridge, read_timeout_seconds=120) as client:
                return {t.name for t in (await client.list_tools()).tools}

        assert "search_documents" in anyio.run(tools)
    finally:
        stopped = subprocess.run(
            [foldermind, "--home", str(home), "stop"], cwd=elsewhere, env=env, capture_output=True, timeout=120
        )
        pid_file = Home.resolve(home).pid_file
        if stopped.returncode != 0 and pid_file.exists():  # leave no kernel behind whatever happened
            with contextlib.suppress(Exception):
                psutil.Process(int(pid_file.read_text())).kill()
    assert stopped.returncode == 0, stopped.stderr
