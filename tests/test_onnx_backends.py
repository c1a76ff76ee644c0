"""The embedder and the indexer's query encoder on ONNX Runtime, end to end: real kernels, the real model, the
checked export in a model cache shared by homes. Whether torch was imported is read from the workers
themselves (``torch_loaded`` in their describe details: ``"torch" in sys.modules`` there)."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import DescribeReply, DescribeRequest, EmbedReply, EmbedRequest
from foldermind.workers.embedding import model_files, onnx_export, onnx_model
from tests.config import merge
from tests.helpers import (
    FAST_RESTART,
    MODEL_CACHE,
    RunningKernel,
    indexer_note,
    remove_tree,
    short_tmpdir,
    wait_for,
    with_model_cache,
)

MODEL = "all-MiniLM-L6-v2"
MODELS_ONLY = {
    "workers": {name: {"enabled": False} for name in ("llm", "frontdoor", "watcher", "parser")},
    "ingest": {"embed_quantize": "fp32"},
}
"""Only the embedder and the indexer, the workers under test, on the export itself (the int8 copy made from it,
the default, is tests/test_precision.py's)."""
TEXTS = ["kittens chasing yarn", "The central bank raised interest rates to fight inflation.", "x"]


@pytest.fixture(scope="module")
def checked_export() -> Path:
    """The shared cache's checked export (made now if no test kernel made it yet)."""
    return onnx_export.open_checked(model_files.model_dir(), MODEL, MODEL_CACHE, 1).path


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_tmpdir()
    yield path
    remove_tree(path)


def kernel(home: Path, cache: Path = MODEL_CACHE) -> RunningKernel:
    return RunningKernel(home, with_model_cache(merge(FAST_RESTART, MODELS_ONLY), cache))


def settled(client: BusClient) -> dict[str, dict[str, Any]] | None:
    """The embedder's details and the indexer's query encoder's, once neither is loading any more."""
    emb = dict(client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details)
    query = dict(client.request("indexer", DescribeRequest(), DescribeReply, timeout=10).body.details["query_encoder"])
    if emb["state"] == "loading" or query["state"] == "loading":
        return None
    return {"embedder": emb, "indexer": query}


def both_settled(k: RunningKernel, timeout: float = 240) -> dict[str, dict[str, Any]]:
    client = k.client()
    return wait_for(lambda: settled(client), timeout, 0.2, "the embedder's and the indexer's models")


def embedded(k: RunningKernel) -> np.ndarray[Any, np.dtype[np.float32]]:
    reply = k.client().request("embedder", EmbedRequest(texts=TEXTS), EmbedReply, timeout=120)
    raw = bytes(frames.buffer_bytes(reply.buffers[0]))
    return np.frombuffer(raw, dtype=np.float32).reshape(reply.body.count, reply.body.dim)


def test_with_a_checked_export_cached_neither_the_embedder_nor_the_indexer_imports_torch(
    root: Path, checked_export: Path
) -> None:
    k = kernel(root).start()
    try:
        found = both_settled(k)
        for name, details in found.items():
            assert details["backend"] == "onnx", (name, details)
            assert details["onnx_exported"] is False and details["onnx_file"] == str(checked_export), details
            assert details["torch_loaded"] is False, (name, details)
            assert details["onnx_cosine"] >= onnx_model.MIN_COSINE
        assert found["embedder"]["intra_op_threads"] == 1  # its CPUs run as streams of one thread each
        vectors = embedded(k)
        assert vectors.shape == (len(TEXTS), 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        # Embedding did not bring torch in either, and `status` says which backend runs.
        assert settled(k.client())["embedder"]["torch_loaded"] is False  # type: ignore[index]
        assert "onnx" in wait_for(lambda: "model ready" in (n := k.worker("embedder")["note"]) and n, 10, 0.1)
        assert indexer_note(k) == "queries: onnx fp32"
    finally:
        k.stop()


def _corrupt_file(path: Path) -> str:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(4096)  # same size: only the hash can tell
    path.write_bytes(bytes(data))
    return "is not the file its check record describes"


def _corrupt_record(path: Path) -> str:
    record = onnx_model.check_file(path)
    data = json.loads(record.read_text())
    vectors = np.frombuffer(base64.b64decode(data["reference"]), dtype="<f4")
    data["reference"] = base64.b64encode((-vectors).astype("<f4").tobytes()).decode()
    record.write_text(json.dumps(data))
    return "disagrees with its recorded torch vectors"


@pytest.mark.parametrize("corrupt", [_corrupt_file, _corrupt_record], ids=["corrupt-file", "disagreeing-record"])
def test_an_unusable_cached_export_is_exported_again_and_status_says_why(
    root: Path, checked_export: Path, corrupt: Any
) -> None:
    cache = root / "cache"
    cache.mkdir()
    for source in (checked_export, onnx_model.check_file(checked_export)):
        shutil.copy2(source, cache / source.name)
    reason = corrupt(cache / checked_export.name)
    k = kernel(root / "home", cache).start()
    try:
        found = both_settled(k)
        # One of the two re-exported (in its export child: torch never entered either worker); the other
        # waited for it on the lock and loaded the new file.
        exported = [name for name, d in found.items() if d["onnx_exported"]]
        assert len(exported) == 1, found
        for name, details in found.items():
            assert details["backend"] == "onnx" and details["torch_loaded"] is False, (name, details)
        note = found[exported[0]]["backend_note"]
        assert reason in note and "exported again" in note, note
        status = "queries: onnx" if exported[0] == "indexer" else "model ready"
        said = wait_for(lambda: (n := k.worker(exported[0])["note"]) and status in n and n, 10, 0.1, "status note")
        assert "exported again" in said, said
        assert (cache / checked_export.name).read_bytes() != b"" and embedded(k).shape == (len(TEXTS), 384)
        onnx_model.load_cached(cache / checked_export.name, model_files.model_dir(), 1)  # the new pair is sound
    finally:
        k.stop()


def test_when_no_export_can_be_made_torch_runs_and_status_says_why(root: Path) -> None:
    blocker = root / "a-file"
    blocker.write_text("not a folder")
    k = kernel(root / "home", blocker / "models").start()
    try:
        found = both_settled(k)
        for name, details in found.items():
            assert details["backend"] == "torch" and details["torch_loaded"] is True, (name, details)
            assert details["backend_note"].startswith("onnx unavailable: cannot use the model cache"), details
        note = wait_for(lambda: "model ready" in (n := k.worker("embedder")["note"]) and n, 10, 0.1)
        assert "torch; onnx unavailable: cannot use the model cache" in note, note
        note = indexer_note(k)
        assert note.startswith("queries: torch fp32 (onnx unavailable"), note
        assert embedded(k).shape == (len(TEXTS), 384)
    finally:
        k.stop()


def test_two_homes_started_at_once_share_one_export(root: Path) -> None:
    cache = root / "cache"
    first, second = kernel(root / "one", cache), kernel(root / "two", cache)
    try:
        first.start()
        second.start()
        found = [both_settled(first), both_settled(second)]
        workers = [d for homes in found for d in homes.values()]
        assert sum(bool(d["onnx_exported"]) for d in workers) == 1, workers
        assert {d["onnx_file"] for d in workers} == {str(next(cache.glob("*.onnx")))}
        assert all(d["backend"] == "onnx" and d["torch_loaded"] is False for d in workers), workers
        assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
            [Path(workers[0]["onnx_file"]).name, onnx_model.check_file(Path(workers[0]["onnx_file"])).name]
        )
    finally:
        first.stop()
        second.stop()
