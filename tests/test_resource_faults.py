"""Resource faults: a full disk under the home, and model files missing or corrupt.

Disk full: the whole home (config, data with SQLite / Tantivy / usearch, logs, run/ with the sockets) sits
on a small tmpfs of its own, so every writer of the home meets the same full disk; the Smart Folder is
elsewhere. A ballast file leaves a fixed 1 MiB free before indexing starts, so the disk fills mid-indexing
every run. Mounting needs root (CI runs as root); elsewhere the test is skipped and says so.

The llm worker is switched off in the disk-full run: it would copy its ~98 MB converted model into
data/models at start (a write path of its own, not the index's). Queries are encoded with torch (the
ONNX export writes ~90 MB into data/models too).

The reference for "what a fresh index would have" is the parser's own parse + chunk functions run in the
test process on the final files: the same deterministic code a fresh indexer runs, without a second
kernel's start-up.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.messages import DescribeReply, DescribeRequest
from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import (
    AUTO_ASKS_THE_MODEL,
    FAST_RESTART,
    ONE_PARSER,
    SEARCH_OVER_BUS,
    RunningKernel,
    cli,
    kill9,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
)

SCIFACT = Path("/work/shared/eval/scifact/corpus.jsonl")
TMPFS_MB = 64
FREE_LEFT = 1024 * 1024  # what the ballast leaves for the index: a few dozen documents' worth
CORPUS_FILES = 120
SEED_WORD = "quillfeather"  # only in the seed folder, indexed before the disk fills

DISK_CONFIG = merge(FAST_RESTART, {"mcp": {"port": 0, "rate_per_minute": 6000}, "workers": {"llm": {"enabled": False}}})


# ------------------------------------------------------------------------------------------------
# helpers


@contextlib.contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(ballast: Path, leave: int) -> None:
    """Grow ``ballast`` until only ``leave`` bytes stay free on its file system (0: until ENOSPC)."""
    block = b"\0" * (1 << 20)
    with open(ballast, "ab") as fh:
        while (room := free_bytes(ballast.parent) - leave) > 0:
            try:
                fh.write(block[: min(len(block), room)])
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return


def write_corpus(root: Path, count: int) -> list[Path]:
    root.mkdir(parents=True)
    files = []
    with SCIFACT.open() as fh:
        for _, line in zip(range(count), fh, strict=False):
            doc = json.loads(line)
            path = root / f"sf{doc['_id']}.txt"
            path.write_text(f"{doc['title']}\n\n{doc['text']}\n")
            files.append(path)
    return files


def reference_chunks(files: list[Path]) -> dict[str, list[str]]:
    """Each file's chunk texts as a fresh index would make them (the parser worker's own functions)."""
    from foldermind.protocol.runtime.config import IngestPolicy
    from foldermind.workers.embedding.model_files import tokenizer_file
    from foldermind.workers.parser.chunker import chunk, load_tokenizer
    from foldermind.workers.parser.formats import parse_file

    policy = IngestPolicy()
    tokenizer = load_tokenizer(tokenizer_file(None))
    out = {}
    for path in files:
        doc = parse_file(path, policy.max_file_bytes)
        chunks = chunk(doc.segments, tokenizer, policy.chunk_max_tokens, policy.chunk_overlap_tokens)
        out[str(path)] = [c["text"] for c in chunks]
    return out


def readonly_db(home: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{home / 'data' / 'index.sqlite'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def integrity(home: Path) -> str:
    db = readonly_db(home)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def counts(home: Path) -> dict[str, int]:
    db = readonly_db(home)
    try:
        out = {r[0]: int(r[1]) for r in db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status")}
        return out
    finally:
        db.close()


def indexer_details(k: RunningKernel) -> dict[str, Any]:
    reply = k.client().request("indexer", DescribeRequest(), DescribeReply, timeout=10).body
    return dict(reply.details)


def indexer_note(home: Path) -> str:
    for w in status_json(home).get("workers", []):
        if w["name"] == "indexer":
            return str(w.get("note") or "")
    return ""


# A wait polls over the bus (status and folders from this process) and checks the CLI's answer once: a CLI
# process is ~0.75 CPU-s, and a poll through it ran one every 0.1-0.5 s for minutes, taking the CPU from the
# kernel it waited for.
def bus_note(k: RunningKernel) -> str:
    """:func:`indexer_note` asked over the bus from this process."""
    return str(k.worker("indexer").get("note") or "")


def print_diagnostics(k: RunningKernel) -> None:
    """What a failed run needs to be understood (pytest shows it with the failure)."""
    with contextlib.suppress(Exception):
        print("status:", cli(k.root, "status", check=False).stdout)
    for name in ("indexer.log", "indexer.stderr.log", "kernel.log"):
        with contextlib.suppress(OSError):
            print(f"--- {name} (tail)\n", (k.home.log_dir / name).read_text(errors="replace")[-4000:])


def resumed_at(log: Path) -> float:
    """When the indexer logged that its writes succeed again (epoch seconds)."""
    from datetime import datetime

    lines = [ln for ln in log.read_text(errors="replace").splitlines() if "disk space available again" in ln]
    assert lines, "the indexer never logged its resumption"
    return datetime.strptime(lines[-1][:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def keyword_search(home: Path, query: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cli(home, "search", query, "--mode", "keyword", "--json").stdout)
    return data


def tantivy_chunk_ids(home: Path) -> list[int]:
    import tantivy

    from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex

    index = KeywordIndex(home / "data" / "tantivy").index  # opened beside the indexer's writer: read only
    index.reload()
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs)).hits
    return sorted(int(searcher.doc(addr)["chunk_id"][0]) for _, addr in hits)


# ------------------------------------------------------------------------------------------------
# disk full


def test_each_store_survives_enospc_and_writes_again_once_space_is_freed(tmp_path: Path) -> None:
    """The three stores on a 4 MiB tmpfs, in this process: each write that meets the full disk comes out
    as DiskFull (SQLite's SQLITE_FULL by its code; Tantivy and usearch, which drop the errno, by the free
    space left), leaves nothing half-done behind, and the same objects write again after the ballast goes."""
    import numpy as np

    from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
    from foldermind.workers.indexer.storage.storage import DiskFull, writing
    from foldermind.workers.indexer.storage.store import Store
    from foldermind.workers.indexer.storage.vectors import VectorIndex

    with tmpfs(tmp_path / "disk", 4) as disk:
        store = Store(disk / "index.sqlite")
        bm25 = KeywordIndex(disk / "tantivy")
        vectors = VectorIndex(disk / "vectors.usearch", 384)
        folder = store.folders.add("/nowhere", "F", "")
        with store.tx() as db:
            store.documents.mark_pending(db, folder.id, "/nowhere/a.txt", 1, 1)
        doc = store.documents.pending(1)[0]
        ballast = disk / "ballast"
        fill(ballast, 0)
        chunks = [{"ordinal": i, "text": f"word{i} " * 300, "tokens": 9, "line_start": 0, "line_end": 0,
                   "char_start": 0, "char_end": 9} for i in range(400)]  # fmt: skip

        with pytest.raises(DiskFull) as sql_full, writing("a database write", store.path, disk), store.tx() as db:
            store.documents.write(db, doc.id, 1, 1, "x", "txt", None, None, chunks)
        assert "database or disk is full" in str(sql_full.value)
        assert not store.db.in_transaction  # the connection is usable: the next BEGIN works
        assert store.documents.get("/nowhere/a.txt").status == "pending"  # type: ignore[union-attr]

        rows = [{"id": i, "doc_id": 1, "text": f"word{i} " * 300, "heading": "", "folder_id": "f"} for i in range(3000)]
        with pytest.raises(DiskFull, match="Tantivy"), writing("the Tantivy commit", bm25.path, disk):
            bm25.replace([1], rows)
            bm25.commit()
        # The killed writer fails the next replace too; that error, kept (as a status report would keep
        # it), must not keep the dead writer and its lock alive once discarded.
        with pytest.raises(ValueError) as kept:
            bm25.replace([1], rows[:3])
        bm25.discard()
        vectors.add(list(range(2000)), np.random.default_rng(1).random((2000, 384), dtype=np.float32))
        with pytest.raises(DiskFull, match="vector"), writing("saving the vector index", vectors.path, disk):
            vectors.save()
        assert not vectors.path.with_suffix(".tmp").exists() and vectors.dirty

        ballast.unlink()
        with store.tx() as db:
            store.documents.write(db, doc.id, 1, 1, "x", "txt", None, None, chunks[:5])
        bm25.replace([1], rows[:5])
        bm25.commit()
        vectors.save()
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert bm25.num_docs == 5 and bm25.search("word3", 5)[0]
        assert kept.value is not None  # (still referenced here, on purpose)
        assert len(VectorIndex(disk / "vectors.usearch", 384)) == 2000
        bm25.close()
        store.db.close()


@pytest.mark.slow  # 2-3 min of wall alone (its module then goes first: tests/conftest.py)
def test_a_full_disk_pauses_indexing_with_a_clear_error_and_it_resumes_by_itself(capsys: Any) -> None:
    root = short_tmpdir()
    home = root / "home"
    seed, docs = root / "seed", root / "docs"
    seed.mkdir()
    (seed / "seed.txt").write_text(f"The {SEED_WORD} ledger was indexed before the disk filled.\n")
    files = write_corpus(docs, CORPUS_FILES)
    with tmpfs(home, TMPFS_MB):
        k = RunningKernel(home, DISK_CONFIG)
        try:
            k.start()
            pids = k.pids()
            cli(home, "folders", "add", str(seed), "--name", "Seed", "--wait", timeout=120)
            assert keyword_search(home, SEED_WORD)["results"]

            ballast = home / "ballast"
            fill(ballast, FREE_LEFT)
            cli(home, "folders", "add", str(docs), "--name", "Docs", timeout=60)

            # -- the disk fills mid-indexing: a clear, typed error in every status surface --------------
            wait_for(lambda: "disk full (ENOSPC)" in bus_note(k), 90, 0.1, "the indexer's disk-full note")
            note = indexer_note(home)
            assert "disk full (ENOSPC)" in note, note
            assert str(home / "data") in note  # which path, and what failed
            text = cli(home, "status").stdout
            assert "disk full (ENOSPC)" in text and "disk_full:" in text, text
            folder = next(f for f in status_json(home)["folders"] if f["name"] == "Docs")
            assert folder["state"] == "disk_full" and folder["files_total"] > 0
            url, token = str(mc.mcp_info(home)["url"]), mc.token_of(home)
            storage = (mc.call(url, token, "index_status").structured_content or {})["storage"]
            assert storage["state"] == "disk_full" and "ENOSPC" in storage["message"] and storage["since"]

            # Nothing lost or failed for it, nothing corrupt, search answers from what is indexed.
            during = counts(home)
            assert during.get("failed", 0) == 0 and during.get("pending", 0) > 0, during
            assert integrity(home) == "ok"
            assert keyword_search(home, SEED_WORD)["results"][0]["file_path"].endswith("seed.txt")
            assert tantivy_chunk_ids(home)  # Tantivy opens and searches

            # -- log writes on a disk with no byte left: no worker crashes -----------------------------
            fill(ballast, 0)
            assert free_bytes(home) < 64 * 1024
            parser = k.worker("parser#1")
            kill9(parser["pid"])  # the supervisor logs it; the new parser opens its log and logs READY
            k.wait_state("parser#1", "RUNNING", 30, other_pid_than=parser["pid"])
            cli(home, "restart", "watcher")  # the watcher's rescan logs too, and re-sends the folder
            k.wait_state("watcher", "RUNNING", 30, other_pid_than=pids["watcher"])
            # The indexer killed on the full disk: it must start again (its restart reconcile cannot save
            # the vector file) and say the disk is full once it tries to write, not crash-loop to FAILED.
            indexer_pid = pids["indexer"]
            assert indexer_pid is not None
            kill9(indexer_pid)
            k.wait_state("indexer", "RUNNING", 60, other_pid_than=pids["indexer"])
            wait_for(lambda: "disk full (ENOSPC)" in bus_note(k), 60, 0.1, "the restarted indexer's note")
            assert "disk full (ENOSPC)" in indexer_note(home)
            st = k.wait_all_running(60)  # settled: an on-demand worker may be starting or leaving for a moment
            # Not restarted: the same process, or (an on-demand worker IDLE at the start) started once since.
            untouched = {n for n in pids if n not in ("parser#1", "watcher", "indexer")}
            now = k.pids()
            assert all(now[n] == pids[n] or pids[n] is None for n in untouched), (pids, now)
            assert all(w["restarts"] == 0 for w in st.workers if w["name"] in untouched), st.workers
            assert k.worker("indexer")["restarts"] == 1  # the kill, nothing more
            assert counts(home).get("failed", 0) == 0
            assert integrity(home) == "ok"

            # -- space freed: indexing resumes by itself ----------------------------------------------
            freed_at, freed_wall = time.monotonic(), time.time()
            ballast.unlink()
            wait_for(lambda: "disk full" not in bus_note(k), 60, 0.1, "the disk-full note to clear")
            assert "disk full" not in indexer_note(home)
            resumed_s = resumed_at(home / "logs" / "indexer.log") - freed_wall  # the indexer's own clock

            def all_embedded(folders: list[dict[str, Any]]) -> dict[str, Any] | None:
                f = next(f for f in folders if f["name"] == "Docs")
                done = f["state"] == "ready" and f["chunks"] == f["chunks_embedded"] > 0
                return f if done else None

            try:
                # `status --json`'s folders are the indexer's folder list, which k.folders() asks for.
                wait_for(lambda: all_embedded(k.folders()), 300, 0.1, "every file indexed and embedded")
                final = all_embedded(status_json(home)["folders"])
                assert final is not None
            except AssertionError:
                print("DEBUG folders", status_json(home)["folders"], counts(home), indexer_details(k))
                print("DEBUG status", cli(home, "status").stdout)
                print("DEBUG log", (home / "logs" / "indexer.log").read_text(errors="replace")[-6000:])
                raise
            settled_s = time.monotonic() - freed_at
            assert final["files_indexed"] == final["files_total"] == CORPUS_FILES and final["files_failed"] == 0
            # Settled, none failed: on-demand workers come and go (the embedder hands over to the llm once every
            # chunk is embedded), so a worker may be STARTING or STOPPING for a moment; none may be in BACKOFF.
            settled = wait_for(
                lambda: all(w["state"] in ("RUNNING", "IDLE") for w in k.status().workers), 60, 0.2, "workers settled"
            )
            assert settled and k.status().workers
            # (the log lines about the full disk may be lost with the disk; the one after is written)

            # -- the three stores agree with each other and with a fresh index ------------------------
            assert integrity(home) == "ok"
            expected = reference_chunks(files)
            db = readonly_db(home)
            try:
                rows = db.execute(
                    "SELECT d.path, d.status, d.chunks, c.id, c.text, c.vector IS NOT NULL FROM documents d "
                    "JOIN chunks c ON c.doc_id = d.id ORDER BY d.path, c.ordinal"
                ).fetchall()
                dead = db.execute("SELECT COUNT(*) FROM journal").fetchone()[0]
            finally:
                db.close()
            stored: dict[str, list[str]] = {}
            for r in rows:
                stored.setdefault(r[0], []).append(r[4])
            got = {p: texts for p, texts in stored.items() if p.startswith(str(docs))}
            assert set(got) == set(expected)  # no file lost, none extra
            mismatched = [p for p in expected if got[p] != expected[p]]
            assert not mismatched, mismatched[:3]
            assert all(r[1] == "indexed" and r[5] for r in rows)
            assert all(r[2] == len(stored[r[0]]) for r in rows)  # documents.chunks == its chunk rows
            sqlite_ids = sorted(int(r[3]) for r in rows)
            assert dead == 0  # every journal entry applied to Tantivy
            wait_for(lambda: tantivy_chunk_ids(home) == sqlite_ids, 20, 0.3, "Tantivy == SQLite chunk ids")
            assert indexer_details(k)["vectors"] == len(sqlite_ids)
            hit = keyword_search(home, Path(files[-1]).read_text().split("\n")[0])["results"]
            assert hit and hit[0]["file_path"] == str(files[-1])  # a file stored after the disk filled
        except AssertionError:
            print_diagnostics(k)
            raise
        finally:
            k.stop()
        # usearch: the file a clean stop leaves loads with every vector SQLite holds (one per sentence unit of
        # each chunk), keyed by chunk id.
        from usearch.index import Index

        vectors = Index.restore(str(home / "data" / "vectors.usearch"))
        assert vectors is not None
        db = readonly_db(home)
        try:
            stored = db.execute("SELECT SUM(LENGTH(vector)) FROM chunks").fetchone()[0] // (vectors.ndim * 4)
        finally:
            db.close()
        assert len(vectors) == stored >= len(sqlite_ids)
        assert sorted({int(x) for x in vectors.keys}) == sqlite_ids
    remove_tree(root)
    with capsys.disabled():
        print(
            f"\n[resource faults] tmpfs {TMPFS_MB} MiB, {FREE_LEFT >> 20} MiB left by the ballast; "
            f"{CORPUS_FILES} files, {len(sqlite_ids)} chunks; disk full during: {during}; status said: {note!r}; "
            f"resumed {resumed_s:.1f} s after the ballast went, all indexed and embedded after {settled_s:.1f} s"
        )


# ------------------------------------------------------------------------------------------------
# model files missing or corrupt


def corrupt_model_dir(target: Path) -> Path:
    """The bundled embedding model's directory with its weights replaced by junk (tokenizer intact)."""
    from foldermind.workers.embedding.model_files import model_dir

    bundled = model_dir()
    target.mkdir()
    for item in bundled.iterdir():
        if item.name != "model.safetensors":
            (target / item.name).symlink_to(item)
    (target / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}" + os.urandom(4096))
    return target


def test_missing_llm_file_and_corrupt_embedding_model_leave_search_working() -> None:
    """tests/test_chat.py covers a corrupt .gguf (the fallback's MODEL_NOT_READY naming it) and tests/test_ingest.py an
    embedding model that is missing at first and appears later; here the .gguf does not exist at all and
    the embedding model's weights are corrupt, in one kernel."""
    pytest.importorskip("ctransformers", reason="the llm worker's default backend is not installed")
    root = short_tmpdir()
    missing = root / "gone" / "SmolLM2-missing.gguf"
    embed_dir = corrupt_model_dir(root / "junk-model")
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        {"mcp": {"port": 0, "rate_per_minute": 6000}, "llm": {"model_path": missing}},
        AUTO_ASKS_THE_MODEL,
        {"ingest": {"embed_model_dir": embed_dir, "embed_retry_s": 2.0}},
    )
    docs = root / "docs"
    docs.mkdir()
    (docs / "harbour.txt").write_text("The lighthouse keeper counted pelicans in the harbour.\n")
    (docs / "glacier.md").write_text("# Plan\n\nReach the glacier by spring with crampons.\n")
    k = RunningKernel(root / "home", config)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), timeout=60)

        url, token = str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root)

        # The embedder says why; documents are keyword-searchable; hybrid falls back and says so.
        emb_note = wait_for(lambda: "failed" in (n := k.worker("embedder").get("note") or "") and n, 90, 0.2, "note")
        assert "model failed" in emb_note

        def keyword_hits() -> list[Any] | None:
            found = mc.call(url, token, "search_documents", {"query": "pelicans harbour", "mode": "keyword"})
            return None if found.is_error else (found.structured_content or {}).get("results")

        hits = wait_for(keyword_hits, 60, 0.3, "keyword hits")
        assert hits[0]["file_name"] == "harbour.txt"
        hybrid = mc.call(url, token, "search_documents", {"query": "pelicans harbour", "mode": "hybrid"})
        body = hybrid.structured_content or {}
        assert not hybrid.is_error and body["results"][0]["file_name"] == "harbour.txt"
        assert body.get("note"), body  # the fallback to keyword search is said, not silent

        # Chat still answers, from the quotes (sentences scored by their words alone, as no vector can be
        # made), and says why the model's answer is missing: MODEL_NOT_READY, naming the file.
        chat = mc.call(url, token, "chat_with_documents", {"query": "Who counted pelicans?"})
        out = chat.structured_content or {}
        assert not chat.is_error and "lighthouse keeper counted pelicans" in out["answer"], chat.content
        assert out["citations"][0]["file_name"] == "harbour.txt" and "words only" in (out["note"] or "")
        assert out["answer_mode_used"] == "fallback" and out["fallback_reason"].startswith("MODEL_NOT_READY")
        assert missing.name in out["fallback_reason"]
        # The llm names the missing file and stays up. Its model loads on first use (the chat above, or a
        # summary once the ingest queue is idle, which a failing embedder can put off for long).
        llm_note = wait_for(lambda: "failed" in (n := k.worker("llm").get("note") or "") and n, 30, 0.2, "llm note")
        assert missing.name in llm_note, llm_note
        status = mc.call(url, token, "index_status").structured_content or {}
        assert status["embedding"]["state"] == "unavailable" and status["embedding"]["note"], status["embedding"]
        assert status["totals"]["files_indexed"] == 2 and status["totals"]["files_failed"] == 0
        assert status["storage"]["state"] == "ok"
        k.wait_all_running(60)  # settled: an on-demand worker may be starting or leaving for a moment
        assert k.worker("embedder")["restarts"] == 0 and k.worker("llm")["restarts"] == 0
    finally:
        k.stop()
        remove_tree(root)


def test_a_missing_embedding_model_directory_keeps_files_pending_with_the_reason_until_it_appears() -> None:
    """``[ingest] embed_model_dir`` names a directory that does not exist. Its tokenizer sizes the chunks,
    so files cannot be chunked (hence not keyword-indexed) until it exists: they wait as pending, never
    failed, the parser's status line says why, and they are indexed and embedded once the directory
    appears, without a restart. (tests/test_ingest.py covers the embedder alone lacking its model: there
    the bundled tokenizer still chunks and documents are keyword-searchable meanwhile.)"""
    from foldermind.workers.embedding.model_files import model_dir

    root = short_tmpdir()
    late = root / "late-model"
    config = merge(
        FAST_RESTART,
        SEARCH_OVER_BUS,  # read through the CLI
        {"ingest": {"embed_model_dir": late, "embed_retry_s": 1.0}},
    )
    docs = root / "docs"
    docs.mkdir()
    (docs / "harbour.txt").write_text("The lighthouse keeper counted pelicans in the harbour.\n")
    k = RunningKernel(root / "home", config)
    try:
        k.start()
        cli(k.root, "folders", "add", str(docs), timeout=60)

        def parser_says_why() -> str | None:
            notes = [w.get("note") or "" for w in k.status().workers if w["name"].startswith("parser")]
            return next((n for n in notes if "cannot load the tokenizer" in n), None)

        note = wait_for(parser_says_why, 60, 0.2, "a parser's note naming the missing model")
        assert str(late) in note, note
        folder = json.loads(cli(k.root, "folders", "list", "--json").stdout)[0]
        assert folder["files_failed"] == 0 and folder["state"] == "indexing", folder
        late.symlink_to(model_dir())  # the model arrives: no restart, no user action

        def embedded(folders: list[dict[str, Any]]) -> bool:
            f = folders[0]
            return bool(f["files_indexed"] == 1 and f["chunks"] == f["chunks_embedded"] > 0)

        wait_for(lambda: embedded(k.folders()), 180, 0.1, "the file indexed and embedded")
        assert embedded(json.loads(cli(k.root, "folders", "list", "--json").stdout))
        assert keyword_search(k.root, "pelicans")["results"][0]["file_path"].endswith("harbour.txt")
        # Settled (the embedder may be leaving for a moment once it hands over to the llm), and never restarted.
        workers = [
            w for w in k.wait_all_running(60).workers if w["name"].split("#")[0] in ("parser", "embedder", "indexer")
        ]
        assert all(w["restarts"] == 0 for w in workers), workers
    finally:
        k.stop()
        remove_tree(root)
