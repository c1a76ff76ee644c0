"""``foldermind console``: open the web console in the default browser, signed in through a one-time link."""

from __future__ import annotations

import webbrowser

import click

from foldermind.kernel.cli.common import connect, current_home, home_option, require_running
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ConsoleLinkReply, ConsoleLinkRequest


@click.command()
@home_option
@click.option("--url", "print_url", is_flag=True, help="Print the one-time sign-in link instead of opening it.")
def console(print_url: bool) -> None:
    """Open the web console in your browser, signed in (a link that works once, for a minute)."""
    home = current_home()
    require_running(home)
    with connect(home) as client:
        try:
            reply = client.request("console", ConsoleLinkRequest(), ConsoleLinkReply, timeout=10).body
        except JobError as exc:
            if exc.code in (ErrorCode.UNKNOWN_WORKER, ErrorCode.SERVICE_UNAVAILABLE):
                raise click.ClickException(
                    f"the console is not serving ({exc.message}); `foldermind status` shows it, and"
                    " [workers.console] enabled = false in supervisor.toml turns it off"
                ) from exc
            raise click.ClickException(exc.message) from exc
    if print_url:
        click.echo(reply.link)
        return
    if webbrowser.open(reply.link):
        click.echo(f"opened the console ({reply.url}) in your browser")
    else:
        click.echo(f"no browser found: open this link within {reply.expires_s:g} s\n{reply.link}")
