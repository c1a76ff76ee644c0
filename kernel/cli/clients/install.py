"""``foldermind config install`` and ``config uninstall``: our entry merged into (or taken out of) a
client's real config file, everything else in it kept byte for byte.

Install defaults to the command form (``foldermind mcp``) for every client: it needs no token in the file
and starts the supervisor when the client starts, so it is the form that keeps working after a token
rotation or a port change. ``--http`` writes the URL form, the token referenced as the client allows.

Each installed entry presents a client key of its own (``mcp --client NAME``, or that key's token in the URL
form), made on first install and reused after: the one the file's entry already presents, else the key named
after the client (``<client>-<folder>`` for a project's file, so a repository's agent is scoped apart from the
same app's user-level entry). Installing again therefore moves an entry on the owner's token onto its own key
and never makes a second one. ``--folders`` sets the key's scope; ``--owner-key`` keeps the owner's token.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

import click

from foldermind.kernel.cli.clients import entries, keys
from foldermind.kernel.cli.clients import file as clientfile
from foldermind.kernel.cli.clients.config import config, say_url_source, target, transport_options, wants_stdio
from foldermind.kernel.cli.clients.facts import CLIENTS, Client, Secret, config_file
from foldermind.kernel.cli.clients.jsonedit import JsonError
from foldermind.kernel.cli.common import current_home, home_option, typed
from foldermind.protocol.runtime.client_keys import ClientKeys
from foldermind.protocol.runtime.home import Home

client_option = click.option("--client", "name", type=click.Choice(list(CLIENTS)), required=True)
project_option = click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Edit the project's file (.mcp.json, .cursor/mcp.json, .vscode/mcp.json, .zed/settings.json) in DIR.",
)
dry_run_option = click.option("--dry-run", is_flag=True, help="Print the change as a unified diff; write nothing.")


def _where(client: Client, project: Path | None) -> Path:
    try:
        return config_file(client, project.resolve() if project else None)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _change(path: Path, old: str, new: str, dry_run: bool, done: str, private: bool = False) -> bool:
    """Show or make the change; a file already as wanted is left untouched (no backup, no write).
    Whether the file changed."""
    if new == old:
        click.echo(f"{path}: {done} already; nothing to change")
        return False
    if dry_run:
        diff = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), str(path), str(path) + " (after)"
        )
        sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in diff)
        return False
    backup = clientfile.write(path, old, new, private)
    click.echo(f"{path}: {done}" + (f" (the previous file is {backup})" if backup else ""))
    return True


def _read(path: Path, client: Client) -> str:
    """The file's text, refused with its line and column when it is not the client's format."""
    old = clientfile.read(path)
    try:
        clientfile.parse(old, client)
    except JsonError as exc:
        fmt = "JSON with comments" if client.jsonc else "JSON"
        raise click.ClickException(f"{path} is not valid {fmt} ({exc}); nothing was changed") from None
    return old


@click.command("install")
@home_option
@client_option
@transport_options
@project_option
@dry_run_option
@click.option(
    "--folders", default=None, help="The client's key sees only these Smart Folders (ids or names); else every one."
)
@click.option("--owner-key", is_flag=True, help="Present the owner's token (every folder), not a key of its own.")
def install_cmd(
    name: str, stdio: bool, http: bool, project: Path | None, dry_run: bool, folders: str | None, owner_key: bool
) -> None:
    """Merge the foldermind entry into CLIENT's config file (command form unless --http), with a client key of
    its own."""
    client = CLIENTS[name]
    home = current_home()
    home.ensure()
    stdio = wants_stdio(name, stdio, http)
    if owner_key and folders is not None:
        raise click.UsageError("--owner-key sees every folder; --folders is for the client's own key")
    path = _where(client, project)
    old = _read(path, client)
    key = "" if owner_key else _client_key(home, _key_name(home, client, project, old), folders, dry_run)
    left = _presented(home, client, old) if owner_key else None
    if left:
        revoke = typed(home, "token", "revoke", left)
        click.echo(f"client key {left!r} is kept, though this entry no longer uses it: `{revoke}` ends it", err=True)
    t = target(home, stdio, key, placeholder=dry_run)
    item = entries.vscode_input() if entries.needs_input(client, stdio) else None
    try:
        new = clientfile.with_entry(old, client, entries.entry(client, stdio, t), item)
    except JsonError as exc:
        raise click.ClickException(f"{path}: {exc}; nothing was changed") from None
    literal = not stdio and client.http is not None and client.http.secret is Secret.LITERAL
    loose = clientfile.readable_by_others(path) if literal else None
    changed = _change(path, old, new, dry_run, "foldermind entry installed", private=literal)
    if loose is not None:
        _say_token_exposure(path, loose, changed, dry_run, typed(home, "config", "install", "--client", name))
    user_note = client.user_file_note if project is None else ""
    show = typed(home, "token", "show", *([key] if key else []))
    for line in (client.note, user_note, entries.secret_hint(client, stdio, show)):
        if line:
            click.echo(line, err=True)
    say_url_source(t, stdio)
    if changed:
        click.echo(f"restart {client.title} (or reload its MCP servers) to pick it up", err=True)


def _presented(home: Home, client: Client, text: str) -> str | None:
    """The registered client key the file's entry presents now (None: the owner's token, or no entry)."""
    try:
        entry = clientfile.current(text, client)
    except JsonError:
        return None
    return keys.presented_key(home, entry) if isinstance(entry, dict) else None


def _key_name(home: Home, client: Client, project: Path | None, text: str) -> str:
    """The key this file's entry should present: the one it presents already, else one named after the client."""
    known = _presented(home, client, text)
    if known:
        return known
    if project is None:
        return client.name
    slug = re.sub(r"[^a-z0-9_-]+", "-", project.resolve().name.lower()).strip("-_")
    return f"{client.name}-{slug}"[:63].rstrip("-_") if slug else client.name


def _client_key(home: Home, name: str, folders: str | None, dry_run: bool) -> str:
    """Key ``name``: made when missing (every folder, or ``folders``), its scope set to ``folders`` when given."""
    existing = ClientKeys(home).get(name)
    wanted = keys.resolve_folders(home, folders)
    scope = "every Smart Folder" if wanted is None else ", ".join(wanted)
    if existing is None:
        if dry_run:
            click.echo(f"client key {name!r} would be made; it would see {scope}", err=True)
            return name
        keys.add_key(home, name, wanted)
        click.echo(f"client key {name!r} made; it sees {scope}", err=True)
    elif wanted is not None and (existing.folders is None or sorted(existing.folders) != sorted(wanted)):
        if not dry_run:
            keys.set_scope(home, name, wanted)
        click.echo(f"client key {name!r} {'would now see' if dry_run else 'now sees'} {scope}", err=True)
    return name


def _say_token_exposure(path: Path, mode: int, changed: bool, dry_run: bool, stdio_install: str) -> None:
    """The URL form put the token itself into a file other users could read: it is made owner-only (the
    token is a key to every indexed document), and the command form, which writes no token, is named."""
    was = f"{path} was readable by other users (mode {mode:04o}) and"
    if changed:
        said = f"{was} now holds the token: made it owner-only ({mode & 0o700:04o}), its backup too"
    elif dry_run:
        said = f"{was} would hold the token: it would be made owner-only ({mode & 0o700:04o})"
    else:
        said = f"{path} holds the token and other users can read it (mode {mode:04o}): `chmod 600 {path}`"
    click.echo(f"warning: {said}; `{stdio_install}` (the command form) writes no token at all", err=True)


@click.command("uninstall")
@home_option
@client_option
@project_option
@dry_run_option
def uninstall_cmd(name: str, project: Path | None, dry_run: bool) -> None:
    """Take the foldermind entry out of CLIENT's config file; every other entry stays."""
    client = CLIENTS[name]
    path = _where(client, project)
    old = _read(path, client)
    try:
        new = clientfile.without_entry(old, client)
    except JsonError as exc:
        raise click.ClickException(f"{path}: {exc}; nothing was changed") from None
    removed = _change(path, old, new, dry_run, "foldermind entry removed")
    key = _presented(current_home(), client, old) if removed else None
    if key:
        click.echo(f"client key {key!r} is kept: `{typed(current_home(), 'token', 'revoke', key)}` ends it", err=True)


# `config` is config.py's group; its two subcommands that edit files join it here, so the group is
# complete wherever it is reached from (the command line asks this module for it).
config.add_command(install_cmd)
config.add_command(uninstall_cmd)
