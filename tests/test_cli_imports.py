"""What a command from a terminal imports: ``foldermind search`` is typed often and waits on the interpreter's
start and its imports (most of its wall time), so its path must not pull in the config's pydantic, the MCP
SDK, the model libraries or the other commands' modules. The same holds for ``--version``, ``mcp --help`` and
the ``config snippet --json`` the console's Clients page runs as a child of the kernel (each open of the page
pays it; docs/benchmarks/console.md, "The Clients page and CLI start-up"). Checked in a real ``foldermind``
process against a real kernel, through its ``sys.modules`` when it exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from foldermind.kernel.cli.clients import entries
from tests.config import merge
from tests.helpers import RunningKernel, only_workers, remove_tree, short_tmpdir, wait_for

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
        "foldermind.kernel.cli.clients.commands",
        "foldermind.kernel.cli.bridge",
        "foldermind.kernel.cli.doctor",
        "foldermind.kernel.cli.clients.install",
        "foldermind.kernel.cli.clients.config",
        "foldermind.kernel.cli.clients.facts",
        "foldermind.kernel.cli.clients.file",
        "foldermind.kernel.cli.clients.entries",
        "foldermind.kernel.cli.clients.jsonedit",
        "foldermind.kernel.cli.clients.keys",
    }
)
"""Modules (and packages, with everything under them) a ``foldermind search`` must not import."""

SNIPPET_NEEDS = frozenset(
    {
        "keyring",  # the URL forms carry the owner's token, read from the secret store
        "foldermind.kernel.cli.clients.config",
        "foldermind.kernel.cli.clients.facts",
        "foldermind.kernel.cli.clients.entries",
    }
)
"""What ``config snippet --json`` does import of :data:`HEAVY`: with the front door up, its URL is the live one,
so the config (pydantic) is not read; the JSON5 editor and the client keys belong to ``config install``."""

# The console script's own body (``from foldermind.kernel.cli import main; main()``), then, as the process
# exits, the modules it loaded (a None entry blocks an import, it loads nothing) written to the file named by
# FM_MODULES, and the programs it started (the "subprocess.Popen" audit event) to that name + ".spawned".
PROBE = (
    "import atexit, os, sys\n"
    "spawned = []\n"
    "sys.addaudithook(lambda event, a: event == 'subprocess.Popen'\n"
    "    and spawned.append(os.path.basename(a[1] if isinstance(a[1], str) else str(a[1][0]))))\n"
    "def report():\n"
    "    out = os.environ['FM_MODULES']\n"
    "    open(out, 'w').write('\\n'.join(sorted(k for k, v in sys.modules.items() if v is not None)))\n"
    "    open(out + '.spawned', 'w').write('\\n'.join(spawned))\n"
    "atexit.register(report)\n"
    "sys.argv[0] = 'foldermind'\n"
    "from foldermind.kernel.cli import main\n"
    "main()\n"
)


@pytest.fixture(scope="module")
def indexer_only() -> Iterator[RunningKernel]:
    """A kernel running the indexer (an empty index answers a keyword search) and the front door (its live URL is
    what a snippet shows)."""
    root = short_tmpdir("fmci-")
    kernel = RunningKernel(root, merge(only_workers("indexer", "frontdoor"), {"mcp": {"port": 0}}))
    try:
        kernel.start()
        wait_for(lambda: entries.live_url(kernel.home), 60, 0.1, "the front door's live URL")
        yield kernel
    finally:
        kernel.stop()
        remove_tree(root)


def loaded_by(
    kernel: RunningKernel, *args: str, watch: frozenset[str] = HEAVY
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``foldermind --home HOME ARGS`` as a terminal runs it, and the entries of ``watch`` it had loaded by its
    exit."""
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
    return done, {h for h in watch if any(n == h or n.startswith(h + ".") for n in names)}


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


def spawned_by(kernel: RunningKernel) -> list[str]:
    """The programs the last :func:`loaded_by` command started."""
    return (kernel.root / "modules.txt.spawned").read_text().split()


def test_the_version_imports_no_heavy_module_nor_the_message_kinds(indexer_only: RunningKernel) -> None:
    done, heavy = loaded_by(indexer_only, "--version", watch=HEAVY | {"foldermind.protocol.messages", "keyring"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("foldermind, version "), done.stdout
    assert not heavy, f"foldermind --version imported {sorted(heavy)}"


def test_the_help_of_the_stdio_bridge_imports_neither_the_mcp_sdk_nor_keyring(indexer_only: RunningKernel) -> None:
    done, heavy = loaded_by(indexer_only, "mcp", "--help", watch=HEAVY - {"foldermind.kernel.cli.clients.commands"})
    assert done.returncode == 0, done.stderr
    assert "stdio bridge" in done.stdout, done.stdout
    assert not heavy, f"foldermind mcp --help imported {sorted(heavy)}"


def test_the_snippets_of_the_clients_page_import_neither_the_config_nor_the_json5_editor_and_spawn_nothing(
    indexer_only: RunningKernel,
) -> None:
    done, heavy = loaded_by(indexer_only, "config", "snippet", "--json")
    assert done.returncode == 0, done.stderr
    live = entries.live_url(indexer_only.home)
    urls = {item["url"] for item in json.loads(done.stdout) if item["form"] == "url"}
    assert urls == {live}, (urls, live)
    assert "keyring" in heavy, "the probe must see the secret store the URL forms read the token from"
    unneeded = heavy - SNIPPET_NEEDS
    assert not unneeded, f"foldermind config snippet --json imported {sorted(unneeded)}"
    # Off macOS keyring's macOS backend module looked for its frameworks with ldconfig, gcc and ld (four
    # programs each) on every token read; nothing in a snippet needs another program.
    assert spawned_by(indexer_only) == [], spawned_by(indexer_only)


def test_a_summary_from_a_terminal_asks_the_indexer_without_the_mcp_sdk(indexer_only: RunningKernel) -> None:
    """``summary`` is a pure lookup: over the bus, as ``search``; its typed error reads as the tool's."""
    missing = indexer_only.root / "never-indexed.txt"
    done, heavy = loaded_by(
        indexer_only, "summary", str(missing), watch=HEAVY - {"foldermind.kernel.cli.clients.commands"}
    )
    assert done.returncode == 1 and "INVALID_PATH: " in done.stderr and "not inside any Smart Folder" in done.stderr, (
        done.stderr
    )
    assert not heavy, f"foldermind summary imported {sorted(heavy)}"
