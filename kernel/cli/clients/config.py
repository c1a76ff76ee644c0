"""``foldermind config``: ``defaults`` (every setting with its help) and ``snippet`` (a client's entry to
paste); :mod:`.install` adds ``install`` and ``uninstall`` to the same group, imported only when one of them
runs (with the JSON5 editor and the client keys a snippet never needs).

A snippet does not need a running supervisor: without one it uses the configured URL and says so, since
the port actually bound can differ only when the configured one is taken at start.
"""

from __future__ import annotations

import importlib
import json
import shlex
from typing import Any

import click

from foldermind.kernel.cli.clients import entries
from foldermind.kernel.cli.clients.facts import CLIENTS, GENERIC, NAMES, user_file
from foldermind.kernel.cli.common import current_config, current_home, home_option, typed
from foldermind.protocol.runtime.home import Home

LATER = {"install": "clients.install", "uninstall": "clients.install"}
"""Subcommands defined in another module of the CLI (name -> module under it), imported when they run."""


class ConfigGroup(click.Group):
    """``config``, whose ``install`` and ``uninstall`` are loaded on demand (as the top group loads commands)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LATER})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LATER and cmd_name not in self.commands:
            importlib.import_module(f"foldermind.kernel.cli.{LATER[cmd_name]}")  # its decorators add it here
        return super().get_command(ctx, cmd_name)


@click.group(cls=ConfigGroup)
def config() -> None:
    """Client configuration, and the settings' defaults."""


@config.command("defaults")
def config_defaults() -> None:
    """Print every setting with its default and its help, as supervisor.toml (override any of them in
    <home>/config/supervisor.toml)."""
    from foldermind.protocol.runtime import defaults  # the config's pydantic models: only this command needs them

    click.echo(defaults.render(), nl=False)


def transport_options(func: click.decorators.FC) -> click.decorators.FC:
    """``--stdio`` / ``--http``: the command form (the default) or the URL form."""
    func = click.option("--http", "http", is_flag=True, help="The URL form (streamable HTTP with the token).")(func)
    return click.option(
        "--stdio", is_flag=True, help="The command form (`foldermind mcp`), the default: no token needed."
    )(func)


def wants_stdio(name: str, stdio: bool, http: bool) -> bool:
    """Which form: the command form unless --http (it needs no token in the client's environment, which an
    app started from the dock does not have); Claude Desktop refuses HTTP."""
    if stdio and http:
        raise click.UsageError("--stdio and --http exclude each other")
    client = CLIENTS.get(name)
    if client is not None and client.http is None:
        if http:
            raise click.ClickException(f"{client.title} takes only the command form: {client.note}")
        return True
    return not http


def target(home: Home, stdio: bool, key: str = "", placeholder: bool = False) -> entries.Target:
    """This install as an entry points at it, with the owner's token or client key ``key``'s. The token is read
    only for the URL form; ``placeholder`` stands in for a key not made yet (a dry run)."""
    command = entries.bridge_command(home) + (["--client", key] if key else [])
    if stdio:
        return entries.Target(command, "", "", url_is_live=False)
    from foldermind.protocol.runtime.token_store import TokenStore  # keyring: only the URL form reads a token

    live = entries.live_url(home)
    url = live or entries.configured_url(current_config(home))
    token = TokenStore(home, key).stored() if key else TokenStore(home).load_or_create()
    if token is None and placeholder:
        token = f"<client key {key}'s token>"
    if token is None:
        raise click.ClickException(f"client key {key!r} has no stored token: `foldermind token rotate {key}`")
    return entries.Target(command, url, token, url_is_live=live is not None)


def say_url_source(t: entries.Target, stdio: bool) -> None:
    if not stdio and not t.url_is_live:
        click.echo(
            f"# foldermind is not running: {t.url} is the configured URL (if that port is taken at start,"
            " `foldermind status` shows the one used and `foldermind doctor` finds entries that differ)",
            err=True,
        )


def claude_mcp_add(home: Home, stdio: bool, t: entries.Target) -> str:
    """The same entry as Claude Code's own command adds it (user scope: every project)."""
    if stdio:
        return shlex.join(["claude", "mcp", "add", "--scope", "user", entries.SERVER_NAME, "--", *t.command])
    head = shlex.join(["claude", "mcp", "add", "--transport", "http", "--scope", "user", entries.SERVER_NAME, t.url])
    # $(...) so the token is read when the line runs, not pasted into the shell's history.
    return f'{head} --header "Authorization: Bearer $({typed(home, "token", "show")})"'


@config.command("snippet")
@home_option
@click.option("--client", "name", type=click.Choice(NAMES), default=None, help="Required unless --json.")
@transport_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Every form of the client's entry (of every client without --client) as JSON, with the file and the notes.",
)
def config_snippet(name: str | None, stdio: bool, http: bool, as_json: bool) -> None:
    """Paste-ready client config: the command form (`foldermind mcp`), or with --http the real URL and the
    token (or the client's reference to it)."""
    home = current_home()
    home.ensure()
    if as_json:
        click.echo(json.dumps(all_snippets(home, [name] if name else list(NAMES)), indent=2))
        return
    if name is None:
        raise click.UsageError("--client is required (or --json for every client)")
    stdio = wants_stdio(name, stdio, http)
    t = target(home, stdio)
    click.echo(entries.snippet(name, stdio, t))
    if name == GENERIC:
        click.echo("# not any client's file: the transport, URL, header or command to give a client", err=True)
    else:
        client = CLIENTS[name]
        click.echo(f"# paste into {user_file(client)} ({client.where})", err=True)
        for note in (client.note, client.user_file_note):
            if note:
                click.echo(f"# {note}", err=True)
        hint = entries.secret_hint(client, stdio, typed(home, "token", "show"))
        if hint:
            click.echo(f"# {hint}", err=True)
        if name == "claude-code":
            click.echo(f"# or run: {claude_mcp_add(home, stdio, t)}", err=True)
        install = typed(home, "config", "install", "--client", name, *([] if stdio else ["--http"]))  # the same form
        click.echo(f"# or let foldermind merge it in: `{install}`", err=True)
    say_url_source(t, stdio)


def all_snippets(home: Home, names: list[str]) -> list[dict[str, Any]]:
    """Each client's entry in each form it takes (the command form first), as ``config snippet`` prints them:
    ``{client, title, form, snippet, file, where, notes, url, url_is_live}``. The owner's token is read only for
    a URL form, and is in a snippet only where the client has no way to refer to it."""
    out: list[dict[str, Any]] = []
    for name in names:
        client = CLIENTS.get(name)
        forms = [True] if client is not None and client.http is None else [True, False]
        for stdio in forms:
            t = target(home, stdio)
            notes = [] if client is None else [client.note, client.user_file_note]
            if client is not None:
                notes.append(entries.secret_hint(client, stdio, typed(home, "token", "show")) or "")
            if name == "claude-code":
                notes.append(f"or run: {claude_mcp_add(home, stdio, t)}")
            out.append(
                {
                    "client": name,
                    "title": client.title if client is not None else "Any other client",
                    "form": "command" if stdio else "url",
                    "snippet": entries.snippet(name, stdio, t),
                    "file": str(user_file(client)) if client is not None else "",
                    "where": client.where if client is not None else "the client's own form for an MCP server",
                    "notes": [n for n in notes if n],
                    "url": t.url,
                    "url_is_live": t.url_is_live,
                }
            )
    return out
