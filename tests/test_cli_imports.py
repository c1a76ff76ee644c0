"""What a command from a terminal imports: ``foldermind search`` is typed often and waits on the interpreter's
start and its imports (most of its wall time), so its path must not pull in the config's pydantic, the MCP
SDK, the model libraries or the other commands' modules. Checked in a real ``foldermind`` process searching a
real kernel, through its ``sys.modules`` when it exits."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.helpers import RunningKernel, only_workers, remove_tree, short_tmpdir

HEAVY = frozenset(
    {
        # libraries: pydantic (the config, ~190 ms of imports), the MCP SDK and its HTTP stack, the models
        "pydantic",
        "pydantic_core",
        "mcp",
        "httpx",
        "anyio",
        "starlette",
        "uvicorn",
        "numpy",
        "torch",
        "onnxruntime",
        "tokenizers",
        "transformers",
        "tantivy",
        "usearch",
        "rich",
        "json5",
        "keyring",
        # ours: the config and every command module the search does not run
        "foldermind.protocol.runtime.config",
        "foldermind.workers",
        "foldermind.kernel.cli.lifecycle",
        "foldermind.kernel.cli.worker",
        "foldermind.kernel.cli.bus",
        "foldermind.kernel.cli.clients",
        "foldermind.kernel.cli.bridge",
        "foldermind.kernel.cli.doctor",
        "foldermind.kernel.cli.install",
        "foldermind.kernel.cli.clientconfig",
        "foldermind.kernel.cli.clientfacts",
        "foldermind.kernel.cli.clientfile",
        "foldermind.kernel.cli.entries",
        "foldermind.kernel.cli.jsonedit",
    }
)
"""Modules (and packages, with everything under them) a ``foldermind search`` must not import."""

# The console script's own body (``from foldermind.kernel.cli import main; main()``), then, as the process
# exits, the modules it loaded written to the file named by FM_MODULES.
PROBE = (
    "import atexit, os, sys\n"
    "atexit.register(lambda: open(os.environ['FM_MODULES'], 'w').write('\\n'.join(sorted(sys.modules))))\n"
    "sys.argv[0] = 'foldermind'\n"
    "from foldermind.kernel.cli import main\n"
    "main()\n"
)


@pytest.fixture(scope="module")
def indexer_only() -> Iterator[RunningKernel]:
    """A kernel running only the indexer: an empty index answers a keyword search."""
    root = short_tmpdir("fmci-")
    kernel = RunningKernel(root, only_workers("indexer"))
    try:
        yield kernel.start()
    finally:
        kernel.stop()
        remove_tree(root)


def loaded_by(kernel: RunningKernel, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``foldermind --home HOME ARGS`` as a terminal runs it, and the entries of :data:`HEAVY` it had loaded by
    its exit."""
    modules = kernel.root / "modules.txt"
    modules.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(kernel.root), *args],
        env={**os.environ, "FM_MODULES": str(modules)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    names = modules.read_text().split()
    return done, {h for h in HEAVY if any(n == h or n.startswith(h + ".") for n in names)}


def test_a_search_from_a_terminal_imports_none_of_the_heavy_modules(indexer_only: RunningKernel) -> None:
    done, heavy = loaded_by(indexer_only, "search", "anything at all", "--mode", "keyword")
    assert done.returncode == 0, done.stderr
    assert "0 of 0 matches" in done.stdout and "keyword" in done.stdout, done.stdout
    assert not heavy, f"foldermind search imported {sorted(heavy)}"


def test_the_probe_sees_the_heavy_modules_a_command_does_import(indexer_only: RunningKernel) -> None:
    """``logs`` reads the config (pydantic) for the worker names, so the same probe must report it: the check
    above can fail."""
    done, heavy = loaded_by(indexer_only, "logs", "indexer", "--lines", "1")
    assert done.returncode == 0, done.stderr
    assert {"pydantic", "foldermind.protocol.runtime.config"} <= heavy, sorted(heavy)
