"""The MCP front door through real clients: the mcp SDK's client over streamable HTTP and over the stdio
bridge, raw HTTP for what no client library sends, and the MCP Inspector's CLI (npm)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult

from foldermind.protocol.messages import DescribeReply, DescribeRequest, McpInfoReply, McpInfoRequest
from foldermind.workers.frontdoor.http import bind
from tests import mcpclient as mc
from tests.config import Config, merge
from tests.helpers import (
    FAST_RESTART,
    NO_LLM,
    ONE_PARSER,
    RunningKernel,
    cli,
    kill9,
    npm_installed,
    only_workers,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
    with_model_cache,
)

MARKER = "zebracorn"  # a word only the tests' queries and one document contain, to scan logs for


def write_docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Setup\n\nInstall the package with pip.\n\n## Windows\n\nOn Windows, run the installer as administrator.\n"
        "\n# Usage\n\nStart the server, then search your notes for a " + MARKER + " or anything else.\n"
    )
    (docs / "fox.txt").write_text("The quick brown fox jumps over the lazy dog.\nFoxes are small omnivores.\n")
    (docs / "cats.txt").write_text("Cats are small carnivorous mammals.\nA cat sleeps most of the day.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    outside = root / "outside.txt"
    outside.write_text("secret text outside every Smart Folder\n")
    os.symlink(outside, docs / "escape.txt")
    return docs


NO_SUMMARIES: Config = {"llm": {"analysis": False}}
"""The llm serves chats but writes no summaries: these tests read a document's analysis (its type, its
date) but never the model's summary, which the llm would otherwise write for every indexed file as soon as
the queue is idle, competing with the tests for the CPU (see tests/README.md)."""


@contextmanager
def serving(
    write: Callable[[Path], Path] = write_docs, more: Config = NO_SUMMARIES
) -> Iterator[tuple[RunningKernel, Path, str, str]]:
    """A kernel serving MCP with the Smart Folder ``write`` makes: (kernel, folder, url, token), ``more``
    added to its supervisor.toml. Every tool is called, so every worker runs; one parser is enough for four
    small files."""
    root = short_tmpdir()
    # The product's query path (ONNX), as a user's front door runs it.
    config = merge(FAST_RESTART, ONE_PARSER, {"mcp": {"port": 0, "rate_per_minute": 6000}}, more)
    k = RunningKernel(root / "home", config)
    docs = write(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=300)
        info = mc.mcp_info(k.root)
        yield k, docs, str(info["url"]), mc.token_of(k.root)
    finally:
        k.stop()
        remove_tree(root)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, Path, str, str]]:
    with serving() as running:
        yield running


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    # Clients that read only text get the same JSON.
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


TOOLS = {
    "search_documents",
    "chat_with_documents",
    "list_smart_folders",
    "get_document_summary",
    "read_document",
    "find_similar",
    "index_status",
}


def test_tools_list_over_http_has_schemas_and_read_only_annotations(served: Any) -> None:
    _, _, url, token = served

    async def go() -> Any:
        async with mc.http_client(url, token) as client:
            return (await client.list_tools()).tools, client.instructions

    tools, instructions = mc.run(go)
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
        assert tool.annotations.open_world_hint is False
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        # Written as docstrings, sent without their source indentation.
        assert tool.description and tool.description == tool.description.strip(), tool.name
        assert not any(line.startswith(" ") for line in tool.description.splitlines()), tool.description
        for name, prop in tool.input_schema.get("properties", {}).items():
            variants = prop.get("anyOf", [prop])
            for v in variants:
                if v.get("type") == "string" and "enum" not in v:
                    assert "maxLength" in v, f"{tool.name}.{name} has no length bound"
    search = next(t for t in tools if t.name == "search_documents")
    assert search.input_schema["properties"]["query"]["maxLength"] == 1000
    assert search.input_schema["properties"]["top_k"]["maximum"] == 50
    assert instructions and "never instructions" in instructions


def test_output_schemas_are_published_flat_and_judge_results_as_the_models_own(served: Any) -> None:
    """A client checks every result against the tool's outputSchema (the MCP SDK's client with jsonschema, on each
    call); published without $refs and with nullable fields as type lists, it says what the result models say."""
    from jsonschema.validators import validator_for
    from mcp.server.mcpserver.utilities.func_metadata import StrictJsonSchema
    from pydantic import TypeAdapter

    from foldermind.workers.frontdoor import schemas

    _, _, url, token = served

    async def go() -> Any:
        async with mc.http_client(url, token) as client:
            return (await client.list_tools()).tools

    published = {t.name: t.output_schema for t in mc.run(go)}
    for name, schema in published.items():
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text and '{"type": "null"}' not in text, name
    search = structured(mc.call(url, token, "search_documents", {"query": "brown fox", "top_k": 3}))
    status = structured(mc.call(url, token, "index_status", {}))
    hit = search["results"][0]
    cases = {
        "search_documents": (schemas.SearchOutput, search),
        "find_similar": (schemas.SimilarOutput, {"results": [hit], "note": None}),
        "index_status": (schemas.IndexStatusOutput, status),
    }
    for name, (model, good) in cases.items():
        own = TypeAdapter(model).json_schema(schema_generator=StrictJsonSchema)
        mine, theirs = (validator_for(s)(s) for s in (published[name], own))
        bad = json.loads(json.dumps(good))
        variants = [good, bad]
        if "results" in good:
            bad["results"][0]["location"]["page"] = "one"  # an int or null
            nulls = json.loads(json.dumps(good))
            nulls["results"][0]["location"].update(page=None, heading=None)
            wrong = json.loads(json.dumps(good))
            wrong["results"][0]["chunk_id"] = None  # not nullable
            variants += [nulls, wrong]
        else:
            bad["embedding"] = None
        verdicts = [(mine.is_valid(v), theirs.is_valid(v)) for v in variants]
        assert all(a == b for a, b in verdicts), (name, verdicts)
        assert verdicts[0] == (True, True) and verdicts[1] == (False, False), (name, verdicts)
    assert schemas.flat(None) is None
    looped = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    assert schemas.flat(looped) is looped  # a model that refers to itself keeps its $refs


def say_the_same(result: CallToolResult) -> dict[str, Any]:
    """One text block whose JSON is exactly the structuredContent (a client reading either, like Claude Code
    that shows the model only structuredContent when there is one, gets everything); an error carries its
    {code, message} as that text and no structuredContent (clients check structuredContent against the
    tool's outputSchema even on errors)."""
    texts = [c for c in result.content if c.type == "text"]
    assert len(texts) == len(result.content) == 1, result.content
    body = json.loads(texts[0].text)
    if result.is_error:
        assert result.structured_content is None and set(body) == {"code", "message"}, result
    else:
        assert body == result.structured_content, result
    assert isinstance(body, dict)
    return body


def test_structured_content_and_text_say_the_same_for_every_tool_and_error_in_both_eras(served: Any) -> None:
    _, docs, url, token = served
    fox, guide = str(docs / "fox.txt"), str(docs / "guide.md")
    analyzed = lambda: not mc.call(url, token, "get_document_summary", {"file_path": guide}).is_error  # noqa: E731
    wait_for(analyzed, 120, 0.5, "guide.md analyzed")
    calls: list[tuple[str, dict[str, Any], bool]] = [  # (tool, arguments, an error expected)
        ("search_documents", {"query": "brown fox"}, False),
        ("search_documents", {"query": "fox", "smart_folder_id": "no-such-folder"}, True),
        ("chat_with_documents", {"query": "What do foxes do?", "answer_mode": "extractive"}, False),
        ("chat_with_documents", {"query": "x" * 2001}, True),
        ("list_smart_folders", {}, False),
        ("get_document_summary", {"file_path": guide}, False),
        ("get_document_summary", {"file_path": "relative/fox.txt"}, True),
        ("read_document", {"file_path": fox, "start_line": 2}, False),
        ("read_document", {"file_path": fox, "start_line": 3, "end_line": 2}, True),
        ("find_similar", {"file_path": fox, "top_k": 2}, False),
        ("find_similar", {"file_path": str(docs / "absent.txt")}, True),
        ("index_status", {}, False),
        ("no_such_tool", {}, True),
    ]

    async def go(mode: str) -> list[tuple[str, bool, dict[str, Any]]]:
        async with mc.http_client(url, token, mode=mode) as client:
            out = []
            for tool, args, _ in calls:
                result = await client.call_tool(tool, args)
                assert isinstance(result, CallToolResult)
                out.append((tool, bool(result.is_error), say_the_same(result)))
            return out

    for mode in ("auto", "legacy"):  # the stateless 2026-07-28 revision, and the initialize handshake
        seen = asyncio.run(go(mode))
        assert [is_error for _, is_error, _ in seen] == [bad for _, _, bad in calls], (mode, seen)
    # Every tool answered at least once without error, so each success shape was compared.
    assert {tool for tool, is_error, _ in seen if not is_error} == TOOLS


PROMPTS = {"answer_from_documents", "summarise_folder", "find_similar_documents"}
PROMPT_REFUSALS = {"INVALID_QUERY", "INVALID_PATH", "INVALID_SMART_FOLDER", "INVALID_ARGUMENT", "FILE_NOT_INDEXED"}
HOSTILE_PROMPT_ARGS = (
    [("answer_from_documents", {"query": "fox", "max_passages": n}) for n in ("0", "-1", "21", "abc", "1e309", "")]
    + [("answer_from_documents", {"query": q}) for q in ("\x00", "AND OR NOT (", "*" * 1000, "\u202e\ufeff")]
    + [
        ("find_similar_documents", {"file_path": p})
        for p in ("/etc/passwd", "/tmp/../etc/passwd", "file:///etc/passwd", "\\\\host\\share", "/a\x00b", "/" * 5000)
    ]
    + [("summarise_folder", {"smart_folder_id": i}) for i in ("", "x" * 201, "/", "../", "\x00")]
    + [("answer_from_documents", {}), ("summarise_folder", {"smart_folder_id": "x", "extra": "y"})]
)


def test_prompts_frame_the_index_for_the_clients_model_in_both_eras(served: Any) -> None:
    _, docs, url, token = served
    fox = str(docs / "fox.txt")

    async def go(mode: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
        async with mc.http_client(url, token, mode=mode) as client:
            listed = {p.name: [a.name for a in p.arguments or []] for p in (await client.list_prompts()).prompts}
            folder = (await client.call_tool("list_smart_folders", {})).structured_content["folders"][0]["id"]  # type: ignore[index]
            texts = []
            for name, args in (
                ("answer_from_documents", {"query": "What do foxes do?"}),
                ("summarise_folder", {"smart_folder_id": folder}),
                ("find_similar_documents", {"file_path": fox, "top_k": "2"}),
            ):
                got = await client.get_prompt(name, args)
                assert [m.role for m in got.messages] == ["user"], got
                texts.append(got.messages[0].content.text)  # type: ignore[union-attr]
            errors = []
            for name, args in (
                ("answer_from_documents", {"query": "x" * 2001}),
                ("answer_from_documents", {"query": "   "}),
                ("summarise_folder", {"smart_folder_id": "no-such-folder"}),
                ("find_similar_documents", {"file_path": "relative/fox.txt"}),
                ("no_such_prompt", {}),
            ):
                with pytest.raises(MCPError) as refused:
                    await client.get_prompt(name, args)
                assert refused.value.code == INVALID_PARAMS
                errors.append(refused.value.error.message.split(":")[0])
            for name, args in HOSTILE_PROMPT_ARGS:  # a typed refusal or a rendering, never an internal error
                try:
                    await client.get_prompt(name, args)
                except MCPError as exc:
                    assert exc.code == INVALID_PARAMS, (name, args, exc.error)
                    assert exc.error.message.split(":")[0] in PROMPT_REFUSALS, (name, args, exc.error)
            return listed, texts, errors

    for mode in ("auto", "legacy"):
        listed, (answer, summary, similar), errors = asyncio.run(go(mode))
        assert set(listed) == PROMPTS and listed["answer_from_documents"] == ["query", "max_passages"], listed
        assert "[1] " + fox in answer and "Foxes are small omnivores." in answer and "DATA" in answer
        assert "cite" in answer.lower() or "Cite" in answer
        assert 'Summarise the Smart Folder "' in summary and str(docs) in summary and "[1] " in summary
        assert fox in similar and "[1] " in similar and "[1] " + fox not in similar
        assert errors == ["INVALID_QUERY", "INVALID_QUERY", "INVALID_SMART_FOLDER", "INVALID_PATH", "INVALID_ARGUMENT"]


def test_search_documents_every_mode(served: Any) -> None:
    _, docs, url, token = served
    for mode in ("hybrid", "keyword", "semantic"):
        out = structured(mc.call(url, token, "search_documents", {"query": "brown fox", "mode": mode, "top_k": 3}))
        assert out["mode_used"] == mode
        assert out["results"], mode
        top = out["results"][0]
        assert top["file_path"] == str(docs / "fox.txt"), (mode, top)
        assert top["file_name"] == "fox.txt"
        assert top["smart_folder"] == "docs"
        assert top["location"]["line_start"] >= 1 and top["location"]["line_end"] >= top["location"]["line_start"]
        assert top["modified_at"].endswith("Z")
        assert isinstance(top["chunk_id"], int)
        if mode != "semantic":
            assert "fox" in top["snippet"].lower()
        assert out["query_ms"] >= 0 and out["total_matches"] >= 1
    # Headings travel as the location of markdown chunks.
    out = structured(mc.call(url, token, "search_documents", {"query": "installer administrator", "mode": "keyword"}))
    assert out["results"][0]["location"].get("heading", "").startswith("Setup")


def test_search_documents_phrases_exclusions_group_by_file_and_min_score(served: Any) -> None:
    _, _, url, token = served

    def files(args: dict[str, Any]) -> list[str]:
        out = structured(mc.call(url, token, "search_documents", {"mode": "keyword", **args}))
        return [r["file_name"] for r in out["results"]]

    assert files({"query": "small"}) and {"fox.txt", "cats.txt"} <= set(files({"query": "small"}))
    assert files({"query": "small -cats"}) == ["fox.txt"]
    assert files({"query": '"small omnivores"'}) == ["fox.txt"] and files({"query": '"omnivores small"'}) == []
    grouped = files({"query": "fox foxes brown dog", "group_by_file": True, "mode": "hybrid"})
    assert len(grouped) == len(set(grouped))
    assert files({"query": "small", "min_score": 1e9}) == []
    assert mc.error_code(mc.call(url, token, "search_documents", {"query": "cat", "min_score": "x"})) == (
        "INVALID_ARGUMENT"
    )


def test_search_scoping_and_query_errors(served: Any) -> None:
    _, _, url, token = served
    folders = structured(mc.call(url, token, "list_smart_folders"))["folders"]
    folder_id = folders[0]["id"]
    out = structured(mc.call(url, token, "search_documents", {"query": "cat", "smart_folder_id": folder_id}))
    assert out["results"] and all(r["smart_folder_id"] == folder_id for r in out["results"])
    cases = [
        ({"query": ""}, "INVALID_QUERY"),
        ({"query": "   "}, "INVALID_QUERY"),
        ({"query": "x" * 1001}, "INVALID_QUERY"),
        ({"query": "cat", "top_k": 0}, "INVALID_ARGUMENT"),
        ({"query": "cat", "top_k": 51}, "INVALID_ARGUMENT"),
        ({"query": "cat", "mode": "fuzzy"}, "INVALID_ARGUMENT"),
        ({"query": "cat", "smart_folder_id": "no-such-folder"}, "INVALID_SMART_FOLDER"),
    ]
    for args, code in cases:
        assert mc.error_code(mc.call(url, token, "search_documents", args)) == code, args
    # Operators and punctuation are searched for, never parsed.
    for query in ('cat AND "dog', "fox*", "(brackets] {x}", "!!!", "title:fox ^2 ~ -cat"):
        result = mc.call(url, token, "search_documents", {"query": query, "mode": "keyword"})
        assert not result.is_error, (query, result.content)


def test_list_read_similar_status_summary(served: Any) -> None:
    _, docs, url, token = served
    folders = structured(mc.call(url, token, "list_smart_folders"))["folders"]
    assert len(folders) == 1
    assert folders[0]["destination_path"] == str(docs)
    assert folders[0]["file_count"] == 4  # the symlink is not a file of the folder
    guide = str(docs / "guide.md")
    out = structured(mc.call(url, token, "read_document", {"file_path": guide, "start_line": 1, "end_line": 1}))
    assert out["text"].strip() == "Setup" and out["start_line"] == 1 and out["end_line"] == 1
    assert out["total_lines"] >= 5 and out["truncated"] is False
    whole = structured(mc.call(url, token, "read_document", {"file_path": guide}))
    assert MARKER in whole["text"]
    similar = structured(mc.call(url, token, "find_similar", {"file_path": str(docs / "fox.txt"), "top_k": 2}))
    assert similar["results"] and all(r["file_path"] != str(docs / "fox.txt") for r in similar["results"])
    broken = str(docs / "broken.pdf")
    assert mc.error_code(mc.call(url, token, "read_document", {"file_path": broken})) == "FILE_NOT_INDEXED"
    assert mc.error_code(mc.call(url, token, "find_similar", {"file_path": broken})) == "FILE_NOT_INDEXED"
    # The product's query path: ONNX takes over once its export is verified.
    wait_for(
        lambda: structured(mc.call(url, token, "index_status"))["embedding"]["query_backend"] == "onnx",
        60,
        0.5,
        "queries encoded by ONNX Runtime",
    )
    status = structured(mc.call(url, token, "index_status"))
    assert status["totals"]["files_indexed"] == 3
    assert [f["file_path"] for f in status["recent_failures"]] == [broken]
    assert status["recent_failures"][0]["error"]
    assert status["embedding"]["dim"] == 384
    assert status["folders"][0]["files_indexed"] == 3
    summary = structured(mc.call(url, token, "get_document_summary", {"file_path": guide}))
    assert summary["file_path"] == guide and summary["type"] and summary["analyzed_at"].endswith("Z")
    unanalyzed = mc.call(url, token, "get_document_summary", {"file_path": broken})
    assert mc.error_code(unanalyzed) == "FILE_NOT_ANALYZED"


def test_every_invalid_path_is_refused(served: Any) -> None:
    _, docs, url, token = served
    bad = [
        "docs/fox.txt",
        "file://" + str(docs / "fox.txt"),
        "\\\\server\\share\\fox.txt",
        "//server/share/fox.txt",
        str(docs) + "/../docs/fox.txt",
        str(docs / "fox.txt") + "\x00.md",
        "C:\\Users\\me\\fox.txt",
        "/etc/passwd",
        str(docs / "escape.txt"),  # a symlink inside the folder pointing outside it
        str(docs.parent / "outside.txt"),
    ]
    for tool in ("read_document", "find_similar", "get_document_summary"):
        for path in bad:
            assert mc.error_code(mc.call(url, token, tool, {"file_path": path})) == "INVALID_PATH", (tool, path)
    assert mc.error_code(mc.call(url, token, "no_such_tool", {})) == "UNKNOWN_TOOL"


def test_stdio_bridge_relays_to_the_running_supervisor(served: Any) -> None:
    k, docs, _, _ = served
    pid_before = k.kernel_pid

    async def go() -> tuple[set[str], dict[str, Any]]:
        async with mc.stdio_client(k.root) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("search_documents", {"query": "sleeping cat"})
            assert isinstance(result, CallToolResult)
            return names, structured(result)

    names, out = mc.run(go)
    assert names == TOOLS
    assert out["results"][0]["file_path"] == str(docs / "cats.txt")
    assert int(k.home.pid_file.read_text()) == pid_before  # the bridge used the running supervisor


def test_client_setup_commands(served: Any) -> None:
    k, _, url, token = served
    out = cli(k.root, "test-connection").stdout
    assert url in out and all(name in out for name in TOOLS)
    assert cli(k.root, "token", "show").stdout.strip() == token
    # A snippet carries the URL the running front door bound (tests/test_clients.py checks every client's shape).
    zed = json.loads(cli(k.root, "config", "snippet", "--client", "zed", "--http").stdout)
    assert zed["context_servers"]["foldermind"] == {"url": url, "headers": {"Authorization": f"Bearer {token}"}}
    desktop = json.loads(cli(k.root, "config", "snippet", "--client", "claude-desktop").stdout)
    command = desktop["mcpServers"]["foldermind"]
    assert command["args"] == ["--home", str(k.root), "mcp"] and Path(command["command"]).name == "foldermind"


def test_mcp_inspector_cli(served: Any) -> None:
    _, docs, url, token = served
    inspector = inspector_bin()
    base = [inspector, "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]

    def inspect(*args: str, via: list[str] = base, timeout: float = 120) -> Any:
        """One Inspector CLI call that must succeed; its JSON output."""
        done = subprocess.run([*via, *args], capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert {t["name"] for t in inspect("--method", "tools/list")["tools"]} == TOOLS
    result = inspect("--method", "tools/call", "--tool-name", "search_documents", "--tool-arg", "query=brown fox")
    assert result["structuredContent"]["results"][0]["file_path"] == str(docs / "fox.txt")
    args = ["--method", "tools/call", "--tool-name", "read_document", "--tool-arg", "file_path=relative/x"]
    refused = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120)
    assert json.loads(json.loads(refused.stdout)["content"][0]["text"])["code"] == "INVALID_PATH", refused.stdout
    # Grounded chat: the Inspector checks structuredContent against the tool's output schema.
    args = ["--method", "tools/call", "--tool-name", "chat_with_documents", "--tool-arg", "query=What do foxes do?"]
    chat = inspect(*args, timeout=180)
    assert not chat.get("isError"), chat
    assert chat["structuredContent"]["answer"] and chat["structuredContent"]["session_id"].startswith("mcp-")
    # The prompts, as the Inspector lists and renders them.
    assert {p["name"] for p in inspect("--method", "prompts/list")["prompts"]} == PROMPTS
    args = ["--method", "prompts/get", "--prompt-name", "answer_from_documents", "--prompt-args", "query=brown fox"]
    assert "[1] " + str(docs / "fox.txt") in inspect(*args)["messages"][0]["content"]["text"]
    # The Inspector launching the stdio bridge, as a stdio-only client would.
    k = served[0]
    bridge = [inspector, "--cli", sys.executable, "-m", "foldermind.kernel.cli", "--home", str(k.root), "mcp"]
    assert {t["name"] for t in inspect("--method", "tools/list", via=bridge)["tools"]} == TOOLS
    wrong = [inspector, "--cli", url, "--transport", "http", "--header", "Authorization: Bearer wrong"]
    denied = subprocess.run([*wrong, "--method", "tools/list"], capture_output=True, text=True, timeout=120)
    assert "tools" not in denied.stdout


INSPECTOR = "2.12.0"  # as the Makefile installs it


def inspector_bin() -> str:
    """The Inspector CLI as `make test` installs it in .cache/inspector, else installed here if npm exists."""
    prefix = npm_installed("inspector", "@modelcontextprotocol/inspector", INSPECTOR, "FOLDERMIND_INSPECTOR_DIR")
    return str(prefix / "node_modules" / ".bin" / "mcp-inspector")


def test_logs_never_carry_query_text(served: Any) -> None:
    k, _, url, token = served
    for mode in ("hybrid", "keyword", "semantic"):
        structured(mc.call(url, token, "search_documents", {"query": f"where is the {MARKER}", "mode": mode}))
    mc.call(url, token, "search_documents", {"query": f"{MARKER} " * 300})  # an over-long one: refused
    mc.call(url, token, "read_document", {"file_path": f"/nowhere/{MARKER}.txt"})
    offenders = [p.name for p in k.home.log_dir.glob("*.log*") if MARKER in p.read_text(errors="replace")]
    assert offenders == []


# ---------------------------------------------------------------------------------------------
# HTTP hardening, port fallback, token rotation and a worker killed mid-request: a kernel of their own


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[RunningKernel, str, int]]:
    """These tests search and list tools but never chat or read a summary: no llm (whose summaries of the
    indexed files would take the CPU from the tests meanwhile), one parser."""
    root = short_tmpdir()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    config = merge(
        FAST_RESTART,
        NO_LLM,
        ONE_PARSER,
        {"mcp": {"port": port, "rate_per_minute": 30}},
        {"workers": {"indexer": {"env": {"FOLDERMIND_TEST_DELAY": "search.request:2"}}}},
    )
    k = RunningKernel(root / "home", config)
    docs = write_docs(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), "--wait", timeout=120)
        yield k, str(mc.mcp_info(k.root)["url"]), port
    finally:
        taken.close()
        k.stop()
        remove_tree(root)


def test_port_fallback_is_reported_in_status(guarded: Any) -> None:
    k, url, taken = guarded
    st = status_json(k.root)["mcp"]
    assert st["state"] == "running"
    assert st["port"] != taken and st["url"] == url and f":{st['port']}/mcp" in url
    names = mc.run(lambda: list_names(url, mc.token_of(k.root)))
    assert names == TOOLS
    info = k.client().request("frontdoor", McpInfoRequest(), McpInfoReply, timeout=10).body
    assert (info.url, info.port, info.state, info.token_mode) == (url, st["port"], "running", "file")


async def list_names(url: str, token: str) -> set[str]:
    async with mc.http_client(url, token) as client:
        return {t.name for t in (await client.list_tools()).tools}


def test_http_refusals_in_order(guarded: Any) -> None:
    k, url, _ = guarded
    token = mc.token_of(k.root)
    auth = {"Authorization": f"Bearer {token}"}
    body = mc.initialize_body()
    assert mc.raw(url, body=body)[0] == 401
    assert mc.raw(url, body=body, headers={"Authorization": "Bearer " + "x" * 43})[0] == 401
    assert mc.raw(url, body=body, headers={"Authorization": token})[0] == 401
    assert mc.raw(url, body=body, headers={**auth, "Origin": "http://evil.example"})[0] == 403
    # Refused on the declared length, before one byte of the body is read (none is sent: a server that
    # closes on unread data may reset the connection before the client reads the 413).
    too_big = {"Content-Length": str(5 * 1024 * 1024 + 1)}
    assert mc.raw(url, headers={**auth, **too_big})[0] == 413
    assert mc.raw(url, body=body, headers=auth, content_length=False)[0] == 411
    # Size is checked before auth, auth before Origin.
    assert mc.raw(url, headers=too_big)[0] == 413
    assert mc.raw(url, body=body, headers={"Origin": "http://evil.example"})[0] == 401
    port = int(url.split(":")[2].split("/")[0])
    ok = mc.raw(url, body=body, headers={**auth, "Origin": f"http://127.0.0.1:{port}"})
    assert ok[0] == 200, ok


def test_rate_limit_per_session_and_unauthenticated_floods(guarded: Any) -> None:
    k, url, _ = guarded
    token = mc.token_of(k.root)

    async def burst() -> tuple[int, int]:
        """Two sessions; the first spends its 30-request bucket, the second still answers."""
        async with (
            mc.http_client(url, token, mode="legacy") as first,
            mc.http_client(url, token, mode="legacy") as second,
        ):
            limited = 0
            for _ in range(40):
                try:
                    await first.list_tools()
                except Exception:
                    limited += 1
            await second.list_tools()
            return limited, 0

    # Unauthenticated floods first: they must not create or spend any bucket.
    buckets_before = refused(k)["buckets"]
    for _ in range(50):
        assert mc.raw(url, body=mc.initialize_body())[0] == 401
    assert refused(k)["buckets"] == buckets_before
    assert refused(k)["401"] >= 50
    limited, _ = mc.run(burst)
    assert limited >= 1
    # The 429 itself, raw: a session the server issued (its own bucket), past its budget.
    status, hdrs, _ = mc.raw(url, body=mc.initialize_body(), headers={"Authorization": f"Bearer {token}"})
    assert status == 200 and hdrs.get("mcp-session-id")
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": hdrs["mcp-session-id"]}
    statuses = [mc.raw(url, body=b'{"jsonrpc":"2.0","id":7,"method":"ping"}', headers=headers) for _ in range(35)]
    limited_responses = [r for r in statuses if r[0] == 429]
    assert limited_responses, [s for s, _, _ in statuses]
    _, hdrs, payload = limited_responses[0]
    assert int(hdrs["retry-after"]) >= 1
    assert json.loads(payload)["error"] == {"code": -32004, "message": "Rate limit exceeded"}


def refused(k: RunningKernel) -> dict[str, int]:
    """The front door's guard counters, from its describe reply."""
    reply = k.client().request("frontdoor", DescribeRequest(), DescribeReply, timeout=10)
    counts: dict[str, int] = reply.body.details["refused"]
    return counts


def test_token_rotation_and_failed_write(guarded: Any) -> None:
    k, url, _ = guarded
    old = mc.token_of(k.root)
    body = mc.initialize_body()
    assert mc.raw(url, body=body, headers={"Authorization": f"Bearer {old}"})[0] == 200
    new = cli(k.root, "token", "rotate").stdout.strip()
    assert new and new != old
    assert mc.raw(url, body=body, headers={"Authorization": f"Bearer {old}"})[0] == 401
    assert mc.raw(url, body=body, headers={"Authorization": f"Bearer {new}"})[0] == 200
    assert mc.token_of(k.root) == new
    # A rotation whose write fails (the token file's path is a directory now) keeps the current token.
    token_file = k.home.config_dir / "mcp-token"
    moved = token_file.with_name("mcp-token.saved")
    token_file.rename(moved)
    token_file.mkdir()
    try:
        failed = cli(k.root, "token", "rotate", check=False)
        assert failed.returncode != 0 and "old token still works" in failed.stderr
        assert mc.raw(url, body=body, headers={"Authorization": f"Bearer {new}"})[0] == 200
    finally:
        token_file.rmdir()
        moved.rename(token_file)
    assert mc.token_of(k.root) == new


def test_indexer_killed_mid_request_gives_service_unavailable(guarded: Any) -> None:
    k, url, _ = guarded
    token = mc.token_of(k.root)
    before = k.worker("indexer")["pid"]
    result: dict[str, Any] = {}

    def search() -> None:
        t0 = time.monotonic()
        result["r"] = mc.call(url, token, "search_documents", {"query": "fox"})
        result["t"] = time.monotonic()
        result["t0"] = t0

    thread = threading.Thread(target=search)
    thread.start()
    wait_for(lambda: k.worker("indexer")["in_flight"] > 0, 10, 0.02, "the search in flight")
    killed_at = time.monotonic()
    kill9(before)
    # The front door keeps answering calls that need no other worker meanwhile.
    assert mc.run(lambda: list_names(url, token)) == TOOLS
    thread.join(30)
    assert mc.error_code(result["r"]) == "SERVICE_UNAVAILABLE"
    assert result["t"] - killed_at < 3.0
    k.wait_state("indexer", "RUNNING", 30, other_pid_than=before)

    def answered() -> CallToolResult | None:
        r = mc.call(url, token, "search_documents", {"query": "fox"})
        return None if r.is_error else r

    assert structured(wait_for(answered, 30, 1.0, "a search after the restart"))["results"]


# ---------------------------------------------------------------------------------------------


def test_two_stdio_bridges_start_and_share_one_supervisor() -> None:
    root = short_tmpdir()
    home = root / "home"
    (home / "config").mkdir(parents=True)
    # The bridges need the front door; the embedder is the worker counted below. Nothing is indexed.
    config = merge(FAST_RESTART, only_workers("embedder", "frontdoor"), {"mcp": {"port": 0}})
    (home / "config" / "supervisor.toml").write_text(with_model_cache(config))
    try:

        async def one() -> set[str]:
            async with mc.stdio_client(home) as client:
                return {t.name for t in (await client.list_tools()).tools}

        results: list[set[str]] = []
        errors: list[BaseException] = []

        def run_one() -> None:
            try:
                results.append(mc.run(one))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run_one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        assert not errors, errors
        assert results == [TOOLS, TOOLS]
        kernels = [
            p
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and str(home) in p.info["cmdline"] and "--detached" in p.info["cmdline"]
        ]
        assert len(kernels) == 1, [p.info["cmdline"] for p in kernels]
        embedders = [w for w in status_json(home)["workers"] if w["name"] == "embedder"]
        assert len(embedders) == 1
    finally:
        cli(home, "stop", check=False, timeout=60)
        remove_tree(root)


def test_accepted_connections_get_tcp_nodelay() -> None:
    """Without TCP_NODELAY each response of the stateless protocol waited ~40 ms on the client's delayed
    ACK (the search bench measured hybrid at 83.7 ms median before the fix, 31.4 ms with it; commit
    15084d5). asyncio sets it on accepted connections only when the listening socket's protocol is
    IPPROTO_TCP, which bind() must therefore say explicitly."""
    listener = bind("127.0.0.1", 0)
    port = listener.getsockname()[1]
    seen: list[int] = []

    async def go() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            while not seen:
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(asyncio.wait_for(go(), 10))
    assert seen == [1]
