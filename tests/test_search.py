"""Search and the data behind the MCP tools, against a real kernel: hybrid search and its fusions,
hostile queries, snippets, folder scoping on both sides, read_document, find_similar,
get_document_summary and index_status. Pure parts (fusion, snippets, text rebuilding, scoped
vector search, query building) are checked in-process too, where many cases are cheap."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import string
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    IndexStatusReply,
    IndexStatusRequest,
    ReadDocumentReply,
    ReadDocumentRequest,
    SearchReply,
    SearchRequest,
    SimilarReply,
    SimilarRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.workers.embedding import onnx_model
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.fusion_evidence import idf_share
from foldermind.workers.indexer.search.scoped import ScopedVectors
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.search.snippets import snippet
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.chunks import ChunkPos
from foldermind.workers.indexer.storage.extracted import read_lines, rebuild
from foldermind.workers.indexer.storage.keyword.bm25 import MASK_TERMS, KeywordIndex
from foldermind.workers.indexer.storage.keyword.languages import stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import idf, query_tokens, stem, text_terms
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import document_text, parse_md, parse_txt
from tests.config import merge
from tests.filemakers import make_pdf
from tests.helpers import (
    FAST_RESTART,
    MODEL_CACHE,
    ONE_PARSER,
    SEARCH_OVER_BUS,
    RunningKernel,
    only_workers,
    remove_tree,
    short_tmpdir,
    wait_for,
)
from tests.world import KernelWorld

MAX_BYTES = 50 * 1024 * 1024
NASTY = [
    "AND",
    "OR",
    "NOT",
    "AND OR NOT",
    '"',
    '"unclosed phrase',
    "zanzibar*",
    "*",
    "?",
    "wh?t",
    "[(zanzibar",
    "{a TO z]",
    "text:zanzibar",
    ":",
    "title:",
    "zanzibar^2",
    "^",
    "zanzibar~1",
    "~",
    "-zanzibar",
    "-",
    "+zanzibar",
    "!!!",
    "!",
    "\\",
    "a" * 300,
    "x" * 1000,
    "zanzibar " * 110,
    "/regex.*/",
    "'single' `tick`",
    "NULL\x00byte",
    "emoji 🦓 zebra",
    "İstanbul ß ﬁ",
    "東京",
    "a_b c-d e.f",
    "&& || !",
    "(((((",
    "))))",
    "field:[* TO *]",
]


# ------------------------------------------------------------------------------------------------
# the corpus and the kernel (one for the whole module: starting one and embedding costs seconds)


def write_docs(root: Path, outside: Path) -> None:
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("The quarterly planning meeting discussed zanzibar logistics.\n" * 3)
    (root / "guide.md").write_text(
        "# Setup\n\nIntro text.\n\n## Windows\n\nInstall the frobnicator with the wizard.\n\n"
        "## Linux\n\nUse the package manager for quokka tooling.\n"
    )
    filler = " ".join(f"Paragraph filler sentence number {i} says little of note." for i in range(12))
    (root / "late.txt").write_text(
        f"{filler} Then the xylophonist arrived with mallets. {filler} Finally the xylophonist left.\n"
    )
    lines = []
    for i in range(1, 301):
        if i % 25 == 13:
            lines.append("")
        elif i % 7 == 0:
            lines.append(f"\tline {i:03d} has a tab and trailing words  ")
        else:
            lines.append(f"line {i:03d} of the ledger lists ostrich feathers and amount {i * 3}")
    (root / "long.txt").write_text("\n".join(lines) + "\n")
    (root / "wide.txt").write_text("W" * 50 + " " + "wide " * 300 + "\n")
    make_pdf(root / "report.pdf", [["Executive summary about budgets."], ["Appendix on narwhal migration."]])
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (root / "empty.txt").write_text("")
    (root / "twin_a.txt").write_text("Glaciers retreat as the climate warms; meltwater lakes form below the ice.\n")
    (root / "twin_b.txt").write_text("Warming temperatures shrink glaciers, leaving lakes of meltwater behind.\n")
    outside.write_text("Secret outside text about basilisks.\n")
    (root / "escape.txt").symlink_to(outside)
    (root / "alias.txt").symlink_to(root / "notes.txt")
    (root / "sub").mkdir()


def write_big(root: Path, n: int) -> None:
    root.mkdir(parents=True)
    moods = ["sleepy", "playful", "curious", "fluffy", "tiny", "striped", "grey", "ginger"]
    for i in range(n):
        (root / f"kitten{i:03d}.txt").write_text(
            f"A {moods[i % len(moods)]} kitten number {i} plays with a ball of yarn on the sofa.\n"
        )


def write_little(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "pets.txt").write_text("Our neighbour's young cat naps on the sofa and chases string all afternoon.\n")
    (root / "pasta.txt").write_text("Boil the pasta in salted water, then toss it with garlic and olive oil.\n")
    (root / "tax.txt").write_text("File the annual tax return before the deadline to avoid a penalty.\n")


class World(KernelWorld):
    def __init__(self, kernel: RunningKernel, root: Path) -> None:
        super().__init__(kernel, root, "search-test")
        self.docs, self.big, self.little = root / "docs", root / "big", root / "little"
        self.outside = root / "outside.txt"

    def search(self, query: str, mode: str = "hybrid", check_mode: bool = False, **kw: Any) -> SearchReply:
        return super().search(query, mode, check_mode, **kw)

    def settled(
        self, expected: Mapping[str, int] | int, count: str = "files_total", embedded: bool = True, keyword: bool = True
    ) -> bool:
        return super().settled(expected, count, embedded, keyword)


BIG = 150


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    root = short_tmpdir("fms-")
    w = World(RunningKernel(root, merge(FAST_RESTART, SEARCH_OVER_BUS)), root)
    try:
        w.kernel.start()
        write_docs(w.docs, w.outside)
        write_big(w.big, BIG)
        write_little(w.little)
        w.add("docs", w.docs)
        w.add("big", w.big)
        w.add("little", w.little)
        expected = {"docs": 11, "big": BIG, "little": 3}
        wait_for(lambda: w.settled(expected), 180, 0.2, "every folder indexed and embedded")
        yield w
    finally:
        w.kernel.stop()
        remove_tree(root)


def names(reply: SearchReply) -> list[str]:
    return [r["file_name"] for r in reply.results]


# ------------------------------------------------------------------------------------------------
# search.request


def test_every_mode_fills_hits_timings_and_locations(world: World) -> None:
    docs_id = world.folder_ids["docs"]
    for mode in ("keyword", "semantic", "hybrid"):
        reply = world.search("frobnicator wizard", mode, top_k=5)
        assert reply.mode_used == mode and reply.note is None
        assert set(reply.timings) == {"embed", "keyword", "vector", "fuse", "rows"}
        assert all(v >= 0 for v in reply.timings.values())
        top = reply.results[0]
        assert top["file_name"] == "guide.md", (mode, names(reply))
        assert top["folder_id"] == docs_id and top["smart_folder"] == "docs"
        assert top["chunk_index"] == 1  # Setup / Windows / Linux: the second chunk
        assert top["location"]["heading"] == "Setup > Windows"
        assert top["location"]["line_start"] <= top["location"]["line_end"]
        assert "frobnicator" in top["snippet"]
        assert 0 < len(reply.results) <= 5
    keyword = world.search("frobnicator", "keyword")
    assert keyword.timings["embed"] == 0 and keyword.timings["vector"] == 0 and keyword.timings["keyword"] > 0
    pdf = world.search("narwhal", "keyword").results[0]
    assert pdf["file_name"] == "report.pdf" and pdf["location"]["page"] == 2 and pdf["chunk_index"] == 1


def test_both_fusions_and_the_default(world: World) -> None:
    rrf = world.search("frobnicator installation", fusion="rrf")
    weighted = world.search("frobnicator installation", fusion="weighted")
    blend = world.search("frobnicator installation", fusion="blend")
    by_evidence = world.search("frobnicator installation", fusion="evidence")
    default = world.search("frobnicator installation")
    assert names(rrf)[0] == names(weighted)[0] == names(blend)[0] == names(by_evidence)[0] == "guide.md"
    assert all(r["score"] <= 1 for r in by_evidence.results)  # convex combinations of 0..1 scores, less repeats
    assert all(r["score"] <= 2 / 61 + 1e-6 for r in rrf.results)  # two lists, 1 / (60 + rank) each
    assert weighted.results[0]["score"] == pytest.approx(1.0)  # first in both lists: 1 in each
    assert all(0 <= r["score"] <= 1 for r in weighted.results)
    assert [r["chunk_id"] for r in default.results] == [r["chunk_id"] for r in by_evidence.results]  # the default
    err = world.error(SearchRequest("frobnicator", "hybrid", fusion="borda"), SearchReply)
    assert err.code == "invalid_query"


def test_nasty_queries_never_fail(world: World) -> None:
    for query in NASTY:
        for mode in ("keyword", "hybrid"):
            reply = world.search(query, mode)
            assert reply.mode_used == mode, query
    assert world.search("!!!", "hybrid").results == []  # nothing searchable: no results, no error
    assert world.search('"*?"', "semantic").results == []
    assert set(names(world.search("zanzibar* -", "keyword"))) == {"notes.txt", "alias.txt"}
    for bad in ("", "   ", "\n\t", "q" * 1001):
        assert world.error(SearchRequest(bad, "hybrid"), SearchReply).code == "invalid_query"
    assert world.error(SearchRequest("x", "fuzzy"), SearchReply).code == "invalid_query"
    assert world.error(SearchRequest("x", "hybrid", folder_id="no-such-folder"), SearchReply).code == (
        "invalid_smart_folder"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(min_size=1, max_size=200))
def test_any_text_is_a_query_or_invalid_query(world: World, query: str) -> None:
    try:
        reply = world.search(query, "hybrid", top_k=3)
    except JobError as exc:
        assert exc.code == "invalid_query" and not query.strip()
        return
    assert reply.mode_used == "hybrid" and len(reply.results) <= 3


def test_snippets_hold_a_query_term_for_keyword_and_semantic_hits(world: World) -> None:
    for mode in ("keyword", "semantic", "hybrid"):
        hits = [
            r for r in world.search("xylophonists arriving", mode, top_k=50).results if r["file_name"] == "late.txt"
        ]
        assert hits, mode
        for hit in hits:
            # In the first chunk the word lies ~700 characters in: the snippet moved there (stemmed match).
            assert "xylophonist" in hit["snippet"], (mode, hit["snippet"])
            assert len(hit["snippet"]) <= 240 and "<" not in hit["snippet"]
    semantic = world.search("kittens playing with yarn", "semantic", top_k=3).results
    assert all("yarn" in r["snippet"] or "kitten" in r["snippet"] for r in semantic)


def test_folder_scope_is_applied_inside_both_searches(world: World) -> None:
    little = world.folder_ids["little"]
    # Every chunk of the big folder is nearer to this query than anything in the little one, so a
    # search that scoped after cutting to depth would find nothing there.
    unscoped = world.search("kittens chasing yarn", "semantic", top_k=50)
    assert all(r["smart_folder"] == "big" for r in unscoped.results)
    for mode in ("semantic", "hybrid"):
        scoped = world.search("kittens chasing yarn", mode, top_k=3, folder_id=little)
        assert scoped.mode_used == mode
        assert names(scoped)[0] == "pets.txt", (mode, names(scoped))
        assert {r["folder_id"] for r in scoped.results} == {little}
    # The scoped ranking is the exact one: the unscoped neighbours of the whole index, filtered.
    everything = world.search("kittens chasing yarn", "semantic", top_k=200)
    expected = [(r["chunk_id"], r["score"]) for r in everything.results if r["folder_id"] == little]
    scoped = world.search("kittens chasing yarn", "semantic", top_k=3, folder_id=little)
    assert [c for c, _ in expected] == [r["chunk_id"] for r in scoped.results]
    assert [s for _, s in expected] == pytest.approx([r["score"] for r in scoped.results], abs=1e-4)
    # Keyword: "sofa" is in every big file too; the scope is a Tantivy filter, not a cut.
    assert names(world.search("sofa", "keyword", top_k=1, folder_id=little)) == ["pets.txt"]
    by_path = world.search("sofa", "keyword", folder_id=str(world.little))  # a folder's path works too
    assert names(by_path) == ["pets.txt"]


# ------------------------------------------------------------------------------------------------
# doc.read.request


def read(world: World, path: Path | str, *args: Any) -> ReadDocumentReply:
    reply: ReadDocumentReply = world.call(ReadDocumentRequest(str(path), *args), ReadDocumentReply)
    return reply


def test_read_document_rebuilds_the_parsers_text_exactly(world: World) -> None:
    for name in ("long.txt", "guide.md", "notes.txt", "report.pdf", "late.txt", "wide.txt"):
        path = world.docs / name
        expected = document_text(path, MAX_BYTES).rstrip()  # trailing whitespace is in no chunk
        whole = read(world, path)
        assert whole.text == expected, name
        assert whole.total_lines == expected.count("\n") + 1 and not whole.truncated
        assert whole.start_line == 1 and whole.end_line == whole.total_lines


def test_read_document_ranges_and_truncation(world: World) -> None:
    path = world.docs / "long.txt"
    lines = path.read_text().split("\n")
    part = read(world, path, 140, 160)
    assert part.text == "\n".join(lines[139:160]) and (part.start_line, part.end_line) == (140, 160)
    assert not part.truncated and part.total_lines == 300
    assert read(world, path, 300).text == lines[299]
    past = read(world, path, 295, 400)
    assert past.text == "\n".join(lines[294:300]) and past.end_line == 300 and past.truncated
    beyond = read(world, path, 301)
    assert beyond.text == "" and beyond.end_line == 300 and not beyond.truncated
    cut = read(world, path, 10, None, 200)
    assert cut.truncated and len(cut.text) <= 200 and cut.text == "\n".join(lines[9 : cut.end_line])
    assert 10 < cut.end_line < 20  # whole lines only
    wide = read(world, world.docs / "wide.txt", 1, 1, 30)
    assert wide.text == "W" * 30 and wide.truncated  # one line longer than the budget: its start
    empty = read(world, world.docs / "empty.txt")
    assert (empty.text, empty.total_lines, empty.truncated) == ("", 0, False)
    alias = read(world, world.docs / "alias.txt")  # a symlink inside the folder: the file it names
    assert alias.file_path == str(world.docs / "notes.txt")
    for bad in ((0,), (5, 4), (1, None, 0)):
        assert world.error(ReadDocumentRequest(str(path), *bad), ReadDocumentReply).code == "bad_request"


def test_read_document_refuses_paths_outside_and_files_not_indexed(world: World) -> None:
    def code(path: str) -> str:
        return world.error(ReadDocumentRequest(path), ReadDocumentReply).code

    assert code("notes.txt") == "invalid_path"  # relative
    assert code(f"file://{world.docs}/notes.txt") == "invalid_path"
    assert code(f"{world.docs}/sub/../notes.txt") == "invalid_path"
    assert code(f"{world.docs}/notes.txt\x00") == "invalid_path"
    assert code(str(world.outside)) == "invalid_path"
    assert code(str(world.docs / "escape.txt")) == "invalid_path"  # symlink pointing outside
    assert code(str(world.docs / "sub")) == "invalid_path"  # a folder
    assert code(str(world.docs / "missing.txt")) == "invalid_path"
    assert code("/etc/passwd") == "invalid_path"
    err = world.error(ReadDocumentRequest(str(world.docs / "broken.pdf")), ReadDocumentReply)
    assert err.code == "file_not_indexed" and "failed" in err.info.message
    hidden = world.docs / ".hidden.txt"
    hidden.write_text("never indexed")
    assert world.error(ReadDocumentRequest(str(hidden)), ReadDocumentReply).code == "file_not_indexed"


# ------------------------------------------------------------------------------------------------
# doc.similar.request, doc.summary.request, index.status.request


def test_find_similar_uses_stored_vectors_one_hit_per_document(world: World) -> None:
    reply: SimilarReply = world.call(SimilarRequest(str(world.docs / "twin_a.txt"), 5), SimilarReply)
    files = [r["file_path"] for r in reply.results]
    assert files[0] == str(world.docs / "twin_b.txt")
    assert str(world.docs / "twin_a.txt") not in files and len(files) == len(set(files)) == 5
    assert [r["score"] for r in reply.results] == sorted((r["score"] for r in reply.results), reverse=True)
    kitten = world.call(SimilarRequest(str(world.big / "kitten000.txt"), 3), SimilarReply)
    assert all(r["smart_folder"] == "big" for r in kitten.results)
    code = world.error(SimilarRequest(str(world.docs / "broken.pdf")), SimilarReply).code
    assert code == "file_not_indexed"
    assert world.error(SimilarRequest(str(world.outside)), SimilarReply).code == "invalid_path"


def test_summary_of_an_indexed_file_failed_files_have_none_and_paths_are_checked_first(world: World) -> None:
    reply = world.call(SummaryRequest(str(world.docs / "notes.txt")), SummaryReply)
    assert reply.analysis["file_path"] == str(world.docs / "notes.txt") and reply.analysis["category"] == "general"
    err = world.error(SummaryRequest(str(world.docs / "broken.pdf")), SummaryReply)
    assert err.code == "file_not_analyzed" and "could not be indexed" in err.info.message  # and why
    assert "(failed: corrupt PDF" in err.info.message and "folders show" in err.info.message, err.info.message
    for bad in (str(world.outside), str(world.docs / "escape.txt"), "notes.txt", "/etc/passwd"):
        assert world.error(SummaryRequest(bad), SummaryReply).code == "invalid_path", bad


def test_index_status_reports_totals_folders_model_and_failures(world: World) -> None:
    status: IndexStatusReply = world.call(IndexStatusRequest(), IndexStatusReply)
    totals = status.totals
    counts = ("files_total", "files_indexed", "files_failed", "files_skipped", "files_pending", "files_unsupported")
    assert set(totals) == {*counts, "chunks", "chunks_embedded"}
    assert totals["files_unsupported"] == sum(status.unsupported.values())
    assert totals["files_total"] == sum(f["files_total"] for f in status.folders)
    assert totals["chunks"] == sum(f["chunks"] for f in status.folders) == totals["chunks_embedded"]
    assert totals["files_failed"] == 1 and totals["files_indexed"] == 10 + BIG + 3
    assert {f["name"] for f in status.folders} == {"docs", "big", "little"}
    assert status.embedding["model"] == "all-MiniLM-L6-v2" and status.embedding["dim"] == 384
    assert status.embedding["state"] == "ready"
    failure = status.recent_failures[0]
    assert failure["path"] == str(world.docs / "broken.pdf") and failure["status"] == "failed"
    assert failure["error"] and failure["folder_id"] == world.folder_ids["docs"]
    assert world.call(IndexStatusRequest(max_failures=0), IndexStatusReply).recent_failures == []


def test_local_query_vectors_equal_the_embedders(world: World) -> None:
    """The indexer's own query model and the embedder over the bus (its fallback) give one vector."""
    endpoint = world.kernel.home.bus_endpoint
    remote = QueryEncoder(
        SearchPolicy(query_encoder="embedder"), IngestPolicy(), endpoint, "test-remote", cache_dir=MODEL_CACHE
    )
    local = QueryEncoder(
        SearchPolicy(query_encoder="local"), IngestPolicy(), endpoint, "test-local", cache_dir=MODEL_CACHE
    )
    key = f"all-MiniLM-L6-v2 {onnx_model.precision_label(IngestPolicy().embed_quantize)}"  # the index's vectors
    try:
        local.start()

        def from_embedder() -> tuple[Any] | None:
            vector, _ = remote.encode("kittens chasing yarn", 384, key)
            return None if vector is None else (vector,)

        # The embedder left once the world was indexed (released for the llm's summaries): the first request
        # starts it, and answers once its model is loaded.
        (via_bus,) = wait_for(from_embedder, 120, 0.5, "a query vector from the embedder")
        wait_for(lambda: local.state != "loading", 120, 0.1, "the query model")
        assert local.state == "ready", local.error
        mine, why = local.encode("kittens chasing yarn", 384, key)
        assert mine is not None, why
        assert float(np.dot(mine, via_bus)) == pytest.approx(1.0, abs=1e-4)
        assert float(np.linalg.norm(mine)) == pytest.approx(1.0, abs=1e-4)
        # Vectors of another model than the index's are never used, from either source.
        assert local.encode("x", 384, "another-model")[0] is None
        assert local.encode("x", 768, key)[0] is None
    finally:
        remote.close()
        local.close()
    details = world.client.request("indexer", DescribeRequest(), DescribeReply, timeout=20).body.details
    assert details["query_encoder"]["policy"] == "local"


def test_without_vectors_hybrid_falls_back_and_similar_says_not_embedded() -> None:
    root = short_tmpdir("fmn-")
    config = merge(
        FAST_RESTART,
        {"search": {"query_encoder": "embedder", "query_backend": "torch"}},
        only_workers("watcher", "parser", "indexer"),
        ONE_PARSER,
    )
    w = World(RunningKernel(root, config), root)
    try:
        w.kernel.start()
        write_little(w.little)
        w.add("little", w.little)

        wait_for(lambda: w.settled({"little": 3}, embedded=False), 60, 0.1, "keyword-indexed")
        reply = w.search("sofa", "hybrid")
        assert reply.mode_used == "keyword" and names(reply) == ["pets.txt"]
        assert reply.note and reply.note.startswith("semantic search unavailable")
        assert w.search("sofa", "semantic").mode_used == "keyword"
        err = w.error(SimilarRequest(str(w.little / "pets.txt")), SimilarReply)
        assert err.code == "not_embedded"

        def unavailable() -> dict[str, Any] | None:
            emb: dict[str, Any] = w.call(IndexStatusRequest(), IndexStatusReply).embedding
            return emb if emb["state"] == "unavailable" else None

        assert wait_for(unavailable, 30, 0.2, "embedding unavailable")["note"]
    finally:
        w.kernel.stop()
        remove_tree(root)


def test_with_the_embedder_frozen_hybrid_answers_from_keywords_and_says_why_in_words() -> None:
    root = short_tmpdir("fme-")
    asks_embedder = {"query_encoder": "embedder", "query_backend": "torch", "query_embed_timeout_s": 2.0}
    config = merge(FAST_RESTART, {"search": asks_embedder}, ONE_PARSER)
    w = World(RunningKernel(root, config), root)
    try:
        w.kernel.start()
        write_little(w.little)
        w.add("little", w.little)
        wait_for(lambda: w.settled({"little": 3}), 180, 0.2, "indexed and embedded")
        assert w.search("sofa", "hybrid").mode_used == "hybrid"
        pid = w.kernel.worker("embedder")["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            reply = w.search("cat naps", "hybrid")  # a new query: no cached vector
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert reply.mode_used == "keyword" and names(reply) == ["pets.txt"], reply
        # The note reaches the person searching: the wait in words, not the bus's code and message.
        assert reply.note and "the embedder, busy or starting, did not answer within 2 s" in reply.note, reply.note
        assert "deadline_exceeded" not in reply.note and "embed.request" not in reply.note, reply.note
    finally:
        w.kernel.stop()
        remove_tree(root)


# ------------------------------------------------------------------------------------------------
# in-process: fusion, snippets, text rebuilding, scoped vectors, query building


def test_rrf_and_weighted_fusion() -> None:
    keyword = [(1, 12.0), (2, 6.0), (3, 2.0)]
    semantic = [(3, 0.9), (4, 0.5), (1, 0.1)]
    fused = dict(fusion.rrf([keyword, semantic], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 63) and fused[4] == pytest.approx(1 / 62)
    weighted = dict(fusion.weighted(keyword, semantic, 0.5))
    assert weighted[1] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert weighted[3] == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)
    assert weighted[2] == pytest.approx(0.5 * 0.4) and weighted[4] == pytest.approx(0.5 * 0.5)
    assert fusion.weighted(keyword, semantic, 1.0)[0][0] == 1 and fusion.weighted(keyword, semantic, 0.0)[0][0] == 3
    assert fusion.min_max([(7, 3.0)]) == {7: 1.0} and fusion.weighted([], [], 0.5) == []


def test_snippet_windows() -> None:
    text = "alpha " * 100 + "The Xylophonists played. " + "omega " * 100
    s = snippet(text, "xylophonist")
    assert "Xylophonists" in s and len(s) <= 240 and s == s.strip() and s in text
    assert snippet(text, "nothing-matches") == text[:240].strip()
    cjk = "短い話です。" * 50 + "東京の話。"
    assert "東京" in snippet(cjk, "東京") and len(snippet(cjk, "東京")) <= 240


@settings(max_examples=200, deadline=None)
@given(query=st.text(max_size=120))
def test_keyword_index_accepts_any_text(tmp_path_factory: pytest.TempPathFactory, query: str) -> None:
    index = _tiny_index(tmp_path_factory)
    hits, total = index.search(query, 10)
    assert len(hits) <= 10 and total >= len(hits)


_INDEX: list[KeywordIndex] = []


def _tiny_index(factory: pytest.TempPathFactory) -> KeywordIndex:
    if not _INDEX:
        index = KeywordIndex(factory.mktemp("bm25"))
        rows = [
            {"id": 1, "doc_id": 1, "text": "AND OR NOT zanzibar running", "heading": "Intro", "folder_id": "f"},
            {"id": 2, "doc_id": 2, "text": "東京タワー title: field ^ ~ * ?", "heading": None, "folder_id": "f"},
        ]
        index.replace([], rows)
        index.commit()
        _INDEX.append(index)
    return _INDEX[0]


def test_keyword_terms_are_stemmed_and_operators_are_words() -> None:
    root = short_tmpdir("fmk-")
    try:
        index = KeywordIndex(root / "t")
        rows = [{"id": 1, "doc_id": 1, "text": "the runners were running and not stopping", "heading": None}]
        index.replace([], [{**r, "folder_id": "f"} for r in rows])
        index.commit()
        assert [h.chunk_id for h in index.search("RUNS", 5)[0]] == [1]
        assert [h.chunk_id for h in index.search("NOT", 5)[0]] == [1]  # a plain word, not an operator
        assert index.search("text:zzz*", 5) == ([], 0)
        assert index.search("!!! ??? ***", 5) == ([], 0)
        assert [h.chunk_id for h in index.search("running", 5, "f")[0]] == [1]
        assert index.search("running", 5, "another-folder") == ([], 0)
        index.close()
    finally:
        remove_tree(root)


_LINE = st.text(alphabet=string.ascii_letters + "  \t.,!?", max_size=60)


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(_LINE, min_size=1, max_size=40), overlap=st.sampled_from([0, 4, 8]))
def test_rebuilt_text_matches_the_parsers_text(lines: list[str], overlap: int) -> None:
    """For any text file, small chunks with overlaps (and none): the rebuilt text has the extracted
    text's length up to the last chunk, the same line breaks and characters wherever a chunk holds
    them, and differs at most in whitespace no chunk holds."""
    data = "\n".join(lines).encode()
    parsed = parse_txt(data)
    chunks = chunk(parsed.segments, _tokenizer(), max_tokens=16, overlap_tokens=overlap)
    if not chunks:
        return
    full = parsed.text
    positions = [ChunkPos(c["ordinal"], c["text"], c["char_start"], c["line_start"], c["line_end"]) for c in chunks]
    rebuilt = rebuild(positions)
    end = max(c["char_end"] for c in chunks)
    original = full[:end]
    assert len(rebuilt) == end and rebuilt.count("\n") == original.count("\n")
    covered = [False] * end
    for c in chunks:
        assert rebuilt[c["char_start"] : c["char_end"]] == c["text"]
        assert rebuilt[: c["char_start"]].count("\n") + 1 == c["line_start"]
        covered[c["char_start"] : c["char_end"]] = [True] * (c["char_end"] - c["char_start"])
    gaps = [original[m.start() : m.end()] for m in re.finditer(r"0+", "".join("1" if h else "0" for h in covered))]
    assert all(a == b or (a.isspace() and b.isspace()) for a, b in zip(original, rebuilt, strict=True))
    if all(re.fullmatch(r"\n* *", gap) for gap in gaps):
        assert rebuilt == original  # gaps of line breaks then indentation come back exactly


def indexed(store: Store, folder_id: str, path: str, chunks: list[dict[str, Any]]) -> int:
    """The id of a document at ``path``, written to the store with ``chunks`` as the pipeline writes one."""
    with store.tx() as db:
        store.documents.mark_pending(db, folder_id, path, 1, 1)
        doc = store.documents.get(path)
        assert doc is not None
        store.documents.write(db, doc.id, 1, 1, "h", "txt", None, None, chunks)
    return doc.id


_WORDS = st.lists(
    st.sampled_from(["pip", "install", "the", "runner", "Windows", "setup", "fox."]), min_size=1, max_size=12
)
_BLOCK = st.one_of(
    st.tuples(st.just("#"), st.integers(1, 3), _WORDS),  # a heading: it closes a section
    st.tuples(st.just("p"), st.integers(1, 4), _WORDS),  # a paragraph of a few lines
)


@settings(max_examples=40, deadline=None)
@given(blocks=st.lists(_BLOCK, min_size=1, max_size=8), blanks=st.lists(st.integers(0, 3), min_size=8, max_size=8))
@example(  # found by the fuzz test in CI: line 3 is the blank line before "## Windows", in no chunk
    blocks=[("#", 1, ["Setup"]), ("p", 1, ["Install", "with", "pip."]), ("#", 2, ["Windows"]), ("p", 1, ["Run"])],
    blanks=[1, 1, 1, 1, 0, 0, 0, 0],
)
def test_read_lines_returns_every_range_of_the_rebuilt_text(
    blocks: list[tuple[str, int, list[str]]], blanks: list[int]
) -> None:
    """Every line range of a Markdown file (headings, paragraphs, runs of blank lines that no chunk
    holds), read through a real SQLite store, is exactly that range of the whole rebuilt text, and
    with a character budget its longest whole-line prefix."""
    parts: list[str] = []
    for (kind, n, words), gap in zip(blocks, blanks, strict=False):
        if kind == "#":
            parts.append("#" * n + " " + " ".join(words))
        else:
            per_line = max(1, len(words) // n)
            parts.append("\n".join(" ".join(words[i : i + per_line]) for i in range(0, len(words), per_line)))
        parts.append("\n" * gap)
    parsed = parse_md("\n".join(parts).encode())
    chunks = chunk(parsed.segments, _tokenizer(), max_tokens=12, overlap_tokens=3)
    root = short_tmpdir("fmr-")
    try:
        store = Store(root / "index.sqlite")
        folder = store.folders.add(str(root / "docs"), "docs", "")
        path = str(root / "docs" / "doc.md")
        doc_id = indexed(store, folder.id, path, [dict(c) for c in chunks])
        whole = rebuild(
            ChunkPos(c["ordinal"], c["text"], c["char_start"], c["line_start"], c["line_end"]) for c in chunks
        )
        lines = whole.split("\n") if chunks else []
        total = len(lines)
        assert store.chunks.last_line(doc_id) == total
        for start in range(1, total + 2):
            for end in range(start - 1 if start > total else start, total + 2):
                got = read_lines(store, doc_id, start, end, 100_000)
                want = lines[start - 1 : end]
                assert got.text == "\n".join(want), (start, end)
                assert (got.start_line, got.end_line) == (start, start + len(want) - 1), (start, end)
                assert got.total_lines == total and got.truncated == (end > total), (start, end)
            if start <= total:  # a budget: the most whole lines that fit, or the start of one too long
                budget = 1 + start % 7 * 5
                cut = read_lines(store, doc_id, start, None, budget)
                fits = [
                    k for k in range(1, total - start + 2) if len("\n".join(lines[start - 1 : start - 1 + k])) <= budget
                ]
                k = max(fits, default=1)
                want_text = "\n".join(lines[start - 1 : start - 1 + k]) if fits else lines[start - 1][:budget]
                assert (cut.text, cut.end_line) == (want_text, start + k - 1), start
                assert cut.truncated == (start + k - 1 < total or not fits), start
    finally:
        remove_tree(root)


_TOKENIZERS: list[Any] = []


def _tokenizer() -> Any:
    if not _TOKENIZERS:
        _TOKENIZERS.append(load_tokenizer())
    return _TOKENIZERS[0]


def test_a_folder_counts_files_not_yet_in_the_keyword_index_until_its_commit() -> None:
    """A folder is "ready" only when a keyword search finds every indexed file: a document written to
    SQLite but not yet committed to Tantivy (its journal row) keeps its folder "indexing" (a CI run
    once searched in that window, right after "ready", and found nothing)."""
    root = short_tmpdir("fmj-")
    try:
        store = Store(root / "index.sqlite")
        a, b = (store.folders.add(str(root / name), name, "") for name in ("a", "b"))
        one = {"ordinal": 0, "text": "x", "tokens": 3, "line_start": 1, "line_end": 1, "char_start": 0, "char_end": 1}
        doc_id = indexed(store, a.id, str(root / "a" / "x.txt"), [one])
        assert store.folders.progress(a.id)["files_pending"] == 0
        assert store.folders.progress(a.id)["files_not_yet_searchable"] == 1
        assert store.folders.progress(b.id)["files_not_yet_searchable"] == 0
        seq, ids = store.journal.after(0)
        assert ids == [doc_id]
        store.journal.applied(seq)  # what the pipeline does once Tantivy has committed
        assert store.folders.progress(a.id)["files_not_yet_searchable"] == 0
    finally:
        remove_tree(root)


def test_the_coverage_reads_the_terms_a_passage_holds_from_the_keyword_index_as_the_analyzer_finds_them() -> None:
    """The rescoring's coverage (``evidence`` fusion) asks the keyword index which query terms each passage's
    text or heading holds (:meth:`KeywordIndex.held`) instead of analysing the text again: the analyzer's answer,
    past one search's :data:`MASK_TERMS` terms, in each document's language. A passage not committed to the
    index yet is left out there, and the coverage analyses its text."""
    root = short_tmpdir("fmh-")
    kw = KeywordIndex(root / "tantivy")
    try:
        store = Store(root / "index.sqlite")
        folder = store.folders.add(str(root), "f", "")

        def chunk(n: int, text: str, heading: str | None = None) -> dict[str, Any]:
            lines = {"line_start": n + 1, "line_end": n + 1, "char_start": 0, "char_end": len(text)}
            return {"ordinal": n, "text": text, "heading": heading, "tokens": 3} | lines

        def written(name: str, chunks: list[dict[str, Any]], language: str | None = None) -> list[int]:
            with store.tx() as db:
                store.documents.mark_pending(db, folder.id, str(root / name), 1, 1)
                doc = store.documents.get(str(root / name))
                assert doc is not None
                return store.documents.write(db, doc.id, 1, 1, "h", "txt", None, None, chunks, language)

        english = written("a.txt", [chunk(0, "The runners were running quickly", "Installing"), chunk(1, "no such")])
        german = written("b.txt", [chunk(0, "Die Häuser standen am Fluss")], "de")
        docs = [store.documents.get(str(root / name)) for name in ("a.txt", "b.txt")]
        kw.replace([], store.journal.chunks_for_index([d.id for d in docs if d is not None]))
        kw.commit()
        later = written("c.txt", [chunk(0, "running installations of houses")])  # not in the index yet
        words = ["houses", "runner", "quick", "instal", *(f"zz{i}" for i in range(24)), "run", "Häuser", "fluss"]
        passages = [*english, *german, *later]
        rows = store.chunks.hits(passages)

        def analysed(cid: int) -> set[str]:  # the passage's terms, as its document's language indexes them
            text = f"{rows[cid]['heading'] or ''}\n{rows[cid]['text']}"
            return set(text_terms(text, stemmed_as(rows[cid]["language"])))

        for language in ("en", "de"):
            terms = [stem(w, language) for w in words]
            assert len(terms) > MASK_TERMS
            held = kw.held(passages, terms)
            assert set(held) == {*english, *german}
            for cid in held:
                assert held[cid] == [t in analysed(cid) for t in terms]
            assert any(held[german[0]]) and any(held[english[0]][MASK_TERMS:])
        assert kw.held(english, [stem("running")]) == {english[0]: [True], english[1]: [False]}
        assert kw.held(english, []) == {english[0]: [], english[1]: []}  # a query of no term (CJK only, say)
        assert kw.held([], [stem("running")]) == {}

        policy = SearchPolicy()
        service = SearchService(
            store,
            kw,
            VectorIndex(root / "v.usearch", 4),
            QueryEncoder(policy, IngestPolicy(), "inproc://x", "t"),
            policy,
        )
        query = "how quickly do runners install houses by the fluss"
        tokens = list(dict.fromkeys(query_tokens(query)))
        expected = {}
        for cid in passages:
            language = stemmed_as(rows[cid]["language"])
            doc_freq, total = kw.term_stats(language)
            idfs = [idf(doc_freq(t), total) for t in tokens]
            expected[cid] = idf_share(idfs, [stem(t, language) in analysed(cid) for t in tokens])
        assert service._coverage(query, {}, passages) == expected
        assert expected[later[0]] > 0 and expected[german[0]] > 0 and expected[english[1]] == 0
    finally:
        kw.close()
        remove_tree(root)


def test_a_document_written_again_keeps_the_vectors_of_its_unchanged_chunks_and_only_those() -> None:
    root = short_tmpdir("fmv-")
    try:
        store = Store(root / "index.sqlite")
        folder = store.folders.add(str(root), "f", "")

        def chunk(n: int, text: str) -> dict[str, Any]:
            return {"ordinal": n, "text": text, "tokens": 3, "line_start": n + 1, "line_end": n + 1}

        texts = ["alpha beta", "gamma delta", "epsilon zeta"]
        doc_id = indexed(
            store,
            folder.id,
            str(root / "x.txt"),
            [chunk(n, t) | {"char_start": 0, "char_end": 1} for n, t in enumerate(texts)],
        )
        old = [
            int(r[0]) for r in store.db.execute("SELECT id FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,))
        ]
        blobs = [np.full(4, n, dtype=np.float32).tobytes() for n in range(3)]
        assert store.embeddings.store(old, blobs) == old
        edited = ["alpha beta", "gamma DELTA changed", "epsilon zeta", "a new chunk"]
        with store.tx() as db:
            new = store.documents.write(
                db,
                doc_id,
                1,
                1,
                "h2",
                "txt",
                None,
                None,
                [chunk(n, t) | {"char_start": 0, "char_end": 1} for n, t in enumerate(edited)],
            )
        kept = dict(store.embeddings.get(new))
        assert set(kept) == {new[0], new[2]}  # the unchanged texts, with their very vectors
        assert kept[new[0]] == blobs[0] and kept[new[2]] == blobs[2]
        assert [row[0] for row in store.embeddings.unembedded(10, set())] == [
            new[1],
            new[3],
        ]  # only these go to the embedder
        assert set(store.embeddings.dead()) == set(old)  # the old ids leave the usearch file at its next save
    finally:
        remove_tree(root)


def test_scoped_vector_search_is_exact_small_and_deepens_big_a_chunk_at_its_best_unit() -> None:
    root = short_tmpdir("fmv-")
    try:
        store = Store(root / "index.sqlite")
        # An unscoped search walks the graph here (a narrow beam: it misses true neighbours); a scoped one scans.
        vectors = VectorIndex(root / "v.usearch", 8, expansion_search=16, exact_search_vectors=0)
        rng = np.random.default_rng(7)
        folders = {name: store.folders.add(str(root / name), name, "").id for name in ("big", "small")}
        ids: dict[str, list[int]] = {"big": [], "small": []}
        for name, n in (("big", 400), ("small", 12)):
            with store.tx() as db:
                for i in range(n):
                    path = str(root / name / f"{i}.txt")
                    store.documents.mark_pending(db, folders[name], path, 1, 1)
                    doc = store.documents.get(path)
                    assert doc is not None
                    chunk_row = {"ordinal": 0, "text": "x", "tokens": 3, "line_start": 1, "line_end": 1}
                    ids[name] += store.documents.write(
                        db, doc.id, 1, 1, "h", "txt", None, None, [{**chunk_row, "char_start": 0, "char_end": 1}]
                    )
        all_ids = ids["big"] + ids["small"]
        # One to three units a chunk, as :mod:`units` makes them.
        counts = rng.integers(1, 4, size=len(all_ids))
        matrix = rng.normal(size=(int(counts.sum()), 8)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        owner = np.repeat(np.arange(len(all_ids)), counts)
        blobs = [embeddings.pack(matrix[owner == i]) for i in range(len(all_ids))]
        store.embeddings.store(all_ids, blobs)
        vectors.add(*embeddings.stack(list(zip(all_ids, blobs, strict=True)), 8))
        assert len(vectors) == len(matrix) and [int(k) for k in vectors.keys()] == sorted(all_ids)  # noqa: SIM118
        query = matrix[0] + 0.1
        query /= np.linalg.norm(query)
        best_unit = np.full(len(all_ids), -2.0)
        np.maximum.at(best_unit, owner, matrix @ query)
        scans: list[bool] = []  # what each usearch search was asked: an exact scan or a graph walk
        walk = vectors.index.search

        def search(*args: Any, exact: bool = False, **kwargs: Any) -> Any:
            scans.append(exact)
            return walk(*args, exact=exact, **kwargs)

        vectors.index.search = search
        for name, limit in (("small", 20_000), ("big", 20_000), ("big", 50), ("small", 5)):
            scoped = ScopedVectors(store, vectors, exact_limit=limit)
            scans.clear()
            got = scoped.search(folders[name], query, 5)
            assert all(scans) and (limit < len(matrix)) == bool(scans), (name, limit)  # past the limit: a scan
            members = np.array([all_ids.index(i) for i in ids[name]])
            best = members[np.argsort(-best_unit[members])[:5]]
            assert [c for c, _ in got] == [all_ids[i] for i in best], (name, limit)
            # usearch keeps half floats: its cosines are within ~1e-3 of the exact ones SQLite's float32 give.
            exact_scores = [float(best_unit[i]) for i in best]
            exact = limit >= len(matrix)  # the folder's units fit the limit: numpy over SQLite's vectors
            assert [s for _, s in got] == pytest.approx(exact_scores, abs=0 if exact else 2e-3), (name, limit)
            assert scoped.count(folders[name]) == len(ids[name])
        # Unscoped, usearch returns each chunk once, at its best unit, however many of its units are near.
        got = vectors.search(query, 10, exact=True)
        assert len({c for c, _ in got}) == 10
        assert [c for c, _ in got] == [all_ids[i] for i in np.argsort(-best_unit)[:10]]
        assert len({c for c, _ in vectors.search(query, 10)}) == 10 and scans[-1] is False  # walked: each chunk once
        # The cache follows SQLite: a chunk deleted elsewhere leaves the scoped results at once.
        scoped = ScopedVectors(store, vectors)
        first = scoped.search(folders["small"], query, 1)[0][0]
        # (another thread: its own connection, as the ingest thread has)
        writer = threading.Thread(target=lambda: store.db.execute("DELETE FROM chunks WHERE id = ?", (first,)))
        writer.start()
        writer.join()
        assert scoped.search(folders["small"], query, 1)[0][0] != first
    finally:
        remove_tree(root)


def test_a_semantic_search_right_after_a_folder_is_removed_finds_the_other_folders_chunks() -> None:
    """The usearch file drops a removed folder's vectors only at its next save (up to 30 s later): meanwhile they
    were still the nearest ones, filled the search's depth and left nothing to return ("0 of 40 matches" in s56's
    walk, right after `folders remove` of the demo). Real SQLite and usearch; vectors of 4 dimensions, by hand."""
    root = short_tmpdir("fmd-")
    kw = KeywordIndex(root / "tantivy")
    try:
        store = Store(root / "index.sqlite")
        gone, kept = (store.folders.add(str(root / name), name, "") for name in ("gone", "kept"))
        one = {"text": "x", "tokens": 3, "line_start": 1, "line_end": 1, "char_start": 0, "char_end": 1}
        docs = [indexed(store, gone.id, str(root / "gone" / f"{i}.txt"), [one | {"ordinal": 0}]) for i in range(3)]
        docs.append(indexed(store, kept.id, str(root / "kept" / "k.txt"), [one | {"ordinal": 0}]))
        ids = [int(r[0]) for r in store.db.execute("SELECT id FROM chunks ORDER BY doc_id")]
        near, far = [1.0, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0]
        vectors = np.asarray([near, near, near, far], dtype=np.float32)
        assert store.embeddings.store(ids, [v.tobytes() for v in vectors]) == ids
        index = VectorIndex(root / "v.usearch", 4)
        index.add(ids, vectors)
        policy = SearchPolicy()
        service = SearchService(
            store,
            kw,
            index,
            QueryEncoder(policy, IngestPolicy(), "inproc://x", "t"),
            policy,
        )
        query = np.asarray(near, dtype=np.float32)
        assert sorted(c for c, _ in service._semantic(query, 3, None, None)) == ids[:3]  # the three near ones
        store.folders.remove(gone.id)
        assert len(index) == 4 and sorted(store.embeddings.dead()) == ids[:3]  # not saved yet: still in the file
        assert [c for c, _ in service._semantic(query, 3, None, None)] == [ids[3]]
    finally:
        kw.close()
        remove_tree(root)
