"""The query encoder's ONNX backend on the real bundled model: export, cache, check against torch and its
record, fallbacks to torch, and the query-vector cache. One export is shared by the module (a few seconds)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pytest

from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.workers.embedding import model_files, onnx_export, onnx_int8, onnx_model
from foldermind.workers.indexer.search.encoder import QueryEncoder, VectorCache
from tests.helpers import wait_for

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

os.environ["HF_HUB_OFFLINE"] = "1"

MODEL = "all-MiniLM-L6-v2"
INDEXED = f"{MODEL} fp32"
"""What an index of fp32 vectors of the bundled model records (model_files.vectors_key)."""
LONG = "Photosynthesis turns light, water and carbon dioxide into glucose and oxygen in the chloroplasts. " * 30
SENTENCES = [
    "kittens chasing yarn",
    "How do I reset my router's wifi password?",
    "Größenwahn und Gemütlichkeit: ein café crème, s'il vous plaît",
    "東京の天気は明日晴れるでしょう",
    "Ελληνικά, русский, العربية, हिन्दी 🚀✨",
    "x",
    LONG,
]
NO_BUS = "ipc:///nonexistent/foldermind-test.sock"


def torch_vectors(model: SentenceTransformer, texts: list[str]) -> npt.NDArray[np.float32]:
    """What the torch backend gives: each text encoded alone, normalised."""
    import torch

    with torch.inference_mode():
        rows = [model.encode([t], normalize_embeddings=True, convert_to_numpy=True)[0] for t in texts]
    return np.stack(rows).astype(np.float32)


@dataclass
class Shared:
    model: SentenceTransformer
    model_dir: Path
    data_dir: Path
    """The model cache the module's export is in."""
    loaded: onnx_export.Loaded

    def reference(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return torch_vectors(self.model, texts)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Shared:
    """The bundled model loaded once, and exported once into a temporary data folder."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    path = model_files.model_dir()
    model = SentenceTransformer(str(path), device="cpu")
    model.eval()
    data_dir = tmp_path_factory.mktemp("onnx-cache")
    before = onnx_export.export_count
    loaded = onnx_export.open_checked(path, MODEL, data_dir, 1)
    assert onnx_export.export_count == before + 1
    return Shared(model, path, data_dir, loaded)


def encoder_for(cache_dir: Path, **search: Any) -> QueryEncoder:
    # fp32: the encoder's vectors are compared with torch's (the int8 default moves them; test_precision)
    ingest = IngestPolicy(embed_quantize="fp32")
    return QueryEncoder(SearchPolicy(**search), ingest, NO_BUS, "test-encoder", cache_dir=cache_dir)


def settled(enc: QueryEncoder) -> None:
    """Wait until the background load has finished with both backends (torch, then ONNX or not)."""
    enc.start()
    wait_for(lambda: enc.state != "loading" and "loading" not in enc.backend_note, 180, 0.05, "the query encoder")
    assert enc.state == "ready", enc.error


# ------------------------------------------------------------------------------------------------
# export, check, cache file


def test_export_matches_torch_on_sentences_non_ascii_and_truncated_long_text(shared: Shared) -> None:
    loaded = shared.loaded
    assert loaded.exported and loaded.cosine >= onnx_model.MIN_COSINE and loaded.note == ""
    assert loaded.path.parent == shared.data_dir
    assert loaded.path.name.startswith(f"{MODEL}-") and loaded.path.suffix == ".onnx"
    record = onnx_model.check_file(loaded.path)
    visible = sorted(p.name for p in loaded.path.parent.iterdir() if not p.name.startswith("."))
    assert visible == [loaded.path.name, record.name]  # no temporary file left
    check = loaded.check  # the record: this file, checked against torch, with torch's vectors of the probes
    assert check.onnx_sha256 == onnx_model.file_sha256(loaded.path) and check.cosine >= onnx_model.MIN_COSINE
    assert check.preprocessing.max_seq_length == 256 and check.onnxruntime and check.torch
    reference = shared.reference(list(onnx_model.PROBES))
    assert np.allclose(check.vectors(384), reference, atol=1e-6)
    # The long text is cut at the model's limit, by both.
    assert shared.model.max_seq_length == 256
    assert len(shared.model.tokenizer(LONG)["input_ids"]) > 256
    want = shared.reference(SENTENCES)
    one_by_one = np.concatenate([loaded.encoder.encode([s]) for s in SENTENCES])
    batch = loaded.encoder.encode(SENTENCES)
    for got in (one_by_one, batch):
        assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 384)
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert np.min(np.sum(got * want, axis=1)) >= 1 - 1e-4
    more = loaded.encoder.encode([LONG + " Anything past token 256 changes nothing."])[0]
    assert float(np.dot(more, one_by_one[-1])) > 0.99999


def test_the_cached_file_is_reused_not_exported_again(shared: Shared) -> None:
    path = shared.loaded.path
    mtime = path.stat().st_mtime_ns
    before = onnx_export.export_count
    again = onnx_export.open_checked(shared.model_dir, MODEL, shared.data_dir, 1)
    assert not again.exported and again.path == path and again.note == ""
    assert onnx_export.export_count == before and path.stat().st_mtime_ns == mtime


def test_a_corrupt_cached_file_is_detected_and_exported_again(shared: Shared, tmp_path: Path) -> None:
    good = shared.loaded.path
    bad = tmp_path / good.name
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 3])  # cut short
    shutil.copy2(onnx_model.check_file(good), onnx_model.check_file(bad))
    stale = tmp_path / f"{MODEL}-0123456789abcdef.onnx"  # an export of an older model, unused for long
    stale.write_bytes(b"old")
    old = time.time() - onnx_export.UNUSED_EXPORT_S - 60
    os.utime(stale, (old, old))
    recent = tmp_path / f"{MODEL}-fedcba9876543210.onnx"  # another home's version, in use: kept
    recent.write_bytes(b"in use")
    before = onnx_export.export_count
    loaded = onnx_export.open_checked(shared.model_dir, MODEL, tmp_path, 1)
    assert loaded.exported and onnx_export.export_count == before + 1
    assert loaded.note.startswith("exported again:") and "not the file its check record describes" in loaded.note
    assert loaded.cosine >= onnx_model.MIN_COSINE
    assert bad.stat().st_size == good.stat().st_size
    visible = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert visible == sorted([good.name, onnx_model.check_file(good).name, recent.name])


def test_a_file_that_loads_but_disagrees_with_torch_is_refused(shared: Shared, tmp_path: Path) -> None:
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(shared.loaded.path))
    biggest = max(graph.graph.initializer, key=lambda t: int(np.prod(t.dims)) if len(t.dims) == 2 else 0)
    weights = numpy_helper.to_array(biggest)
    weights = weights * 1.5 + 0.01  # the word embeddings, probably: every row changes
    biggest.CopyFrom(numpy_helper.from_array(weights.astype(np.float32), biggest.name))
    target = onnx_model.cache_file(tmp_path, MODEL, onnx_model.model_digest(shared.model_dir))
    onnx.save(graph, str(target))
    # A record that vouches for this very file (its hash) but holds the real torch vectors.
    check = dataclasses.replace(
        shared.loaded.check, onnx_bytes=target.stat().st_size, onnx_sha256=onnx_model.file_sha256(target)
    )
    onnx_model.check_file(target).write_text(check.to_json())
    with pytest.raises(onnx_model.OnnxError, match="disagrees with its recorded torch vectors"):
        onnx_model.load_cached(target, shared.model_dir, 1)
    # open_checked would export again; told to stop, it does not export.
    stop = threading.Event()
    stop.set()
    before = onnx_export.export_count
    with pytest.raises(onnx_model.OnnxError, match="stopped"):
        onnx_export.open_checked(shared.model_dir, MODEL, tmp_path, 1, stop)
    assert onnx_export.export_count == before


def test_an_export_in_progress_stops_when_told_and_leaves_no_file(shared: Shared, tmp_path: Path) -> None:
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    dest = tmp_path / "models" / "m.onnx"
    started = time.monotonic()
    with pytest.raises(onnx_model.OnnxError, match="stopped"):
        onnx_export.export(shared.model_dir, dest, stop)
    assert time.monotonic() - started < 5
    assert list(dest.parent.iterdir()) == []


def test_a_failed_export_says_why(tmp_path: Path) -> None:
    with pytest.raises(onnx_model.OnnxError, match=r"export failed \(exit 1\): .+no config\.json"):
        onnx_export.export(tmp_path, tmp_path / "out" / "m.onnx")
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("quantize", ["fp32", "int8"])
def test_a_load_that_waited_for_a_failed_export_of_the_same_files_fails_alike_without_exporting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quantize: str
) -> None:
    """The embedder and the indexer ask for one export at once; when it fails (here a stand-in for the child
    that fails, as on a damaged model), the one that waited on the lock (the export's, or for int8 the int8
    copy's, taken first) gets its reason instead of running the same export again. A later attempt exports
    again."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"a": 1}')
    (model / "model.safetensors").write_bytes(b"damaged weights")
    runs: list[str] = []
    first_in = threading.Event()

    def failing_export(model_dir: Path, dest: Path, *args: Any, **kwargs: Any) -> None:
        runs.append(threading.current_thread().name)
        first_in.set()
        time.sleep(0.5)  # the other load meanwhile waits on the lock
        raise onnx_model.OnnxError("export failed (exit 1): the weights cannot be read")

    monkeypatch.setattr(onnx_export, "export", failing_export)
    errors: dict[str, str] = {}

    def load(name: str) -> None:
        try:
            onnx_int8.open_precision(model, MODEL, tmp_path / "cache", 1, quantize)
        except onnx_model.OnnxError as exc:
            errors[name] = str(exc)

    first = threading.Thread(target=load, args=("first",), name="first")
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=load, args=("second",), name="second")
    second.start()
    first.join(10)
    second.join(10)
    assert runs == ["first"]
    assert errors == {n: "export failed (exit 1): the weights cannot be read" for n in ("first", "second")}
    load("retry")  # not waiting for anyone's export: it tries again
    assert runs == ["first", "MainThread"] and set(errors) == {"first", "second", "retry"}


def test_the_digest_follows_weights_and_configs_only(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "README.md").write_text("about")
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"mean": true}')
    first = onnx_model.model_digest(tmp_path)
    (tmp_path / "README.md").write_text("about, edited")
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.bin").write_bytes(b"someone else's export")
    assert onnx_model.model_digest(tmp_path) == first
    (tmp_path / "1_Pooling" / "config.json").write_text('{"mean": false}')
    second = onnx_model.model_digest(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"weight5")
    assert len({first, second, onnx_model.model_digest(tmp_path)}) == 3
    assert onnx_model.cache_file(tmp_path, "a/b c", first).name == f"a_b_c-{first}.onnx"


@pytest.mark.slow
def test_the_torch_export_exporter_works_too(shared: Shared, tmp_path: Path) -> None:
    """The fallback exporter (torch.export + onnxscript), for a torch without the TorchScript one."""
    dest = onnx_model.cache_file(tmp_path, MODEL, onnx_model.model_digest(shared.model_dir))
    onnx_export.export(shared.model_dir, dest, exporter="dynamo")
    encoder, check, cosine = onnx_model.load_cached(dest, shared.model_dir, 1)
    assert cosine >= onnx_model.MIN_COSINE and check.exporter == "dynamo"
    assert encoder.encode(["kittens"]).shape == (1, 384)


def test_onnxruntime_is_refused_rather_than_crashing_after_usearch() -> None:
    """usearch's static libstdc++ crashes a later `import onnxruntime` unless the locale was built first."""
    after = (
        "import usearch.index\nfrom foldermind.workers.embedding import onnx_model\n"
        "print(repr(onnx_model.onnxruntime_unsafe()))\n"
    )
    out = subprocess.run([sys.executable, "-c", after], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usearch.compiled was imported before" in out.stdout, out.stderr
    # The indexer's import order (the query encoder first) makes it safe.
    indexer = (
        "import foldermind.workers.indexer\nimport usearch.index\nfrom foldermind.workers.embedding import onnx_model\n"
        "assert not onnx_model.onnxruntime_unsafe()\nimport onnxruntime\nprint('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", indexer], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ------------------------------------------------------------------------------------------------
# the query encoder: backends and fallbacks


def test_the_encoder_answers_with_onnx_from_the_cached_export(shared: Shared) -> None:
    before = onnx_export.export_count
    enc = encoder_for(shared.data_dir)
    try:
        settled(enc)
        assert enc.backend == "onnx" and enc.backend_note == "", enc.backend_note
        assert onnx_export.export_count == before and enc.onnx_exported is False
        assert enc.onnx_file == str(shared.loaded.path)
        vector, why = enc.encode("kittens chasing yarn", 384, INDEXED)
        assert vector is not None, why
        assert float(np.dot(vector, shared.reference(["kittens chasing yarn"])[0])) >= 1 - 1e-4
        details = enc.describe()
        assert details["backend"] == "onnx" and details["backend_wanted"] == "onnx" and details["threads"] == 1
        # Vectors of another model than the index's are never used.
        assert enc.encode("x", 384, "another-model")[0] is None
        assert enc.encode("x", 768, INDEXED)[0] is None
        # Nor vectors of another precision: this fp32 query model never answers for an index of int8 vectors.
        assert enc.vectors_key == INDEXED and model_files.vectors_key(MODEL, "fp32") == INDEXED
        vector, why = enc.encode("x", 384, f"{MODEL} int8-x2q1")
        assert vector is None and f"the query model is {INDEXED}, the index holds {MODEL} int8-x2q1" in why, why
    finally:
        enc.close()


def test_backend_torch_never_tries_onnx(tmp_path: Path) -> None:
    enc = encoder_for(tmp_path, query_backend="torch")
    try:
        settled(enc)
        assert enc.backend == "torch" and enc.backend_note == "" and enc.onnx_file is None
        assert list(tmp_path.iterdir()) == []
        vector, why = enc.encode("kittens chasing yarn", 384, INDEXED)
        assert vector is not None and vector.shape == (384,), why
    finally:
        enc.close()


def test_an_onnx_file_that_cannot_load_leaves_torch_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Shared
) -> None:
    def broken_export(model_dir: Path, dest: Path, *args: Any, **kwargs: Any) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"this is not an onnx model")
        good = shared.loaded.check
        check = dataclasses.replace(good, onnx_bytes=dest.stat().st_size, onnx_sha256=onnx_model.file_sha256(dest))
        onnx_model.check_file(dest).write_text(check.to_json())

    monkeypatch.setattr(onnx_export, "export", broken_export)
    enc = encoder_for(tmp_path)
    try:
        settled(enc)
        assert enc.backend == "torch"
        assert enc.backend_note.startswith("onnx unavailable:") and "does not load" in enc.backend_note
        assert enc.describe()["backend_note"] == enc.backend_note
        assert [p for p in tmp_path.iterdir() if not p.name.startswith(".")] == []  # not kept for the next start
        vector, why = enc.encode("kittens chasing yarn", 384, INDEXED)
        assert vector is not None, why
        assert float(np.dot(vector, shared.reference(["kittens chasing yarn"])[0])) >= 1 - 1e-4
    finally:
        enc.close()


def test_without_onnxruntime_torch_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "onnxruntime" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    enc = encoder_for(tmp_path)
    try:
        settled(enc)
        assert enc.backend == "torch" and enc.backend_note == "onnx unavailable: onnxruntime is not installed"
        assert enc.encode("kittens", 384, INDEXED)[0] is not None
    finally:
        enc.close()


def test_an_onnx_failure_on_a_query_switches_to_torch(shared: Shared) -> None:
    enc = encoder_for(shared.data_dir)
    try:
        settled(enc)
        assert enc.backend == "onnx"

        def boom(texts: list[str]) -> npt.NDArray[np.float32]:
            raise RuntimeError("session lost")

        enc._onnx.encode = boom  # type: ignore[method-assign,union-attr]
        vector, why = enc.encode("a query", 384, INDEXED)
        assert vector is not None, why
        assert enc.describe()["backend"] == "torch" and "session lost" in enc.backend_note
    finally:
        enc.close()


# ------------------------------------------------------------------------------------------------
# the query-vector cache


def test_a_repeated_query_is_served_from_the_cache(shared: Shared, monkeypatch: pytest.MonkeyPatch) -> None:
    enc = encoder_for(shared.data_dir, query_cache_size=4)
    try:
        settled(enc)
        calls: list[str] = []
        real = enc._encode_local

        def counted(query: str) -> npt.NDArray[np.float32]:
            calls.append(query)
            return real(query)

        monkeypatch.setattr(enc, "_encode_local", counted)
        first, _ = enc.encode("kittens chasing yarn", 384, INDEXED)
        second, _ = enc.encode("kittens chasing yarn", 384, INDEXED)
        assert first is not None and second is not None and np.array_equal(first, second)
        assert calls == ["kittens chasing yarn"]
        second[:] = 0  # the caller's copy: the cached vector is untouched
        third, _ = enc.encode("kittens chasing yarn", 384, INDEXED)
        assert third is not None and np.array_equal(third, first)
        enc.encode("Kittens chasing yarn", 384, INDEXED)  # exact text: another key
        assert calls == ["kittens chasing yarn", "Kittens chasing yarn"]
        assert enc.describe()["cache"] == {"size": 4, "entries": 2, "hits": 2, "misses": 2}
    finally:
        enc.close()


EVENTLET = "What kind of work is the Eventlet pool especially good at?"
EVIDENCE = [  # sentences of Celery's docs that an evidence request encodes for that question (shape batch 8)
    "With Eventlet you can efficiently spawn hundreds, or thousands of green threads.",
    "Eventlet Workers Pool",
    "Celery supports Eventlet as an alternative execution pool implementation and in some cases superior to prefork.",
    "You may want a mix of both Eventlet and prefork workers, and route tasks according to compatibility or what works"
    " best.",
    "The prefork pool can take use of multiple processes, but how many is often limited to a few processes per CPU.",
    "Generally, CPU-bound operations don't go well with Eventlet.",
    "However, you need to ensure one task doesn't block the event loop too long.",
]


def test_an_int8_evidence_sentence_s_vector_is_the_same_whichever_sentences_are_encoded_with_it(shared: Shared) -> None:
    # onnxruntime's dynamic quantisation scales a batch as a whole: a sentence encoded beside others got a vector that
    # depended on them, its cosine with the question moving by up to 0.05 across the answer floor's threshold
    # (docs/benchmarks/answer-relevance.md). A sentence's vector is a function of its text.
    enc = QueryEncoder(
        SearchPolicy(), IngestPolicy(embed_quantize="int8"), NO_BUS, "test-encoder", cache_dir=shared.data_dir
    )
    try:
        settled(enc)
        assert enc.backend == "onnx" and str(enc.precision).startswith("int8"), (enc.backend, enc.precision)
        question, why = enc.encode(EVENTLET, 384, None)
        assert question is not None, why
        alone, why = enc.encode_sentences(EVIDENCE[:1], 384, None)
        assert alone is not None, why
        cosines = set()
        for mates in (EVIDENCE[1:4], EVIDENCE[4:7], EVIDENCE[2:5], EVIDENCE[1:7]):
            got, why = enc.encode_sentences([*mates, EVIDENCE[0]], 384, None)
            assert got is not None, why
            assert np.array_equal(got[-1], alone[0]), float(np.dot(got[-1], alone[0]))
            cosines.add(float(np.dot(got[-1], question)))
        assert len(cosines) == 1
    finally:
        enc.close()


def test_vector_cache_is_lru_keyed_by_model_and_can_be_off() -> None:
    cache = VectorCache(2)
    one, two, three = (np.full(3, i, dtype=np.float32) for i in (1, 2, 3))
    cache.put("m", "a", one)
    cache.put("m", "b", two)
    assert cache.get("other-model", "a") is None
    got = cache.get("m", "a")  # "a" is now the most recent
    assert got is not None and np.array_equal(got, one)
    cache.put("m", "c", three)  # evicts "b"
    assert cache.get("m", "b") is None and cache.get("m", "c") is not None and len(cache) == 2
    off = VectorCache(0)
    off.put("m", "a", one)
    assert off.get("m", "a") is None and len(off) == 0


def test_the_policy_keys_and_their_defaults() -> None:
    policy = SearchPolicy()
    assert (policy.query_backend, policy.query_threads, policy.query_cache_size) == ("onnx", 1, 256)
    from foldermind.protocol.runtime import config

    shipped = config.load().search
    assert (shipped.query_backend, shipped.query_threads, shipped.query_cache_size) == ("onnx", 1, 256)
    assert model_files.model_name(model_files.model_dir()) == MODEL
