"""Commands that connect MCP clients: ``mcp`` (the stdio bridge), ``token``, ``config snippet`` and
``test-connection``."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import click
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from foldermind.kernel import bridge
from foldermind.kernel.cli import connect, current_config, current_home, home_option, kernel_running
from foldermind.kernel.home import Home
from foldermind.kernel.token_store import TokenPersistError, TokenStore
from foldermind.protocol.errors import BusError, RemoteError
from foldermind.protocol.messages import TokenRotateReply, TokenRotateRequest

CLIENTS = ("claude-desktop", "claude-code", "cursor", "zed")
SERVER_NAME = "foldermind"


def _serving(home: Home) -> dict[str, Any]:
    if not kernel_running(home):
        raise click.ClickException("foldermind is not running: `foldermind start` first")
    try:
        return bridge.wait_for_frontdoor(home, 20)
    except bridge.BridgeError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("mcp")
@home_option
def mcp_cmd() -> None:
    """stdio bridge for MCP clients that launch a command (Claude Desktop, Claude Code, ...).

    Starts the supervisor if none runs, then relays MCP between stdin/stdout and the front door."""
    home = current_home()
    home.ensure()
    sys.exit(bridge.run(home, current_config(home).kernel.start_wait_s + 30))


@click.group()
def token() -> None:
    """The bearer token MCP clients send (Authorization: Bearer ...)."""


@token.command("show")
@home_option
def token_show() -> None:
    """Print the token (and where it is stored)."""
    home = current_home()
    home.ensure()
    store = TokenStore(home)
    value = store.load_or_create()
    click.echo(value)
    click.echo(f"(stored in {store.mode} mode)", err=True)


@token.command("rotate")
@home_option
def token_rotate() -> None:
    """Make a new token; the old one stops working at once. Re-copy client snippets afterwards."""
    home = current_home()
    home.ensure()
    if kernel_running(home):
        # The running front door rotates it, so the switch is atomic for requests in flight.
        with connect(home) as client:
            try:
                client.request("frontdoor", TokenRotateRequest(), TokenRotateReply, timeout=10)
            except RemoteError as exc:
                raise click.ClickException(f"rotation failed, the old token still works: {exc.info.message}") from exc
            except BusError as exc:
                raise click.ClickException(f"the front door did not answer: {exc}") from exc
        value = TokenStore(home).load_or_create()
    else:
        store = TokenStore(home)
        store.load_or_create()
        try:
            value = store.rotate()
        except TokenPersistError as exc:
            raise click.ClickException(f"rotation failed, the old token still works: {exc}") from exc
    click.echo(value)
    click.echo("token rotated: re-copy your client snippets (`foldermind config snippet --client ...`)", err=True)


@click.group()
def config() -> None:
    """Client configuration."""


def _command(home: Home) -> list[str]:
    """How a client should launch the bridge: this installation's own ``foldermind`` executable."""
    exe = Path(sys.executable).parent / "foldermind"
    cmd = [str(exe)] if exe.exists() else [shutil.which("foldermind") or "foldermind"]
    if home.root is not None:
        cmd += ["--home", str(home.root)]
    return [*cmd, "mcp"]


def snippet(client: str, url: str, tok: str, stdio: bool, command: list[str]) -> str:
    auth = {"Authorization": f"Bearer {tok}"}
    if client == "claude-code":
        if stdio:
            return f"claude mcp add {SERVER_NAME} -- " + " ".join(command)
        return f'claude mcp add --transport http {SERVER_NAME} {url} --header "Authorization: Bearer {tok}"'
    if stdio:
        entry: dict[str, Any] = {"command": command[0], "args": command[1:]}
    else:
        entry = {"url": url, "headers": auth}
    key = "context_servers" if client == "zed" else "mcpServers"
    return json.dumps({key: {SERVER_NAME: entry}}, indent=2)


WHERE = {
    "claude-desktop": "claude_desktop_config.json (Settings > Developer > Edit Config)",
    "claude-code": "a terminal (or the same entry in .mcp.json)",
    "cursor": "~/.cursor/mcp.json (Settings > MCP)",
    "zed": "~/.config/zed/settings.json",
}


@config.command("snippet")
@home_option
@click.option("--client", "client", type=click.Choice(CLIENTS), required=True)
@click.option("--stdio", is_flag=True, help="The command form (`foldermind mcp`) instead of the HTTP URL.")
def config_snippet(client: str, stdio: bool) -> None:
    """Paste-ready client config with the real port and token filled in."""
    home = current_home()
    home.ensure()
    command = _command(home)
    if stdio:
        url, tok = "", ""
    else:
        url, tok = str(_serving(home)["url"]), TokenStore(home).load_or_create()
    click.echo(f"# paste into {WHERE[client]}", err=True)
    click.echo(snippet(client, url, tok, stdio, command))


async def list_tools(url: str, tok: str) -> list[str]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {tok}"}, timeout=httpx2.Timeout(15.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.list_tools()
        return [tool.name for tool in result.tools]


@click.command("test-connection")
@home_option
def test_connection() -> None:
    """A tools/list round trip through the front door, as a client would make it."""
    home = current_home()
    info = _serving(home)
    url = str(info["url"])
    try:
        names = anyio.run(list_tools, url, TokenStore(home).load_or_create())
    except Exception as exc:
        raise click.ClickException(f"tools/list against {url} failed: {type(exc).__name__}: {exc}") from exc
    click.echo(f"connected to {url}: {len(names)} tools")
    for name in names:
        click.echo(f"  {name}")


def register(group: click.Group) -> None:
    # The front door logs the token's storage mode once per start; a terminal command need not repeat
    # it on every call (`token show` says the mode itself).
    logging.getLogger("foldermind.token").setLevel(logging.ERROR)
    for command in (mcp_cmd, token, config, test_connection):
        group.add_command(command)
