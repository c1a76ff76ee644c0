"""A long PDF's pages are indexed as they are read: a search finds its first page while the parser is still
reading, and the document ends as a parse in one go leaves it (:mod:`foldermind.workers.indexer.ingest.pages`).

A real kernel (watcher, one parser, indexer) indexes a long real PDF, its parser starved to a quarter of its
time (SIGSTOP/SIGCONT, as test_parse_progress does) until it has sent its first pages, and then held there by
its test switch (``FOLDERMIND_TEST_PARSER_HOLD_PAGES``): a search finds the first page's word while the
document is ``indexing`` ("n of N pages indexed", as ``folders show`` and ``index_status`` list it) and the
parse has not ended; once parsed, its chunks are those of the same PDF parsed in one go (texts, ordinals,
places), each once. A parse cut off there (no progress for its deadline, twice) fails with the reason and "n
of N pages indexed", those pages still found. A parser killed there (kill -9), with the embedder running,
leaves pages and vectors that the retry replaces: the same end, every chunk embedded once, no vector left in
the usearch file for a chunk that is gone. A kernel killed there (kill -9) leaves the document ``indexing``;
after a restart its pages are found while it is parsed again, and it ends the same, Tantivy holding each of
its chunks once. A PDF replaced while held ends as its new version.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import IndexStatusReply, IndexStatusRequest
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.vectors import VectorIndex
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import parse_content
from tests.config import Config, merge
from tests.helpers import (
    FAST_RESTART,
    RunningKernel,
    cli,
    found,
    kill9,
    only_workers,
    remove_tree,
    short_tmpdir,
    wait_for,
    wait_found,
)
from tests.test_parse_progress import FIRST, LAST, PAGES, document, long_pdf, starved

NOTE = re.compile(rf"^(\d+) of {PAGES} pages indexed")


LIGHT = ("watcher", "parser", "indexer")


def config(workers: tuple[str, ...], flag: Path, extra: Config | None = None) -> Config:
    parser = {"count": 1, "env": {"FOLDERMIND_TEST_PARSER_HOLD_PAGES": f"manual:{flag}"}}
    return merge(FAST_RESTART, only_workers(*workers), {"workers": {"parser": parser}}, extra or {})


Kernel = tuple[RunningKernel, Path, Path]
"""A running kernel, its documents folder and the flag of its parser's hold."""


@contextlib.contextmanager
def started(home_dir: Path, workers: tuple[str, ...], extra: Config | None = None) -> Iterator[Kernel]:
    root = short_tmpdir("fmpages-")
    (root / "docs").mkdir()
    flag = root / "hold"
    k = RunningKernel(home_dir, config(workers, flag, extra)).start()
    try:
        yield k, root / "docs", flag
    finally:
        flag.unlink(missing_ok=True)
        k.stop()
        remove_tree(root)


@pytest.fixture
def kernel(home_dir: Path) -> Iterator[Kernel]:
    with started(home_dir, LIGHT) as running:
        yield running


@pytest.fixture
def embedding_kernel(home_dir: Path) -> Iterator[Kernel]:
    with started(home_dir, (*LIGHT, "embedder")) as running:
        yield running


@pytest.fixture
def impatient_kernel(home_dir: Path) -> Iterator[Kernel]:
    """A parse is cut off after 1 s without progress (a held one makes none)."""
    with started(home_dir, LIGHT, {"ingest": {"parse_timeout_s": 1}, "bus": {"overrun_grace_s": 1}}) as running:
        yield running


def index(home: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(home / "data" / "index.sqlite"))


def stored_chunks(home: Path, name: str) -> list[tuple[Any, ...]]:
    with index(home) as db:
        return db.execute(
            "SELECT c.ordinal, c.text, c.char_start, c.char_end, c.line_start, c.line_end, c.page_start FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE d.path LIKE ? ORDER BY c.ordinal, c.id",
            (f"%/{name}",),
        ).fetchall()


def embedded(home: Path, name: str) -> tuple[int, int]:
    """(chunks with a vector, chunks) of the file ``name``."""
    with index(home) as db:
        row = db.execute(
            "SELECT COUNT(c.vector), COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path LIKE ?",
            (f"%/{name}",),
        ).fetchone()
        return int(row[0]), int(row[1])


def leftovers(home: Path) -> int:
    """Vectors held back for pages still to come: none once nothing is being indexed."""
    with index(home) as db:
        return int(db.execute("SELECT COUNT(*) FROM reusable").fetchone()[0])


def in_one_go(pdf: Path) -> list[tuple[Any, ...]]:
    data = pdf.read_bytes()
    doc = parse_content(pdf, data, len(data))
    return [
        (c["ordinal"], c["text"], c["char_start"], c["char_end"], c["line_start"], c["line_end"], c["page_start"])
        for c in chunk(doc.segments, load_tokenizer(), 256, 32)
    ]


def held_after_first_pages(k: RunningKernel, flag: Path) -> int:
    """The parser's pid, once it holds after sending its first pages (starved until then, so its parse lasts
    past the moment a parse first sends pages, on any machine)."""
    parser = wait_for(lambda: k.pids().get("parser"), 120, 0.02, "the parser running")
    held = Path(f"{flag}.held")
    with starved(parser):
        wait_for(lambda: held.exists() or ended(k.root), 300, 0.02, "the first pages sent")
    assert held.exists(), f"parsed without sending pages ahead: {dict(document(k.root, 'manual.pdf') or {})}"
    return parser


def ended(home: Path) -> bool:
    row = document(home, "manual.pdf")
    return row is not None and row["status"] in ("indexed", "failed")


def half_indexed(k: RunningKernel, docs: Path, flag: Path) -> Path:
    """The long PDF, added, its parser held after sending its first pages and the first page found."""
    flag.write_text("hold")
    pdf = long_pdf(docs / "manual.pdf")
    cli(k.root, "folders", "add", str(docs))
    held_after_first_pages(k, flag)
    wait_found(k, FIRST, {"manual.pdf"}, 25, "the first page found")
    return pdf


def finished(home: Path) -> sqlite3.Row:
    done = wait_for(lambda: (r := document(home, "manual.pdf")) and r["status"] in ("indexed", "failed") and r, 600)
    assert isinstance(done, sqlite3.Row)
    return done


def test_a_search_finds_the_first_page_of_a_long_pdf_while_it_is_parsed_and_it_ends_as_parsed_in_one_go(
    kernel: Kernel,
) -> None:
    k, docs, flag = kernel
    home = k.root
    pdf = half_indexed(k, docs, flag)
    row = document(home, "manual.pdf")
    assert row is not None and row["status"] == "indexing", dict(row or {})
    read = NOTE.match(row["error"])
    assert read is not None and 0 < int(read.group(1)) < PAGES, row["error"]
    assert found(home, LAST) == set()
    shown = cli(home, "folders", "show", str(docs)).stdout
    assert re.search(rf"^indexing\s+manual\.pdf\s+\d+ of {PAGES} pages indexed", shown, re.M), shown
    with BusClient(k.home.bus_endpoint, name="test") as client:
        status = client.request("indexer", IndexStatusRequest(), IndexStatusReply, timeout=30).body
    assert [(Path(d["path"]).name, bool(NOTE.match(d["error"]))) for d in status.indexing] == [("manual.pdf", True)]
    assert status.totals["files_pending"] == 1 and status.recent_failures == []
    flag.unlink()
    row = finished(home)
    assert row["status"] == "indexed", row["error"]
    assert row["attempts"] == 1 and row["pages"] == PAGES and row["error"] is None
    whole = in_one_go(pdf)
    assert stored_chunks(home, "manual.pdf") == whole
    assert row["chunks"] == len(whole)
    wait_found(k, LAST, {"manual.pdf"}, 60, "the last page found")
    assert leftovers(home) == 0


def test_a_parser_killed_midway_leaves_pages_and_vectors_the_retry_replaces_with_nothing_twice(
    embedding_kernel: Kernel,
) -> None:
    k, docs, flag = embedding_kernel
    home = k.root
    (docs / "warm.txt").write_text("A note that loads the embedding model before the manual comes.\n")
    cli(home, "folders", "add", str(docs))
    wait_for(lambda: embedded(home, "warm.txt")[0] > 0, 300, 0.1, "the model loaded")
    flag.write_text("hold")
    pdf = long_pdf(docs / "manual.pdf")
    parser = held_after_first_pages(k, flag)
    wait_for(lambda: embedded(home, "manual.pdf")[0] > 0, 25, 0.05, "pages read embedded")
    kill9(parser)
    flag.unlink()
    row = finished(home)
    assert row["status"] == "indexed", row["error"]
    assert row["attempts"] == 2, "the retry on a fresh parser"
    assert stored_chunks(home, "manual.pdf") == in_one_go(pdf)
    wait_found(k, LAST, {"manual.pdf"}, 60, "the last page found")
    assert found(home, FIRST) == {"manual.pdf"}
    vectors, chunks = wait_for(lambda: (n := embedded(home, "manual.pdf"))[0] == n[1] and n, 900, 0.5, "embedded")
    assert leftovers(home) == 0
    k.stop()  # the vector index is saved as the indexer stops
    with index(home) as db:
        wanted = {int(r[0]) for r in db.execute("SELECT id FROM chunks WHERE vector IS NOT NULL")}
        dim = db.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()  # recorded when not 384
    keys = {int(key) for key in VectorIndex(home / "data" / "vectors.usearch", int(dim[0]) if dim else 384).keys()}  # noqa: SIM118
    assert keys == wanted and vectors == chunks


def keyword_ids(home: Path) -> list[int]:
    """The chunk ids the Tantivy index holds (read with the kernel stopped)."""
    import tantivy

    bm25 = KeywordIndex(home / "data" / "tantivy")
    try:
        searcher = bm25.index.searcher()
        hits = searcher.search(tantivy.Query.all_query(), int(searcher.num_docs) + 10).hits
        return sorted(int(searcher.doc(addr)["chunk_id"][0]) for _, addr in hits)
    finally:
        bm25.close()


def test_a_kernel_killed_midway_parses_the_half_indexed_pdf_again_after_its_restart_with_nothing_twice(
    kernel: Kernel,
) -> None:
    k, docs, flag = kernel
    home = k.root
    pdf = half_indexed(k, docs, flag)
    workers = k.descendants()
    kill9(k.kernel_pid)
    wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers), 30)
    k.stop()
    flag.unlink()
    row = document(home, "manual.pdf")
    assert row is not None and row["status"] == "indexing" and row["chunks"] > 0, dict(row or {})
    again = RunningKernel(home, config(LIGHT, flag)).start()
    try:
        assert found(home, FIRST) == {"manual.pdf"}
        row = finished(home)
        assert row["status"] == "indexed", row["error"]
        assert stored_chunks(home, "manual.pdf") == in_one_go(pdf)
        wait_found(again, LAST, {"manual.pdf"}, 60, "the last page found")
    finally:
        again.stop()
    with index(home) as db:
        ids = sorted(int(r[0]) for r in db.execute("SELECT id FROM chunks"))
    assert keyword_ids(home) == ids
    assert leftovers(home) == 0


def test_a_parse_cut_off_after_pages_were_indexed_fails_with_the_reason_and_its_pages_stay_searchable(
    impatient_kernel: Kernel,
) -> None:
    k, docs, flag = impatient_kernel
    home = k.root
    half_indexed(k, docs, flag)  # held after its first pages each time: no progress, cut off twice
    row = finished(home)
    assert row["status"] == "failed" and row["attempts"] == 2, dict(row)
    reason = re.fullmatch(
        rf"quarantined: its parse made no progress .*, twice \((\d+) of {PAGES} pages indexed; they stay searchable\)",
        row["error"],
    )
    assert reason is not None and 0 < int(reason.group(1)) < PAGES, row["error"]
    assert 0 < len(stored_chunks(home, "manual.pdf")) < len(in_one_go(docs / "manual.pdf"))
    assert found(home, FIRST) == {"manual.pdf"} and found(home, LAST) == set()
    shown = cli(home, "folders", "show", str(docs), "--failed").stdout
    assert re.search(r"^failed\s+manual\.pdf\s+quarantined: .*pages indexed; they stay searchable", shown, re.M), shown
    assert leftovers(home) == 0


def test_a_pdf_changed_while_its_pages_are_indexed_ends_as_its_new_version(kernel: Kernel) -> None:
    k, docs, flag = kernel
    home = k.root
    pdf = half_indexed(k, docs, flag)
    newer = pdf.with_name("newer.tmp")
    long_pdf(newer)
    newer.write_bytes(newer.read_bytes().replace(FIRST.encode(), b"quetzalrevision"))
    newer.replace(pdf)  # the new version, while the old one is being read
    flag.unlink()
    wait_found(k, "quetzalrevision", {"manual.pdf"}, 600, "the new version found")
    row = finished(home)
    assert row["status"] == "indexed", row["error"]
    assert stored_chunks(home, "manual.pdf") == in_one_go(pdf)
    assert found(home, FIRST) == set()
    assert leftovers(home) == 0
