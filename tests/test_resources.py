"""The MCP resources through real clients: the mcp SDK's client in both protocol eras (the stateless
2026-07-28 revision and the initialize handshake), over the stdio bridge, the MCP Inspector's CLI and
the TypeScript SDK's client (both npm).

One kernel for the module: its Smart Folder holds a few documents to read, a broken one, a symlink that
points outside it, and enough notes that ``resources/list`` takes more than one page.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from mcp.client import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.types import INVALID_PARAMS, CallToolResult, TextResourceContents

from foldermind.workers.frontdoor.resources import LIST_PAGE, document_uri, folder_uri
from tests import mcpclient as mc
from tests.helpers import NO_LLM, RunningKernel, npm_installed
from tests.test_frontdoor import inspector_bin, serving, write_docs

ERAS = ("auto", "legacy")  # the stateless 2026-07-28 revision, and the initialize handshake
NOTES = LIST_PAGE + 20  # more indexed documents than one page of resources/list


def docs_and_notes(root: Path) -> Path:
    docs = write_docs(root)
    (docs / "notes").mkdir()
    for n in range(NOTES):
        (docs / "notes" / f"note{n:03d}.txt").write_text(f"Note number {n}.\n")
    return docs


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, Path, str, str]]:
    # No llm: resources, prompts and the tools listed here never chat or read a model summary, and its
    # summaries of the ~125 indexed files would compete with the tests for the CPU.
    with serving(docs_and_notes, NO_LLM) as running:
        yield running


def text_of(contents: list[Any]) -> str:
    assert len(contents) == 1 and isinstance(contents[0], TextResourceContents), contents
    return contents[0].text


def code_of(refused: pytest.ExceptionInfo[MCPError]) -> str:
    """The tool error code a refused resource request starts its message with."""
    return refused.value.error.message.split(":")[0]


async def first_folder(client: Client) -> str:
    listed = await client.call_tool("list_smart_folders", {})
    assert isinstance(listed, CallToolResult) and listed.structured_content is not None
    folder_id = listed.structured_content["folders"][0]["id"]
    assert isinstance(folder_id, str)
    return folder_id


async def every_resource(client: Client) -> list[str]:
    """Every URI resources/list gives, following its cursors."""
    uris: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.list_resources(cursor=cursor, cache_mode="bypass")
        uris += [r.uri for r in page.resources]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            assert pages > 1, "the listing fit one page: the test's folder is too small to page"
            return uris


def test_templates_and_every_indexed_document_are_listed_page_by_page_in_both_eras(served: Any) -> None:
    _, docs, url, token = served

    async def go(mode: str) -> tuple[list[str], list[str], str]:
        async with mc.http_client(url, token, mode=mode) as client:
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            uris = await every_resource(client)
            with pytest.raises(MCPError) as refused:
                await client.list_resources(cursor="not-a-cursor-of-ours", cache_mode="bypass")
            assert refused.value.code == INVALID_PARAMS
            return templates, uris, code_of(refused)

    for mode in ERAS:
        templates, uris, bad_cursor = anyio.run(go, mode)
        assert templates == ["foldermind://document/{path}"], mode
        assert len(uris) == len(set(uris)), "a document was listed twice"
        assert uris[0].startswith("foldermind://folder/"), uris[:3]
        wanted = {document_uri(str(docs / n)) for n in ("guide.md", "fox.txt", "cats.txt")}
        wanted |= {document_uri(str(docs / "notes" / f"note{n:03d}.txt")) for n in range(NOTES)}
        assert wanted <= set(uris), (mode, sorted(wanted - set(uris))[:5])
        assert document_uri(str(docs / "broken.pdf")) not in uris  # failed: nothing to read
        assert bad_cursor == "INVALID_ARGUMENT"


def test_a_document_resource_reads_what_read_document_reads_full_and_ranged_in_both_eras(served: Any) -> None:
    _, docs, url, token = served
    fox = str(docs / "fox.txt")

    async def go(mode: str) -> tuple[str, str, str, dict[str, Any], dict[str, Any]]:
        async with mc.http_client(url, token, mode=mode) as client:
            full = await client.read_resource(document_uri(fox))
            tool = await client.call_tool("read_document", {"file_path": fox})
            assert isinstance(tool, CallToolResult) and tool.structured_content is not None
            ranged = await client.read_resource(document_uri(fox) + "?start_line=2&end_line=2")
            # A client that fills the template without encoding the slashes names the same file.
            plain = await client.read_resource("foldermind://document/" + fox)
            meta = ranged.contents[0].meta or {}
            return (
                text_of(full.contents),
                text_of(ranged.contents),
                text_of(plain.contents),
                meta,
                tool.structured_content,
            )

    for mode in ERAS:
        full, ranged, plain, meta, tool = anyio.run(go, mode)
        assert full == tool["text"] == plain, mode
        assert full.startswith("The quick brown fox") and "Foxes are small omnivores." in full
        assert ranged == "Foxes are small omnivores."
        assert meta["start_line"] == meta["end_line"] == 2 and meta["total_lines"] == tool["total_lines"]
        assert meta["file_path"] == fox and meta["truncated"] is False


def test_a_document_resource_refuses_exactly_what_read_document_refuses(served: Any) -> None:
    k, docs, url, token = served
    outside = str(docs.parent / "outside.txt")
    cases: list[tuple[str, dict[str, Any]]] = [  # (path, range) for both the tool and the resource
        (outside, {}),  # outside every Smart Folder
        (str(docs / "escape.txt"), {}),  # a symlink inside that points outside
        (str(docs / ".." / "outside.txt"), {}),
        (str(docs / "broken.pdf"), {}),  # inside, but failed: not indexed
        (str(docs / "absent.txt"), {}),
        ("relative/fox.txt", {}),
        (str(docs / "fox.txt"), {"start_line": 3, "end_line": 2}),
        (str(docs / "fox.txt"), {"start_line": 0}),
        (str(docs / "fox.txt"), {"start_line": 10_000_001}),
    ]

    async def go() -> list[tuple[str | None, str, int]]:
        async with mc.http_client(url, token) as client:
            seen = []
            for path, span in cases:
                tool = await client.call_tool("read_document", {"file_path": path, **span})
                assert isinstance(tool, CallToolResult)
                query = "&".join(f"{k}={v}" for k, v in span.items())
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(document_uri(path) + (f"?{query}" if query else ""))
                seen.append((mc.error_code(tool), code_of(refused), refused.value.code))
            for uri in (
                document_uri(str(docs / "fox.txt")) + "?start_line=abc",
                document_uri(str(docs / "fox.txt")) + "?lines=1-2",
                document_uri(str(docs / "fox.txt")) + "?start_line=1&start_line=2",
                "foldermind://nothing/here",
                "file:///etc/passwd",
                "foldermind://document/" + quote("file:///etc/passwd", safe=""),
            ):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                seen.append((None, code_of(refused), refused.value.code))
            return seen

    seen = anyio.run(go)
    for (tool, resource, rpc), case in zip(seen, cases, strict=False):
        assert tool is not None and tool == resource, (case, tool, resource)
        assert rpc == INVALID_PARAMS, case
    assert [resource for _, resource, _ in seen[:4]] == ["INVALID_PATH"] * 3 + ["FILE_NOT_INDEXED"]
    assert [code for _, code, _ in seen[len(cases) :]] == ["INVALID_ARGUMENT"] * 5 + ["INVALID_PATH"]
    # What was refused stays out of the logs: the outside file's name and its text alike.
    logs = "".join(p.read_text(errors="replace") for p in k.home.log_dir.glob("*.log*"))
    assert "secret text outside" not in logs and "outside.txt" not in logs


def test_a_stdio_client_reads_a_document_resource_through_the_bridge(served: Any) -> None:
    k, docs, _, _ = served

    async def go() -> tuple[list[str], str]:
        async with mc.stdio_client(k.root) as client:
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            read = await client.read_resource(document_uri(str(docs / "cats.txt")) + "?start_line=2")
            return templates, text_of(read.contents)

    assert anyio.run(go) == (["foldermind://document/{path}"], "A cat sleeps most of the day.")


HOSTILE_URIS = [
    "foldermind://document/",
    "foldermind://document/%00",
    "foldermind://document/%2Fa%00b",
    "foldermind://document/%ZZ",
    "foldermind://document/" + quote("/" * 5000, safe=""),
    "foldermind://document/" + "%2F" * 6000,
    "foldermind://document/" + quote("\\\\host\\share\\x.txt", safe=""),
    "foldermind://document/" + quote("C:\\Windows\\win.ini", safe=""),
    "foldermind://document/%2Fetc%2Fpasswd?start_line=1e309",
    "foldermind://document/%2Fetc%2Fpasswd?end_line=-1",
    "foldermind://document/%2Fetc%2Fpasswd?start_line=%00",
    "foldermind://document/%2Fetc%2Fpasswd?" + "&".join(f"k{n}=v" for n in range(50)),
    "foldermind://document/%2Fetc%2Fpasswd?&&==",
    "foldermind://folder/",
    "foldermind://folder/%00?after=-5",
    "foldermind://folder/x?after=99999999999999999999999",
    "foldermind://\u202e\ufeff/x",
    "foldermind:document",
    "foldermind://",
]
HOSTILE_REFUSALS = {"INVALID_PATH", "INVALID_ARGUMENT", "INVALID_SMART_FOLDER", "FILE_NOT_INDEXED"}


def test_hostile_resource_uris_get_a_typed_refusal_never_an_internal_error(served: Any) -> None:
    _, _, url, token = served

    async def go() -> list[tuple[str, int, str]]:
        async with mc.http_client(url, token) as client:
            seen = []
            for uri in HOSTILE_URIS:
                try:
                    await client.read_resource(uri)
                except MCPError as exc:
                    seen.append((uri, exc.code, exc.error.message.split(":")[0]))
                else:
                    seen.append((uri, 0, "read"))
            return seen

    for uri, rpc, code in anyio.run(go):
        assert rpc == INVALID_PARAMS and code in HOSTILE_REFUSALS, (uri[:80], rpc, code)


def test_a_folder_resource_lists_its_documents_with_their_status(served: Any) -> None:
    _, docs, url, token = served

    async def go(mode: str) -> tuple[dict[str, Any], str, str]:
        async with mc.http_client(url, token, mode=mode) as client:
            read = await client.read_resource(folder_uri(await first_folder(client)))
            listing = json.loads(text_of(read.contents))
            fox = next(d for d in listing["documents"] if d["path"] == str(docs / "fox.txt"))
            opened = text_of((await client.read_resource(fox["uri"])).contents)
            with pytest.raises(MCPError) as refused:
                await client.read_resource(folder_uri("no-such-folder"))
            return listing, opened, code_of(refused)

    for mode in ERAS:
        listing, opened, unknown = anyio.run(go, mode)
        assert listing["folder"]["path"] == str(docs) and listing["next"] is None
        status = {Path(d["path"]).name: d["status"] for d in listing["documents"]}
        assert status["fox.txt"] == status["guide.md"] == "indexed" and status["broken.pdf"] == "failed"
        assert sum(1 for name in status if name.startswith("note")) == NOTES
        assert opened.startswith("The quick brown fox")
        assert unknown == "INVALID_SMART_FOLDER"


def test_a_file_added_to_a_watched_folder_is_announced_in_both_eras(served: Any) -> None:
    _, docs, url, token = served

    async def listed(client: Client, uri: str) -> None:
        """Until resources/list gives ``uri`` (the announcement may come when the file is only recorded)."""
        with anyio.fail_after(120):
            while uri not in await every_resource(client):
                await anyio.sleep(0.2)

    async def stateless() -> list[object]:
        async with mc.http_client(url, token) as client:
            folder = folder_uri(
                (await client.call_tool("list_smart_folders", {})).structured_content["folders"][0]["id"]
            )  # type: ignore[index]
            async with client.listen(resources_list_changed=True, resource_subscriptions=[folder]) as sub:
                added = docs / "added-stateless.txt"
                added.write_text("A file that arrived while a client listened.\n")
                events: list[object] = []
                with anyio.fail_after(120):
                    async for event in sub:
                        events.append(event)
                        if any(isinstance(e, ResourceUpdated) and e.uri == folder for e in events):
                            break
            await listed(client, document_uri(str(added)))
            return events

    async def handshake() -> list[str]:
        got: list[str] = []
        arrived = anyio.Event()

        async def on_message(message: IncomingMessage) -> None:
            method = getattr(message, "method", None)
            if isinstance(method, str):
                got.append(method)
                if "notifications/resources/updated" in got and "notifications/resources/list_changed" in got:
                    arrived.set()

        async with mc.http_client(url, token, mode="legacy", message_handler=on_message) as client:
            caps = client.server_capabilities.resources
            assert caps is not None and caps.list_changed and caps.subscribe, caps
            folder = folder_uri(
                (await client.call_tool("list_smart_folders", {})).structured_content["folders"][0]["id"]
            )  # type: ignore[index]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resources/subscribe is the handshake era's own way
                await client.subscribe_resource(folder)
            added = docs / "added-handshake.txt"
            added.write_text("A file that arrived while a session was open.\n")
            with anyio.fail_after(120):
                await arrived.wait()
            await listed(client, document_uri(str(added)))
            return got

    events = anyio.run(stateless)
    assert any(isinstance(e, ResourcesListChanged) for e in events), events
    got = anyio.run(handshake)
    assert {"notifications/resources/list_changed", "notifications/resources/updated"} <= set(got), got


def test_the_mcp_inspector_lists_templates_and_resources_and_reads_one(served: Any) -> None:
    _, docs, url, token = served
    inspector = inspector_bin()
    base = [inspector, "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]

    def inspect(*args: str) -> Any:
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    templates = inspect("--method", "resources/templates/list")["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["foldermind://document/{path}"]
    listed = [r["uri"] for r in inspect("--method", "resources/list")["resources"]]
    assert listed[0].startswith("foldermind://folder/") and document_uri(str(docs / "fox.txt")) in listed
    read = inspect("--method", "resources/read", "--uri", document_uri(str(docs / "fox.txt")))
    assert read["contents"][0]["text"].startswith("The quick brown fox")


TS_SDK = "1.32.2"  # as the Makefile installs it


def test_the_typescript_sdk_client_lists_and_reads_resources_gets_a_prompt_and_hears_of_a_new_file(
    served: Any,
) -> None:
    _, docs, url, token = served
    prefix = npm_installed("ts-sdk", "@modelcontextprotocol/sdk", TS_SDK, "FOLDERMIND_TS_SDK_DIR")
    # ESM resolves packages from the script's own directory: the script runs beside the SDK's node_modules.
    script = prefix / "ts_resources.mjs"
    shutil.copyfile(Path(__file__).with_name("ts_resources.mjs"), script)
    fox = document_uri(str(docs / "fox.txt"))
    node = subprocess.Popen(
        ["node", str(script), url, token, fox], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert node.stdout is not None
        first = node.stdout.readline()
        assert json.loads(first or "{}") == {"listening": True}, node.stderr.read() if node.stderr else first
        (docs / "added-typescript.txt").write_text("A file that arrived while the TypeScript client listened.\n")
        out, err = node.communicate(timeout=120)
    finally:
        node.kill()
    assert node.returncode == 0, err
    seen = json.loads(out)
    assert seen["capabilities"] == {"subscribe": True, "listChanged": True}
    assert seen["templates"] == ["foldermind://document/{path}"]
    assert seen["listed"][0].startswith("foldermind://folder/") and len(seen["listed"]) > LIST_PAGE
    assert seen["nextCursor"], "the first page says where the next one starts"
    assert seen["text"].startswith("The quick brown fox")
    assert seen["refused"]["code"] == INVALID_PARAMS and "INVALID_PATH" in seen["refused"]["message"]
    assert "quick brown fox" in seen["prompt"] and "[1]" in seen["prompt"]  # the search's passages, numbered
    assert seen["changed"], "no resources/list_changed reached the TypeScript client after a file was added"
