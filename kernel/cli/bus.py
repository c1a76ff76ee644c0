"""``foldermind bus keys|allow|deny``: the kernel's side of workers on other machines.

The kernel listens for them on ``[bus] listen_tcp`` (CURVE only); these commands print its public key (what a
remote worker passes as ``--server-key``) and edit the allow list of worker keys it admits. They work on the
home's files, with or without a running kernel: the ZAP handler reads the list at every handshake, so an
``allow`` lets the next connection in without a restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from foldermind.kernel import curve
from foldermind.kernel.cli.common import current_home, home_option
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.keys import ensure_keypair


@click.group()
def bus() -> None:
    """The tcp bus where workers on other machines join (see [bus] listen_tcp)."""


def show_public_key(folder: Callable[[Home], Path], as_json: bool) -> None:
    """The public key of the home's keypair in ``folder(home)`` (made on first use), as ``bus keys`` and
    ``worker keys`` print it: alone on its line, or ``{"public_key": ...}``."""
    home = current_home()
    home.ensure()
    public_key = ensure_keypair(folder(home))
    click.echo(json.dumps({"public_key": public_key}) if as_json else public_key)


@bus.command("keys")
@home_option
@click.option("--json", "as_json", is_flag=True, help='Print {"public_key": ...}.')
def bus_keys(as_json: bool) -> None:
    """Print the kernel's public key (made on first use): remote workers pass it as --server-key."""
    show_public_key(lambda home: home.bus_keys, as_json)


# A Z85 key may begin with "-" (its alphabet has it): unknown options are taken as the arguments they are.
@bus.command("allow", context_settings={"ignore_unknown_options": True})
@home_option
@click.argument("name")
@click.argument("public_key")
def bus_allow(name: str, public_key: str) -> None:
    """Admit the worker key PUBLIC_KEY (its `foldermind worker keys`) under NAME."""
    home = current_home()
    home.ensure()
    try:
        curve.allow(home, name, public_key)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"allowed {name}")


@bus.command("deny")
@home_option
@click.argument("name")
def bus_deny(name: str) -> None:
    """Remove NAME's key from the allow list: the kernel drops its members and refuses it from then on."""
    home = current_home()
    if not curve.deny(home, name):
        raise click.ClickException(f"no key named {name!r} is allowed")
    click.echo(f"denied {name}")
