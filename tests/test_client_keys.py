"""Client keys through the real MCP SDK client over HTTP: a key scoped to one Smart Folder against every tool,
resource and prompt, with a second folder whose documents match every query sent (a leak shows as a hit);
paths to the hidden folder fuzzed (symlinks, encodings, ``//``, ``/./``, chunk ids) and refused exactly as a path
outside every folder is; revocation mid-session; an activity row per call and no query text in it or the logs.

One kernel for the module (no llm: chat is asked for its extractive answer, which needs no model).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged
from mcp.types import TextResourceContents

from foldermind.protocol.runtime.home import Home
from foldermind.workers.frontdoor.resources import document_uri, folder_uri
from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, NO_LLM, ONE_PARSER, RunningKernel, cli, remove_tree, short_tmpdir, wait_for
from tests.keyworld import (
    SECRET_WORD,
    TEXT,
    announce_private_then_work,
    embedded,
    fuzzed,
    leaked,
    refusal,
    same_as_outside,
    structured,
    write_folders,
)


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    root = short_tmpdir()
    config = merge(FAST_RESTART, ONE_PARSER, {"mcp": {"port": 0, "rate_per_minute": 6000}}, NO_LLM)
    k = RunningKernel(root / "home", config)
    work, private = write_folders(root)
    try:
        k.start()
        cli(k.root, "folders", "add", str(work), "--wait", timeout=300)
        cli(k.root, "folders", "add", str(private), "--wait", timeout=300)
        url = str(mc.mcp_info(k.root)["url"])
        owner = mc.token_of(k.root)
        embedded(url, owner)
        folders = structured(mc.call(url, owner, "list_smart_folders"))["folders"]
        ids = {Path(f["destination_path"]).name: f["id"] for f in folders}
        made = json.loads(cli(k.root, "token", "add", "work-agent", "--folders", "work", "--json").stdout)
        assert made["folders"] == [ids["work"]] and made["name"] == "work-agent"
        yield {
            "kernel": k,
            "root": root,
            "url": url,
            "owner": owner,
            "key": made["token"],
            "work": work,
            "private": private,
            "ids": ids,
        }
    finally:
        k.stop()
        remove_tree(root)


QUERIES = [f"zebra budget quarterly {SECRET_WORD}", "zebra budget", '"zebra budget" owner']


def test_the_owner_sees_both_folders_so_every_query_below_would_show_a_leak(world: dict[str, Any]) -> None:
    for mode in ("hybrid", "keyword", "semantic"):
        hits = structured(
            mc.call(world["url"], world["owner"], "search_documents", {"query": "zebra budget", "mode": mode})
        )
        assert leaked(hits, world["private"]), (mode, hits)


def test_a_scoped_key_finds_only_its_folder_in_every_search_mode_and_filter(world: dict[str, Any]) -> None:
    url, key, private, ids = world["url"], world["key"], world["private"], world["ids"]
    filters: list[dict[str, Any]] = [
        {},
        {"file_types": ["txt", "md"]},
        {"path_glob": "**/*"},
        {"path_glob": f"{private}/**"},
        {"modified_after": "P30D"},
        {"group_by_file": True},
        {"top_k": 50},
    ]
    found_work = False
    for query in QUERIES:
        for mode in ("hybrid", "keyword", "semantic"):
            for extra in filters:
                result = mc.call(url, key, "search_documents", {"query": query, "mode": mode, **extra})
                if result.is_error:  # an absolute glob outside the key's folders may be refused, never answered
                    continue
                body = structured(result)
                assert not leaked(body, private), (query, mode, extra, leaked(body, private))
                found_work |= any(r["file_path"].startswith(str(world["work"])) for r in body["results"])
    assert found_work, "the scoped key found nothing at all: the test would not see a leak"
    # An absolute glob into the hidden folder is refused as one into no folder at all (no oracle of its root).
    nowhere = str(world["root"] / "no-such-folder")
    globbed = [
        refusal(mc.call(url, key, "search_documents", {"query": "zebra", "path_glob": f"{root}/**"}))
        for root in (private, nowhere)
    ]
    assert globbed[0] == globbed[1], globbed
    hidden = mc.call(url, key, "search_documents", {"query": "zebra", "smart_folder_id": ids["private"]})
    unknown = mc.call(url, key, "search_documents", {"query": "zebra", "smart_folder_id": "nosuchfolder"})
    code, message = refusal(hidden)
    assert (code, message.replace(ids["private"], "X")) == (
        refusal(unknown)[0],
        refusal(unknown)[1].replace("nosuchfolder", "X"),
    )


def test_listings_status_chat_and_similar_show_only_the_scoped_folder(world: dict[str, Any]) -> None:
    url, key, private, work = world["url"], world["key"], world["private"], world["work"]
    folders = structured(mc.call(url, key, "list_smart_folders"))["folders"]
    assert [f["id"] for f in folders] == [world["ids"]["work"]]
    status = structured(mc.call(url, key, "index_status"))
    assert not leaked(status, private), leaked(status, private)
    assert status["totals"]["files_total"] == 2 and [f["path"] for f in status["folders"]] == [str(work)]
    owner_status = structured(mc.call(url, world["owner"], "index_status"))
    assert leaked(owner_status, private), "the owner's status lists the private folder's failure"
    chat = structured(
        mc.call(url, key, "chat_with_documents", {"query": f"zebra budget {SECRET_WORD}?", "answer_mode": "extractive"})
    )
    assert not leaked(chat, private), leaked(chat, private)
    similar = structured(mc.call(url, key, "find_similar", {"file_path": str(work / "budget.txt"), "top_k": 25}))
    assert not leaked(similar, private) and similar["results"], similar
    owner_similar = structured(
        mc.call(url, world["owner"], "find_similar", {"file_path": str(work / "budget.txt"), "top_k": 25})
    )
    assert leaked(owner_similar, private), "the owner's neighbours include the private folder's documents"


def test_paths_into_the_hidden_folder_are_refused_as_a_path_outside_every_folder(world: dict[str, Any]) -> None:
    url, key, owner = world["url"], world["key"], world["owner"]
    outside_path = str(world["root"] / "outside-everything.txt")
    Path(outside_path).write_text("zebra budget\n")
    for tool in ("read_document", "get_document_summary", "find_similar"):
        outside = refusal(mc.call(url, key, tool, {"file_path": outside_path}))
        for path in fuzzed(world):
            same_as_outside(mc.call(url, key, tool, {"file_path": path}), path, outside, outside_path)
    # The owner reads the same file: the refusal above is the scope's.
    assert not mc.call(url, owner, "read_document", {"file_path": str(world["private"] / "taxes.txt")}).is_error
    # A chunk of the hidden folder is no chunk for the key.
    hits = structured(mc.call(url, owner, "search_documents", {"query": "private tax notes", "mode": "keyword"}))
    chunk = next(r["chunk_id"] for r in hits["results"] if r["file_path"].startswith(str(world["private"])))
    hidden = refusal(mc.call(url, key, "read_document", {"chunk_id": chunk}))
    missing = refusal(mc.call(url, key, "read_document", {"chunk_id": 2**62}))
    assert (hidden[0], hidden[1].replace(str(chunk), "N")) == (missing[0], missing[1].replace(str(2**62), "N"))


def test_resources_and_prompts_show_and_read_only_the_scoped_folder(world: dict[str, Any]) -> None:
    url, key, private, ids = world["url"], world["key"], world["private"], world["ids"]
    taxes = str(private / "taxes.txt")
    outside_path = str(world["root"] / "outside-everything.txt")
    Path(outside_path).write_text("zebra budget\n")

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mc.http_client(url, key) as client:
            listed = await client.list_resources(cache_mode="bypass")
            out["uris"] = [r.uri for r in listed.resources]
            refused = {}
            for uri in (
                document_uri(taxes),
                f"foldermind://document/{taxes}",
                f"foldermind://document/{quote(taxes, safe='/')}",
                document_uri(str(world["work"] / "alias.txt")),
                document_uri(outside_path),
                folder_uri(ids["private"]),
                folder_uri("nosuchfolder"),
            ):
                try:
                    await client.read_resource(uri)
                    refused[uri] = None
                except MCPError as exc:
                    refused[uri] = exc.error.message
            out["refused"] = refused
            readable = await client.read_resource(document_uri(str(world["work"] / "budget.txt")))
            assert isinstance(readable.contents[0], TextResourceContents)
            answer = await client.get_prompt("answer_from_documents", {"query": f"zebra budget {SECRET_WORD}"})
            out["answer"] = answer.model_dump()
            prompt_refusals = []
            for folder in (ids["private"], "nosuchfolder"):
                try:
                    await client.get_prompt("summarise_folder", {"smart_folder_id": folder})
                    prompt_refusals.append(None)
                except MCPError as exc:
                    prompt_refusals.append(exc.error.message)
            out["prompt_refusals"] = prompt_refusals
            return out

    out = anyio.run(go)
    assert out["uris"] and not [u for u in out["uris"] if quote(str(private), safe="") in u or ids["private"] in u]
    refused = out["refused"]
    assert None not in refused.values(), refused
    outside = refused[document_uri(outside_path)].replace(outside_path, "P")
    for uri, message in refused.items():
        if "document/" in uri:
            asked = outside_path if "outside" in uri else str(world["work"] / "alias.txt") if "alias" in uri else taxes
            assert message.replace(asked, "P") == outside, (uri, message)
    assert refused[folder_uri(ids["private"])] == refused[folder_uri("nosuchfolder")]
    assert not leaked(out["answer"], private) and str(world["work"]) in json.dumps(out["answer"])
    assert out["prompt_refusals"][0] == out["prompt_refusals"][1] is not None


def test_every_call_leaves_an_activity_row_and_no_query_text_anywhere(world: dict[str, Any]) -> None:
    url, key, k = world["url"], world["key"], world["kernel"]
    before = json.loads(cli(k.root, "activity", "--client", "work-agent", "--json").stdout)
    mc.call(url, key, "search_documents", {"query": f"zebra {SECRET_WORD}"})
    mc.call(url, key, "read_document", {"file_path": str(world["work"] / "budget.txt")})
    mc.call(url, key, "read_document", {"file_path": str(world["private"] / "taxes.txt")})

    def rows() -> list[dict[str, Any]]:
        return json.loads(cli(k.root, "activity", "--client", "work-agent", "--json").stdout)

    after = rows()
    for _ in range(200):  # written by the front door's writer thread: poll until the three rows are there
        if len(after) >= len(before) + 3:
            break
        after = rows()
    new = after[len(before) :]
    assert [r["tool"] for r in new] == ["search_documents", "read_document", "read_document"], new
    assert new[0]["outcome"] == "ok" and new[0]["count"] >= 1
    assert all(p.startswith(str(world["work"])) for p in new[0]["documents"]), new[0]
    assert new[1]["documents"] == [str(world["work"] / "budget.txt")]
    assert new[2]["outcome"] == "INVALID_PATH" and new[2]["documents"] == []
    assert all(r["arguments"] is None for r in after)
    home = Home.resolve(k.root)
    for folder in (home.data_dir, home.log_dir):
        for path in folder.rglob("*"):
            if path.is_file() and ("activity" in path.name or path.suffix in (".log", ".json") or "log" in path.name):
                assert SECRET_WORD.encode() not in path.read_bytes(), path
    listed = [e for e in json.loads(cli(k.root, "token", "list", "--json").stdout) if e["name"] == "work-agent"]
    assert [e["folders"] for e in listed] == [[world["ids"]["work"]]]
    assert listed[0]["last_used"] and "token" not in listed[0]
    # The scope as the user named it ("--folders work"), not the bare id only (on main: "work-agent: ID; ...").
    text = cli(k.root, "token", "list").stdout.splitlines()
    assert any(line.startswith(f"work-agent: work ({world['ids']['work']}); created ") for line in text), text


def test_a_revoked_key_is_refused_at_once_and_its_open_session_closed(world: dict[str, Any]) -> None:
    url, k = world["url"], world["kernel"]
    made = json.loads(cli(k.root, "token", "add", "short-lived", "--json").stdout)
    token = made["token"]
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    status, headers, _ = mc.raw(url, body=json.dumps(init).encode(), headers={"Authorization": f"Bearer {token}"})
    assert status == 200
    sid = headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    auth = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    assert mc.raw(url, body=json.dumps(listing).encode(), headers=auth)[0] == 200
    cli(k.root, "token", "revoke", "short-lived")
    assert mc.raw(url, body=json.dumps(listing).encode(), headers=auth)[0] == 401
    owner = {**auth, "Authorization": f"Bearer {world['owner']}"}
    # The session closes within a second or so of the revocation (the front door's sweep): poll for it.
    wait_for(
        lambda: mc.raw(url, body=json.dumps(listing).encode(), headers=owner)[0] == 404,
        30,
        0.05,
        "the revoked key's session closed",
    )


def test_a_revoked_keys_open_listen_stream_is_ended(world: dict[str, Any]) -> None:
    """The stateless era has no session to close: its subscriptions/listen stream is what stays open."""
    url, k = world["url"], world["kernel"]
    made = json.loads(cli(k.root, "token", "add", "listener", "--json").stdout)

    async def go() -> str:
        async with mc.http_client(url, made["token"]) as client:
            with anyio.fail_after(60):
                try:
                    async with client.listen(resources_list_changed=True) as sub:
                        await anyio.to_thread.run_sync(lambda: cli(k.root, "token", "revoke", "listener"))
                        async for _ in sub:
                            pass
                except Exception as exc:
                    return type(exc).__name__ + ": " + str(exc)
            return "ended"

    how = anyio.run(go)
    # The server ends the stream with an error (the key is revoked), which the SDK reports as a lost subscription;
    # a stream left open runs into the minute's deadline instead (TimeoutError).
    assert how.startswith("SubscriptionLost") or "TOKEN_REFUSED" in how, how


def test_a_key_scoped_to_a_criteria_folder_sees_its_matching_documents_only(world: dict[str, Any]) -> None:
    """The criteria folder spans both registered folders; a key scoped to it sees its matches in both and nothing
    else, and the work key, whose scope does not hold it, is refused it as an unknown folder."""
    url, k = world["url"], world["kernel"]
    cli(k.root, "folders", "add-criteria", "--name", "taxwork", "--query", "tax plan")
    folders = structured(mc.call(url, world["owner"], "list_smart_folders"))["folders"]
    saved = next(f["id"] for f in folders if f["kind"] == "criteria")
    made = json.loads(cli(k.root, "token", "add", "criteria-agent", "--folders", "taxwork", "--json").stdout)
    assert made["folders"] == [saved]
    found: set[str] = set()
    for mode in ("hybrid", "keyword", "semantic"):
        body = structured(mc.call(url, made["token"], "search_documents", {"query": "zebra budget", "mode": mode}))
        found |= {r["file_path"] for r in body["results"]}
    assert found == {str(world["private"] / "taxes.txt"), str(world["work"] / "plan.md")}, found
    refused = refusal(mc.call(url, world["key"], "search_documents", {"query": "zebra", "smart_folder_id": saved}))
    unknown = refusal(mc.call(url, world["key"], "search_documents", {"query": "zebra", "smart_folder_id": "nope"}))
    assert (refused[0], refused[1].replace(saved, "X")) == (unknown[0], unknown[1].replace("nope", "X"))
    outside = refusal(mc.call(url, made["token"], "read_document", {"file_path": str(world["work"] / "budget.txt")}))
    assert outside[0] == "INVALID_PATH" and "not inside any Smart Folder" in outside[1]
    assert not mc.call(url, made["token"], "read_document", {"file_path": str(world["work"] / "plan.md")}).is_error
    # index_status counts the criteria folder's documents (the private folder's broken PDF is no match, so its
    # failure, which the owner's status lists, is not shown)...
    status = structured(mc.call(url, made["token"], "index_status"))
    owner = structured(mc.call(url, world["owner"], "index_status"))["totals"]
    totals = status["totals"]
    assert (totals["files_total"], totals["files_indexed"], totals["files_failed"]) == (2, 2, 0), totals
    assert 0 < totals["chunks_embedded"] <= totals["chunks"] < owner["chunks"], (totals, owner)
    assert status["folders"] == [] and status["recent_failures"] == [] and not leaked(status, world["private"])
    # ...and a criteria folder of PDFs holds that failed one (a failed document stays searchable by its old
    # chunks): its key is told of its failure, and of nothing else.
    cli(k.root, "folders", "add-criteria", "--name", "pdfs", "--types", "pdf")
    pdfs = json.loads(cli(k.root, "token", "add", "pdf-agent", "--folders", "pdfs", "--json").stdout)
    status = structured(mc.call(url, pdfs["token"], "index_status"))
    totals = status["totals"]
    assert (totals["files_total"], totals["files_failed"], totals["files_indexed"]) == (1, 1, 0), totals
    assert [f["file_path"] for f in status["recent_failures"]] == [str(world["private"] / "broken.pdf")], status
    # A key holding a path folder and a criteria folder counts each document once.
    both = json.loads(cli(k.root, "token", "add", "both-agent", "--folders", "work,taxwork", "--json").stdout)
    totals = structured(mc.call(url, both["token"], "index_status"))["totals"]
    assert (totals["files_total"], totals["files_indexed"]) == (3, 3), totals
    # A path folder with a criteria folder that reaches beyond it: the criteria's match in the other folder is
    # searched too (the scope is not the path folder's alone), and nothing else of that folder.
    both = json.loads(cli(k.root, "token", "add", "work-and-tax", "--folders", "work,taxwork", "--json").stdout)
    beyond: set[str] = set()
    for mode in ("hybrid", "keyword", "semantic"):
        args = {"query": "zebra budget tax plan", "mode": mode, "top_k": 50}
        beyond |= set(leaked(structured(mc.call(url, both["token"], "search_documents", args)), world["private"]))
    assert beyond == {str(world["private"] / "taxes.txt")}, beyond


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_a_scoped_client_hears_only_of_changes_to_its_own_folder(world: dict[str, Any], era: str) -> None:
    """The handshake era's session stream, and the stateless era's subscriptions/listen stream."""
    url, work, private = world["url"], world["work"], world["private"]
    log: list[str] = []

    def handler(who: str) -> Any:
        async def on_message(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/resources/list_changed":
                log.append(who)

        return on_message

    async def handshake() -> None:
        async with (
            mc.http_client(url, world["owner"], mode="legacy", message_handler=handler("owner")) as owner,
            mc.http_client(url, world["key"], mode="legacy", message_handler=handler("scoped")) as scoped,
        ):
            await owner.list_resources(cache_mode="bypass")  # both sessions are known to the change feed
            await scoped.list_resources(cache_mode="bypass")
            await announce_private_then_work(log, private, work)

    async def stateless() -> None:
        async def drain(sub: Any, who: str) -> None:
            async for event in sub:
                if isinstance(event, ResourcesListChanged):
                    log.append(who)

        async with (
            mc.http_client(url, world["owner"]) as owner,
            mc.http_client(url, world["key"]) as scoped,
            owner.listen(resources_list_changed=True) as owner_sub,
            scoped.listen(resources_list_changed=True) as scoped_sub,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(drain, owner_sub, "owner")
            tg.start_soon(drain, scoped_sub, "scoped")
            await announce_private_then_work(log, private, work)
            tg.cancel_scope.cancel()

    anyio.run(handshake if era == "legacy" else stateless)
    assert log.index("scoped") > log.index("wrote-work"), log


def test_a_removed_folder_leaves_every_scope_and_an_empty_scope_sees_nothing(world: dict[str, Any]) -> None:
    url, k = world["url"], world["kernel"]
    scratch = world["root"] / "scratch"
    scratch.mkdir()
    (scratch / "s.txt").write_text("Scratch. " + TEXT)
    cli(k.root, "folders", "add", str(scratch), "--wait", timeout=300)
    made = json.loads(cli(k.root, "token", "add", "scratch-agent", "--folders", "scratch", "--json").stdout)
    before = structured(mc.call(url, made["token"], "search_documents", {"query": "zebra budget"}))
    assert [r["file_path"] for r in before["results"]] == [str(scratch / "s.txt")]
    cli(k.root, "folders", "remove", str(scratch))
    for mode in ("hybrid", "keyword", "semantic"):
        after = structured(mc.call(url, made["token"], "search_documents", {"query": "zebra budget", "mode": mode}))
        assert after["results"] == [], after
    assert structured(mc.call(url, made["token"], "list_smart_folders"))["folders"] == []
    assert structured(mc.call(url, made["token"], "index_status"))["totals"]["files_total"] == 0
    keys = {e["name"]: e["folders"] for e in json.loads(cli(k.root, "token", "list", "--json").stdout)}
    assert keys["scratch-agent"] == []


def test_config_install_gives_the_client_its_own_scoped_key_and_its_bridge_follows_a_rotation(
    world: dict[str, Any],
) -> None:
    """An entry on the owner's token is moved onto a key of its own by installing again (one key, reused after);
    ``--folders`` sets that key's scope. The stdio entry launches the bridge with ``--client``, which presents the
    key (the private folder stays hidden) and reads it again after ``token rotate NAME``."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    k, project = world["kernel"], world["root"] / "project"
    project.mkdir()

    def installed(*more: str) -> tuple[list[str], dict[str, Any]]:
        cli(k.root, "config", "install", "--client", "claude-code", "--project", str(project), *more)
        entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["foldermind"]
        keys = {e["name"]: e["folders"] for e in json.loads(cli(k.root, "token", "list", "--json").stdout)}
        return entry["args"], {n: f for n, f in keys.items() if n.startswith("claude-code")}

    args, keys = installed("--owner-key")
    assert args[-1] == "mcp" and keys == {}, (args, keys)
    args, keys = installed("--folders", "work")  # moved onto its own key, named after the client and the project
    assert args[-3:] == ["mcp", "--client", "claude-code-project"] and keys == {
        "claude-code-project": [world["ids"]["work"]]
    }
    assert installed() == (args, keys)  # again: the same key, its scope kept
    assert installed("--folders", "private")[1] == {"claude-code-project": [world["ids"]["private"]]}
    assert installed("--folders", "work") == (args, keys)
    checks = json.loads(cli(k.root, "doctor", "--json", "--project", str(project), check=False).stdout)["checks"]
    mine = [c for c in checks if c["name"] == "claude-code" and str(project) in c["detail"]]
    assert [c["status"] for c in mine] == ["ok"], mine
    listed = next(c for c in checks if c["name"] == "client keys")
    assert "claude-code-project (" in listed["detail"] and world["ids"]["work"] in listed["detail"], listed
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["foldermind"]

    # The entry exactly as the client launches it: this install's foldermind, --home, mcp --client.
    params = StdioServerParameters(command=entry["command"], args=entry["args"])

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(params, read_timeout_seconds=120) as client:
            first = await client.call_tool("search_documents", {"query": "zebra budget", "top_k": 50})
            cli(k.root, "token", "rotate", "claude-code-project")
            second = await client.call_tool("search_documents", {"query": "zebra budget", "top_k": 50})
            return structured(first), structured(second)

    first, second = anyio.run(go)
    for body in (first, second):
        assert body["results"] and not leaked(body, world["private"]), body


def test_a_url_entry_written_by_config_install_carries_the_clients_scoped_key(world: dict[str, Any]) -> None:
    """Zed's URL form holds the token itself: the one written is the client key's, and an MCP round trip with it
    sees the work folder only."""
    import json5

    k, project = world["kernel"], world["root"] / "zedproject"
    project.mkdir()
    cli(k.root, "config", "install", "--client", "zed", "--project", str(project), "--http", "--folders", "work")
    entry = json5.loads((project / ".zed" / "settings.json").read_text())["context_servers"]["foldermind"]
    token = entry["headers"]["Authorization"].removeprefix("Bearer ")
    assert token not in (world["owner"], world["key"]) and entry["url"] == world["url"]
    body = structured(mc.call(world["url"], token, "search_documents", {"query": "zebra budget", "top_k": 50}))
    assert body["results"] and not leaked(body, world["private"]), body
    for _ in range(200):  # written by the front door's writer thread: poll until the row is there
        rows = json.loads(cli(k.root, "activity", "--client", "zed-zedproject", "--json").stdout)
        if rows:
            break
    assert [r["tool"] for r in rows] == ["search_documents"], rows
