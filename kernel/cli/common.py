"""Helpers every command group shares: the ``--home`` option, the home and its config, a bus client,
whether a kernel runs, and how to print a command a user can type as it is.

The config (pydantic: ~190 ms of imports, python -X importtime) and the bus client (ZeroMQ and every message
kind: ~80 ms) are imported by the helper that needs them, not here: the group imports this module for
``--home`` on every command, and ``foldermind search`` never reads the config (tests/test_cli_imports.py)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from foldermind.protocol.runtime.home import Home

if TYPE_CHECKING:
    from foldermind.protocol.client import BusClient
    from foldermind.protocol.runtime.config import SupervisorConfig

F = TypeVar("F", bound=Callable[..., Any])

NOT_RUNNING_EXIT = 3
DEMO_DESCRIPTION = "foldermind's own docs"
"""The description `start --demo-folder` (`make run`) registers its demo folder with: how it is told apart later."""


def home_option(func: F) -> F:
    """``--home`` on the group and on every command (``foldermind status --home X`` reads naturally)."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            ctx.meta["foldermind.home"] = value
        return value

    return click.option(
        "--home",
        type=click.Path(file_okay=False),
        default=None,
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Folder for config, data, logs and sockets (default: platform dirs; env FOLDERMIND_HOME).",
    )(func)


def current_home() -> Home:
    """The home of ``--home`` (or FOLDERMIND_HOME, or the platform's), reaching its running kernel's sockets
    wherever they are (:meth:`Home.serving`: a kernel started with another XDG_RUNTIME_DIR)."""
    ctx = click.get_current_context()
    return Home.resolve(ctx.meta.get("foldermind.home") or os.environ.get("FOLDERMIND_HOME") or None).serving()


def current_config(home: Home) -> SupervisorConfig:
    from foldermind.protocol.runtime.config import ConfigError, load  # lazily: see the module docstring

    try:
        return load(home.supervisor_override)
    except ConfigError as exc:
        raise click.ClickException(f"invalid supervisor config: {exc}") from exc


def stray_config(home: Home) -> str:
    """Why a ``supervisor.toml`` at the top of the home is not read (settings go in ``config/``), or "": a
    copy of the defaults saved next to data/ and logs/ looks like the place, and its edits would be ignored
    without a word."""
    if home.root is None:
        return ""
    stray = home.root / "supervisor.toml"
    if stray.resolve() == home.supervisor_override.resolve() or not stray.is_file():
        return ""
    return f"{stray} is not read: a home's settings go in {home.supervisor_override}"


@contextmanager
def connect(home: Home) -> Iterator[BusClient]:
    from foldermind.protocol.client import BusClient  # lazily: see the module docstring

    client = BusClient(home.bus_endpoint, name="cli")
    try:
        yield client
    finally:
        client.close()


def kernel_running(home: Home) -> bool:
    return home.running_pid() is not None


def require_running(home: Home) -> None:
    if not kernel_running(home):
        raise click.ClickException(f"foldermind is not running (home: {home.root or 'platform default'})")


def failed_and_not_read(folder: Any) -> str:
    """ "3 failed", "1 skipped" when any, and when its last scan found any, "2 not read (other formats: .gz 2)":
    the files of a folder (a ``FolderInfo``) that are not indexed, as every folder line says them."""
    out = f"{folder['files_failed']} failed"
    if folder.get("files_skipped"):
        out += f", {folder['files_skipped']} skipped"
    unsupported = folder.get("files_unsupported") or 0
    if unsupported:
        out += f", {unsupported} not read (other formats"
        out += f": {suffix_counts(folder['unsupported'])})" if folder.get("unsupported") else ")"
    return out


def suffix_counts(counts: dict[str, int], most: int = 5) -> str:
    """ ".gz 12, .xyz 1, no suffix 2": the unsupported files of a folder by suffix, most first."""
    named = [f"{suffix or 'no suffix'} {n}" for suffix, n in list(counts.items())[:most]]
    rest = sum(list(counts.values())[most:])
    return ", ".join(named) + (f", other {rest}" if rest else "")


def chunks_line(folder: Any) -> str:
    """ "826 chunks", or while some wait for vectors "826 chunks (searchable by keyword, embedding 95/826)"."""
    chunks, embedded = folder["chunks"], folder["chunks_embedded"]
    if embedded >= chunks:
        return f"{chunks} chunks"
    searchable = "searchable by keyword, " if folder["state"] in ("ready", "embedding") else ""
    return f"{chunks} chunks ({searchable}embedding {embedded}/{chunks})"


def one_line(name: str) -> str:
    """A file name on one terminal line: control characters (a newline in a name) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def installed_exe() -> Path:
    """This install's ``foldermind`` script, beside the interpreter running it (a venv's bin/)."""
    return Path(sys.executable).parent / "foldermind"


def prog(path: str | None = None) -> list[str]:
    """How to invoke this install from a shell whose PATH is ``path`` (default: this one's): plain
    ``foldermind`` only when that name finds this very install; otherwise its script by absolute path,
    since a venv's bin/ is on no PATH outside the venv (what `make run` and a new user's shell have)."""
    exe = installed_exe()
    if not exe.exists():
        return [sys.executable, "-m", "foldermind.kernel.cli"]
    found = shutil.which("foldermind", path=path)
    return ["foldermind"] if found and os.path.samefile(found, exe) else [str(exe)]


def typed(home: Home, *args: str) -> str:
    """A command line to print for the user, ready to paste: this install's program, ``--home`` when the
    home is not the default one, then ``args``."""
    flag = ["--home", str(home.root)] if home.root is not None else []
    return shlex.join([*prog(), *flag, *args])


def activate_hint() -> str | None:
    """When the commands printed carry a path: how to put that bin/ on PATH for this shell instead."""
    if prog()[0] == "foldermind" or sys.prefix == sys.base_prefix:
        return None
    script = Path(sys.prefix) / "bin" / "activate"
    if not script.exists():
        return None
    return f"(or run `source {shlex.quote(str(script))}` once in your shell, then type `foldermind` alone)"
