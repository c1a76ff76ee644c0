"""A folder's progress as it is shown: the embedded count never runs backwards while a batch arrives, and a
folder is "ready" only once its chunks are embedded ("embedding" before, searchable by keyword meanwhile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foldermind.workers.indexer.storage.store import Store
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, only_workers, wait_for
from tests.test_units import _document_with_chunks, _store_with_chunks


def test_a_batch_committed_while_the_embedded_chunks_are_counted_is_never_taken_off_uncounted(tmp_path: Path) -> None:
    store, ids = _store_with_chunks(tmp_path, 3)
    store.embeddings.store(ids[:1], [b"\0" * 8])  # one chunk embedded long ago
    batch = tuple(ids[1:])
    calls: list[tuple[int, ...]] = []

    def arriving_committed_during_the_count() -> tuple[int, ...]:
        # The batch arrives right after the count looked at what arrives: it is committed before the count's
        # query reads, and is still arriving (not yet in usearch) when the count looks again.
        if not calls:
            calls.append(())
            store.embeddings.store(list(batch), [b"\0" * 8] * len(batch))
            return ()
        calls.append(batch)
        return batch

    assert store.embeddings.count(None, arriving_committed_during_the_count) == 1, "not 1 - 2 (taken off uncounted)"
    assert store.embeddings.count(None, lambda: batch) == 1, "still arriving: not yet found by a semantic search"
    assert store.embeddings.count(None, lambda: ()) == 3, "arrived"
    folder = store.folders.all()[0].id
    assert store.embeddings.count(folder, lambda: ()) == 3 and store.embeddings.count("another", lambda: ()) == 0


def test_the_embedded_count_of_each_folder_follows_its_vectors_in_a_database_made_before_its_index(
    tmp_path: Path,
) -> None:
    store, ids = _store_with_chunks(tmp_path, 4)
    other = store.folders.add(str(tmp_path / "more"), "more", "")
    with store.tx() as db:
        more = _document_with_chunks(store, db, other.id, str(tmp_path / "more" / "b.txt"), 3)
        # As a database of an older version holds it: the count's index is made when the store is opened.
        db.execute("DROP INDEX chunks_unembedded_doc")
    store = Store(tmp_path / "index.sqlite")
    docs = store.folders.find(str(tmp_path / "docs")).id
    store.embeddings.store([ids[0], ids[2], more[1]], [b"\0" * 8] * 3)
    assert store.embeddings.count(docs, lambda: ()) == 2 and store.embeddings.count(other.id, lambda: ()) == 1
    assert store.embeddings.count(None, lambda: ()) == 3
    assert store.embeddings.count(docs, lambda: (ids[2], more[1])) == 1, (
        "arriving: not counted yet, the other folder's not"
    )
    # The folder's chunks come from the same statement, whatever arrives.
    assert store.embeddings.chunk_counts(docs, lambda: (ids[2], more[1])) == (4, 1)
    assert store.embeddings.chunk_counts(other.id, lambda: ()) == (3, 1) and store.embeddings.chunk_counts(
        None, lambda: ()
    ) == (7, 3)
    assert store.embeddings.count(None, lambda: (ids[1],)) == 3, "arriving without a vector yet: nothing to leave out"
    store.embeddings.drop_all("m", "p", reembedding="")
    assert store.embeddings.count(docs, lambda: ()) == 0 and store.embeddings.count(None, lambda: ()) == 0
    store.embeddings.store(ids, [b"\0" * 8] * len(ids))
    assert store.embeddings.count(docs, lambda: ()) == 4 and store.embeddings.count(other.id, lambda: ()) == 0


def _folder(home: Path) -> dict[str, Any]:
    folders: list[dict[str, Any]] = json.loads(cli(home, "folders", "list", "--json").stdout)
    return folders[0]


def test_a_folder_is_embedding_until_its_chunks_are_embedded_and_only_then_ready(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"note{i}.txt").write_text(f"Note {i} about the migration of arctic terns and puffins.\n" * 20)
    # Each embedding request waits 2 s at the embedder: the files are found by keyword long before.
    slow_embedder = {"workers": {"embedder": {"env": {"FOLDERMIND_TEST_DELAY": "embed.request:2"}}}}
    config = merge(FAST_RESTART, only_workers("watcher", "parser", "embedder", "indexer"), ONE_PARSER, slow_embedder)
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        seen: list[dict[str, Any]] = []

        # Watched over the bus from this process (a CLI process, ~0.75 CPU-s, every 0.1 s took the CPU from the
        # kernel watched); `foldermind folders list` is checked on the way and at the end.
        def observe(state: str) -> dict[str, Any] | None:
            f = k.folders()[0]
            seen.append(f)
            return f if f["state"] == state else None

        embedding = wait_for(lambda: observe("embedding"), 60, 0.1, "the folder embedding")
        assert embedding["files_indexed"] == 4 and embedding["chunks_embedded"] < embedding["chunks"]
        hits = json.loads(cli(home_dir, "search", "puffins", "--mode", "keyword", "--json").stdout)["results"]
        assert {Path(h["file_path"]).name for h in hits} == {f"note{i}.txt" for i in range(4)}
        listed = cli(home_dir, "folders", "list").stdout
        assert "embedding: 4/4 files" in listed and "searchable by keyword, embedding" in listed, listed
        wait_for(lambda: observe("ready"), 120, 0.1, "the folder ready")
        ready = _folder(home_dir)
        seen.append(ready)
        assert ready["state"] == "ready"
        assert ready["chunks"] and ready["chunks_embedded"] == ready["chunks"]
        for f in seen:
            assert f["state"] != "ready" or f["chunks_embedded"] == f["chunks"], f
        counts = [f["chunks_embedded"] for f in seen]
        assert counts == sorted(counts), f"the embedded count went backwards: {counts}"
    finally:
        k.stop()
