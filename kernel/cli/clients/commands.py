"""Commands that connect MCP clients: ``mcp`` (the stdio bridge), ``token`` and ``test-connection``, and the
terminal forms of the tools (``ask``, ``summary``). ``config`` is in :mod:`.config`."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from foldermind.kernel.cli.common import connect, current_config, current_home, home_option, kernel_running
from foldermind.protocol.errors import BusError, JobError
from foldermind.protocol.runtime.home import Home

if TYPE_CHECKING:
    from foldermind.protocol.runtime.token_store import TokenStore

# The MCP SDK, httpx and anyio are imported by the commands that speak MCP, not by the command line itself:
# together ~0.3 s of every command's start on a quiet machine (python -X importtime), and `foldermind search`
# or `status` never use them. The token store (keyring, which loads every backend it knows) likewise: `mcp`
# reads the token in its bridge, `--help` never.


def _store(home: Home) -> TokenStore:
    from foldermind.protocol.runtime.token_store import TokenStore

    return TokenStore(home)


def _serving(home: Home) -> dict[str, Any]:
    from foldermind.kernel.cli.bridge import relay as bridge

    if not kernel_running(home):
        raise click.ClickException("foldermind is not running: `foldermind start` first")
    try:
        return bridge.wait_for_frontdoor(home, 20)
    except bridge.BridgeError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("mcp")
@home_option
@click.option(
    "--client", "key", default=None, help="Present this client key (`foldermind token add`), not the owner's."
)
def mcp_cmd(key: str | None) -> None:
    """stdio bridge for MCP clients that launch a command (Claude Desktop, Claude Code, ...).

    Starts the supervisor if none runs, then relays MCP between stdin/stdout and the front door."""
    from foldermind.kernel.cli.bridge import relay as bridge
    from foldermind.protocol.runtime.config import SupervisorConfig

    home = current_home()
    home.ensure()
    try:
        config = current_config(home)
    except click.ClickException as exc:
        # `start` refuses it too: the bridge stays up with the defaults and answers each request why, rather
        # than exit (a client shows that as "Connection closed" and must be restarted once it is mended).
        print(f"foldermind: {exc.message}", file=sys.stderr, flush=True)
        config = SupervisorConfig()
    if key:
        from foldermind.protocol.runtime.client_keys import ClientKeys

        if ClientKeys(home).get(key) is None:  # every request will be refused: say why once, here
            print(f"foldermind: no client key {key!r} in this home (`foldermind token list`)", file=sys.stderr)
    sys.exit(bridge.run(home, config.kernel.start_wait_s + 30, config.mcp.max_body_mb, key or ""))


@click.group()
def token() -> None:
    """The bearer tokens MCP clients send (Authorization: Bearer ...): the owner's, and a key per client."""


@token.command("add")
@home_option
@click.argument("name")
@click.option("--folders", default=None, help="Only these Smart Folders (ids or names, comma-separated).")
@click.option("--json", "as_json", is_flag=True, help='Print {"name", "token", "folders"}.')
def token_add(name: str, folders: str | None, as_json: bool) -> None:
    """Make a key for one MCP client: every folder, or only --folders."""
    from foldermind.kernel.cli.clients import keys

    keys.token_add(name, folders, as_json)


@token.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def token_list(as_json: bool) -> None:
    """The client keys: name, scope, created, last used (never the token)."""
    from foldermind.kernel.cli.clients import keys

    keys.token_list(as_json)


@token.command("revoke")
@home_option
@click.argument("name")
def token_revoke(name: str) -> None:
    """Delete a client key: refused at once, its open sessions closed."""
    from foldermind.kernel.cli.clients import keys

    keys.token_revoke(name)


@token.command("show")
@home_option
@click.argument("name", required=False)
def token_show(name: str | None) -> None:
    """Print the owner's token, or client key NAME's (and where it is stored)."""
    home = current_home()
    home.ensure()
    if name:
        from foldermind.kernel.cli.clients import keys

        keys.token_show_named(home, name)
        return
    store = _store(home)
    value = store.load_or_create()
    click.echo(value)
    click.echo(f"(stored in {store.mode} mode)", err=True)


@token.command("rotate")
@home_option
@click.argument("name", required=False)
def token_rotate(name: str | None) -> None:
    """Make a new token (the owner's, or client key NAME's); the old one stops working at once."""
    if name:
        from foldermind.kernel.cli.clients import keys

        keys.token_rotate_named(name)
        return
    home = current_home()
    home.ensure()
    if kernel_running(home):
        # The running front door rotates it, so the switch is atomic for requests in flight.
        from foldermind.protocol.messages import TokenRotateReply, TokenRotateRequest

        with connect(home) as client:
            try:
                client.request("frontdoor", TokenRotateRequest(), TokenRotateReply, timeout=10)
            except JobError as exc:
                raise click.ClickException(f"rotation failed, the old token still works: {exc.message}") from exc
            except BusError as exc:
                raise click.ClickException(f"the front door did not answer: {exc}") from exc
        value = _store(home).load_or_create()
    else:
        from foldermind.protocol.runtime.token_store import TokenPersistError

        store = _store(home)
        store.load_or_create()
        try:
            value = store.rotate()
        except TokenPersistError as exc:
            raise click.ClickException(f"rotation failed, the old token still works: {exc}") from exc
    click.echo(value)
    click.echo(
        "token rotated: re-copy the snippets of clients that use the URL (`foldermind config snippet --client ...`);"
        " clients over the stdio bridge (`foldermind mcp`) follow it by themselves",
        err=True,
    )


async def list_tools(url: str, tok: str) -> list[str]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

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
    import anyio

    home = current_home()
    info = _serving(home)
    url = str(info["url"])
    try:
        names = anyio.run(list_tools, url, _store(home).load_or_create())
    except Exception as exc:
        raise click.ClickException(f"tools/list against {url} failed: {type(exc).__name__}: {exc}") from exc
    click.echo(f"connected to {url}: {len(names)} tools")
    for name in names:
        click.echo(f"  {name}")


async def call_tool(url: str, tok: str, name: str, args: dict[str, Any], on_text: Any = None) -> Any:
    """One tool call over HTTP, as an MCP client makes it; ``on_text`` gets each progress notification's text
    (None for one without: work going on)."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def report(progress: float, total: float | None, message: str | None) -> None:
        if on_text is not None:
            on_text(message or None)

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {tok}"}, timeout=httpx2.Timeout(180.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        return await client.call_tool(name, args, read_timeout_seconds=180, progress_callback=report)


def _tool(name: str, args: dict[str, Any], on_text: Any = None) -> dict[str, Any]:
    """The tool's structured result, or a ClickException carrying its typed error."""
    import anyio

    home = current_home()
    url = str(_serving(home)["url"])
    try:
        result = anyio.run(call_tool, url, _store(home).load_or_create(), name, args, on_text)
    except Exception as exc:
        raise click.ClickException(f"{name} against {url} failed: {type(exc).__name__}: {exc}") from exc
    if result.is_error:
        text = result.content[0].text if result.content else "{}"
        try:
            body = json.loads(text)
            raise click.ClickException(f"{body['code']}: {body['message']}")
        except (ValueError, KeyError):
            raise click.ClickException(text) from None
    return dict(result.structured_content or {})


@click.command("ask")
@home_option
@click.argument("question")
@click.option("--session", "session_id", default=None, help="Continue a conversation (its session id).")
@click.option("--files", "max_files", type=click.IntRange(1, 20), default=5, show_default=True)
@click.option("--persona", default=None, help="Tone of the answer, e.g. 'concise'.")
@click.option(
    "--mode",
    "answer_mode",
    type=click.Choice(["auto", "extractive", "generative"]),
    default=None,
    help="extractive: quote the documents (no model); generative: the model's checked answer; auto: both "
    "(default: [llm] answer_mode).",
)
@click.option(
    "--folder",
    "folder_id",
    default=None,
    help="Answer from this Smart Folder only (id or path; a criteria folder's id or name).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ask(
    question: str,
    session_id: str | None,
    max_files: int,
    persona: str | None,
    answer_mode: str | None,
    folder_id: str | None,
    as_json: bool,
) -> None:
    """Ask the documents a question (the chat_with_documents tool from a terminal)."""
    args: dict[str, Any] = {"query": question, "max_context_files": max_files}
    if folder_id:
        args["smart_folder_id"] = folder_id
    if session_id:
        args["session_id"] = session_id
    if persona:
        args["persona"] = persona
    if answer_mode:
        args["answer_mode"] = answer_mode
    streamed = not as_json and sys.stdout.isatty()
    screen = AnswerScreen()
    out = _tool("chat_with_documents", args, screen.progress if streamed else None)
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    screen.finish(out["answer"])
    if out.get("note"):
        click.echo(f"({out['note']})")
    for c in out["citations"]:
        click.echo(f"[{c['id']}] {c['file_path']}  ({_place(c['location'])})")
        if c.get("quote"):
            click.echo(f"    \u201c{c['quote']}\u201d")
    used = out["tokens_used"]
    grounded = "grounded" if out["grounded"] else "NOT grounded in any document"
    how = out.get("answer_mode_used", "")
    if out.get("dropped_sentences"):
        how += f", {out['dropped_sentences']} unsupported sentence(s) dropped"
    if out.get("fallback_reason"):
        how += f"; the model's answer was not used: {out['fallback_reason']}"
    if out.get("floor"):  # whether the local model also read a question the evidence only just answers
        how += f"; floor: {out['floor']}"
    # the model took part: it wrote (its tokens) or only read the question (floor evidence+model, no tokens)
    tokens = f"{used['prompt']} + {used['completion']} tokens, " if used["prompt"] or used["completion"] else ""
    model = f"{tokens}{out['model']}; " if out.get("model") else ""
    click.echo(f"-- {grounded} ({how}); {model}session {out['session_id']}", err=True)


class AnswerScreen:
    """An answer as it streams to a terminal: each piece of text as it comes (the front door sends only
    pieces of the final answer: the quotes, then the sentences the check kept), and a status line on stderr
    while the model writes; at the end, whatever of the answer was not shown yet."""

    STATUS = "(the local model is writing; only the sentences a passage backs will be shown)"

    def __init__(self) -> None:
        self.shown = ""
        self.status = False

    def progress(self, text: str | None) -> None:
        if text is None:
            if not self.status:  # the model writes (after the quotes, in auto mode)
                self.status = True
                click.echo(("\n" if self.shown else "") + self.STATUS, err=True)
            return
        click.echo(text, nl=False)
        self.shown += text

    def finish(self, answer: str) -> None:
        if answer.startswith(self.shown):
            click.echo(answer[len(self.shown) :])
        else:  # a front door that streamed something else: the answer, whole, after it
            click.echo("\n")
            click.echo(answer)


def _place(loc: dict[str, Any]) -> str:
    parts = []
    if loc.get("page"):
        parts.append(f"page {loc['page']}")
    if loc.get("heading"):
        parts.append(str(loc["heading"]))
    lines = loc["line_start"], loc["line_end"]
    parts.append(f"line {lines[0]}" if lines[0] == lines[1] else f"lines {lines[0]}-{lines[1]}")
    return ", ".join(parts)


def _analysis(path: str) -> dict[str, Any]:
    """The stored analysis the get_document_summary tool serves, asked of the indexer over the bus as
    ``search`` is: a pure lookup needs neither the front door nor the MCP SDK (~1 s of CPU to import;
    docs/benchmarks/cli.md). Errors read as the tool's: ``FILE_NOT_ANALYZED: ...``."""
    from foldermind.protocol.messages import SummaryReply, SummaryRequest
    from foldermind.protocol.messages.indexer import iso_time

    home = current_home()
    if not kernel_running(home):
        raise click.ClickException("foldermind is not running: `foldermind start` first")
    with connect(home) as client:
        try:
            analysis = dict(
                client.request("indexer", SummaryRequest(path=path), SummaryReply, timeout=30).body.analysis
            )
        except JobError as exc:
            raise click.ClickException(f"{exc.code.mcp}: {exc.message}") from exc
        except BusError as exc:
            raise click.ClickException(f"the indexer did not answer: {exc}") from exc
    at = analysis.get("analyzed_at")  # epoch seconds on the bus, ISO 8601 in every answer a user reads
    analysis["analyzed_at"] = iso_time(at) if isinstance(at, int | float) and not isinstance(at, bool) else None
    return analysis


@click.command("summary")
@home_option
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def summary(path: str, as_json: bool) -> None:
    """A file's stored analysis (the get_document_summary tool from a terminal)."""
    out = _analysis(os.path.abspath(path))
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    click.echo(out["file_path"])
    keys = ("summary", "category", "type", "date", "entity", "suggested_name", "confidence", "language", "analyzed_at")
    for key in keys:
        if out.get(key) not in (None, ""):
            click.echo(f"  {key}: {out[key]}")
    for key in ("keywords", "key_entities"):
        if out.get(key):
            click.echo(f"  {key}: {', '.join(out[key])}")
