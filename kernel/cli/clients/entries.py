"""The foldermind entry a client's config holds, built from the client facts table and this install: the
command that launches the stdio bridge, or the URL with the token referenced the way the client can.

Pure functions of (client, transport, target), so ``config snippet``, ``config install`` and ``doctor``
agree on what "our entry" is: doctor compares a file against exactly what install would write.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from foldermind.kernel.cli.clients.facts import CLIENTS, GENERIC, TOKEN_ENV, VSCODE_INPUT_ID, Client, Secret
from foldermind.kernel.cli.common import installed_exe
from foldermind.protocol.runtime.home import Home

if TYPE_CHECKING:  # the config (pydantic) is loaded only where one is read: a live URL needs none
    from foldermind.protocol.runtime.config import SupervisorConfig

SERVER_NAME = "foldermind"


@dataclass(frozen=True)
class Target:
    """What an entry points at: this install's bridge command, its MCP URL and its token."""

    command: list[str]
    url: str
    token: str
    url_is_live: bool  # the URL the running front door bound, rather than the configured one


def bridge_command(home: Home) -> list[str]:
    """How a client should launch the bridge: this installation's own ``foldermind`` executable, by its
    absolute path, because a client started from a desktop has no venv on its PATH."""
    exe = installed_exe()
    cmd = [str(exe)] if exe.exists() else [shutil.which("foldermind") or "foldermind"]
    if home.root is not None:
        cmd += ["--home", str(home.root)]
    return [*cmd, "mcp"]


def configured_url(config: SupervisorConfig) -> str:
    """The URL the front door binds when its port is free (FOLDERMIND_MCP_PORT overrides the setting)."""
    mcp = config.mcp
    port = os.environ.get("FOLDERMIND_MCP_PORT") or str(mcp.port)
    host = f"[{mcp.host}]" if ":" in mcp.host else mcp.host
    return f"http://{host}:{port}{mcp.path}"


def live_url(home: Home) -> str | None:
    """The URL the running front door actually bound (another port when the configured one was taken)."""
    info = home.read_mcp_info()
    if info and info.get("state") == "running" and home.running_pid() is not None:
        return str(info["url"])
    return None


def header_value(client: Client, token: str) -> str:
    """The Authorization header as the client's file should hold it."""
    assert client.http is not None
    secret = client.http.secret
    if secret is Secret.INPUT:
        return f"Bearer ${{input:{VSCODE_INPUT_ID}}}"
    if secret is Secret.ENV_COLON:
        return f"Bearer ${{env:{TOKEN_ENV}}}"
    if secret is Secret.ENV_DOLLAR:
        return f"Bearer ${{{TOKEN_ENV}}}"
    return f"Bearer {token}"


def entry(client: Client, stdio: bool, target: Target) -> dict[str, Any]:
    """Our server's entry (the value under ``servers_key``/``foldermind``)."""
    if stdio or client.http is None:
        out: dict[str, Any] = {"type": "stdio"} if client.stdio_type else {}
        out.update(client.stdio_extra)
        out.update(command=target.command[0], args=target.command[1:])
        return out
    http = client.http
    out = {"type": http.type_value} if http.type_value else {}
    out[http.url_key] = target.url
    out["headers"] = {"Authorization": header_value(client, target.token)}
    return out


def vscode_input() -> dict[str, Any]:
    """The ``inputs`` item VS Code prompts with (once; it keeps the answer in its secret storage)."""
    return {
        "type": "promptString",
        "id": VSCODE_INPUT_ID,
        "description": "foldermind bearer token (`foldermind token show`)",
        "password": True,
    }


def needs_input(client: Client, stdio: bool) -> bool:
    return not stdio and client.http is not None and client.http.secret is Secret.INPUT


def document(client: Client, stdio: bool, target: Target) -> dict[str, Any]:
    """The whole snippet: the servers key holding our entry (and VS Code's input when it needs one)."""
    doc: dict[str, Any] = {client.servers_key: {SERVER_NAME: entry(client, stdio, target)}}
    if needs_input(client, stdio):
        doc["inputs"] = [vscode_input()]
    return doc


def generic(stdio: bool, target: Target) -> dict[str, Any]:
    """For a client not in the table: the facts to type into its own form, literal token included (there
    is no client mechanism to refer to)."""
    if stdio:
        return {"transport": "stdio", "command": target.command[0], "args": target.command[1:]}
    return {"transport": "streamable-http", "url": target.url, "headers": {"Authorization": f"Bearer {target.token}"}}


def snippet(name: str, stdio: bool, target: Target) -> str:
    if name == GENERIC:
        return json.dumps(generic(stdio, target), indent=2)
    return json.dumps(document(CLIENTS[name], stdio, target), indent=2)


def secret_hint(client: Client, stdio: bool, show: str) -> str | None:
    """What the user must do so the client can fill the token in, or why the token is in the file;
    ``show`` is the command that prints the token, as the user can type it."""
    if stdio or client.http is None:
        return None
    secret = client.http.secret
    if secret is Secret.INPUT:
        return f"{client.title} asks for the token once (input {VSCODE_INPUT_ID}): paste what `{show}` prints"
    if secret is Secret.LITERAL:
        return f"{client.title} documents no env or secret reference for headers, so the token is written as is"
    return (
        f"{client.title} reads the token from {TOKEN_ENV} in its own environment: start it from a shell where"
        f' `export {TOKEN_ENV}="$({show})"` ran (or use --stdio, which needs no token)'
    )
