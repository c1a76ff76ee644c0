"""Damaged indexes, with real processes: files of a stopped kernel's index broken on purpose, then a start.

The Tantivy folder and the usearch file are rebuilt from SQLite at start (a garbled ``meta.json``, a deleted
segment file, the folder removed, a truncated vector file), with a status note while it lasts; a damaged SQLite
file (a bad header, overwritten pages) is named with its fix in ``status`` and ``doctor`` and answered with
``database_damaged``, and ``foldermind repair`` brings search back.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    SearchReply,
    SearchRequest,
    SummaryReply,
    SummaryRequest,
)
from tests import mcpclient as mc
from tests.config import Config, merge
from tests.helpers import (
    FAST_RESTART,
    LIGHT_MAP,
    ONE_PARSER,
    RunningKernel,
    cli,
    only_workers,
    remove_tree,
    short_tmpdir,
    wait_for,
)

FILES = 25
WORD = "heronfield"
"""In every file once: a keyword search for it finds every document."""


def _config(flags: Path, embed: bool, mcp: bool) -> Config:
    # The first Tantivy commit after a start waits while ``flags/commit`` exists: a test reads the rebuild's note.
    switch = {"workers": {"indexer": {"env": {"FOLDERMIND_TEST_INDEXER_HOLD": f"commit:{flags / 'commit'}"}}}}
    workers = ("watcher", "parser", "indexer", *(["embedder"] if embed else []), *(["frontdoor"] if mcp else []))
    return merge(FAST_RESTART, only_workers(*workers), ONE_PARSER, switch)


def _corpus(docs: Path) -> None:
    docs.mkdir(parents=True)
    for i in range(FILES):
        (docs / f"note{i:02d}.txt").write_text(f"Field note {i}: the {WORD} marsh had {i} herons and a kingfisher.\n")


def found(k: RunningKernel, mode: str = "keyword") -> set[str]:
    with k.client() as client:
        reply = client.request("indexer", SearchRequest(WORD, mode=mode, top_k=50), SearchReply, timeout=30).body
    return {hit["file_name"] for hit in reply.results}


def describe(k: RunningKernel) -> dict[str, object]:
    with k.client() as client:
        return dict(client.request("indexer", DescribeRequest(), DescribeReply, timeout=30).body.details)


def every_file_found(k: RunningKernel, mode: str = "keyword") -> bool:
    try:
        return len(found(k, mode)) == FILES
    except JobError:
        return False


class World:
    def __init__(self, embed: bool, mcp: bool = False) -> None:
        self.root = short_tmpdir()  # the bus's socket path must stay short
        self.flags, self.docs, self.embed = self.root / "flags", self.root / "docs", embed
        self.flags.mkdir()
        _corpus(self.docs)
        self.kernel = RunningKernel(self.root, _config(self.flags, embed, mcp))
        self.data = self.kernel.home.data_dir

    def index(self) -> None:
        self.kernel.start()
        cli(self.root, "folders", "add", str(self.docs), "--name", "Notes", "--wait", timeout=180)
        wait_for(lambda: every_file_found(self.kernel), 60, 0.2, "every note indexed")
        if self.embed:
            wait_for(lambda: every_file_found(self.kernel, "semantic"), 60, 0.2, "every note embedded")
            assert describe(self.kernel)["vectors"] == FILES

    def restart_held(self) -> None:
        """Start with the first Tantivy commit held (so the rebuild's note can be read)."""
        (self.flags / "commit").touch()
        self.kernel.start()

    def release(self) -> None:
        (self.flags / "commit").unlink(missing_ok=True)
        (self.flags / "commit.held").unlink(missing_ok=True)

    def note(self) -> str:
        return str(self.kernel.worker("indexer")["note"] or "")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World(embed=True)
    try:
        w.index()
        yield w
    finally:
        w.release()
        w.kernel.stop()
        remove_tree(w.root)


@pytest.fixture
def stopped(world: World) -> Iterator[World]:
    """The world's kernel stopped, every note searchable; started again (and checked) by the test."""
    assert every_file_found(world.kernel)
    world.kernel.stop()
    yield world
    world.release()


def _rebuilt_from_the_database(w: World, why: str) -> None:
    """Started with the first commit held: the note names the damage and the refill's progress; once let go,
    keyword search finds every note again, and the log said so in one line."""
    w.restart_held()
    try:
        note = wait_for(lambda: "rebuilding from the database" in (n := w.note()) and n, 30, 0.1, "the rebuild's note")
        assert note.startswith(f"keyword index damaged ({why}): rebuilding from the database, 0/{FILES} documents")
        assert not every_file_found(w.kernel)  # nothing replayed yet: the note is not a formality
    finally:
        w.release()
    wait_for(lambda: every_file_found(w.kernel), 60, 0.2, "every note found by keyword again")
    assert describe(w.kernel)["chunks_in_bm25"] == FILES
    wait_for(lambda: "rebuilding" not in w.note(), 10, 0.1, "the note cleared")
    log = cli(w.root, "logs", "indexer").stdout
    assert f"keyword index damaged ({why}): rebuilding from the database" in log


def test_a_garbled_meta_json_is_rebuilt_from_the_database(stopped: World) -> None:
    (stopped.data / "tantivy" / "meta.json").write_text("garbage{{ not json")
    _rebuilt_from_the_database(stopped, "its meta.json is unreadable")


def test_a_deleted_segment_file_is_rebuilt_from_the_database(stopped: World) -> None:
    segment = sorted(p for p in (stopped.data / "tantivy").iterdir() if p.suffix == ".idx")[0]
    segment.unlink()
    _rebuilt_from_the_database(stopped, "a segment file is missing")


def test_a_removed_keyword_folder_is_refilled_from_the_database(stopped: World) -> None:
    remove_tree(stopped.data / "tantivy")
    _rebuilt_from_the_database(stopped, f"it holds 0 chunks, the database {FILES}")
    # And once more: the refill is committed for good, and a sound index is not rebuilt again.
    log = stopped.kernel.home.log_file("indexer")
    before = log.read_text().count("keyword index damaged")
    stopped.kernel.stop()
    stopped.kernel.start()
    assert every_file_found(stopped.kernel)
    assert log.read_text().count("keyword index damaged") == before


def test_documents_waiting_to_be_parsed_again_cause_no_rebuild(stopped: World) -> None:
    """Every document marked for parsing again while stopped (as an upgrade of the parsers does): their old
    chunks are still in Tantivy and not counted by SQLite as indexed; that is no damage, and nothing is rebuilt
    (the documents are parsed again and found as before)."""
    log = stopped.kernel.home.log_file("indexer")
    before = log.read_text().count("keyword index damaged")
    db = sqlite3.connect(stopped.data / "index.sqlite")
    with db:
        db.execute("UPDATE documents SET status = 'pending', attempts = 0, sha256 = NULL")
    db.close()
    stopped.kernel.start()
    wait_for(lambda: _all_indexed(stopped) and every_file_found(stopped.kernel), 60, 0.2, "every note parsed again")
    assert log.read_text().count("keyword index damaged") == before


def _all_indexed(w: World) -> bool:
    db = sqlite3.connect(w.data / "index.sqlite")
    try:
        return bool(db.execute("SELECT COUNT(*) FROM documents WHERE status != 'indexed'").fetchone()[0] == 0)
    finally:
        db.close()


def test_a_truncated_vector_file_is_rebuilt_from_the_database(stopped: World) -> None:
    path = stopped.data / "vectors.usearch"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    stopped.kernel.start()
    wait_for(lambda: describe(stopped.kernel)["vectors"] == FILES, 60, 0.2, "every vector restored")
    assert every_file_found(stopped.kernel, "semantic")
    log = cli(stopped.root, "logs", "indexer").stdout
    assert "vector index unreadable" in log and "vectors restored" in log


def _overwrite_pages(db: Path, tables: list[str]) -> None:
    """Random bytes over the root pages of ``tables`` (the file checkpointed first, so every page is in it)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    marks = ",".join("?" * len(tables))
    roots = [int(r[0]) for r in conn.execute(f"SELECT rootpage FROM sqlite_master WHERE name IN ({marks})", tables)]
    conn.close()
    with open(db, "r+b") as fh:
        for page in roots:
            fh.seek((page - 1) * size)
            fh.write(os.urandom(size))


@pytest.fixture
def damaged_home() -> Iterator[World]:
    """An indexed home (keyword only, with the MCP front door), stopped."""
    w = World(embed=False, mcp=True)
    try:
        w.index()
        w.kernel.stop()
        yield w
    finally:
        w.release()
        w.kernel.stop()
        remove_tree(w.root)


def _named_then_repaired(w: World) -> None:
    """Started on the damaged file: status names it with the fix, a search gets ``database_damaged``, doctor
    fails on it; then stopped, repaired, started: keyword search finds every note again."""
    w.kernel.start()
    note = wait_for(lambda: "database damaged" in (n := w.note()) and n, 30, 0.1, "the damage in the status note")
    assert "foldermind repair" in note and "index.sqlite" in note
    assert w.kernel.worker("indexer")["state"] == "RUNNING"
    with pytest.raises(JobError) as caught:
        found(w.kernel)
    assert caught.value.code is ErrorCode.DATABASE_DAMAGED and "foldermind repair" in caught.value.message
    result = mc.call(str(mc.mcp_info(w.root)["url"]), mc.token_of(w.root), "search_documents", {"query": WORD})
    assert mc.error_code(result) == "DATABASE_DAMAGED"
    assert "foldermind repair" in result.content[0].text  # type: ignore[union-attr]
    search = cli(w.root, "search", WORD, "--mode", "keyword", check=False)
    assert search.returncode != 0 and "database damaged" in search.stderr and "foldermind repair" in search.stderr
    status = cli(w.root, "status").stdout
    assert "database damaged" in status and "foldermind repair" in status
    doctor = cli(w.root, "doctor", "--json", check=False)
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["database"]["status"] == "fail" and "repair" in checks["database"]["fix"]
    refused = cli(w.root, "repair", check=False)
    assert refused.returncode != 0 and "stop" in refused.stderr  # never under a running indexer
    log = cli(w.root, "logs", "indexer").stdout
    assert log.count("database damaged") == 1 and "Traceback" not in log  # said once, no traceback per request
    w.kernel.stop()
    doctor = cli(w.root, "doctor", "--json", check=False)  # stopped: the file itself is checked
    check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["database"]
    assert doctor.returncode == 1 and check["status"] == "fail" and "is damaged" in check["detail"]
    out = cli(w.root, "repair").stdout
    assert "is damaged" in out and "kept as" in out
    assert list(w.data.glob("index.sqlite.damaged-*"))
    doctor = cli(w.root, "doctor", "--json", check=False)
    assert {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["database"]["status"] == "ok"
    w.kernel.start()
    wait_for(lambda: every_file_found(w.kernel), 120, 0.3, "every note found by keyword after the repair")
    assert "database damaged" not in w.note()


def test_a_database_with_a_bad_header_is_named_and_repaired(damaged_home: World) -> None:
    db = damaged_home.data / "index.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(db, "r+b") as fh:
        fh.write(b"this is no database at all")
    _named_then_repaired(damaged_home)


def test_a_database_with_overwritten_pages_is_named_and_repaired(damaged_home: World) -> None:
    _overwrite_pages(damaged_home.data / "index.sqlite", ["chunks", "documents"])
    _named_then_repaired(damaged_home)


def test_a_crash_loops_cause_reaches_status_logs_and_doctor_in_one_line(home_dir: Path) -> None:
    flaky = {
        "module": "tests.faultworker",
        "restart": {"max_restarts": 2, "window_s": 60.0},
        "env": {"FOLDERMIND_FAULT": "raise_on_start"},
    }
    config = merge(FAST_RESTART, LIGHT_MAP, {"workers": {"flaky": flaky}})
    k = RunningKernel(home_dir, config)
    try:
        cli(home_dir, "start")
        k.kernel_pid = int(k.home.pid_file.read_text())
        w = k.wait_state("flaky", "FAILED", timeout=30)
        cause = "flaky failed: RuntimeError: FOLDERMIND_FAULT=raise_on_start: the setup failed on purpose"
        assert f"exited with status 1: {cause}" in (w["last_error"] or "")
        assert cause in cli(home_dir, "status").stdout
        assert cause in cli(home_dir, "logs", "flaky").stdout
        doctor = cli(home_dir, "doctor", "--json", check=False)
        assert doctor.returncode == 1
        check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["worker flaky"]
        assert check["status"] == "fail" and cause in check["detail"] and "logs flaky" in check["fix"]
    finally:
        k.stop()


def test_damage_the_ingest_finds_while_running_is_said_once_and_stops_the_writes(damaged_home: World) -> None:
    """Pages the start does not read (the analysis table's): the indexer starts and serves; its ingest thread
    finds the damage, says so once (log and status), writes nothing more, and every request is then refused
    with ``database_damaged`` instead of failing one by one as ``internal``."""
    w = damaged_home
    _overwrite_pages(w.data / "index.sqlite", ["analysis"])
    w.kernel.start()
    note = wait_for(lambda: "database damaged" in (n := w.note()) and n, 30, 0.1, "the damage in the status note")
    assert "database disk image is malformed" in note and "foldermind repair" in note
    assert w.kernel.worker("indexer")["state"] == "RUNNING"
    with w.kernel.client() as client, pytest.raises(JobError) as caught:
        client.request("indexer", SummaryRequest(str(w.docs / "note03.txt")), SummaryReply, timeout=30)
    assert caught.value.code is ErrorCode.DATABASE_DAMAGED
    with pytest.raises(JobError) as caught:
        found(w.kernel)
    assert caught.value.code is ErrorCode.DATABASE_DAMAGED
    log = w.kernel.home.log_file("indexer").read_text()
    assert "indexing stopped" in log
    assert log.count("database damaged") == 1 and "Traceback" not in log  # said once, no traceback per step
    # The watcher, refused the folder list, says so once and waits for the repair (not a retry a second).
    watcher = w.kernel.home.log_file("watcher")
    wait_for(lambda: "folders not watched: database damaged" in watcher.read_text(), 20, 0.1, "the watcher's line")
    assert watcher.read_text().count("database damaged") == 1


def test_a_salvage_skips_damaged_pages_and_keeps_the_rows_around_them(tmp_path: Path) -> None:
    """In-process, on a real SQLite file: leaf pages in the middle of a table overwritten; the copy keeps every
    row before and after them, the AUTOINCREMENT counter, and an index over the table."""
    from foldermind.kernel.cli import salvage

    path = tmp_path / "index.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL);CREATE INDEX t_text ON t(text);"
    )
    db.executemany("INSERT INTO t(text) VALUES(?)", [(f"row {i} " + "x" * 200,) for i in range(20000)])
    db.commit()
    size = int(db.execute("PRAGMA page_size").fetchone()[0])
    leaves = [int(r[0]) for r in db.execute("SELECT pageno FROM dbstat WHERE name = 't' AND pagetype = 'leaf'")]
    db.close()
    hit = leaves[len(leaves) // 2 : len(leaves) // 2 + 3]
    with open(path, "r+b") as fh:
        for page in hit:
            fh.seek((page - 1) * size)
            fh.write(os.urandom(size))
    assert salvage.check(path) != "ok"
    out = tmp_path / "new.sqlite"
    result = salvage.salvage(path, out)
    assert salvage.check(out) == "ok"
    assert 1 <= result.damaged["t"] <= 3  # one damaged spot per page at most
    new = sqlite3.connect(out)
    ids = [int(r[0]) for r in new.execute("SELECT id FROM t ORDER BY id")]
    assert ids[0] == 1 and ids[-1] == 20000  # rows after the damage are kept
    assert 20000 - 3 * 20 <= len(ids) < 20000  # about a page's rows lost per damaged page, no more
    assert new.execute("SELECT seq FROM sqlite_sequence WHERE name = 't'").fetchone()[0] == 20000
    assert new.execute("SELECT name FROM sqlite_master WHERE name = 't_text'").fetchone()
    new.close()


def test_a_vector_file_of_another_dimension_is_started_afresh_not_fatal(tmp_path: Path) -> None:
    """In-process, a real usearch file: one of 8-d vectors where the database records 16-d used to stop the
    indexer at every start; it is now emptied (the ingest thread refills it from SQLite) and says why."""
    import numpy as np

    from foldermind.workers.indexer.storage.vectors import VectorIndex

    path = tmp_path / "vectors.usearch"
    small = VectorIndex(path, 8)
    small.add([1, 2], np.ones((2, 8), dtype=np.float32))
    small.save()
    index = VectorIndex(path, 16)
    assert (len(index), index.ndim, index.dirty) == (0, 16, True)
    assert index.damaged == "8-d vectors, the database's are 16-d"
