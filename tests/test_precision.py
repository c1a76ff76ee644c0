"""int8 as an option (``[ingest] embed_quantize``): the int8 copy of the checked export is made once per
machine and checked, remade with the reason when it is corrupt; an index re-embeds every chunk when the
precision changes, and a search never compares a query vector of one precision with stored vectors of the
other. Real kernels, the real model, the real quantiser (in its child process)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    EmbedReply,
    EmbedRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    IndexStatusReply,
    IndexStatusRequest,
    SearchReply,
    SearchRequest,
    WatchSyncReply,
    WatchSyncRequest,
)
from foldermind.workers.embedding import model_files, onnx_export, onnx_int8, onnx_model
from tests.config import Config, merge
from tests.helpers import (
    FAST_RESTART,
    MODEL_CACHE,
    RunningKernel,
    indexer_note,
    remove_tree,
    short_tmpdir,
    wait_for,
)

MODEL = "all-MiniLM-L6-v2"
INT8 = onnx_model.precision_label("int8")
NO_LLM = {"workers": {"llm": {"enabled": False}, "frontdoor": {"enabled": False}}}
NO_EMBEDDER = {"workers": {"embedder": {"enabled": False}}}
QUANTIZED = {"ingest": {"embed_quantize": "int8"}}
FP32 = {"ingest": {"embed_quantize": "fp32"}}
FALLEN_BACK = {"ingest": {"embed_quantize": "int8", "embed_backend": "torch"}}
"""int8 asked for, and an embedder that runs torch: the state of one whose ONNX Runtime or int8 copy failed."""
FILES = {
    "pets.txt": "Our neighbour's young cat naps on the sofa and chases string all afternoon.\n",
    "pasta.txt": "Boil the pasta in salted water, then toss it with garlic and olive oil.\n",
    "tax.txt": "File the annual tax return before the deadline to avoid a penalty.\n",
}


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_tmpdir("fmq-")
    yield path
    remove_tree(path)


@pytest.fixture(scope="module")
def int8_pair() -> Path:
    """The shared cache's checked int8 copy (made now if no test made it yet)."""
    return onnx_int8.open_precision(model_files.model_dir(), MODEL, MODEL_CACHE, 1, "int8").path


def _copy_export(cache: Path, *files: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    for path in files:
        for source in (path, onnx_model.check_file(path)):
            shutil.copy2(source, cache / source.name)


# ------------------------------------------------------------------------------------------------
# the int8 file


def test_the_int8_copy_is_made_once_from_the_checked_export_and_then_reused(root: Path, int8_pair: Path) -> None:
    fp32 = onnx_export.open_checked(model_files.model_dir(), MODEL, MODEL_CACHE, 1).path
    cache = root / "cache"
    _copy_export(cache, fp32)  # a machine with the fp32 export and no int8 copy yet
    made = onnx_int8.quantize_count
    first = onnx_int8.open_precision(model_files.model_dir(), MODEL, cache, 1, "int8")
    assert first.exported is True and onnx_int8.quantize_count == made + 1
    assert first.path.name == int8_pair.name and first.path.name.endswith(".int8.onnx")
    check = onnx_model.Check.from_file(onnx_model.check_file(first.path))
    assert check.quantized == INT8 and check.source_sha256 == onnx_model.file_sha256(fp32)
    assert check.onnx_sha256 == onnx_model.file_sha256(first.path)
    assert onnx_model.INT8_MIN_COSINE <= check.cosine < onnx_model.MIN_COSINE  # int8 moves vectors, a little
    assert first.path.stat().st_size < fp32.stat().st_size / 3
    again = onnx_int8.open_precision(model_files.model_dir(), MODEL, cache, 1, "int8")
    assert again.exported is False and onnx_int8.quantize_count == made + 1 and again.note == ""
    assert again.cosine >= onnx_model.MIN_COSINE  # against its own recorded vectors
    probe = ["kittens chasing yarn"]
    assert float(np.dot(first.encoder.encode(probe)[0], again.encoder.encode(probe)[0])) > 0.9999


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(4096)  # same size: only the hash can tell
    path.write_bytes(bytes(data))


def test_a_corrupt_int8_copy_is_made_again_and_says_why(root: Path, int8_pair: Path) -> None:
    fp32 = onnx_export.open_checked(model_files.model_dir(), MODEL, MODEL_CACHE, 1).path
    cache = root / "cache"
    _copy_export(cache, fp32, int8_pair)
    _corrupt(cache / int8_pair.name)
    made = onnx_int8.quantize_count
    loaded = onnx_int8.open_precision(model_files.model_dir(), MODEL, cache, 1, "int8")
    assert loaded.exported is True and onnx_int8.quantize_count == made + 1
    assert "int8 copy made again" in loaded.note and "is not the file its check record describes" in loaded.note
    onnx_model.load_cached(cache / int8_pair.name, model_files.model_dir(), 1)  # the new pair is sound


def test_an_int8_record_cannot_vouch_for_the_fp32_export(root: Path, int8_pair: Path) -> None:
    fp32 = onnx_export.open_checked(model_files.model_dir(), MODEL, MODEL_CACHE, 1).path
    cache = root / "cache"
    _copy_export(cache, fp32)
    shutil.copy2(onnx_model.check_file(int8_pair), onnx_model.check_file(cache / fp32.name))
    with pytest.raises(onnx_model.OnnxError, match="check record of another export"):
        onnx_model.load_cached(cache / fp32.name, model_files.model_dir(), 1)


def test_batches_encoded_as_parallel_streams_give_the_one_pass_vectors_in_the_callers_order(int8_pair: Path) -> None:
    """The embedder encodes its batches on several streams at once. int8 quantises activations per batch, so
    only the same batches give the same vectors: the streams must cut them as one pass does and put every row
    back where its text was."""
    encoder = onnx_int8.open_precision(model_files.model_dir(), MODEL, MODEL_CACHE, 1, "int8").encoder
    words = " ".join(FILES.values()).split()
    texts = [" ".join(words[i % 7 : i % 7 + 3 + (i * 5) % 40]) for i in range(23)]  # batches of 4, the last of 3
    one_pass = encoder.encode_longest_first(texts, 4)
    for streams in (2, 3, 8):
        assert np.array_equal(encoder.encode_longest_first(texts, 4, streams=streams), one_pass), streams
    alone = np.vstack([encoder.encode([text]) for text in texts])
    for i in range(len(texts)):  # each row is its own text's vector (nearest of all)
        assert int(np.argmax(one_pass @ alone[i])) == i, (i, one_pass @ alone[i])
    # The embedder's batches of one: every vector is its text's alone, whatever else the request holds.
    assert np.array_equal(encoder.encode_longest_first(texts, 1, streams=2), alone)
    assert not np.array_equal(one_pass, alone)  # in batches of 4, batch mates move int8 vectors


# ------------------------------------------------------------------------------------------------
# an index and its precision


class Home:
    def __init__(self, root: Path) -> None:
        self.root, self.docs = root / "home", root / "docs"
        self.docs.mkdir(parents=True)
        for name, text in FILES.items():
            (self.docs / name).write_text(text)

    def kernel(self, *config: Config) -> RunningKernel:
        return RunningKernel(self.root, merge(FAST_RESTART, NO_LLM, *config))

    def vectors(self) -> dict[int, bytes]:
        db = sqlite3.connect(self.root / "data" / "index.sqlite")
        try:
            return {int(i): bytes(v) for i, v in db.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL")}
        finally:
            db.close()

    def meta(self, key: str) -> str:
        db = sqlite3.connect(self.root / "data" / "index.sqlite")
        try:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return str(row[0]) if row else ""
        finally:
            db.close()


def _call(client: BusClient, msg: Any, reply: type[Any], timeout: float = 30) -> Any:
    return client.request("indexer", msg, reply, timeout=timeout).body


def _embedder_ready(client: BusClient) -> dict[str, Any] | None:
    details = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
    return details if details["state"] == "ready" else None


def _all_embedded(client: BusClient, n: int) -> bool:
    folders = _call(client, FolderListRequest(), FolderListReply).folders
    return bool(folders) and all(
        f["files_total"] >= n and f["state"] == "ready" and f["chunks"] and f["chunks_embedded"] == f["chunks"]
        for f in folders
    )


def _query_precision(client: BusClient) -> str | None:
    details = client.request("indexer", DescribeRequest(), DescribeReply, timeout=10).body.details
    encoder = details["query_encoder"]
    return str(encoder["precision"]) if encoder["state"] == "ready" and encoder["backend"] == "onnx" else None


def _semantic(client: BusClient) -> SearchReply:
    reply: SearchReply = _call(client, SearchRequest("a kitten playing with string", "semantic", top_k=3), SearchReply)
    return reply


def test_a_change_of_precision_re_embeds_every_chunk_and_search_never_mixes_precisions(
    root: Path, int8_pair: Path
) -> None:
    home = Home(root)
    # 1. fp32: the index records the precision of its vectors.
    k = home.kernel(FP32).start()
    try:
        client = k.client("precision-test")
        _call(client, FolderAddRequest(str(home.docs), "docs"), FolderAddReply)
        wait_for(lambda: _all_embedded(client, len(FILES)), 180, 0.2, "every chunk embedded at fp32")
        status = _call(client, IndexStatusRequest(), IndexStatusReply).embedding
        assert status["model"] == MODEL and status["precision"] == "fp32", status
        wait_for(lambda: _query_precision(client) == "fp32", 60, 0.2, "the fp32 query model")
        reply = _semantic(client)
        assert reply.mode_used == "semantic" and reply.note is None and reply.results[0]["file_name"] == "pets.txt"
    finally:
        k.stop()
    fp32_vectors = home.vectors()
    assert len(fp32_vectors) >= len(FILES) and home.meta("embed_precision") == "fp32"

    # 2. int8 configured, but no embedder to re-embed: the fp32 vectors stay, and the int8 query model is
    # never compared with them: semantic search answers from keyword search and says why.
    k = home.kernel(QUANTIZED, NO_EMBEDDER).start()
    try:
        client = k.client("precision-test")
        wait_for(lambda: _query_precision(client) == INT8, 120, 0.2, "the int8 query model")
        reply = _semantic(client)
        assert reply.mode_used == "keyword", reply
        assert reply.note and f"{MODEL} {INT8}" in reply.note and f"{MODEL} fp32" in reply.note, reply.note
        assert home.vectors() == fp32_vectors and home.meta("embed_precision") == "fp32"
        # While an index is being embedded again (the state the pipeline records when it drops the old
        # vectors, set here by hand since no embedder runs), semantic search also answers from keyword search.
        db = sqlite3.connect(home.root / "data" / "index.sqlite")
        with db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('embed_reembedding', 'x fp32')")
        db.close()
        reply = _semantic(client)
        assert reply.mode_used == "keyword" and reply.note and "being embedded again" in reply.note, reply
        db = sqlite3.connect(home.root / "data" / "index.sqlite")
        with db:
            db.execute("UPDATE meta SET value = '' WHERE key = 'embed_reembedding'")
        db.close()
    finally:
        k.stop()

    # 3. int8 with the embedder: every chunk is embedded again, and search runs on int8 vectors only.
    k = home.kernel(QUANTIZED).start()
    try:
        client = k.client("precision-test")
        wait_for(lambda: home.meta("embed_precision") == INT8, 120, 0.2, "the index switched to int8")
        wait_for(lambda: _all_embedded(client, len(FILES)), 180, 0.2, "every chunk embedded again at int8")
        wait_for(lambda: home.meta("embed_reembedding") == "", 60, 0.2, "the re-embedding recorded as done")
        int8_vectors = home.vectors()
        assert set(int8_vectors) == set(fp32_vectors)  # the chunks were kept, only their vectors made again
        assert all(int8_vectors[i] != fp32_vectors[i] for i in fp32_vectors)  # every one of them
        status = _call(client, IndexStatusRequest(), IndexStatusReply).embedding
        assert status["precision"] == INT8 and status["state"] == "ready", status
        # Released once the re-embedding was done (the llm summarises), which may come after this point on a
        # loaded machine: a release frees the model and a describe does not load it again (it is not a use),
        # so a real request loads it, whenever the release came; its vectors are the int8 copy's.
        probe = client.request("embedder", EmbedRequest(["a kitten playing with string"]), EmbedReply, timeout=120)
        assert probe.body.precision == INT8 and probe.body.count == 1, probe.body
        embedder = wait_for(lambda: _embedder_ready(client), 60, 0.2, "the embedder's model loaded")
        assert embedder["precision"] == INT8 and embedder["onnx_file"] == str(int8_pair), embedder
        wait_for(lambda: _query_precision(client) == INT8, 60, 0.2, "the int8 query model")
        reply = _semantic(client)
        assert reply.mode_used == "semantic" and reply.note is None and reply.results[0]["file_name"] == "pets.txt"
        assert INT8 in indexer_note(k)
        log = k.home.log_file("indexer").read_text(encoding="utf-8", errors="replace")
        assert f"the embedder now makes {MODEL} {INT8} vectors, the index held {MODEL} fp32" in log
    finally:
        k.stop()


def test_an_embedder_fallen_back_to_fp32_leaves_an_int8_index_whole_and_new_chunks_wait_for_int8(
    root: Path, int8_pair: Path
) -> None:
    home = Home(root)
    # 1. int8 (the default): an index of int8 vectors.
    k = home.kernel().start()
    try:
        client = k.client("precision-test")
        _call(client, FolderAddRequest(str(home.docs), "docs"), FolderAddReply)
        wait_for(lambda: _all_embedded(client, len(FILES)), 180, 0.2, "every chunk embedded at int8")
    finally:
        k.stop()
    int8_vectors = home.vectors()
    assert len(int8_vectors) >= len(FILES) and home.meta("embed_precision") == INT8

    # 2. The embedder can make fp32 only: the index keeps every int8 vector, a new file's chunks wait (keyword
    # search finds it) and the status says why, instead of the whole index being embedded twice.
    (home.docs / "boats.txt").write_text("The harbour master logs every sailing boat that leaves at dawn.\n")
    k = home.kernel(FALLEN_BACK).start()
    try:
        client = k.client("precision-test")
        client.request("watcher", WatchSyncRequest(), WatchSyncReply, timeout=60)

        def refused() -> dict[str, Any] | None:
            status = _call(client, IndexStatusRequest(), IndexStatusReply).embedding
            return status if status["state"] == "unavailable" else None

        status = wait_for(refused, 180, 0.2, "the fp32 vectors refused")
        assert f"makes fp32 vectors, not the {INT8} the index holds" in status["note"], status
        assert status["precision"] == INT8, status
        embedder = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
        assert embedder["backend"] == "torch" and embedder["precision"] == "fp32", embedder
        hits = _call(client, SearchRequest("harbour sailing boat", "keyword", top_k=3), SearchReply).results
        assert hits and hits[0]["file_name"] == "boats.txt"
        assert home.vectors() == int8_vectors and home.meta("embed_precision") == INT8
        assert home.meta("embed_reembedding") == ""
    finally:
        k.stop()

    # 3. ONNX back: the waiting chunks get int8 vectors, and no other vector was made again.
    k = home.kernel().start()
    try:
        client = k.client("precision-test")
        wait_for(lambda: _all_embedded(client, len(FILES) + 1), 180, 0.2, "the new file embedded at int8")
        after = home.vectors()
        assert len(after) > len(int8_vectors) and all(after[i] == v for i, v in int8_vectors.items())
        log = k.home.log_file("indexer").read_text(encoding="utf-8", errors="replace")
        assert "the embedder now makes" not in log
    finally:
        k.stop()

    # 4. Every chunk embedded with the configured vectors: a start does not wake the on-demand embedder to ask
    # what it runs (the configuration says it), so it stays IDLE, holding no model.
    k = home.kernel().start()
    try:
        client = k.client("precision-test")

        def probe() -> str | None:
            details = client.request("indexer", DescribeRequest(), DescribeReply, timeout=10).body.details
            return None if details["embedder_probe"] == "not yet" else str(details["embedder_probe"])

        said = wait_for(probe, 60, 0.1, "the pipeline past its first embedding step")
        assert said.startswith("not needed: the index"), said
        embedder = k.worker("embedder")
        assert (embedder["state"], embedder["pid"]) == ("IDLE", None), embedder
    finally:
        k.stop()
