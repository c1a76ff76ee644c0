"""The index on disk shrinks back after a big file leaves: a real kernel (watcher, parser, indexer; no embedder,
whose model would take minutes over a few MB, so SQLite and Tantivy hold the bytes), then SQLite's and usearch's
compaction each on a real file of its own (docs/benchmarks/ingest.md has the sizes)."""

from __future__ import annotations

import os
import random
import sqlite3
import sys
from pathlib import Path

import numpy as np

from foldermind.workers.indexer.storage.database import FREE_MIN_BYTES, Database
from foldermind.workers.indexer.storage.storage import disk_bytes
from foldermind.workers.indexer.storage.vectors import VectorIndex
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, cli, only_workers, wait_for, wait_found

PIPELINE = merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"))
WORDS = [f"w{i:04d}" for i in range(3000)]


def per_store(data: Path) -> dict[str, int]:
    """Bytes of each store under the data folder (SQLite with its WAL, the Tantivy folder, the rest)."""
    out = {"sqlite": 0, "tantivy": disk_bytes(data / "tantivy"), "other": 0}
    for path in data.iterdir():
        if path.is_file():
            out["sqlite" if path.name.startswith("index.sqlite") else "other"] += path.stat().st_size
    return out


def write_big(path: Path, seed: int) -> None:
    """~4 MB of random sentences of :data:`WORDS`, marked by the word "bigfileword"."""
    rng = random.Random(seed)
    lines = (" ".join(rng.choices(WORDS, k=12)) + ".\n" for _ in range(60_000))
    path.write_text("The bigfileword marks this file.\n" + "".join(lines))


def test_the_index_on_disk_falls_back_near_its_size_after_a_big_file_is_deleted(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"small{i:02d}.txt").write_text(f"Small note {i} about the harbour and its keeper.\n" * 40)
    big = docs / "big.txt"
    write_big(big, 7)
    big.rename(home_dir / "big.txt")  # kept aside until the small ones are in
    data = home_dir / "data"
    k = RunningKernel(home_dir, PIPELINE).start()
    try:
        cli(home_dir, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=120)
        wait_found(k, "keeper", {f"small{i:02d}.txt" for i in range(8)}, 60, "the small files indexed")
        before = disk_bytes(data)
        sizes = {"before": per_store(data)}
        (home_dir / "big.txt").rename(big)
        wait_found(k, "bigfileword", {"big.txt"}, 600, "the big file indexed")
        sizes["added"] = per_store(data)
        added = disk_bytes(data)
        big.unlink()
        wait_found(k, "bigfileword", set(), 120, "the big file gone from search")
        sizes["deleted"] = per_store(data)
        # The big file's bytes must go; what stays is the stores' fixed overhead: SQLite's WAL up to its
        # checkpoint size (4 MB by default, 1000 pages), a Tantivy segment or two of metadata. A quarter of
        # what the big file added is far above that and far below keeping it all.
        bound = before + (added - before) // 4
        try:
            wait_for(lambda: disk_bytes(data) <= bound, 180, 0.5, f"index back under {bound} bytes")
        finally:
            sizes["settled"] = per_store(data)
            print(sizes, file=sys.stderr)
        assert added > before + 2_000_000, "the big file did not grow the index: the test measures nothing"
    finally:
        k.stop()


def test_a_deleted_file_gives_its_pages_back_while_no_embedder_can_take_its_chunks(home_dir: Path) -> None:
    # No embedder runs and the retry is an hour away: the big file's chunks fetched for the first request stay
    # unembedded. Held as work in hand, they kept the pipeline from ever being idle, so nothing was compacted.
    docs = home_dir / "docs"
    docs.mkdir()
    big = docs / "big.txt"
    write_big(big, 11)
    data = home_dir / "data"
    k = RunningKernel(home_dir, merge(PIPELINE, {"ingest": {"embed_retry_s": 3600.0}})).start()
    try:
        cli(home_dir, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=600)
        wait_found(k, "bigfileword", {"big.txt"}, 600, "the big file indexed")
        added = per_store(data)["sqlite"]
        big.unlink()
        wait_found(k, "bigfileword", set(), 120, "the big file gone from search")
        wait_for(lambda: per_store(data)["sqlite"] < added // 4, 180, 0.5, "the database compacted")
        assert added > 5_000_000, "the big file did not grow the database: the test measures nothing"
    finally:
        k.stop()


def test_a_database_made_before_auto_vacuum_gives_its_free_pages_back_once_they_pass_the_share(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    old = sqlite3.connect(path, isolation_level=None)  # as main made it: no auto_vacuum
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE filler (x BLOB)")
    old.close()
    store = Database(path)
    db = store.db
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    with store.tx() as tx:
        tx.executemany("INSERT INTO filler VALUES (?)", ((os.urandom(1000),) for _ in range(12_000)))
    with store.tx() as tx:
        tx.execute("DELETE FROM filler WHERE rowid % 10 = 0")  # a tenth free: under the share
    assert not store.compact()
    with store.tx() as tx:
        tx.execute("DELETE FROM filler")
    full = path.stat().st_size
    assert db.execute("PRAGMA freelist_count").fetchone()[0] * 4096 > FREE_MIN_BYTES
    assert store.compact()
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # converted, so the next time is incremental
    assert path.stat().st_size < full // 10
    assert Path(f"{path}-wal").stat().st_size == 0  # checkpointed and truncated
    with store.tx() as tx:
        tx.executemany("INSERT INTO filler VALUES (?)", ((os.urandom(1000),) for _ in range(12_000)))
    with store.tx() as tx:
        tx.execute("DELETE FROM filler")
    assert store.compact()  # incremental now
    assert path.stat().st_size < full // 10


def test_the_vector_file_shrinks_once_removed_vectors_are_rebuilt_away(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    index = VectorIndex(tmp_path / "vectors.usearch", 384)
    index.add(list(range(1, 3001)), rng.random((3000, 384), dtype=np.float32))
    index.save()
    kept = index.path.stat().st_size
    index.add(list(range(10_001, 30_001)), rng.random((20_000, 384), dtype=np.float32))
    index.save()
    grown = index.path.stat().st_size
    assert not index.wasted
    index.remove(list(range(10_001, 30_001)))
    index.save()
    assert index.path.stat().st_size == grown  # usearch keeps a removed vector's slot
    assert index.wasted
    draft = index.draft
    live = list(range(1, 3001))
    index.rebuilt([(live, rng.random((3000, 384), dtype=np.float32))], draft=draft)
    index.save()
    assert index.path.stat().st_size <= kept * 1.1
    assert not index.wasted and index.draft == draft and len(index) == 3000


def test_opening_the_index_writes_nothing_so_a_restart_on_a_full_disk_opens_it(tmp_path: Path) -> None:
    # Setting auto_vacuum on a file that has it writes a page to the WAL at every connection: an indexer killed on
    # a full disk then failed to open its index at each restart and went FAILED (test_resource_faults' full-disk run).
    path = tmp_path / "index.sqlite"
    Database(path).db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name("index.sqlite-wal")
    assert wal.stat().st_size == 0
    reopened = Database(path)  # a new process's open: its own connection, the schema checked, migrations run
    assert int(reopened.db.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2  # INCREMENTAL, kept
    assert wal.stat().st_size == 0, "opening the index wrote to it"
