"""The ``foldermind`` command line: the group and where each command lives.

- :mod:`.lifecycle`: ``start``, ``stop``;
- :mod:`.status`: ``status``, ``restart``, ``logs``;
- :mod:`.worker`: ``worker run``;
- :mod:`.folders`: ``folders add|list|remove``, ``search``;
- :mod:`.clients`: what MCP clients need (``mcp``, ``token``, ``config``, ``test-connection``, ``ask``,
  ``summary``), with :mod:`.bridge` for the stdio bridge;
- :mod:`.clientconfig`, :mod:`.install`: ``config defaults|snippet|install|uninstall``, from the one table
  of client facts in :mod:`.clientfacts` (entries built by :mod:`.entries`, files edited by
  :mod:`.clientfile` and :mod:`.jsonedit`);
- :mod:`.doctor`: ``doctor``, the checks of a setup;
- :mod:`.common`: the helpers they share (``--home``, the home's config, a bus client).
"""

from __future__ import annotations

import sys

import click

from foldermind.kernel import __version__
from foldermind.kernel.cli import clients, doctor, folders, lifecycle, status, worker
from foldermind.kernel.cli.common import home_option
from foldermind.protocol.runtime.home import UnsafeHomeError


@click.group()
@click.version_option(__version__, prog_name="foldermind")
@home_option
def cli() -> None:
    """foldermind: search and chat with your folders from any MCP client, locally."""


for _command in (
    lifecycle.start,
    lifecycle.stop,
    status.status,
    status.restart,
    status.logs_cmd,
    worker.worker,
    folders.folders,
    folders.search,
    doctor.doctor,
):
    cli.add_command(_command)
clients.register(cli)


def main() -> None:
    clients.quiet_token_log()
    try:
        cli(prog_name="foldermind")
    except UnsafeHomeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
