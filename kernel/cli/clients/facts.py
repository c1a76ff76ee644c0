"""What each MCP client expects of its config, in one table: the file, the key, the entry shapes, how a
secret is referenced, and where each fact was checked.

Every other module (snippets, ``config install``, ``doctor``, the README's client section) reads these
facts from here, so a client that changes its format is corrected in one place. A fact the clients' own
documentation did not confirm is listed in ``unconfirmed`` and said in the README rather than guessed
silently.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Secret(Enum):
    """How a client's HTTP entry gets the bearer token."""

    INPUT = "input"  # VS Code: "${input:ID}" and an "inputs" entry with "password": true; VS Code asks once
    ENV_COLON = "env-colon"  # "${env:NAME}", expanded by the client from its own environment
    ENV_DOLLAR = "env-dollar"  # "${NAME}", likewise
    LITERAL = "literal"  # the client documents no mechanism: the token itself is written


class Base(Enum):
    """Where a client's user-level file lives, per platform."""

    HOME = "home"  # under $HOME on every platform
    APP_CONFIG = "app-config"  # ~/Library/Application Support (macOS), %APPDATA% (Windows), ~/.config (else)
    DOT_CONFIG = "dot-config"  # %APPDATA% on Windows, ~/.config (XDG_CONFIG_HOME) elsewhere, macOS included


@dataclass(frozen=True)
class HttpForm:
    url_key: str  # "url", or Windsurf's "serverUrl"
    type_value: str | None  # the entry's "type" ("http"), or None where the client infers the transport
    secret: Secret


@dataclass(frozen=True)
class Client:
    name: str  # the --client value
    title: str
    servers_key: str  # the top-level object that maps server names to entries
    jsonc: bool  # the client reads comments (and trailing commas) in this file
    user_base: Base
    user_path: str  # relative to user_base
    project_path: str | None  # relative to a project folder (--project), where the client has such a file
    stdio_type: bool  # its stdio entries carry "type": "stdio"
    http: HttpForm | None  # None: the client's file takes command servers only
    where: str  # how a user opens the file
    sources: tuple[str, ...]  # the documentation the facts above were checked against
    unconfirmed: tuple[str, ...] = ()
    note: str = ""
    user_file_note: str = ""  # said only when the user-level file (not a project's) is the one written
    stdio_extra: tuple[tuple[str, str], ...] = ()  # more fields its stdio entries carry (Zed's "source")


TOKEN_ENV = "FOLDERMIND_MCP_TOKEN"
"""The variable a client expands into its Authorization header. Only the client reads it: foldermind never
takes its token from the environment."""
VSCODE_INPUT_ID = "foldermind-token"

CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            name="claude-desktop",
            title="Claude Desktop",
            servers_key="mcpServers",
            jsonc=False,
            user_base=Base.APP_CONFIG,
            user_path="Claude/claude_desktop_config.json",
            project_path=None,
            stdio_type=False,
            http=None,
            where="Settings > Developer > Edit Config; restart Claude Desktop afterwards",
            sources=(
                "support.anthropic.com/en/articles/11503834 (remote servers only via Settings > Connectors; not"
                " from claude_desktop_config.json)",
                "support.claude.com/en/articles/11175166 (connectors connect from Anthropic's cloud)",
            ),
            unconfirmed=("the Linux path (~/.config/Claude): Anthropic ships no Linux build; community builds use it",),
            note="stdio only: claude_desktop_config.json takes command servers, and its remote Connectors"
            " connect from Anthropic's cloud, which cannot reach 127.0.0.1.",
        ),
        Client(
            name="claude-code",
            title="Claude Code",
            servers_key="mcpServers",
            jsonc=False,
            user_base=Base.HOME,
            user_path=".claude.json",
            project_path=".mcp.json",
            stdio_type=True,
            http=HttpForm(url_key="url", type_value="http", secret=Secret.ENV_DOLLAR),
            where="`claude mcp add`, or .mcp.json in a project (user scope: ~/.claude.json)",
            sources=(
                "code.claude.com/docs/en/mcp (claude mcp add --transport http ... --header; .mcp.json"
                ' {"type": "http", "url", "headers"}; ${VAR} and ${VAR:-default} in command, args, env, url,'
                " headers)",
            ),
            unconfirmed=(
                "${VAR} in headers: bug reports say some versions send it unexpanded"
                " (anthropics/claude-code#6204, #51581); use --stdio if the token is refused",
            ),
            user_file_note="~/.claude.json is also Claude Code's own state, which it rewrites while it runs: quit it"
            " before `config install` into that file, or run the `claude mcp add` line `config snippet` prints.",
        ),
        Client(
            name="cursor",
            title="Cursor",
            servers_key="mcpServers",
            jsonc=False,
            user_base=Base.HOME,
            user_path=".cursor/mcp.json",
            project_path=".cursor/mcp.json",
            stdio_type=False,
            http=HttpForm(url_key="url", type_value=None, secret=Secret.ENV_COLON),
            where="Settings > MCP (it opens ~/.cursor/mcp.json)",
            sources=("cursor.com/docs/mcp.md (~/.cursor/mcp.json, .cursor/mcp.json; stdio, SSE, streamable HTTP)",),
            unconfirmed=(
                "${env:NAME} in url and headers: seen in third-party guides quoting Cursor's docs, not in the"
                " part of Cursor's own page that was checked",
            ),
        ),
        Client(
            name="zed",
            title="Zed",
            servers_key="context_servers",
            jsonc=True,
            user_base=Base.DOT_CONFIG,
            user_path="zed/settings.json",
            project_path=".zed/settings.json",
            stdio_type=False,
            stdio_extra=(("source", "custom"),),
            http=HttpForm(url_key="url", type_value=None, secret=Secret.LITERAL),
            where="zed: open settings (~/.config/zed/settings.json)",
            sources=(
                'zed.dev/docs/ai/mcp ("context_servers": command/args/env, or url + headers; a url without'
                " an Authorization header starts OAuth)",
                'zed-industries/zed#32793 (June 2025: an entry is tagged by "source", "custom" or "extension";'
                " the releases until the untagged settings (command or url) refuse a command entry without"
                ' "source": "custom", which later ones ignore)',
            ),
            unconfirmed=("an env or secret mechanism for headers: none documented, so the token is written literally",),
        ),
        Client(
            name="vscode",
            title="VS Code (Copilot agent mode)",
            servers_key="servers",
            jsonc=True,
            user_base=Base.APP_CONFIG,
            user_path="Code/User/mcp.json",
            project_path=".vscode/mcp.json",
            stdio_type=True,
            http=HttpForm(url_key="url", type_value="http", secret=Secret.INPUT),
            where="MCP: Open User Configuration, or .vscode/mcp.json in a workspace",
            sources=(
                "code.visualstudio.com/docs/copilot/reference/mcp-configuration (mcp.json: servers, inputs;"
                ' {"type": "stdio", "command", "args", "env": {"API_KEY": "${input:api-key}"}})',
                "json.schemastore.org/mcp-config-0.1.0.json (promptString input: type, id, password)",
            ),
            unconfirmed=(
                "the user file's path (the default profile's folder, Code/User/mcp.json): from VS Code's"
                " settings layout, not stated on the page checked",
            ),
        ),
        Client(
            name="windsurf",
            title="Windsurf",
            servers_key="mcpServers",
            jsonc=False,
            user_base=Base.HOME,
            user_path=".codeium/windsurf/mcp_config.json",
            project_path=None,
            stdio_type=False,
            http=HttpForm(url_key="serverUrl", type_value=None, secret=Secret.ENV_COLON),
            where="Windsurf Settings > Cascade > MCP servers > View raw config",
            sources=(
                "docs.windsurf.com/windsurf/cascade/mcp (~/.codeium/windsurf/mcp_config.json; remote HTTP needs"
                " serverUrl or url; env interpolation in command, args, env, serverUrl, url, headers)",
            ),
            unconfirmed=(
                "the ${env:NAME} spelling: from third-party guides; Windsurf's page says interpolation exists",
            ),
        ),
    )
}

GENERIC = "generic"
"""Not a client: the URL, header and command to type into any client's own form."""
NAMES = (*CLIENTS, GENERIC)


def user_file(client: Client) -> Path:
    """The client's user-level config file on this platform, from $HOME (and APPDATA / XDG_CONFIG_HOME)."""
    home = Path(os.path.expanduser("~"))
    windows = sys.platform == "win32"
    if client.user_base is Base.HOME:
        base = home
    elif windows:
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    elif client.user_base is Base.APP_CONFIG and sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    path = base / client.user_path
    # Zed's folder is "Zed" under %APPDATA% but "zed" under ~/.config.
    return path if not (windows and client.name == "zed") else base / "Zed" / "settings.json"


def config_file(client: Client, project: Path | None) -> Path:
    """The file ``config install`` edits: the project's form with ``--project``, else the user's."""
    if project is None:
        return user_file(client)
    if client.project_path is None:
        raise ValueError(f"{client.title} has no project-level config file; drop --project")
    return project / client.project_path
