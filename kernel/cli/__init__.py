"""The ``foldermind`` command line: the group and where each command lives (:data:`COMMANDS`; a command's
module is imported only when it runs).

- :mod:`.lifecycle`: ``start``, ``stop``;
- :mod:`.status`: ``status``, ``restart``, ``logs``;
- :mod:`.worker`: ``worker run`` (here or, with ``--connect``, against a kernel on another machine), ``worker keys``;
- :mod:`.bus`: ``bus keys|allow|deny``, the kernel's keys and allow list for remote workers;
- :mod:`.folders`: ``folders add|list|remove``, ``search``;
- :mod:`.clients`, what MCP clients are given: :mod:`.clients.commands` (``mcp``, ``token``,
  ``test-connection``, ``ask``, ``summary``), :mod:`.clients.keys` (the client keys behind
  ``token add|list|revoke|rotate NAME``, and ``activity``), :mod:`.clients.config` and :mod:`.clients.install`
  (``config defaults|snippet|install|uninstall``, the last two loaded by the ``config`` group when they run);
- :mod:`.bridge`: the stdio bridge ``mcp`` runs;
- :mod:`.doctor`: ``doctor``, the checks of a setup;
- :mod:`.console`: ``console``, the web console opened signed in;
- :mod:`.common`: the helpers they share (``--home``, the home's config, a bus client).
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from foldermind.kernel import __version__
from foldermind.kernel.cli.common import home_option
from foldermind.protocol.runtime.home import HomeNotWritable, UnsafeHomeError

COMMANDS: dict[str, tuple[str, str]] = {
    "start": ("lifecycle", "start"),
    "stop": ("lifecycle", "stop"),
    "status": ("status", "status"),
    "restart": ("status", "restart"),
    "logs": ("status", "logs_cmd"),
    "worker": ("worker", "worker"),
    "bus": ("bus", "bus"),
    "folders": ("folders", "folders"),
    "search": ("folders", "search"),
    "doctor": ("doctor", "doctor"),
    "repair": ("repair", "repair"),
    "mcp": ("clients.commands", "mcp_cmd"),
    "token": ("clients.commands", "token"),
    "config": ("clients.config", "config"),  # install's two subcommands are loaded by the group when they run
    "test-connection": ("clients.commands", "test_connection"),
    "ask": ("clients.commands", "ask"),
    "summary": ("clients.commands", "summary"),
    "console": ("console", "console"),
    "activity": ("clients.keys", "activity"),
}
"""Command name -> (its module under this package, the click command in it)."""


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs (or help lists them all).

    Every command imported up front cost each invocation the MCP SDK, httpx, anyio and the JSON5 editor
    (~1.3 s of imports on a busy machine, python -X importtime), which ``foldermind search`` or ``status``
    never use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module = importlib.import_module(f"{__name__}.{where[0]}")
        command = getattr(module, where[1])
        assert isinstance(command, click.Command), (cmd_name, command)
        return command


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="foldermind")
@home_option
def cli() -> None:
    """foldermind: search and chat with your folders from any MCP client, locally."""


def quiet_token_log() -> None:
    """The front door logs the token's storage mode once per start; a terminal command need not repeat it
    on every call (`token show` says the mode itself). Called when the command line runs, not on import:
    a process that only imports the CLI (a test, a tool reading its commands) keeps its logging as it was."""
    logging.getLogger("foldermind.token").setLevel(logging.ERROR)


def main() -> None:
    quiet_token_log()
    try:
        cli(prog_name="foldermind")
    except (UnsafeHomeError, HomeNotWritable) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
