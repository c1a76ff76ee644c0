"""Search filters (file types, path glob, modification window) and reading around a chunk, against a real
kernel: Tantivy, usearch, SQLite and the embedding model, over the bus and through the MCP tools over HTTP.

The corpus is built so that a filter applied after ranking would fail: 60 Markdown logs match the query far
better than anything else, more than either side retrieves (max(4 * top_k, 40)), so only a search filtered
inside Tantivy and inside the vector search finds the text files and PDFs at all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    ReadDocumentReply,
    ReadDocumentRequest,
    SearchReply,
    SearchRequest,
    WatchSyncReply,
    WatchSyncRequest,
)
from foldermind.workers.indexer.search import filters
from foldermind.workers.indexer.storage.keyword.bm25 import TERM_SET, KeywordIndex, Where
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

LOGS = 60  # strong matches, more than a search's depth for top_k = 5
QUERY = "harbour crane"
MODES = ("keyword", "semantic", "hybrid")


def write_corpus(docs: Path, elsewhere: Path) -> None:
    for i in range(LOGS):
        put(
            docs / "logs" / f"crane{i:02d}.md",
            f"# Harbour crane log {i}\n\nThe harbour crane lifted containers; harbour crane cables checked, "
            f"crane brakes greased, harbour crane operator signed sheet {i}.\n",
            "2023-03-01",
        )
    for year in (2024, 2025):
        for m in range(1, 5):
            put(
                docs / "reports" / str(year) / f"yard{m}.txt",
                f"Yard report {year}-{m}: one harbour crane stood idle among trucks and forklifts.\n",
                f"{year}-0{m}-15",
            )
    for n in (1, 2):
        pdf = docs / "reports" / "2025" / f"survey{n}.pdf"
        make_pdf(pdf, [[f"Survey {n} of the quay."], ["A harbour crane was inspected on the quay."]])
        os.utime(pdf, (at("2025-06-01"), at("2025-06-01")))
    paragraphs = [
        f"Section {i} of the gazetteer.\n"
        + "\n".join(f"Entry {i}.{j} names a village by the river." for j in range(40))
        for i in range(8)
    ]
    put(docs / "gazetteer.txt", "\n\n".join(paragraphs) + "\n", "2022-05-05")
    put(docs / "other.txt", "A gazetteer elsewhere lists towns.\n", "2022-05-05")
    for i in range(3):
        put(elsewhere / f"dock{i}.txt", f"The dock's harbour crane number {i} was repaired.\n", "2025-02-02")


class World(KernelWorld):
    def __init__(self, kernel: RunningKernel, root: Path) -> None:
        super().__init__(kernel, root, "filters-test")
        self.docs, self.elsewhere = root / "docs", root / "elsewhere"
        self.url = self.token = ""

    def search(self, mode: str = "hybrid", query: str = QUERY, check_mode: bool = True, **kw: Any) -> SearchReply:
        return super().search(query, mode, check_mode, **kw)

    def tool(self, name: str, args: dict[str, Any]) -> Any:
        return mc.call(self.url, self.token, name, args)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    root = short_tmpdir("fmf-")
    # Searched and read through MCP and the CLI, never chatted with.
    config = merge(FAST_RESTART, NO_LLM, ONE_PARSER, {"mcp": {"port": 0, "rate_per_minute": 6000}})
    w = World(RunningKernel(root / "home", config), root)
    try:
        w.kernel.start()
        write_corpus(w.docs, w.elsewhere)
        w.add("docs", w.docs)
        w.add("elsewhere", w.elsewhere)
        wait_for(lambda: w.settled({"docs": LOGS + 12, "elsewhere": 3}), 240, 0.2, "both folders indexed and embedded")
        info = mc.mcp_info(w.kernel.root)
        w.url, w.token = str(info["url"]), mc.token_of(w.kernel.root)
        yield w
    finally:
        w.kernel.stop()
        remove_tree(root)


def files(reply: SearchReply, base: Path) -> list[str]:
    return [os.path.relpath(r["file_path"], base) for r in reply.results]


# ------------------------------------------------------------------------------------------------
# filters inside both searches


def test_unfiltered_keyword_search_is_all_markdown_logs_so_a_post_filter_would_find_nothing(world: World) -> None:
    top = files(world.search("keyword", top_k=LOGS), world.docs)
    assert len(top) == LOGS and all(f.startswith("logs/") for f in top), top


def test_a_type_filter_fills_top_k_when_enough_files_match(world: World) -> None:
    for mode in MODES:
        reply = world.search(mode, top_k=5, file_types=["txt"])
        got = [r["file_path"] for r in reply.results]
        assert len(got) == 5 and all(p.endswith(".txt") for p in got), (mode, got)
    keyword = world.search("keyword", top_k=5, file_types=["TXT", ".txt"])  # any case, a leading dot is forgiven
    assert keyword.total_matches == 8 + 3  # every yard report and every dock, not the logs'
    assert len(keyword.results) == 5


def test_a_filter_matching_fewer_than_top_k_returns_what_matches(world: World) -> None:
    for mode in MODES:
        reply = world.search(mode, top_k=10, file_types=["pdf"])
        names = sorted({Path(r["file_path"]).name for r in reply.results})
        assert names == ["survey1.pdf", "survey2.pdf"], (mode, names)
        assert all(r["file_path"].endswith(".pdf") for r in reply.results)
    pages = world.search("keyword", top_k=10, file_types=["pdf"])
    assert {r["location"].get("page") for r in pages.results} == {2}  # the page that says it, not page 1


def test_a_filter_matching_nothing_is_an_empty_result_not_an_error(world: World) -> None:
    empty: list[dict[str, Any]] = [
        {"file_types": ["docx"]},  # read by a parser, but no such file here
        {"modified_after": "2030-01-01"},
        {"path_glob": "nothing/**"},
        {"file_types": ["pdf"], "modified_before": "2025-01-01"},
    ]
    for kw in empty:
        for mode in MODES:
            reply = world.search(mode, **kw)
            assert reply.results == [] and reply.total_matches == 0, (mode, kw)


def test_path_glob_relative_to_the_folder_or_absolute(world: World) -> None:
    docs = world.docs
    for mode in MODES:
        got = files(world.search(mode, top_k=20, path_glob="reports/2025/*"), docs)
        assert got and all(f.startswith("reports/2025/") for f in got), (mode, got)
        assert {Path(f).name for f in got} == {"yard1.txt", "yard2.txt", "yard3.txt", "yard4.txt"} | {
            "survey1.pdf",
            "survey2.pdf",
        }
    deep = files(world.search("keyword", top_k=20, path_glob="**/*.{pdf,txt}"), docs)
    assert {Path(f).suffix for f in deep} == {".pdf", ".txt"} and not any(f.startswith("logs/") for f in deep)
    top_level = world.search("keyword", top_k=20, path_glob="*")  # * stays inside one segment, in every folder
    assert sorted(Path(r["file_path"]).name for r in top_level.results) == ["dock0.txt", "dock1.txt", "dock2.txt"]
    absolute = world.search("keyword", top_k=20, path_glob=f"{docs}/reports/202[4]/yard[12].txt")
    assert sorted(files(absolute, docs)) == ["reports/2024/yard1.txt", "reports/2024/yard2.txt"]


def test_modification_window_after_inclusive_before_exclusive(world: World) -> None:
    year = world.search("keyword", top_k=20, modified_after="2024-01-01", modified_before="2025-01-01")
    assert sorted(files(year, world.docs)) == [f"reports/2024/yard{m}.txt" for m in range(1, 5)]
    edge = world.search("keyword", top_k=20, modified_after="2024-03-15T00:00:00Z", modified_before="2024-04-15")
    assert files(edge, world.docs) == ["reports/2024/yard3.txt"]  # at the instant after: in; at before: out
    offset = world.search("keyword", top_k=20, modified_after="2025-06-01T02:00:00+02:00")  # = 00:00 UTC
    assert sorted({Path(r["file_path"]).name for r in offset.results}) == ["survey1.pdf", "survey2.pdf"]
    for mode in ("semantic", "hybrid"):
        recent = world.search(mode, top_k=20, modified_after="2025-01-01")
        assert recent.results and all(r["modified_at"] >= at("2025-01-01") for r in recent.results), mode


def test_filters_combine_with_each_other_and_with_a_folder(world: World) -> None:
    for mode in MODES:
        both = world.search(mode, top_k=10, file_types=["txt"], path_glob="reports/**", modified_after="2025-01-01")
        assert sorted(files(both, world.docs)) == [f"reports/2025/yard{m}.txt" for m in range(1, 5)], mode
        scoped = world.search(mode, top_k=10, file_types=["txt"], folder_id=world.folder_ids["elsewhere"])
        assert sorted(Path(r["file_path"]).name for r in scoped.results) == ["dock0.txt", "dock1.txt", "dock2.txt"]
        none = world.search(mode, file_types=["pdf"], folder_id=world.folder_ids["elsewhere"])
        assert none.results == [], mode


def test_bad_filter_values_are_invalid_filter(world: World) -> None:
    bad: list[dict[str, Any]] = [
        {"file_types": ["p df"]},
        {"file_types": ["exe"]},  # no parser reads it: a typo would otherwise look like "no results"
        {"file_types": [""]},
        {"file_types": ["x"] * 33},
        {"path_glob": "/etc/**"},  # outside every Smart Folder
        {"path_glob": "a\x00b"},
        {"path_glob": "   "},
        {"modified_after": "yesterday"},
        {"modified_before": "2025-13-01"},
        {"modified_after": "2025-01-01", "modified_before": "2025-01-01"},
        {"modified_after": "2026-01-01", "modified_before": "2025-01-01"},
    ]
    for kw in bad:
        assert world.code(SearchRequest(QUERY, "hybrid", **kw), SearchReply) == "invalid_filter", kw


def test_filtered_ranking_is_the_unfiltered_one_restricted(world: World) -> None:
    """The filter selects, it does not re-rank: the admitted chunks keep their unfiltered order and scores."""
    for mode in ("keyword", "semantic"):
        everything = world.search(mode, top_k=200)
        expected = [(r["chunk_id"], r["score"]) for r in everything.results if r["file_path"].endswith(".txt")]
        filtered = world.search(mode, top_k=len(expected), file_types=["txt"])
        assert [r["chunk_id"] for r in filtered.results] == [c for c, _ in expected], mode
        assert [r["score"] for r in filtered.results] == pytest.approx([s for _, s in expected], abs=1e-4)


def test_filters_through_the_mcp_tool_and_the_cli(world: World) -> None:
    out = world.tool("search_documents", {"query": QUERY, "top_k": 5, "file_types": ["pdf", "txt"]})
    assert not out.is_error, out.content
    results = out.structured_content["results"]
    assert len(results) == 5 and all(r["file_name"].endswith((".pdf", ".txt")) for r in results)
    dated = world.tool(
        "search_documents",
        {"query": QUERY, "path_glob": "reports/**", "modified_after": "2024-01-01", "modified_before": "2024-02-01"},
    )
    assert [r["file_name"] for r in dated.structured_content["results"]] == ["yard1.txt"]
    dated_args = ("search", QUERY, "--path-glob", "reports/**", "--modified-after", "2024-01-01")
    dated_args += ("--modified-before", "2024-02-01")
    none = world.tool("search_documents", {"query": QUERY, "file_types": ["docx"]})
    assert not none.is_error and none.structured_content["results"] == []
    for args in ({"file_types": ["exe"]}, {"modified_after": "soon"}, {"path_glob": "/etc/*"}):
        assert mc.error_code(world.tool("search_documents", {"query": QUERY, **args})) == "INVALID_FILTER", args
    assert mc.error_code(world.tool("search_documents", {"query": QUERY, "file_types": ["x" * 21]})) == (
        "INVALID_ARGUMENT"
    )
    shown = cli(world.kernel.root, "search", QUERY, "--types", "pdf", "--top-k", "10", "--json").stdout
    assert "survey1.pdf" in shown and "crane00.md" not in shown and "yard1.txt" not in shown
    # Times in the CLI's JSON are the MCP tool's: ISO 8601, not epoch seconds.
    by_cli = json.loads(cli(world.kernel.root, *dated_args, "--json").stdout)["results"]
    assert [(r["file_path"], r["modified_at"]) for r in by_cli] == [
        (r["file_path"], r["modified_at"]) for r in dated.structured_content["results"]
    ]
    assert by_cli[0]["modified_at"].startswith("2024-01-")
    listed = json.loads(cli(world.kernel.root, "folders", "list", "--json").stdout)
    assert all(datetime.fromisoformat(f["added_at"]) for f in listed if f["kind"] == "path")


def test_filter_parsing_in_process() -> None:
    roots = lambda: ["/data/docs"]  # noqa: E731
    parsed = filters.parse(["PDF", ".txt"], "**/*.md", "2025-01-01", "2025-02-01T12:30:00+01:00", roots)
    assert parsed.types == frozenset({"pdf", "txt"}) and parsed.glob == "**/*.md"
    assert parsed.after_ns == int(at("2025-01-01")) * 10**9
    assert parsed.before_ns == int(at("2025-02-01T11:30:00")) * 10**9
    assert not filters.parse(None, "", "", "", roots).active
    assert filters.parse(None, "/data/docs/a/**", None, None, roots).glob == "/data/docs/a/**"
    assert filters.parse(None, "/data/*/x", None, None, roots).glob  # a glob around the folder may reach in
    with pytest.raises(JobError):
        filters.parse(None, "/datax/**", None, None, roots)


# ------------------------------------------------------------------------------------------------
# read_document around a chunk


def chunks_of(world: World, name: str) -> list[Any]:
    """Every chunk of the gazetteer (each holds the word), in document order."""
    reply = world.search("keyword", "gazetteer village", top_k=100, path_glob=name)
    hits = sorted(reply.results, key=lambda r: r["chunk_index"])
    assert [h["chunk_index"] for h in hits] == list(range(len(hits)))
    return hits


def read(world: World, path: Path, **kw: Any) -> ReadDocumentReply:
    reply: ReadDocumentReply = world.call(ReadDocumentRequest(str(path), **kw), ReadDocumentReply)
    return reply


def test_reading_around_a_chunk_in_chunks_and_in_lines(world: World) -> None:
    path = world.docs / "gazetteer.txt"
    hits = chunks_of(world, "gazetteer.txt")
    assert len(hits) >= 5, len(hits)
    whole = read(world, path)
    lines = whole.text.split("\n")

    def span(first: dict[str, Any], last: dict[str, Any]) -> tuple[int, int]:
        return first["location"]["line_start"], last["location"]["line_end"]

    mid = len(hits) // 2
    around = read(world, path, chunk_id=hits[mid]["chunk_id"], before=1, after=1)
    assert (around.start_line, around.end_line) == span(hits[mid - 1], hits[mid + 1])
    assert around.text == "\n".join(lines[around.start_line - 1 : around.end_line])
    alone = read(world, path, chunk_id=hits[mid]["chunk_id"])
    assert (alone.start_line, alone.end_line) == span(hits[mid], hits[mid])
    first = read(world, path, chunk_id=hits[0]["chunk_id"], before=3, after=1)  # nothing before the first
    assert (first.start_line, first.end_line) == span(hits[0], hits[1]) and first.start_line == 1
    last = read(world, path, chunk_id=hits[-1]["chunk_id"], before=1, after=5)  # nothing after the last
    assert (last.start_line, last.end_line) == span(hits[-2], hits[-1])
    assert last.end_line == whole.total_lines and not last.truncated
    by_lines = read(world, path, chunk_id=hits[mid]["chunk_id"], before=2, after=3, unit="lines")
    assert (by_lines.start_line, by_lines.end_line) == (
        hits[mid]["location"]["line_start"] - 2,
        hits[mid]["location"]["line_end"] + 3,
    )
    edge = read(world, path, chunk_id=hits[-1]["chunk_id"], before=10**6, after=10**6, unit="lines")
    assert (edge.start_line, edge.end_line) == (1, whole.total_lines)


def test_reading_around_a_chunk_refuses_bad_requests(world: World) -> None:
    path = world.docs / "gazetteer.txt"
    hits = chunks_of(world, "gazetteer.txt")
    other = world.search("keyword", "gazetteer towns", path_glob="other.txt").results[0]["chunk_id"]
    err = world.code
    assert err(ReadDocumentRequest(str(path), chunk_id=other), ReadDocumentReply) == "unknown_chunk"
    assert err(ReadDocumentRequest(str(path), chunk_id=2**62), ReadDocumentReply) == "unknown_chunk"
    cid = hits[0]["chunk_id"]
    assert err(ReadDocumentRequest(str(path), start_line=3, chunk_id=cid), ReadDocumentReply) == "bad_request"
    assert err(ReadDocumentRequest(str(path), chunk_id=cid, before=-1), ReadDocumentReply) == "bad_request"
    assert err(ReadDocumentRequest(str(path), chunk_id=cid, unit="pages"), ReadDocumentReply) == "bad_request"
    args = {"file_path": str(path), "chunk_id": cid}
    assert mc.error_code(world.tool("read_document", {**args, "start_line": 2})) == "INVALID_ARGUMENT"
    assert mc.error_code(world.tool("read_document", {"file_path": str(path), "after": 2})) == "INVALID_ARGUMENT"
    assert mc.error_code(world.tool("read_document", {**args, "unit": "pages"})) == "INVALID_ARGUMENT"


def test_read_document_with_a_chunk_id_alone_reads_that_chunk_s_file(world: World) -> None:
    path = world.docs / "gazetteer.txt"
    hit = chunks_of(world, "gazetteer.txt")[1]
    with_path = world.tool("read_document", {"file_path": str(path), "chunk_id": hit["chunk_id"], "after": 1})
    alone = world.tool("read_document", {"chunk_id": hit["chunk_id"], "after": 1})
    assert not alone.is_error, alone.content
    assert alone.structured_content == with_path.structured_content
    assert alone.structured_content["file_path"] == str(path)
    unknown = world.tool("read_document", {"chunk_id": 2**62})
    assert mc.error_code(unknown) == "UNKNOWN_CHUNK" and "search again" in str(unknown.content[0].text)
    nothing = world.tool("read_document", {"start_line": 2})
    assert mc.error_code(nothing) == "INVALID_ARGUMENT"
    assert "give file_path" in str(nothing.content[0].text) and "Field required" not in str(nothing.content[0].text)
    assert world.code(ReadDocumentRequest("", chunk_id=hit["chunk_id"] + 10**9), ReadDocumentReply) == "unknown_chunk"


def test_a_chunk_id_goes_stale_when_its_file_is_edited(world: World) -> None:
    path = world.elsewhere / "dock1.txt"
    hit = world.search("keyword", "repaired", folder_id=world.folder_ids["elsewhere"], path_glob="dock1.txt")
    old = hit.results[0]["chunk_id"]
    via_tool = world.tool("read_document", {"file_path": str(path), "chunk_id": old, "before": 1, "after": 1})
    assert not via_tool.is_error and "repaired" in via_tool.structured_content["text"]
    path.write_text("The dock's harbour crane number 1 was replaced by a new one.\n")

    def rewritten() -> bool:
        found = world.search("keyword", "replaced", folder_id=world.folder_ids["elsewhere"]).results
        return any(r["file_path"] == str(path) for r in found)

    wait_for(rewritten, 60, 0.2, "the edited file indexed again")
    assert world.code(ReadDocumentRequest(str(path), chunk_id=old), ReadDocumentReply) == "unknown_chunk"
    stale = world.tool("read_document", {"file_path": str(path), "chunk_id": old})
    assert mc.error_code(stale) == "UNKNOWN_CHUNK"
    assert "changed since the search" in str(stale.content[0].text)


def test_keyword_filter_of_many_documents_in_process(tmp_path: Path) -> None:
    """Past one term set (bm25.TERM_SET ids) the filter is several, or'ed; kept and excluded sets count right."""
    index = KeywordIndex(tmp_path / "tantivy")
    n = 2 * TERM_SET + 500
    rows = [
        {"id": i + 1, "doc_id": i + 1, "text": f"lighthouse keeper {i}", "heading": None, "folder_id": "f"}
        for i in range(n)
    ]
    index.replace([], rows)
    index.commit()
    kept = list(range(1, n + 1, 2))  # every other document: more than two term sets
    hits, total = index.search("lighthouse", 10 * n, None, docs=(kept, False))
    assert total == len(kept) and {h.chunk_id for h in hits} == set(kept)
    hits, total = index.search("lighthouse", 10 * n, None, docs=(kept, True))
    assert total == n - len(kept) and not {h.chunk_id for h in hits} & set(kept)
    scores = {h.chunk_id: h.score for h in index.search("lighthouse keeper 7", 10 * n)[0]}
    filtered = {h.chunk_id: h.score for h in index.search("lighthouse keeper 7", 10 * n, None, docs=(kept, False))[0]}
    assert filtered == pytest.approx({c: s for c, s in scores.items() if c in set(kept)})  # scored 0
    assert index.search("lighthouse", 10, None, docs=([], True))[1] == n  # nothing to exclude: everything
    index.close()


def test_types_and_a_window_are_applied_by_tantivys_own_fields_in_process(tmp_path: Path) -> None:
    """A filter without a glob reaches Tantivy as its ``ext`` and ``mtime`` fields (bm25.Where): the same
    documents as the id set would admit, after inclusive and before exclusive, and no score added."""
    index = KeywordIndex(tmp_path / "tantivy")
    names = ["a.txt", "b.TXT", "c.pdf", "d.md", "e"]
    rows = [
        {"id": i + 1, "doc_id": i + 1, "text": f"harbour pilot {i}", "heading": None, "folder_id": "f",
         "path": f"/docs/{name}", "mtime_ns": (i + 1) * 1_000}
        for i, name in enumerate(names)
    ]  # fmt: skip
    index.replace([], rows)
    index.commit()

    def ids(where: Where) -> set[int]:
        return {h.chunk_id for h in index.search("harbour", 10, None, where=where)[0]}

    assert ids(Where(frozenset({"txt"}))) == {1, 2}  # the suffix in any case
    assert ids(Where(frozenset({"pdf", "md"}))) == {3, 4}
    assert ids(Where(after_ns=2_000)) == {2, 3, 4, 5} and ids(Where(before_ns=2_000)) == {1}
    assert ids(Where(frozenset({"txt", "pdf"}), after_ns=2_000, before_ns=3_001)) == {2, 3}
    assert ids(Where(frozenset({"doc"}))) == set()
    plain = {h.chunk_id: h.score for h in index.search("harbour pilot 3", 10)[0]}
    kept = {h.chunk_id: h.score for h in index.search("harbour pilot 3", 10, None, where=Where(after_ns=3_000))[0]}
    assert kept == pytest.approx({c: s for c, s in plain.items() if c >= 3})
    index.close()


def test_a_file_rewritten_unchanged_moves_into_a_date_window_in_keyword_search(world: World) -> None:
    """The same bytes written again (a new mtime) are not parsed again, but Tantivy's ``mtime`` field must follow
    the file, or the keyword side would filter by the old date (the journal has Tantivy read the chunks again)."""
    path = world.elsewhere / "ledger.txt"
    text = "Quarterly ledger reconciliation for the harbour office.\n"
    put(path, text, "2019-05-01")
    world.client.request("watcher", WatchSyncRequest(), WatchSyncReply, timeout=60)

    def found(**window: str) -> bool:
        return "ledger.txt" in {Path(r["file_path"]).name for r in world.search("keyword", "ledger", **window).results}

    try:
        wait_for(lambda: found(modified_before="2020-01-01"), 60, 0.2, "the ledger indexed with its 2019 date")
        chunk = world.search("keyword", "ledger").results[0]["chunk_id"]
        path.write_text(text)  # dated now
        wait_for(lambda: found(modified_after="P1D"), 60, 0.2, "the rewritten ledger inside the last day")
        assert not found(modified_before="2020-01-01")
        assert world.search("keyword", "ledger").results[0]["chunk_id"] == chunk  # not parsed again
    finally:
        path.unlink()
        world.client.request("watcher", WatchSyncRequest(), WatchSyncReply, timeout=60)
        wait_for(lambda: not found(), 60, 0.2, "the ledger gone")
