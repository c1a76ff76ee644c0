"""Smart Folders indexed for real: watcher, parser pool, chunker, indexer (SQLite + Tantivy)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.messages import DescribeReply, DescribeRequest, FolderListReply, FolderListRequest
from tests.config import merge
from tests.filemakers import make_docx, make_encrypted_pdf, make_pdf, make_zip_bomb_docx
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, found, kill9, only_workers, wait_for, wait_found

# The ingestion pipeline without the MCP front door, which no test here talks to (a process start less). The
# llm stays up as a bystander but writes no summaries (the deterministic analysis is the indexer's): when the
# queue is idle it would summarise every indexed file, 6-14 CPU-s for a few small files (2026-12-02).
PIPELINE = merge(
    FAST_RESTART, only_workers("watcher", "parser", "embedder", "indexer", "llm"), {"llm": {"analysis": False}}
)


def search(home: Path, query: str, mode: str = "keyword", **opts: str) -> dict[str, Any]:
    args = ["search", query, "--mode", mode, "--json", *[x for k, v in opts.items() for x in (f"--{k}", v)]]
    data: dict[str, Any] = json.loads(cli(home, *args).stdout)
    return data


def documents(home: Path) -> dict[str, sqlite3.Row]:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT * FROM documents").fetchall()
    db.close()
    return {Path(r["path"]).name: r for r in rows}


def chunk_ids(home: Path, name: str) -> list[int]:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    rows = db.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path LIKE ? ORDER BY c.ordinal",
        (f"%/{name}",),
    ).fetchall()
    db.close()
    return [r[0] for r in rows]


def settled(home: Path) -> bool:
    """Nothing pending, per the indexer's own progress report."""
    folders = json.loads(cli(home, "folders", "list", "--json").stdout)
    return all(f["state"] == "ready" for f in folders)


def ready(k: RunningKernel) -> bool:
    """:func:`settled` asked over the bus from this process."""
    return all(f["state"] == "ready" for f in k.folders())


def wait_settled(k: RunningKernel, timeout: float, what: str) -> None:
    """Until nothing is pending; then `foldermind folders list` says so too. Polled over the bus, as
    :func:`tests.helpers.wait_found`."""
    wait_for(lambda: ready(k), timeout, 0.1, what)
    assert settled(k.root)


def make_corpus(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.txt").write_text("The quarterly planning meeting discussed zanzibar logistics.\n" * 3)
    (root / "guide.md").write_text(
        "# Setup\n\nIntro text.\n\n## Windows\n\nInstall the frobnicator with the wizard.\n\n"
        "## Linux\n\nUse the package manager for quokka tooling.\n"
    )
    (root / "page.html").write_text(
        "<html><head><title>Harbour news</title><script>var secretscript = 1;</script></head>"
        "<body><nav>menu navonlyword</nav><h1>Harbour</h1><p>The lighthouse keeper counted pelicans.</p></body></html>"
    )
    make_pdf(root / "report.pdf", [["Executive summary about budgets."], ["Appendix on narwhal migration."]])
    make_docx(
        root / "plan.docx",
        "Plan",
        [("Goals", ["Reach the glacier by spring."]), ("Risks", ["Avalanche danger is moderate."])],
        [["item", "cost"], ["crampons", "120"]],
    )
    (root / "utf16.txt").write_text("Unicode wide text about xylophones.\n", encoding="utf-16")
    (root / "cjk.txt").write_text("東京タワーは日本の東京にあります。富士山も有名です。\n", encoding="utf-8")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "deep.txt").write_text("Nested folder content about marmots.\n")
    # Never indexed: hidden, temporary, unsupported.
    (root / ".hidden.txt").write_text("hiddenword")
    (root / "draft.txt.swp").write_text("swapword")
    (root / "layers.psd").write_bytes(b"8BPS\x00\x01")  # images are read (OCR): a format no parser reads


@pytest.fixture
def indexed(home_dir: Path) -> Iterator[tuple[RunningKernel, Path]]:
    docs = home_dir / "docs"
    make_corpus(docs)
    k = RunningKernel(home_dir, PIPELINE)
    try:
        k.start()
        out = cli(home_dir, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=120).stdout
        assert "registered Docs" in out
        yield k, docs
    finally:
        k.stop()


def test_every_format_is_findable_with_its_location(indexed: tuple[RunningKernel, Path]) -> None:
    k, _docs = indexed
    home = k.root
    docs_state = documents(home)
    assert {n for n, r in docs_state.items() if r["status"] == "indexed"} == {
        "notes.txt",
        "guide.md",
        "page.html",
        "report.pdf",
        "plan.docx",
        "utf16.txt",
        "cjk.txt",
        "deep.txt",
    }
    assert found(home, "zanzibar") == {"notes.txt"}
    hit = search(home, "frobnicator")["results"][0]
    assert hit["file_name"] == "guide.md" and hit["location"]["heading"] == "Setup > Windows"
    assert "frobnicator" in hit["snippet"].lower()
    assert search(home, "quokka")["results"][0]["location"]["heading"] == "Setup > Linux"
    narwhal = search(home, "narwhal")["results"][0]
    assert narwhal["file_name"] == "report.pdf" and narwhal["location"]["page"] == 2
    assert search(home, "budgets")["results"][0]["location"]["page"] == 1
    assert found(home, "pelicans") == {"page.html"}
    assert found(home, "secretscript") == set() and found(home, "navonlyword") == set()
    avalanche = search(home, "avalanche")["results"][0]
    assert avalanche["file_name"] == "plan.docx" and "Risks" in avalanche["location"]["heading"]
    assert found(home, "crampons") == {"plan.docx"}  # table cells
    assert found(home, "xylophones") == {"utf16.txt"}  # encoding detected, not assumed
    assert found(home, "東京") == {"cjk.txt"}  # CJK query finds the CJK file
    assert found(home, "富士山") == {"cjk.txt"}
    assert found(home, "marmots") == {"deep.txt"}
    assert found(home, "hiddenword") == set() and found(home, "swapword") == set()
    # A user's query syntax never breaks the parser.
    for nasty in ['AND "zanzibar', "zanzibar*", "[(zanzibar", "!!!"]:
        search(home, nasty)
    folder = json.loads(cli(home, "folders", "list", "--json").stdout)[0]
    assert folder["files_indexed"] == 8 and folder["files_failed"] == 0 and folder["chunks"] >= 8
    status = json.loads(cli(home, "status", "--json").stdout)
    assert status["folders"][0]["id"] == folder["id"] and status["folders"][0]["files_total"] == 8


def test_edit_touch_rename_delete_and_changes_while_stopped(indexed: tuple[RunningKernel, Path]) -> None:
    k, docs = indexed
    home = k.root
    notes = docs / "notes.txt"
    # edit -> new text found, old text gone
    notes.write_text("Now the notes talk about ocelots only.\n")
    wait_found(k, "ocelots", {"notes.txt"}, 15, "edited text findable")
    assert found(home, "zanzibar") == set()
    # touch -> nothing reindexed (same chunk ids)
    before = chunk_ids(home, "guide.md")
    os.utime(docs / "guide.md", None)
    time.sleep(1.5)  # let a reindex happen if it (wrongly) would; the assertion below is the check
    wait_settled(k, 10, "settled")
    assert chunk_ids(home, "guide.md") == before
    # rename -> path updated, no reindex
    ids = chunk_ids(home, "deep.txt")
    (docs / "sub" / "deep.txt").rename(docs / "sub" / "renamed.txt")
    wait_found(k, "marmots", {"renamed.txt"}, 15, "renamed path")
    assert chunk_ids(home, "renamed.txt") == ids
    assert documents(home)["renamed.txt"]["original_path"].endswith("deep.txt")
    # delete -> gone from the index
    (docs / "page.html").unlink()
    wait_found(k, "pelicans", set(), 15, "deleted file gone")
    assert "page.html" not in documents(home)
    # changes made while stopped are caught on start
    k.stop()
    (docs / "offline.md").write_text("# Offline\n\nWritten while foldermind slept: wombats.\n")
    (docs / "utf16.txt").unlink()
    (docs / "cjk.txt").write_text("Rewritten offline with platypus facts.\n")
    k.start()
    wait_found(k, "wombats", {"offline.md"}, 30, "offline addition")
    wait_found(k, "platypus", {"cjk.txt"}, 30, "offline edit")
    assert found(home, "xylophones") == set()
    assert found(home, "東京") == set()


def test_an_index_made_by_older_parsers_is_parsed_again_once_on_start(indexed: tuple[RunningKernel, Path]) -> None:
    k, docs = indexed
    home = k.root
    (docs / "manual.rst").write_text("Manual\n======\n\nInstall\n-------\n\nUnpack the gondola kit first.\n")
    wait_found(k, "gondola", {"manual.rst"}, 30, "the .rst file indexed")
    assert search(home, "gondola")["results"][0]["location"]["heading"] == "Manual > Install"
    k.stop()
    # What an older version left: chunks without the headings this one finds, and its extraction number.
    db = sqlite3.connect(home / "data" / "index.sqlite")
    with db:
        db.execute("UPDATE chunks SET heading = NULL")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'extraction'")
    db.close()
    before = chunk_ids(home, "notes.txt")
    k.start()

    # Between the SQLite commit of a file's new chunks and the Tantivy commit that carries them, a keyword hit
    # names the old chunk ids, which are gone: for that moment the file has no result.
    def heading(hits: dict[str, Any]) -> list[str | None]:
        return [r["location"].get("heading") for r in hits["results"][:1]]

    what = "the file parsed again with this version's parsers"
    wait_for(lambda: heading(k.search("gondola")) == ["Manual > Install"], 60, 0.1, what)
    assert heading(search(home, "gondola")) == ["Manual > Install"]
    wait_settled(k, 60, "every document parsed again")
    assert chunk_ids(home, "notes.txt") != before  # unchanged files too: an upgrade reaches them
    assert found(home, "zanzibar") == {"notes.txt"}
    # Their texts did not change: every chunk kept its vector, none went to the embedder again, and the
    # vector index holds them under their new ids.
    folders = json.loads(cli(home, "folders", "list", "--json").stdout)
    assert all(f["chunks_embedded"] == f["chunks"] for f in folders), folders
    assert (
        k.client().request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details["texts_embedded"] == 0
    )
    assert "notes.txt" in {Path(r["file_path"]).name for r in search(home, "zanzibar logistics", "semantic")["results"]}
    db = sqlite3.connect(home / "data" / "index.sqlite")
    assert db.execute("SELECT value FROM meta WHERE key = 'extraction'").fetchone()[0] != "1"
    db.close()
    parsed = chunk_ids(home, "notes.txt")
    k.stop()
    k.start()  # recorded: the next start parses nothing again
    wait_settled(k, 60, "settled after the second start")
    assert chunk_ids(home, "notes.txt") == parsed


def test_bad_files_fail_with_reasons_while_neighbours_index(home_dir: Path) -> None:
    docs = home_dir / "bad"
    docs.mkdir()
    make_pdf(docs / "scanned.pdf", [[], []])
    make_encrypted_pdf(docs / "locked.pdf", "classified")
    (docs / "corrupt.docx").write_bytes(b"PK\x03\x04 this is not really a zip file")
    make_zip_bomb_docx(docs / "bomb.docx", 300)
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 64)
    (docs / "fine.txt").write_text("The neighbour file mentions capybaras.\n")
    outside = home_dir / "outside.txt"
    outside.write_text("Secret outside text about basilisks.\n")
    (docs / "link.txt").symlink_to(outside)
    k = RunningKernel(home_dir, PIPELINE).start()
    try:
        cli(home_dir, "folders", "add", str(docs), "--wait", timeout=120)
        state = documents(home_dir)
        assert state["fine.txt"]["status"] == "indexed"
        reasons = {name: (row["status"], row["error"] or "") for name, row in state.items()}
        assert reasons["scanned.pdf"] == ("failed", "no extractable text (scanned?)")
        assert reasons["locked.pdf"][0] == "failed" and "encrypted" in reasons["locked.pdf"][1].lower()
        assert reasons["corrupt.docx"][0] == "failed" and "docx" in reasons["corrupt.docx"][1].lower()
        assert reasons["bomb.docx"][0] == "failed" and "bomb" in reasons["bomb.docx"][1].lower()
        assert reasons["binary.txt"] == ("failed", "not a text file")
        assert "link.txt" not in state, "a symlink to a file outside the folder was indexed"
        assert found(home_dir, "basilisks") == set()
        assert found(home_dir, "capybaras") == {"fine.txt"}
        k.wait_all_running(60)  # settled: on-demand workers may be starting or leaving for a moment
    finally:
        k.stop()


def test_indexer_killed_mid_batch_indexes_every_file_exactly_once(home_dir: Path) -> None:
    docs = home_dir / "many"
    docs.mkdir()
    n = 150
    for i in range(n):
        (docs / f"doc{i:03d}.txt").write_text(f"Document number {i} mentions token{i} and shared words.\n" * 20)
    k = RunningKernel(home_dir, PIPELINE).start()
    try:
        cli(home_dir, "folders", "add", str(docs))

        client = k.client()

        def some_indexed() -> bool:
            # Over the bus, not a CLI process: polled every 50 ms, so that a machine under load, which
            # indexes the files in a few seconds, is still seen halfway.
            folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=10).body.folders
            return 0 < folders[0]["files_indexed"] < n

        wait_for(some_indexed, 60, 0.05, "indexing under way")
        old = k.worker("indexer")["pid"]
        kill9(old)
        k.wait_state("indexer", "RUNNING", other_pid_than=old)
        wait_settled(k, 120, "indexing finished after the crash")
        state = documents(home_dir)
        assert len(state) == n and all(r["status"] == "indexed" for r in state.values())
        db = sqlite3.connect(home_dir / "data" / "index.sqlite")
        per_doc = dict(db.execute("SELECT doc_id, COUNT(*) FROM chunks GROUP BY doc_id").fetchall())
        recorded = dict(db.execute("SELECT id, chunks FROM documents").fetchall())
        db.close()
        assert per_doc == recorded, "a document's chunks were duplicated or lost"
        for i in (0, n // 2, n - 1):
            hits = search(home_dir, f"token{i}")
            assert [r["file_name"] for r in hits["results"]] == [f"doc{i:03d}.txt"]
            assert hits["total_matches"] == 1, "duplicated in the keyword index"
    finally:
        k.stop()


def test_folders_refuse_overlap_and_remove_purges(indexed: tuple[RunningKernel, Path]) -> None:
    k, docs = indexed
    home = k.root
    inner = cli(home, "folders", "add", str(docs / "sub"), check=False)
    assert inner.returncode != 0 and "inside the Smart Folder" in inner.stderr
    outer = cli(home, "folders", "add", str(docs.parent), check=False)
    assert outer.returncode != 0 and "around the Smart Folder" in outer.stderr
    out = cli(home, "folders", "remove", str(docs)).stdout
    assert "8 documents purged" in out
    assert found(home, "zanzibar") == set()
    assert json.loads(cli(home, "folders", "list", "--json").stdout) == []
    assert (docs / "notes.txt").exists(), "removing a folder must never touch files"


def _watching(k: RunningKernel) -> int:
    return int(k.client().request("watcher", DescribeRequest(), DescribeReply, timeout=10).body.details["watching"])


def test_adding_or_removing_a_folder_is_one_request_and_the_watcher_follows(
    indexed: tuple[RunningKernel, Path],
) -> None:
    # `folders add` and `folders remove` send only their request to the indexer: the indexer tells the watcher.
    k, docs = indexed
    home = k.root
    wait_for(lambda: _watching(k) == 1, 30, 0.1, "the added folder watched")
    cli(home, "folders", "remove", str(docs))
    wait_for(lambda: _watching(k) == 0, 30, 0.1, "the removed folder no longer watched")
    extra = home / "extra"
    extra.mkdir()
    (extra / "kiwi.txt").write_text("The kiwi is a flightless bird of New Zealand.\n")
    cli(home, "folders", "add", str(extra))
    wait_found(k, "flightless", {"kiwi.txt"}, 60, "the new folder scanned and indexed")
    (extra / "tui.txt").write_text("The tui sings with two voice boxes, flightless it is not.\n")
    wait_found(k, "voice boxes", {"tui.txt"}, 60, "a new file seen by the watcher")


def _parser_holding_a_job(k: RunningKernel, other_than: int | None = None) -> int | None:
    for w in k.status().workers:
        if w["name"].startswith("parser#") and w["in_flight"] == 1 and w["pid"] != other_than:
            return int(w["pid"])
    return None


def test_parser_killed_mid_file_retries_once_then_quarantines(home_dir: Path) -> None:
    docs = home_dir / "slow"
    docs.mkdir()
    # Big enough that tokenizing and chunking it keeps a parser busy for a while.
    (docs / "big.txt").write_text("Endless prose about the migration of the arctic tern. " * 300_000)
    k = RunningKernel(home_dir, PIPELINE).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        first = wait_for(lambda: _parser_holding_a_job(k), 60, 0.02, "a parser busy with big.txt")
        kill9(first)
        # The file goes to a fresh parser (attempt 2) ...
        second = wait_for(lambda: _parser_holding_a_job(k, other_than=first), 60, 0.02, "the retry in flight")
        assert documents(home_dir)["big.txt"]["attempts"] == 2
        # ... and a second crash quarantines it with its reason, without a third try.
        kill9(second)
        wait_for(lambda: documents(home_dir)["big.txt"]["status"] == "failed", 30, 0.1, "quarantined")
        assert "quarantined" in documents(home_dir)["big.txt"]["error"]
        # A parser crash costs a restart, nothing more: the next file indexes.
        (docs / "small.txt").write_text("A small file about puffins.\n")
        wait_found(k, "puffins", {"small.txt"}, 30, "neighbour indexed")
        # ... and the crashed parser's restart by policy (it may still be on its backoff).
        up = lambda: all(w["state"] in ("RUNNING", "IDLE") for w in k.status().workers)  # noqa: E731
        wait_for(up, 30, 0.2, "every worker up again")
    finally:
        k.stop()


def test_parser_killed_once_the_file_is_retried_and_indexed(home_dir: Path) -> None:
    docs = home_dir / "retry"
    docs.mkdir()
    (docs / "big.txt").write_text("Long text about the nesting habits of the kittiwake. " * 200_000)
    # Keyword search is all this test asks: no embedder, which would spend the test's whole run embedding the
    # ~10 MB file's thousands of chunks beside it (its chunks then wait, keyword-searchable, as without a model).
    k = RunningKernel(home_dir, merge(PIPELINE, {"workers": {"embedder": {"enabled": False}}})).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        kill9(wait_for(lambda: _parser_holding_a_job(k), 60, 0.02, "a parser busy with big.txt"))
        wait_for(lambda: documents(home_dir)["big.txt"]["status"] == "indexed", 120, 0.2, "indexed on retry")
        assert documents(home_dir)["big.txt"]["attempts"] == 2
        wait_found(k, "kittiwake", {"big.txt"}, 60, "findable")
    finally:
        k.stop()


def test_without_a_model_documents_are_keyword_indexed_then_embedded_when_it_appears(home_dir: Path) -> None:
    from foldermind.workers.embedding.model_files import model_dir

    late_model = home_dir / "late-model"
    late_env = {"FOLDERMIND_EMBED_MODEL_DIR": late_model, "FOLDERMIND_EMBED_RETRY_S": "1"}
    config = merge(PIPELINE, {"ingest": {"embed_retry_s": 1.0}, "workers": {"embedder": {"env": late_env}}})
    docs = home_dir / "docs"
    make_corpus(docs)
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs), "--wait", timeout=120)
        assert found(home_dir, "zanzibar") == {"notes.txt"}  # keyword search works meanwhile
        folder = json.loads(cli(home_dir, "folders", "list", "--json").stdout)[0]
        assert folder["chunks"] > 0 and folder["chunks_embedded"] == 0
        wait_for(lambda: "model failed" in k.worker("embedder")["note"], 30, 0.2, "status says why")
        hybrid = search(home_dir, "zanzibar", mode="hybrid")
        assert hybrid["mode_used"] == "keyword" and "semantic search unavailable" in hybrid["note"]
        late_model.symlink_to(model_dir())  # the model becomes available: no restart, no --force

        def all_embedded(folders: list[dict[str, Any]]) -> bool:
            return bool(folders[0]["chunks"] == folders[0]["chunks_embedded"])

        wait_for(lambda: all_embedded(k.folders()), 120, 0.1, "every chunk embedded")
        assert all_embedded(json.loads(cli(home_dir, "folders", "list", "--json").stdout))
        semantic = search(home_dir, "where do the lighthouse birds live", mode="semantic")
        assert semantic["mode_used"] == "semantic" and semantic["results"]
        assert k.worker("embedder")["restarts"] == 0
    finally:
        k.stop()


def test_demo_folder_is_registered_only_when_no_folder_exists(home_dir: Path) -> None:
    demo = home_dir / "demo"
    demo.mkdir()
    (demo / "readme.md").write_text("# Demo\n\nThe demo folder talks about walruses.\n")
    other = home_dir / "other"
    other.mkdir()
    # The map is not the subject: the pipeline that makes a file keyword-searchable, and no llm to summarise it.
    k = RunningKernel(home_dir, merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"), ONE_PARSER))
    try:
        k.start("--demo-folder", str(demo))
        wait_found(k, "walruses", {"readme.md"}, 60, "demo folder searchable")
        k.stop()
        k.start("--demo-folder", str(other))
        names = [f["name"] for f in json.loads(cli(home_dir, "folders", "list", "--json").stdout)]
        assert names == ["demo"]
    finally:
        k.stop()


def test_an_index_that_outgrows_exact_search_gets_a_full_graph_once_nothing_is_left_to_embed(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    for i in range(4):  # 4 files of 12 sentences: ~50 unit vectors, above the limit of 30 below
        (docs / f"notes{i}.txt").write_text(
            " ".join(f"Entry {j} of ledger {i} records {j * 3} crates of pears shipped north." for j in range(12))
        )
    k = RunningKernel(home_dir, merge(PIPELINE, {"search": {"exact_search_vectors": 30}})).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        data = home_dir / "data"
        wait_for(lambda: ready(k) and (data / "vectors.usearch").exists(), 120, 0.1, "indexed and saved")
        assert settled(home_dir)
        # The ingest thread, idle, rebuilt the draft as a full graph and saved it without the draft marker.
        wait_for(lambda: not (data / "vectors.usearch.draft").exists(), 60, 0.3, "the draft replaced")
        logged = "".join(p.read_text(errors="replace") for p in k.home.log_dir.glob("indexer.log*"))
        assert "graph rebuilt full" in logged
        details = k.client().request("indexer", DescribeRequest(), DescribeReply, timeout=20).body.details
        assert details["vector_graph"] == "full" and details["unit_vectors"] > 30
        hits = search(home_dir, "crates of pears shipped north", "semantic")["results"]
        assert {Path(h["file_path"]).name for h in hits} == {f"notes{i}.txt" for i in range(4)}
    finally:
        k.stop()
