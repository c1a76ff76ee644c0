"""Searches answered while the indexer writes (between the slices of an embedding reply's vectors, during a
Tantivy commit) with complete and consistent results, and side by side with another search.

The first two tests run in this process on a real usearch index (the lock's order and the sliced add);
the others drive a real kernel whose ingest thread a test switch holds mid-write
(``FOLDERMIND_TEST_INDEXER_HOLD``, :mod:`foldermind.workers.framework.faults`), and one whose searches take their query
vectors from the embedder, several at once."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from foldermind.protocol.messages import (
    IndexStatusReply,
    IndexStatusRequest,
    SearchReply,
    SearchRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.workers.indexer.storage.gate import Gate
from foldermind.workers.indexer.storage.vectors import ADD_SLICE, VectorIndex
from tests.config import merge
from tests.helpers import FAST_RESTART, SEARCH_OVER_BUS, RunningKernel, remove_tree, short_tmpdir, wait_for
from tests.world import KernelWorld

MODES = ("keyword", "semantic", "hybrid")


def test_a_reader_waiting_on_a_writer_goes_before_the_writers_next_turn() -> None:
    gate = Gate()
    order: list[str] = []
    holding, go = threading.Event(), threading.Event()

    def writer() -> None:
        with gate.write():
            order.append("write 1")
            holding.set()
            go.wait(10)
        with gate.write():  # at once, as the next slice of an add is
            order.append("write 2")

    def reader() -> None:
        with gate.read():
            order.append("read")

    w = threading.Thread(target=writer)
    w.start()
    assert holding.wait(10)
    r = threading.Thread(target=reader)
    r.start()
    wait_for(lambda: gate._waiting == 1, 10, 0.001, "the reader waiting")  # the gate's own count
    go.set()
    w.join(10)
    r.join(10)
    assert order == ["write 1", "read", "write 2"]


def test_readers_share_the_gate_and_a_writer_waits_for_them() -> None:
    gate = Gate()
    inside, release = threading.Barrier(3), threading.Event()
    wrote: list[int] = []

    def reader() -> None:
        with gate.read():
            inside.wait(10)  # both readers are in at once, or this times out
            release.wait(10)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    inside.wait(10)
    writer = threading.Thread(target=lambda: _write_once(gate, wrote))
    writer.start()
    writer.join(0.2)
    assert writer.is_alive() and not wrote, "a writer went in while readers held the gate"
    release.set()
    writer.join(10)
    assert wrote == [1]


def test_back_to_back_readers_do_not_keep_a_writer_out() -> None:
    gate = Gate()
    stop = threading.Event()
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            with gate.read():
                reads[0] += 1

    def writer(writes: list[int]) -> None:
        for _ in range(20):
            seen = reads[0]
            with gate.write():
                writes.append(seen)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    writes: list[int] = []
    w = threading.Thread(target=writer, args=(writes,))
    try:
        w.start()
        w.join(30)
        assert not w.is_alive(), f"the writer got {len(writes)} of 20 turns while readers kept coming"
    finally:
        stop.set()
        for t in readers:
            t.join(10)
    assert reads[0] > 0


def _write_once(gate: Gate, wrote: list[int]) -> None:
    with gate.write():
        wrote.append(1)


def test_searches_are_answered_between_the_slices_of_one_large_add(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base, more, ndim = 3000, 64 * ADD_SLICE, 64
    index = VectorIndex(tmp_path / "v.usearch", ndim)
    unit = rng.standard_normal((base + more, ndim)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    index.add(list(range(base)), unit[:base])
    sizes_seen: list[int] = []
    adding = threading.Thread(target=index.add, args=(list(range(base, base + more)), unit[base:]))
    adding.start()
    while adding.is_alive():
        hits = index.search(unit[0], 5)
        assert hits[0][0] == 0  # a vector's nearest is itself, whatever is being added
        sizes_seen.append(len(index))
    adding.join()
    mid = [n for n in sizes_seen if base < n < base + more]
    assert mid, f"no search was answered while the add was under way (sizes seen: {sorted(set(sizes_seen))})"
    assert len(index) == base + more
    assert index.search(unit[-1], 1)[0][0] == base + more - 1


# --------------------------------------------------------------------------------------------
# a real kernel, its ingest thread held mid-write

SEED = "The harbour crane lifted containers onto the quay while the pilot boat waited for the tide.\n"


def long_text(word: str, paragraphs: int) -> str:
    """Enough text for more than one slice of vectors (one chunk is at most 256 tokens)."""
    return "\n\n".join(
        f"Paragraph {i} on {word}: the orchard keeper counted {i} ladders, pruned the pear trees, mended "
        f"the cider press and wrote the harvest ledger for row {i}, noting frost, bees and rain. " * 4
        for i in range(paragraphs)
    )


class Busy(KernelWorld):
    def __init__(self, kernel: RunningKernel, docs: Path, flags: Path) -> None:
        super().__init__(kernel, docs.parent, "busy-test")
        self.docs, self.flags = docs, flags

    def search(self, query: str, mode: str = "hybrid", check_mode: bool = True, **kw: Any) -> SearchReply:
        return super().search(query, mode, check_mode, **{"top_k": 5, **kw})

    def files(self, reply: SearchReply) -> set[str]:
        return {h["file_name"] for h in reply.results}

    def summary(self, path: str) -> dict[str, Any]:
        return dict(self.call(SummaryRequest(path), SummaryReply).analysis)

    def folder(self) -> dict[str, int]:
        return dict(next(iter(self.folders().values()), {}))

    def embedded(self, files: int) -> bool:
        """The folder holds ``files`` files with chunks, every one embedded (Tantivy may lag: a hold tests it)."""
        f = self.folder()
        return bool(f and f["files_indexed"] >= files and f["chunks"] and f["chunks_embedded"] == f["chunks"])

    def other(self) -> Busy:
        """The same world through a bus client of its own (a client's requests are one at a time)."""
        return Busy(self.kernel, self.docs, self.flags)

    def hold(self, stage: str) -> Path:
        flag = self.flags / stage
        flag.write_text("hold")
        return flag


@pytest.fixture
def busy(home_dir: Path) -> Iterator[Busy]:
    root = short_tmpdir("fmb-")
    docs, flags = root / "docs", root / "flags"
    docs.mkdir()
    flags.mkdir()
    (docs / "seed.txt").write_text(SEED)
    holds = ",".join(f"{stage}:{flags / stage}" for stage in ("vectors", "commit", "search"))
    switch = {"workers": {"indexer": {"env": {"FOLDERMIND_TEST_INDEXER_HOLD": holds}}}}
    # Two search threads: off by default ([search] search_threads), these tests are what it does when on.
    config = merge(SEARCH_OVER_BUS, FAST_RESTART, switch, {"search": {"search_threads": 2}})
    k = RunningKernel(home_dir, config)
    try:
        k.start()
        b = Busy(k, docs, flags)
        b.add("Busy", docs)
        wait_for(lambda: b.embedded(1), 120, 0.2, "the seed file indexed and embedded")
        yield b
    finally:
        k.stop()
        remove_tree(root)


def test_searches_answer_completely_while_a_commit_and_an_embedding_batch_are_held(busy: Busy) -> None:
    # 1. Held inside a Tantivy commit: the new file is in the writer, not yet committed.
    flag = busy.hold("commit")
    (busy.docs / "quokka.txt").write_text("A quokka hopped across the island boardwalk at dawn.\n")
    wait_for(lambda: Path(f"{flag}.held").exists(), 60, 0.02, "the ingest thread held in its commit")
    for mode in MODES:
        reply = busy.search("harbour crane quay", mode)
        assert "seed.txt" in busy.files(reply), (mode, reply.results)
    assert not busy.search("quokka", "keyword").results, "a keyword hit before its commit"
    flag.unlink()
    wait_for(lambda: "quokka.txt" in busy.files(busy.search("quokka", "keyword")), 60, 0.1, "the commit landing")

    # 2. Held between the first and the second slice of one embedding reply's vectors.
    flag = busy.hold("vectors")
    (busy.docs / "orchard.txt").write_text(long_text("orchards", 30))
    wait_for(lambda: Path(f"{flag}.held").exists() or busy.embedded(3), 120, 0.02, "the ingest thread held mid-add")
    assert Path(f"{flag}.held").exists(), f"embedded without a hold: {busy.folder()}"
    f = busy.folder()
    # SQLite holds every vector already (it is written first); usearch has the first slice. The folder does
    # not read as embedded before a semantic search can find every chunk.
    assert f["chunks"] > ADD_SLICE + 1, f
    assert f["chunks_embedded"] < f["chunks"], f
    totals = busy.client.request("indexer", IndexStatusRequest(), IndexStatusReply, timeout=20).body.totals
    assert totals["chunks_embedded"] < totals["chunks"], totals
    for mode in MODES:
        reply = busy.search("harbour crane quay", mode)
        assert "seed.txt" in busy.files(reply), (mode, reply.results)
        # Complete and consistent: every hit is a file of the folder, read back from SQLite.
        assert busy.files(reply) <= {"seed.txt", "quokka.txt", "orchard.txt"}, reply.results
    # Its analysis waits until nothing is left to embed; meanwhile a summary is made on the spot, not stored.
    db = busy.kernel.home.data_dir / "index.sqlite"
    orchard = str((busy.docs / "orchard.txt").resolve())
    assert stored_analysis(db, orchard) is None
    on_the_spot = busy.summary(orchard)
    assert on_the_spot["file_path"] == orchard and on_the_spot["keywords"], on_the_spot
    flag.unlink()
    wait_for(lambda: busy.embedded(3), 120, 0.2, "every chunk embedded once the hold ends")
    assert "orchard.txt" in busy.files(busy.search("pruning pear trees and the cider press", "semantic"))
    wait_for(lambda: stored_analysis(db, orchard) is not None, 60, 0.1, "the analysis stored once idle")
    assert busy.summary(orchard) == on_the_spot  # the same fields, dated when the content was written


def stored_analysis(db: Path, path: str) -> str | None:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as conn:
        row = conn.execute(
            "SELECT a.fields FROM analysis a JOIN documents d ON d.id = a.doc_id WHERE d.path = ?", (path,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_a_search_is_answered_while_another_search_is_still_in_hand(busy: Busy) -> None:
    flag = busy.hold("search")
    first: list[SearchReply] = []
    held = threading.Thread(target=lambda: first.append(busy.other().search("harbour crane", "keyword")))
    held.start()
    try:
        wait_for(lambda: Path(f"{flag}.held").exists(), 30, 0.02, "the first search held in its handler")
        for mode in MODES:
            reply = busy.search("harbour crane quay", mode)
            assert "seed.txt" in busy.files(reply), (mode, reply.results)
        assert held.is_alive() and not first, "the first search ended before the others were answered"
    finally:
        flag.unlink()
        held.join(30)
    assert first and "seed.txt" in busy.files(first[0])


def test_semantic_searches_side_by_side_each_get_their_own_query_vector_from_the_embedder(home_dir: Path) -> None:
    """With ``query_encoder = "embedder"`` (and whenever the local model cannot serve the index's vectors) a
    search asks the embedder for its query vector over the bus: two searches on two side threads must not share
    one socket (a ZeroMQ socket is not thread-safe: one thread took the other's reply, and the other waited out
    ``query_embed_timeout_s`` and answered from keyword search)."""
    root = short_tmpdir("fmb-")
    docs = root / "docs"
    docs.mkdir()
    (docs / "seed.txt").write_text(SEED)
    config = merge(SEARCH_OVER_BUS, FAST_RESTART, {"search": {"search_threads": 2, "query_encoder": "embedder"}})
    k = RunningKernel(home_dir, config)
    try:
        k.start()
        b = Busy(k, docs, root / "flags")
        b.add("Busy", docs)
        wait_for(lambda: b.embedded(1), 120, 0.2, "the seed file indexed and embedded")
        words = ("harbour", "crane", "quay", "ship", "dock", "cargo", "tide", "pier")
        answered: list[tuple[str, str | None]] = []

        def ask(client: Busy, n: int) -> None:
            for i in range(6):  # distinct queries: none is answered from the query-vector cache
                q = f"{words[(n + i) % len(words)]} {words[(n * 3 + i) % len(words)]} number {n}-{i}"
                r = client.client.request("indexer", SearchRequest(q, "semantic", 5), SearchReply, timeout=30).body
                answered.append((r.mode_used, r.note))

        threads = [threading.Thread(target=ask, args=(b.other(), n)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(answered) == 24
        assert all(mode == "semantic" for mode, _ in answered), [note for mode, note in answered if note]
    finally:
        k.stop()
        remove_tree(root)
