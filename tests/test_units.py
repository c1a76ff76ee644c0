"""What a chunk is embedded as (workers/indexer/ingest/units.py), how usearch keeps a chunk's several vectors, and an
index of one vector per chunk embedded again."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.workers.indexer.ingest import units
from foldermind.workers.indexer.ingest.pipeline import Pipeline
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import ADD_SLICE, VectorIndex
from tests.helpers import remove_tree, short_tmpdir


def test_each_sentence_of_a_chunk_is_a_unit_read_with_the_title() -> None:
    text = "Aspirin lowers the risk of a second stroke. It was tested in 2,000 patients over five years."
    assert units.units(text, "Aspirin and stroke") == [
        "Aspirin and stroke. Aspirin lowers the risk of a second stroke.",
        "Aspirin and stroke. It was tested in 2,000 patients over five years.",
    ]
    # No title: the sentences alone.
    assert units.units(text, "") == [
        "Aspirin lowers the risk of a second stroke.",
        "It was tested in 2,000 patients over five years.",
    ]


def test_a_short_line_joins_the_next_sentence_and_the_title_line_is_the_bare_title() -> None:
    text = "Aspirin and stroke\n\nResults\n\nAspirin lowers the risk of a second stroke."
    made = units.units(text, "Aspirin and stroke")
    assert made == ["Aspirin and stroke", "Aspirin and stroke. Results Aspirin lowers the risk of a second stroke."]
    assert units.units("Aspirin and stroke\n", "Aspirin and stroke") == ["Aspirin and stroke"]
    # A short tail joins the sentence before it.
    assert units.units("Aspirin lowers the risk of a second stroke. See below.", "") == [
        "Aspirin lowers the risk of a second stroke. See below."
    ]


def test_a_chunk_without_a_sentence_is_one_unit_of_its_text() -> None:
    assert units.units("-- == --", "T") == ["T. -- == --"]
    assert len(units.units("x = 1", "")) == 1


def test_the_title_is_the_parsers_else_a_short_first_line() -> None:
    assert units.title_of("  Parsed   title ", "first line\nmore") == "Parsed title"
    assert units.title_of(None, "\n\n  A first   line \nbody") == "A first line"
    assert units.title_of("", "x" * (units.TITLE_CHARS + 1) + "\nbody") == ""
    assert units.title_of(None, "") == ""


def test_a_blob_holds_a_chunks_units_and_a_blob_of_another_dimension_is_none() -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    blob = embeddings.pack(matrix)
    rows = embeddings.unpack(blob, 4)
    assert rows is not None and np.array_equal(rows, matrix)
    assert embeddings.unpack(blob, 5) is None and embeddings.unpack(b"", 4) is None
    keys, stacked = embeddings.stack([(7, blob), (9, embeddings.pack(matrix[:1])), (11, b"xx")], 4)
    assert keys == [7, 7, 7, 9] and np.array_equal(stacked, np.vstack([matrix, matrix[:1]]))


def _unit_vectors(n: int, ndim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, ndim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_usearch_keeps_a_chunks_units_under_its_id_replaces_and_removes_them_whole(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "v.usearch", 8)
    m = _unit_vectors(40, 8, 3)
    # Chunk i holds units 4i..4i+3; slices never split a chunk, so a save between slices keeps whole chunks.
    keys = [i for i in range(10) for _ in range(4)]
    calls: list[int] = []
    index.add(keys, m, between=lambda: calls.append(len(index)))
    assert len(index) == 40 and calls and calls[0] % 4 == 0 and calls[0] >= ADD_SLICE
    assert [int(k) for k in index.keys()] == list(range(10))  # noqa: SIM118
    # A query equal to one unit finds its chunk first, at cosine 1, and each chunk once.
    found = index.search(m[13], 10)
    assert found[0][0] == 3 and abs(found[0][1] - 1.0) < 1e-5 and len({c for c, _ in found}) == 10
    # Writing a chunk again replaces all its units.
    index.add([3, 3], m[:2])
    assert len(index) == 38 and index.search(m[13], 1)[0][0] != 3
    index.remove([3])
    assert len(index) == 36 and 3 not in [int(k) for k in index.keys()]  # noqa: SIM118
    index.save()
    again = VectorIndex(tmp_path / "v.usearch", 8)
    assert len(again) == 36 and again.search(m[20], 1)[0][0] == 5


def test_a_file_of_one_vector_per_chunk_is_started_afresh(tmp_path: Path) -> None:
    from usearch.index import Index

    old = Index(ndim=8, metric="cos", dtype="f32")
    old.add(np.arange(5, dtype=np.uint64), _unit_vectors(5, 8, 1))
    old.save(str(tmp_path / "v.usearch"))
    index = VectorIndex(tmp_path / "v.usearch", 8)
    assert len(index) == 0 and index.dirty


def _store_with_chunks(root: Path, n: int, **meta: str) -> tuple[Store, list[int]]:
    """A real store holding one indexed document of ``n`` chunks (no vectors yet) and the ``meta`` given."""
    store = Store(root / "index.sqlite")
    folder = store.folders.add(str(root / "docs"), "docs", "")
    with store.tx() as db:
        ids = _document_with_chunks(store, db, folder.id, str(root / "docs" / "a.txt"), n)
        for key, value in meta.items():
            store.set_meta(db, key, value)
    return store, ids


def _document_with_chunks(store: Store, db: sqlite3.Connection, folder_id: str, path: str, n: int) -> list[int]:
    """An indexed document at ``path`` of ``n`` chunks (no vectors yet), written in ``db``'s transaction."""
    store.documents.mark_pending(db, folder_id, path, 1, 1)
    doc = store.documents.get(path)
    assert doc is not None
    row = {"text": "x", "tokens": 3, "line_start": 1, "line_end": 1, "char_start": 0, "char_end": 1}
    return store.documents.write(db, doc.id, 1, 1, "h", "txt", None, None, [{**row, "ordinal": i} for i in range(n)])


def test_an_index_of_one_vector_per_chunk_is_embedded_again_once() -> None:
    root = short_tmpdir("fmu-")
    try:
        store, ids = _store_with_chunks(root, 1, embed_model="all-MiniLM-L6-v2", embed_precision="int8")
        vector = _unit_vectors(1, 8, 2)
        store.embeddings.store(ids, [vector.tobytes()])  # as the index kept it before units: no embed_units
        vectors = VectorIndex(root / "v.usearch", 8)
        vectors.add(ids, vector)
        pipeline = Pipeline(store, KeywordIndex(root / "kw"), vectors, "tcp://127.0.0.1:9", IngestPolicy(), "t")
        pipeline.upkeep.reconcile(pipeline.embeds.embedded_with)
        assert store.embeddings.ids() == [] and len(vectors) == 0
        assert store.get_meta("embed_units") == units.VERSION
        assert store.embeddings.reembedding() == "all-MiniLM-L6-v2 int8 chunk"
        assert [r[0] for r in store.embeddings.unembedded(10, set())] == ids  # every chunk goes to the embedder again
        # Embedded by units, the index is left as it is at the next start.
        store.embeddings.store(ids, [embeddings.pack(_unit_vectors(2, 8, 4))])
        store.embeddings.reembedded()
        pipeline.upkeep.reconcile(pipeline.embeds.embedded_with)
        assert store.embeddings.ids() == ids and len(vectors) == 2 and store.embeddings.reembedding() == ""
    finally:
        remove_tree(root)


def test_vectors_restored_from_sqlite_count_as_arriving_until_usearch_has_them() -> None:
    root = short_tmpdir("fmu-")
    try:
        store, ids = _store_with_chunks(root, 3, embed_units=units.VERSION)
        store.embeddings.store(ids, [embeddings.pack(_unit_vectors(2, 8, i)) for i in range(3)])
        vectors = VectorIndex(root / "v.usearch", 8)  # the file lost: every vector is in SQLite only
        seen: list[tuple[int, ...]] = []
        real_add = vectors.add

        def add(keys: list[int], rows: np.ndarray, between: object = None) -> None:
            seen.append(vectors.arriving)  # what a status count leaves out while this add runs
            real_add(keys, rows)

        vectors.add = add  # type: ignore[method-assign]
        pipeline = Pipeline(store, KeywordIndex(root / "kw"), vectors, "tcp://127.0.0.1:9", IngestPolicy(), "t")
        pipeline.upkeep.reconcile(pipeline.embeds.embedded_with)
        assert seen and set(ids) <= set(seen[0])  # the restored chunks did not count as embedded meanwhile
        assert vectors.arriving == () and len(vectors) == 6 and store.embeddings.count_among(tuple(ids), None) == 3
    finally:
        remove_tree(root)


def test_an_index_under_the_exact_limit_finds_the_true_nearest_chunks_where_a_narrow_beam_would_not(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(11)
    # 3,000 chunks of 4 units each, the units of a chunk close together (as a document's sentences are).
    centres = _unit_vectors(3000, 128, 5)
    m = np.repeat(centres, 4, axis=0) + rng.normal(scale=0.05, size=(12000, 128)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    keys = [i for i in range(3000) for _ in range(4)]
    queries = _unit_vectors(20, 128, 6)
    best = (queries @ m.T).reshape(20, 3000, 4).max(axis=2)
    truth = [list(np.argsort(-row)[:10]) for row in best]
    exact = VectorIndex(tmp_path / "a.usearch", 128, expansion_search=16, exact_search_vectors=12000)
    graph = VectorIndex(tmp_path / "b.usearch", 128, expansion_search=16, exact_search_vectors=0)
    # A draft graph that outgrew the limit: its searches stay exact until a full graph replaces it.
    outgrown = VectorIndex(tmp_path / "c.usearch", 128, expansion_search=16, exact_search_vectors=1000)
    for index in (exact, graph, outgrown):
        index.add(keys, m)
    assert outgrown.draft and outgrown.outgrown and not graph.draft
    # As sets: usearch keeps half floats, so two chunks a hair apart may come in either order.
    assert [{c for c, _ in exact.search(q, 10)} for q in queries] == [set(t) for t in truth]
    assert [{c for c, _ in outgrown.search(q, 10)} for q in queries] == [set(t) for t in truth]
    found = [[c for c, _ in graph.search(q, 10)] for q in queries]
    assert all(len(set(f)) == 10 for f in found)  # each chunk once, whichever way
    assert [set(f) for f in found] != [set(t) for t in truth]  # the beam of 16 misses some: what exact is for


def test_a_graph_no_search_walks_is_a_draft_until_it_outgrows_exact_search_and_a_full_one_replaces_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.usearch"
    chunks = {i: _unit_vectors(2, 8, i) for i in range(15)}  # two units each
    index = VectorIndex(path, 8, exact_search_vectors=20)
    assert index.draft and not index.outgrown  # every search is exact while it holds <= 20 vectors
    for i in range(8):
        index.add([i, i], chunks[i])
    index.save()
    assert index.marker.exists() and not index.outgrown
    again = VectorIndex(path, 8, exact_search_vectors=20)  # read back as the draft it is
    assert again.draft and len(again) == 16
    for i in range(8, 15):
        again.add([i, i], chunks[i])
    assert again.outgrown and len(again) == 30
    query = _unit_vectors(1, 8, 99)[0]
    before = {c for c, _ in again.search(query, 5)}
    keys = [i for i in chunks for _ in range(2)]
    batches = [
        (keys[:14], np.vstack([chunks[i] for i in range(7)])),
        ([], np.zeros((0, 8), np.float32)),  # a batch whose chunks were all deleted meanwhile
        (keys[14:], np.vstack([chunks[i] for i in range(7, 15)])),
    ]
    again.rebuilt(batches)
    assert not again.draft and not again.outgrown and len(again) == 30 and again.dirty
    assert {c for c, _ in again.search(query, 5)} == before  # the same chunks, now through the full graph
    again.save()
    assert path.exists() and not again.marker.exists()
    assert not VectorIndex(path, 8, exact_search_vectors=20).draft  # read back as full
    # A file saved before drafts has no marker: it was built full.
    assert not VectorIndex(path, 8, exact_search_vectors=10**6).draft
    # With a limit of 0 every search walks the graph: it is built full from the first vector.
    assert not VectorIndex(tmp_path / "w.usearch", 8, exact_search_vectors=0).draft


def test_the_configured_beam_is_the_one_a_reloaded_or_rebuilt_graph_walks(tmp_path: Path) -> None:
    # A graph read back from its file, or built full beside a draft, walks at [search] expansion_search, not at
    # usearch's own default (64): the beam sets what a walk costs and finds (docs/tuning.md#vector-search).
    assert VectorIndex(tmp_path / "d.usearch", 8).index.expansion_search == SearchPolicy().expansion_search
    path = tmp_path / "v.usearch"
    index = VectorIndex(path, 8, expansion_search=300, exact_search_vectors=0)
    index.add(list(range(40)), _unit_vectors(40, 8, 3))
    index.save()
    assert index.index.expansion_search == 300
    again = VectorIndex(path, 8, expansion_search=200, exact_search_vectors=0)
    assert len(again) == 40 and again.index.expansion_search == 200
    draft = VectorIndex(tmp_path / "r.usearch", 8, expansion_search=150, exact_search_vectors=10)
    assert draft.draft
    draft.rebuilt([(list(range(40)), _unit_vectors(40, 8, 3))])
    assert not draft.draft and draft.index.expansion_search == 150


def test_the_ingest_thread_replaces_an_outgrown_draft_by_a_full_graph_of_sqlites_vectors() -> None:
    root = short_tmpdir("fmu-")
    try:
        store, ids = _store_with_chunks(root, 12, embed_units=units.VERSION)
        store.embeddings.store(ids, [embeddings.pack(_unit_vectors(3, 8, i)) for i in range(12)])  # 36 units
        vectors = VectorIndex(root / "v.usearch", 8, exact_search_vectors=30)
        pipeline = Pipeline(store, KeywordIndex(root / "kw"), vectors, "tcp://127.0.0.1:9", IngestPolicy(), "t")
        # The file lost: the draft filled again from SQLite, and saved.
        pipeline.upkeep.reconcile(pipeline.embeds.embedded_with)
        assert vectors.outgrown and vectors.marker.exists()
        pipeline.upkeep.full_graph()  # on a thread of its own; the ingest thread's next step saves it
        assert pipeline.upkeep.graph is not None
        pipeline.upkeep.graph.join(60)
        pipeline.upkeep.maybe_save()
        assert not vectors.draft and len(vectors) == 36 and not vectors.marker.exists()
        assert set(vectors.keys().tolist()) == set(ids)
        assert not VectorIndex(root / "v.usearch", 8, exact_search_vectors=30).draft
    finally:
        remove_tree(root)


def test_a_graph_built_beside_takes_the_adds_and_removals_made_meanwhile_and_searches_never_stop(
    tmp_path: Path,
) -> None:
    chunks = {i: _unit_vectors(2, 8, i) for i in range(60)}  # two units each
    index = VectorIndex(tmp_path / "v.usearch", 8, exact_search_vectors=20)
    for i in range(40):
        index.add([i, i], chunks[i])
    assert index.outgrown
    halfway, go_on = threading.Event(), threading.Event()

    def batches() -> Iterator[tuple[list[int], np.ndarray]]:
        # What SQLite held when the rebuild began (chunks 0-39), in two reads; the second waits for the test.
        yield [i for i in range(20) for _ in range(2)], np.vstack([chunks[i] for i in range(20)])
        halfway.set()
        go_on.wait(30)
        yield [i for i in range(20, 40) for _ in range(2)], np.vstack([chunks[i] for i in range(20, 40)])

    swapped: list[bool] = []
    build = threading.Thread(target=lambda: swapped.append(index.rebuilt(batches())))
    build.start()
    assert halfway.wait(30)
    # Meanwhile, on this thread (the ingest thread's part): new chunks, a chunk's vectors replaced, chunks gone.
    for i in range(40, 60):
        index.add([i, i], chunks[i])
    index.add([5, 5], chunks[59])
    index.remove([7, 30])
    assert index.draft and {c for c, _ in index.search(chunks[45][0], 1)} == {45}  # the old graph answers
    go_on.set()
    build.join(30)
    assert swapped == [True] and not index.draft
    assert set(index.keys().tolist()) == set(range(60)) - {7, 30}
    assert len(index) == 2 * 58
    for i in (0, 25, 45, 59):
        assert index.search(chunks[i][0], 1)[0][0] in ({5, 59} if i == 59 else {i})
    assert index.search(chunks[5][0], 1)[0][1] < 0.99  # chunk 5's old vectors were replaced: nothing holds them
    assert index.search(chunks[59][1], 2)[0][1] > 0.99


def test_a_graph_built_beside_an_index_that_was_reset_meanwhile_is_dropped(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "v.usearch", 8, exact_search_vectors=10)
    index.add(list(range(20)), _unit_vectors(20, 8, 1))
    started = threading.Event()

    def batches() -> Iterator[tuple[list[int], np.ndarray]]:
        started.set()
        index.reset(8)  # another model's vectors from now on (on the ingest thread, meanwhile)
        yield list(range(20)), _unit_vectors(20, 8, 1)

    assert not index.rebuilt(batches())
    assert started.is_set() and len(index) == 0 and index.draft
    cancelled = VectorIndex(tmp_path / "w.usearch", 8, exact_search_vectors=10)
    cancelled.add(list(range(20)), _unit_vectors(20, 8, 1))
    assert not cancelled.rebuilt([(list(range(20)), _unit_vectors(20, 8, 1))], cancelled=lambda: True)
    assert cancelled.draft and len(cancelled) == 20
