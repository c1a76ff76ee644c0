"""Helpers every command group shares: the ``--home`` option, the home and its config, a bus client,
whether a kernel runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from foldermind.protocol.client import BusClient
from foldermind.protocol.runtime.config import ConfigError, SupervisorConfig, load
from foldermind.protocol.runtime.home import Home

F = TypeVar("F", bound=Callable[..., Any])

NOT_RUNNING_EXIT = 3


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
    ctx = click.get_current_context()
    return Home.resolve(ctx.meta.get("foldermind.home") or os.environ.get("FOLDERMIND_HOME") or None)


def current_config(home: Home) -> SupervisorConfig:
    try:
        return load(home.supervisor_override)
    except ConfigError as exc:
        raise click.ClickException(f"invalid supervisor config: {exc}") from exc


@contextmanager
def connect(home: Home) -> Iterator[BusClient]:
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


def one_line(name: str) -> str:
    """A file name on one terminal line: control characters (a newline in a name) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)
