"""Client keys and what clients did: ``token add|list|revoke`` and ``token rotate [NAME]`` (the ``token`` group is
:mod:`.commands`'), and ``activity``.

A key is stored as the owner's token is (:mod:`foldermind.protocol.runtime.client_keys`); its scope is a list of
Smart Folder ids, resolved here from ids or names through the running indexer.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

import click

from foldermind.kernel.cli.common import connect, current_home, home_option, require_running
from foldermind.protocol.errors import BusError, JobError
from foldermind.protocol.messages import FolderListReply, FolderListRequest
from foldermind.protocol.messages.indexer import iso_time
from foldermind.protocol.runtime import activity as activity_rows
from foldermind.protocol.runtime.client_keys import ClientKey, ClientKeyError, ClientKeys
from foldermind.protocol.runtime.folder_names import Known, NotOneFolder, choose, here
from foldermind.protocol.runtime.home import Home


def folder_names(home: Home) -> dict[str, str]:
    """Every Smart Folder's name by id (path and criteria folders), from the running indexer; {} when it is not
    running."""
    if home.running_pid() is None:
        return {}
    with connect(home) as client, suppress(BusError, JobError):
        reply = client.request("indexer", FolderListRequest(with_criteria=True), FolderListReply, timeout=5).body
        return {f["id"]: f["name"] for f in [*reply.folders, *reply.criteria]}
    return {}


def scope_text(ids: list[str] | tuple[str, ...] | None, names: dict[str, str], every: str = "every folder") -> str:
    """A key's scope as people named it: "work (ID), taxwork (ID)" (an id alone for a folder ``names`` lacks)."""
    if ids is None:
        return every
    return ", ".join(f"{names[i]} ({i})" if i in names else i for i in ids) or "no folder"


def resolve_folders(home: Home, wanted: str | None) -> list[str] | None:
    """The Smart Folder ids that ``wanted`` (ids, paths or names, comma-separated) names; None when not given."""
    if wanted is None:
        return None
    asked = [w.strip() for w in wanted.split(",") if w.strip()]
    if not asked:
        raise click.UsageError("--folders names at least one Smart Folder (its id or name)")
    require_running(home)
    with connect(home) as client:
        try:
            reply = client.request("indexer", FolderListRequest(with_criteria=True), FolderListReply, timeout=20).body
        except (JobError, BusError) as exc:
            raise click.ClickException(f"the Smart Folders could not be listed: {exc}") from exc
    known = [Known(f["id"], f["name"], f["path"]) for f in reply.folders]
    known += [Known(c["id"], c["name"], "") for c in reply.criteria]
    ids: list[str] = []
    for name in asked:
        try:
            ids.append(known[choose(known, name, here(name))].id)
        except NotOneFolder as exc:
            raise click.ClickException(f"{exc} (`foldermind folders list`)") from None
    return list(dict.fromkeys(ids))


def describe(key: ClientKey, used: float | None) -> dict[str, Any]:
    return {
        "name": key.name,
        "folders": None if key.folders is None else list(key.folders),
        "created": iso_time(key.created),
        "last_used": iso_time(used),
    }


def add_key(home: Home, name: str, scope: list[str] | None) -> tuple[ClientKey, str]:
    try:
        return ClientKeys(home).add(name, scope)
    except ClientKeyError as exc:
        raise click.ClickException(str(exc)) from exc


def set_scope(home: Home, name: str, scope: list[str] | None) -> None:
    try:
        ClientKeys(home).set_scope(name, scope)
    except ClientKeyError as exc:
        raise click.ClickException(str(exc)) from exc


def token_add(name: str, folders: str | None, as_json: bool) -> None:
    """Make a key for one MCP client (every folder, or only --folders)."""
    home = current_home()
    home.ensure()
    key, token = add_key(home, name, resolve_folders(home, folders))
    if as_json:
        click.echo(json.dumps({"name": key.name, "token": token, "folders": describe(key, None)["folders"]}))
        return
    click.echo(token)
    scope = scope_text(key.folders, folder_names(home), "every Smart Folder")
    click.echo(f"key {key.name!r} made; it sees {scope}", err=True)


def token_list(as_json: bool) -> None:
    home = current_home()
    used = activity_rows.last_used(home.data_dir)
    # A name revoked and made again: the new key's use starts at its creation.
    keys = [describe(k, u if (u := used.get(k.name)) and u >= k.created else None) for k in ClientKeys(home).all()]
    if as_json:
        click.echo(json.dumps(keys, indent=2))
        return
    if not keys:
        click.echo("no client keys (`foldermind token add NAME`); the owner's token sees every folder")
    names = folder_names(home)
    for k in keys:
        scope = scope_text(k["folders"], names)
        click.echo(f"{k['name']}: {scope}; created {k['created']}; last used {k['last_used'] or 'never'}")


def token_revoke(name: str) -> None:
    try:
        ClientKeys(current_home()).revoke(name)
    except ClientKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"key {name!r} revoked: refused from its next request; its open sessions close within a second")


def token_show_named(home: Home, name: str) -> None:
    """For a client that reads its key from its environment or a prompt (the URL form of Claude Code, Cursor,
    Windsurf, VS Code): printed as the owner's token is, by the same user."""
    try:
        token = ClientKeys(home).token(name)
    except ClientKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    if token is None:
        raise click.ClickException(f"no client key {name!r} with a stored token (`foldermind token list`)")
    click.echo(token)


def token_rotate_named(name: str) -> None:
    try:
        token = ClientKeys(current_home()).rotate(name)
    except ClientKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(token)
    click.echo(f"key {name!r} rotated: its old token is refused from now on", err=True)


def since_time(raw: str | None) -> float | None:
    """``WHEN`` as the console takes it too (:func:`~foldermind.protocol.runtime.activity.since_time`)."""
    if raw is None:
        return None
    try:
        return activity_rows.since_time(raw)
    except ValueError:
        raise click.BadParameter(activity_rows.SINCE_HELP, param_hint="--since") from None


@click.command("activity")
@home_option
@click.option("--client", "client_name", default=None, help="Only this client key's calls ('owner': the owner's).")
@click.option("--since", "since", default=None, help="Only calls since WHEN: an ISO date or time, or 30m, 12h, 7d.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=200, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def activity(client_name: str | None, since: str | None, limit: int, as_json: bool) -> None:
    """What MCP clients called and which documents they were given (latest last)."""
    rows = activity_rows.read(current_home().data_dir, client_name, since_time(since), limit)
    for row in rows:
        row["at"] = iso_time(row["at"])
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for row in rows:
        docs = f"{row['count']} document(s)" + (f": {', '.join(row['documents'][:3])}" if row["documents"] else "")
        more = " ..." if row["count"] > 3 else ""
        click.echo(
            f"{row['at']} {row['client']} {row['tool']} {row['outcome']} {row['duration_ms']:.0f} ms {docs}{more}"
        )


# --- what doctor says about keys

GIVE_FOLDERS = "; give it --folders"


def keys_summary(home: Home) -> tuple[str, str]:
    """(status, detail) of the client keys: how many, and each one's scope."""
    keys = ClientKeys(home).all()
    if not keys:
        return "info", "no client keys: every client holds the owner's token (`foldermind token add NAME`)"
    names = folder_names(home)
    listed = "; ".join(f"{k.name} ({scope_text(k.folders, names)})" for k in keys)
    return "info", f"{len(keys)} client key(s): {listed}"


def entry_key(args: list[str], base: list[str]) -> str | None:
    """The client key a stdio entry's arguments name (``base`` then ``--client NAME``); "" for the owner's
    (``base`` alone); None when they are neither."""
    if args == base:
        return ""
    if len(args) == len(base) + 2 and args[: len(base)] == base and args[len(base)] == "--client":
        return args[-1]
    return None


def presented_key(home: Home, entry: dict[str, Any]) -> str | None:
    """The registered client key a client file's entry presents: named after ``--client`` in a command entry's
    arguments, or by its token in a URL entry's header; None for the owner's token or an unknown one."""
    args = entry.get("args")
    if isinstance(args, list) and "--client" in args[:-1]:
        name = str(args[args.index("--client") + 1])
        return name if ClientKeys(home).get(name) is not None else None
    header = entry.get("headers")
    bearer = str(header.get("Authorization", "")) if isinstance(header, dict) else ""
    key = ClientKeys(home).by_token(bearer.removeprefix("Bearer ")) if bearer.startswith("Bearer ") else None
    return key.name if key is not None else None


def key_problems(home: Home, name: str, in_project: bool) -> list[tuple[bool, str]]:
    """A stdio entry presenting client key ``name`` ("" the owner's): registered, and scoped when the file is a
    project's (a repository's agent then reads only the folders it was given)."""
    key = ClientKeys(home).get(name) if name else None
    if name and key is None:
        return [(True, f"its client key {name!r} is not registered (revoked?)")]
    if in_project and (key is None or key.folders is None):
        which = "the owner's token" if key is None else f"client key {name!r}"
        return [(False, f"a project-level file with {which} sees every Smart Folder{GIVE_FOLDERS}")]
    return []
