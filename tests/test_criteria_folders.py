"""Criteria Smart Folders against a real kernel: saved with the CLI and over the bus, listed (CLI, bus, the MCP
tool over HTTP) with their kind and the documents matching now, searched by id in every mode, following the
files as they are written, edited and deleted, ageing out of a relative window with no event at all, removed
(by name, and with the path folder they lie within), and refused when they lie outside every Smart Folder.

The corpus is built so that each criterion leaves something out: a matching word in a file of another type,
in a file modified before the window, in a file of another folder, and files of the right type and date that
hold none of the words."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    CriteriaAddReply,
    CriteriaAddRequest,
    CriteriaInfo,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    SearchReply,
    SearchRequest,
)
from foldermind.workers.indexer.search import filters
from tests import mcpclient as mc
from tests.config import merge
from tests.filemakers import at, make_pdf, put
from tests.helpers import (
    FAST_RESTART,
    NO_LLM,
    ONE_PARSER,
    RunningKernel,
    cli,
    remove_tree,
    short_tmpdir,
    wait_for,
)
from tests.world import KernelWorld

MODES = ("keyword", "semantic", "hybrid")
TAX = {  # what "receipt invoice", pdf or txt, modified in 2025 or later holds, across every folder
    "docs/tax/receipt-hardware.txt",
    "docs/tax/invoice-plumber.txt",
    "docs/tax/receipt-dentist.pdf",
    "docs/tax/receipt-draft.txt",
    "other/invoice-car.txt",
}


def write_corpus(root: Path) -> None:
    docs, other = root / "docs", root / "other"
    put(docs / "tax" / "receipt-hardware.txt", "Receipt from the hardware store: nails and screws.\n", "2025-03-01")
    put(docs / "tax" / "invoice-plumber.txt", "Invoices from the plumber for the kitchen sink.\n", "2025-05-10")
    put(docs / "tax" / "receipt-draft.txt", "A receipt for the bakery, a draft kept for later.\n", "2025-02-01")
    put(docs / "tax" / "invoice-2024.txt", "Invoice for the roof, paid in the summer.\n", "2024-06-01")  # too early
    pdf = docs / "tax" / "receipt-dentist.pdf"
    make_pdf(pdf, [["Dental care, March."], ["Receipt for the dentist's cleaning."]])
    os.utime(pdf, (at("2025-07-01"), at("2025-07-01")))
    put(docs / "notes" / "receipt.md", "# A receipt\n\nThe bread and the milk.\n", "2025-04-01")  # not pdf or txt
    put(docs / "notes" / "garden.txt", "Tomatoes and beans grow in the garden.\n", "2025-04-01")  # no word
    put(docs / "live" / "placeholder.txt", "Nothing to see in this file yet.\n", "2025-04-01")
    put(docs / "aging" / "memo.txt", "A memo about the quarterly meeting.\n")
    put(other / "invoice-car.txt", "Invoice for the car repair at the garage.\n", "2025-08-01")
    put(root / "spare" / "receipt-spare.txt", "A spare receipt.\n", "2024-08-01")  # too early
    (root / "unregistered").mkdir()


class World(KernelWorld):
    def __init__(self, kernel: RunningKernel, root: Path) -> None:
        super().__init__(kernel, root, "criteria-test")
        self.url = self.token = ""

    def listing(self) -> FolderListReply:
        reply: FolderListReply = self.call(FolderListRequest(with_criteria=True), FolderListReply)
        return reply

    def criteria(self, name: str) -> CriteriaInfo | None:
        return next((c for c in self.listing().criteria if c["name"] == name), None)

    def save(self, name: str, **kw: Any) -> CriteriaInfo:
        folder: CriteriaInfo = self.call(CriteriaAddRequest(name, **kw), CriteriaAddReply).folder
        return folder

    def files(self, reply: SearchReply) -> set[str]:
        return {os.path.relpath(r["file_path"], self.root) for r in reply.results}

    def within(self, query: str, folder: str, mode: str = "keyword", **kw: Any) -> SearchReply:
        """A search of the Smart Folder ``folder`` (an id or a name), 50 deep."""
        return self.search(query, mode, top_k=50, folder_id=folder, **kw)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    base = short_tmpdir("fmc-")  # short: the home's socket paths must fit in sun_path
    root = base / "files"
    # Searched through the bus, the CLI and MCP, never chatted with: no llm, one parser.
    config = merge(FAST_RESTART, NO_LLM, ONE_PARSER, {"mcp": {"port": 0}})
    w = World(RunningKernel(base / "home", config), root)
    try:
        w.kernel.start()
        write_corpus(root)
        for name in ("docs", "other", "spare"):
            w.add(name, root / name)
        wait_for(lambda: w.settled({"docs": 9, "other": 1, "spare": 1}), 240, 0.2, "the folders indexed and embedded")
        info = mc.mcp_info(w.kernel.root)
        w.url, w.token = str(info["url"]), mc.token_of(w.kernel.root)
        yield w
    finally:
        w.kernel.stop()
        remove_tree(base)


def test_a_criteria_folder_is_saved_and_listed_with_its_kind_and_what_matches_now(world: World) -> None:
    saved = cli(
        world.kernel.root,
        "folders",
        "add-criteria",
        "--name",
        "Tax 2025",
        "--query",
        "receipt invoice",
        "--types",
        "pdf,TXT",
        "--modified-after",
        "2025-01-01",
    ).stdout
    assert "Tax 2025" in saved and "5 documents match now" in saved, saved
    listed = json.loads(cli(world.kernel.root, "folders", "list", "--json").stdout)
    kinds = {f["name"]: f["kind"] for f in listed}
    assert {n for n, k in kinds.items() if k == "path"} == {"docs", "other", "spare"}
    assert kinds["Tax 2025"] == "criteria"
    assert world.call(FolderListRequest(), FolderListReply).criteria == []  # only when asked: counting costs
    tax = next(f for f in listed if f["name"] == "Tax 2025")
    assert tax["file_count"] == len(TAX) and tax["file_types"] == ["pdf", "txt"] and tax["within"] == ""
    text = cli(world.kernel.root, "folders", "list").stdout
    assert "criteria: query 'receipt invoice', types pdf,txt, modified after 2025-01-01, in every folder" in text

    out = mc.call(world.url, world.token, "list_smart_folders")
    assert not out.is_error, out.content
    folders = {f["name"]: f for f in out.structured_content["folders"]}
    assert {f["kind"] for n, f in folders.items() if n != "Tax 2025"} == {"path"}
    assert folders["Tax 2025"]["kind"] == "criteria" and folders["Tax 2025"]["file_count"] == len(TAX)
    assert folders["Tax 2025"]["criteria"]["query"] == "receipt invoice"
    assert folders["docs"]["criteria"] is None and folders["docs"]["destination_path"] == str(world.root / "docs")


def test_searching_a_criteria_folder_finds_only_its_documents_in_every_mode(world: World) -> None:
    tax = world.criteria("Tax 2025") or world.save(
        "Tax 2025", query="receipt invoice", file_types=["pdf", "txt"], modified_after="2025-01-01"
    )
    everything = world.within("receipt invoice", tax["id"])
    assert world.files(everything) == TAX  # the keyword query matches each of them, and nothing else is admitted
    for mode in MODES:
        # Words none of the documents hold: the folder still confines what a by-meaning search returns.
        got = world.files(world.within("garden tomatoes meeting", tax["id"], mode))
        assert got <= TAX and (mode == "keyword" or got), (mode, got)
    by_name = world.within("receipt", "Tax 2025")
    assert world.files(by_name) <= TAX and by_name.results
    narrowed = world.within("receipt invoice", tax["id"], file_types=["pdf"])  # with the request's own filter
    assert world.files(narrowed) == {"docs/tax/receipt-dentist.pdf"}
    assert world.within("receipt", tax["id"], modified_before="2025-01-01").results == []

    out = mc.call(
        world.url,
        world.token,
        "search_documents",
        {"query": "invoice", "mode": "keyword", "smart_folder_id": tax["id"]},
    )
    assert not out.is_error, out.content
    got = {os.path.relpath(r["file_path"], world.root) for r in out.structured_content["results"]}
    assert got == {"docs/tax/invoice-plumber.txt", "other/invoice-car.txt"}
    shown = cli(world.kernel.root, "search", "invoice", "--folder", tax["id"], "--mode", "keyword").stdout
    assert "invoice-car.txt" in shown and "invoice-2024.txt" not in shown
    missing = mc.call(world.url, world.token, "search_documents", {"query": "x", "smart_folder_id": "no-such"})
    assert mc.error_code(missing) == "INVALID_SMART_FOLDER"


def test_what_the_query_means_any_word_stemmed_phrases_and_exclusions(world: World) -> None:
    tax_dir = str(world.root / "docs" / "tax")
    assert world.save("any", query="receipt invoice", within=tax_dir)["file_count"] == 5  # the 2024 one too
    assert world.save("stemmed", query="invoice", within=tax_dir)["file_count"] == 2  # "Invoices" is "invoice"
    phrase = world.save("phrase", query='"kitchen sink"', within=tax_dir)
    assert world.files(world.within("plumber", phrase["id"])) == {"docs/tax/invoice-plumber.txt"}
    # The draft's chunk holds "receipt" and "draft": excluded as a document, whatever else matched.
    no_draft = world.save("no draft", query="receipt -draft", within=tax_dir)
    assert no_draft["file_count"] == 2
    assert "docs/tax/receipt-draft.txt" not in world.files(world.within("receipt", no_draft["id"]))
    only_types = world.save("pdfs anywhere", file_types=["pdf"])
    assert only_types["file_count"] == 1 and only_types["query"] == ""


def test_a_criteria_folder_follows_files_written_edited_and_deleted(world: World) -> None:
    live = world.root / "docs" / "live"
    folder = world.save("Live memos", query="memorandum", within=str(live))
    assert folder["file_count"] == 0

    def count() -> int:
        found = world.criteria("Live memos")
        assert found is not None
        return found["file_count"]

    put(live / "one.txt", "A memorandum on the budget.\n")
    put(live / "two.txt", "Another memorandum, on the staff.\n")
    wait_for(lambda: count() == 2, 60, 0.2, "both new files in the criteria folder")
    put(live / "one.txt", "Notes on the budget (no longer the word).\n")
    wait_for(lambda: count() == 1, 60, 0.2, "the edited file out of it")
    assert world.files(world.within("memorandum", folder["id"])) == {"docs/live/two.txt"}
    (live / "two.txt").unlink()
    wait_for(lambda: count() == 0, 60, 0.2, "the deleted file out of it")
    assert world.within("memorandum budget staff", folder["id"]).results == []


def test_a_document_ages_out_of_a_relative_window_with_no_event(world: World) -> None:
    memo = world.root / "docs" / "aging" / "memo.txt"
    docs_before = {f["name"]: f["files_indexed"] for f in world.listing().folders}
    mtime = memo.stat().st_mtime
    # In the window for MARGIN more seconds from now: long enough for the add to be answered on a busy machine.
    margin = 15
    window = int(time.time() - mtime) + margin
    folder = world.save("Recent memos", query="memo", modified_after=f"PT{window}S", within=str(memo.parent))
    assert folder["file_count"] == 1, folder
    assert world.files(world.within("quarterly meeting", folder["id"])) == {"docs/aging/memo.txt"}

    def aged_out() -> bool:
        found = world.criteria("Recent memos")
        return found is not None and found["file_count"] == 0

    wait_for(aged_out, margin + 60, 0.5, "the memo aged out of the window")
    assert world.within("quarterly meeting", folder["id"]).results == []
    assert memo.stat().st_mtime == mtime  # nothing touched the file: time alone moved it out
    assert {f["name"]: f["files_indexed"] for f in world.listing().folders} == docs_before


def test_criteria_folders_are_removed_by_name_and_with_their_path_folder(world: World) -> None:
    gone = world.save("Short-lived", query="receipt")
    removed = cli(world.kernel.root, "folders", "remove", "Short-lived").stdout
    assert "removed the criteria folder Short-lived" in removed
    assert world.criteria("Short-lived") is None
    assert world.code(SearchRequest("receipt", "keyword", 5, gone["id"]), SearchReply) == "invalid_smart_folder"
    assert world.within("receipt", world.listing().folders[0]["id"]).results  # the documents stay indexed

    spare = world.root / "spare"
    inside = world.save("Spare receipts", query="receipt", within=str(spare))
    everywhere = world.save("Every receipt", query="receipt")
    assert inside["file_count"] == 1
    reply: FolderRemoveReply = world.call(FolderRemoveRequest(str(spare)), FolderRemoveReply)
    assert reply.folder is not None and reply.documents_purged == 1
    assert [c["name"] for c in reply.criteria] == ["Spare receipts"]
    names = {c["name"] for c in world.listing().criteria}
    assert "Spare receipts" not in names and "Every receipt" in names
    assert (spare / "receipt-spare.txt").exists()  # files are never touched
    wait_for(
        lambda: (c := world.criteria("Every receipt")) is not None and c["file_count"] == everywhere["file_count"] - 1,
        30,
        0.2,
        "the spare receipt out of the folder spanning every Smart Folder",
    )
    assert world.code(FolderRemoveRequest("Spare receipts"), FolderRemoveReply) == "unknown_folder"


def test_a_criteria_folder_within_an_unregistered_path_is_refused(world: World) -> None:
    outside = world.root / "unregistered"
    refused = cli(
        world.kernel.root,
        "folders",
        "add-criteria",
        "--name",
        "Outside",
        "--query",
        "x",
        "--within",
        str(outside),
        check=False,
    )
    assert refused.returncode != 0 and "no registered Smart Folder" in refused.stderr, refused
    assert world.criteria("Outside") is None
    for within in (str(outside), "relative/path", str(world.root / "docs" / "tax" / "invoice-plumber.txt")):
        assert world.code(CriteriaAddRequest("Outside", "receipt", within=within), CriteriaAddReply) == "invalid_path"


def test_bad_criteria_get_typed_errors(world: World) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"name": "Nothing"}, "invalid_filter"),  # no criterion: it would be every document
        ({"name": "Exe", "file_types": ["exe"]}, "invalid_filter"),
        ({"name": "Soon", "modified_after": "soon"}, "invalid_filter"),
        ({"name": "Backwards", "modified_after": "2026-01-01", "modified_before": "2025-01-01"}, "invalid_filter"),
        ({"name": "Only exclusions", "query": "-draft"}, "invalid_query"),
        ({"name": "Punctuation", "query": "!!!"}, "invalid_query"),
        ({"name": " ", "query": "receipt"}, "bad_request"),
        ({"name": "x" * 201, "query": "receipt"}, "bad_request"),
    ]
    for kw, code in bad:
        name = kw.pop("name")
        assert world.code(CriteriaAddRequest(name, **kw), CriteriaAddReply) == code, (name, kw)
    world.save("Unique", query="receipt")
    assert world.code(CriteriaAddRequest("Unique", "invoice"), CriteriaAddReply) == "folder_overlap"


def test_durations_in_filters_count_back_from_now() -> None:
    roots = lambda: ["/data"]  # noqa: E731
    before = int(time.time())
    parsed = filters.parse(None, None, "P30D", "pt12h", roots)
    after = int(time.time())
    assert parsed.after_ns is not None and parsed.before_ns is not None
    assert (before - 30 * 86400) * 10**9 <= parsed.after_ns <= (after - 30 * 86400) * 10**9
    assert (before - 12 * 3600) * 10**9 <= parsed.before_ns <= (after - 12 * 3600) * 10**9
    for bad in ("P", "-P1D", "P1X", "30d"):
        with pytest.raises(JobError):
            filters.parse(None, None, bad, None, roots)


def test_the_summary_prompt_draws_on_a_criteria_folder_only(world: World) -> None:
    tax = world.criteria("Tax 2025") or world.save(
        "Tax 2025", query="receipt invoice", file_types=["pdf", "txt"], modified_after="2025-01-01"
    )

    async def summary() -> str:
        async with mc.http_client(world.url, world.token) as client:
            got = await client.get_prompt("summarise_folder", {"smart_folder_id": tax["id"]})
            return str(got.messages[0].content.text)  # type: ignore[union-attr]

    text = mc.run(summary)
    assert f'criteria Smart Folder "Tax 2025": the {len(TAX)} indexed documents' in text, text[:300]
    cited = {os.path.relpath(p, world.root) for p in re.findall(r"^\[\d+\] (/\S+) \(", text, re.MULTILINE)}
    assert cited and cited <= TAX, cited


def test_criteria_folders_outlive_an_indexer_restart(world: World) -> None:
    saved = world.criteria("Kept") or world.save("Kept", query="invoice", file_types=["txt"])
    assert saved["file_count"] == 3  # the plumber's, the roof's (no window here) and the car's
    old = world.kernel.worker("indexer")["pid"]
    cli(world.kernel.root, "restart", "indexer")
    wait_for(
        lambda: (
            world.kernel.worker("indexer")["pid"] not in (None, old)
            and world.kernel.worker("indexer")["state"] == "RUNNING"
        ),
        60,
        0.2,
        "a new indexer running",
    )
    kept = world.criteria("Kept")
    assert kept is not None and kept == saved
    assert world.files(world.within("invoice", kept["id"])) == {
        "docs/tax/invoice-plumber.txt",
        "docs/tax/invoice-2024.txt",
        "other/invoice-car.txt",
    }
