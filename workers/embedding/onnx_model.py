"""ONNX Runtime for the sentence-transformers model: exported once per machine, checked against torch once, then
loaded without torch.

The whole sentence-transformers pipeline (transformer, pooling, normalisation: whatever modules the model directory
names) is exported to ONNX by a child process (:mod:`foldermind.workers.embedding.onnx_export`), which also checks the
file against torch and records that check. This module is the workers' side and never imports torch: the embedder and
the indexer's query encoder load a checked export with ONNX Runtime and tokenize with the ``tokenizers`` package from
the model's ``tokenizer.json``: neither imports torch once a checked export exists (docs/tuning.md#embedder).

The cache (``[ingest] model_cache_dir``, default ``<user cache dir>/foldermind/models``) is shared by every home on
the machine: ``<name>-<digest>.onnx``, where the digest covers the model's weights, configs and tokenizer files and
:data:`EXPORT_FORMAT`, and beside it ``<file>.checked.json``, the check record: the file's size and SHA-256, the
preprocessing torch used (max length, prompt, lower-casing), the onnxruntime and torch versions, the least cosine
measured and torch's own vectors of the probe sentences. Both are written under temporary names and renamed, and an
export holds a lock file, so two homes starting at once export once and never see half a file.

Every load (:func:`open_checked`) hashes the file against its record (~0.1 CPU-s for 90 MB) and encodes the probes
(short, non-ASCII, one past the model's max length; one at a time and as one padded batch), which must agree with
the recorded torch vectors (cosine >= :data:`MIN_COSINE`): a corrupt file, a record that disagrees or an onnxruntime
that computes otherwise is caught without torch. An export that is missing or unusable is made again (once, in the
child, which checks it against torch); when that fails too, :class:`OnnxError` says why and the caller uses torch.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from tokenizers import Encoding

log = logging.getLogger("foldermind.onnx")

EXPORT_FORMAT = 3
"""Bump when the exported graph or its check record changes: every cached file is then redone.
2: the check record beside the file, tokenization by ``tokenizers``. 3: the model traced with eager attention
(onnx_trace._eager)."""
OPSET = 17
OUTPUT = "sentence_embedding"
MIN_COSINE = 0.9999
CHECK_SUFFIX = ".checked.json"

QUANT_FORMAT = 2
"""Bump when the int8 copy is made otherwise (quantiser settings, its check): every cached int8 file is then
redone, and indexes of its vectors re-embed (the format is part of :func:`precision_label`).
1: onnxruntime's ``quantize_dynamic``, QInt8 weights, per tensor. 2: the same, of the graph onnxruntime's BERT
optimizer fused first (onnx_int8._fused)."""
INT8_SUFFIX = ".int8.onnx"
INT8_MIN_COSINE = 0.8
"""The int8 copy's least cosine to torch over the probes must reach this when it is made (a broken
quantisation gives ~0 or NaN; measured: docs/tuning.md#int8). Its later loads are held to :data:`MIN_COSINE`
against its own recorded vectors."""
PRECISIONS = ("fp32", "int8")

PROBES = (
    "x",
    "How does the immune system respond to a viral infection?",
    "  Größenwahn, café crème, naïve façade — 東京の天気 🚀 Ελληνικά  ",
    "Long text past the model's limit: "
    + "the quick brown fox jumps over the lazy dog near the riverbank at dawn while birds sing. " * 40,
)
"""Checked at the export against torch, and on every load against torch's recorded vectors; the third has
edge whitespace (stripped by sentence-transformers), the last is far longer than 256 tokens (truncation)."""

_HASHED_SUFFIXES = frozenset({".json", ".txt", ".safetensors", ".bin", ".model"})
_SKIPPED_DIRS = frozenset({"onnx", "openvino", ".git", ".cache", "__pycache__"})


class OnnxError(Exception):
    """The ONNX backend cannot be used; the message says why (one line)."""


# ---------------------------------------------------------------------------------------------
# a native clash: usearch and onnxruntime in one process

_STATIC_CXX = ("usearch.compiled",)
"""Extension modules that link libstdc++ statically and export its GNU-unique locale ids (usearch's
Linux wheels do). Loaded before the shared libstdc++ has built a locale, they number those ids with
their own counter, and ``import onnxruntime`` then dies with SIGSEGV (in std::codecvt)."""
_LOCALE_BUILDERS = ("torch._C", "onnxruntime.capi.onnxruntime_pybind11_state")
"""Extension modules whose loading builds a locale in the shared libstdc++ (which makes the order safe)."""
_locale_ready = False


def init_cxx_locale() -> None:
    """Build one ``std::locale`` in the shared libstdc++ now, so that an extension module with a
    static copy loaded later finds the locale ids numbered. Call it before ``usearch`` is imported
    (the query encoder's module does, at import); cheap, and harmless to repeat or where not needed."""
    global _locale_ready
    if _locale_ready or sys.platform != "linux":
        return
    if any(name in sys.modules for name in _STATIC_CXX):
        return  # too late here: onnxruntime_unsafe() tells whether the order was safe anyway
    import ctypes

    try:
        lib = ctypes.CDLL("libstdc++.so.6")
        buf = ctypes.create_string_buffer(64)  # a std::locale is one pointer
        lib._ZNSt6localeC1Ev(buf)  # std::locale::locale(): builds the classic locale, numbering every facet id
        lib._ZNSt6localeD1Ev(buf)
    except (OSError, AttributeError) as exc:  # no GNU libstdc++ (musl, ...): nothing to clash with
        log.debug("libstdc++ locale not initialised: %s", exc)
        return
    _locale_ready = True


def onnxruntime_unsafe() -> str:
    """Why importing onnxruntime in this process would crash it, else empty."""
    if sys.platform != "linux" or _locale_ready or "onnxruntime" in sys.modules:
        return ""
    order = {name: i for i, name in enumerate(sys.modules)}  # sys.modules keeps import order
    static = [order[n] for n in _STATIC_CXX if n in order]
    if not static:
        init_cxx_locale()
        return ""
    if any(order[n] < min(static) for n in _LOCALE_BUILDERS if n in order):
        return ""
    loaded = ", ".join(n for n in _STATIC_CXX if n in order)
    return (
        f"{loaded} was imported before onnxruntime could be made safe to load (its static libstdc++ would "
        "crash onnxruntime); call foldermind.workers.embedding.onnx_model.init_cxx_locale() before importing it"
    )


# ---------------------------------------------------------------------------------------------
# the cache file and its check record


def model_digest(model_dir: Path) -> str:
    """16 hex digits over the model's weights, configs and tokenizer files (and the export format)."""
    digest = hashlib.sha256(f"foldermind-onnx {EXPORT_FORMAT} opset {OPSET}\n".encode())
    files = sorted(_model_files(model_dir), key=lambda p: p.relative_to(model_dir).as_posix())
    if not files:
        raise OnnxError(f"{model_dir} holds no model files")
    for file in files:
        digest.update(f"{file.relative_to(model_dir).as_posix()}\0".encode())
        with open(file, "rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()[:16]


def _model_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS]
        found.extend(Path(folder) / n for n in names if Path(n).suffix in _HASHED_SUFFIXES)
    return found


def cache_file(cache_dir: Path, name: str, digest: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return cache_dir / f"{safe}-{digest}.onnx"


def int8_file(fp32: Path) -> Path:
    """The int8 copy of the export ``fp32``, beside it: ``<name>-<digest>.int8.onnx``."""
    return fp32.with_name(fp32.name.removesuffix(".onnx") + INT8_SUFFIX)


def precision_label(quantize: str) -> str:
    """What the vectors of a precision are recorded as in an index: ``fp32`` (the model's own vectors,
    whichever backend makes them: the fp32 export is checked equal to torch), or for int8 the formats that
    made them (``int8-x3q2``: export format 3, quantisation format 2), since an int8 vector moves with either."""
    if quantize not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}")
    return "fp32" if quantize == "fp32" else f"int8-x{EXPORT_FORMAT}q{QUANT_FORMAT}"


def name_digest(path: Path) -> str:
    """The model digest in an export's or int8 copy's file name (empty when it has none)."""
    found = re.search(r"-([0-9a-f]{16})(?:\.int8)?\.onnx$", path.name)
    return found.group(1) if found else ""


def check_file(path: Path) -> Path:
    """The check record beside an export: ``<file>.checked.json``."""
    return path.with_name(path.name + CHECK_SUFFIX)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@dataclass(frozen=True, slots=True)
class Preprocessing:
    """What sentence-transformers does to a text before the transformer sees it, as the export child read
    it from the loaded model: the prompt it prepends, lower-casing, its max length (truncation)."""

    tokenizer: str
    """``tokenizer.json``'s path relative to the model directory."""
    max_seq_length: int
    prompt: str = ""
    do_lower_case: bool = False


@dataclass(frozen=True, slots=True)
class Check:
    """The record of an export's check against torch (``<file>.checked.json``)."""

    digest: str
    export_format: int
    onnx_bytes: int
    onnx_sha256: str
    preprocessing: Preprocessing
    cosine: float
    """The least cosine between ONNX and torch over the probes, one at a time and batched."""
    min_cosine: float
    onnxruntime: str
    torch: str
    exporter: str
    checked_at: float
    probes: list[str]
    reference: str
    """The vectors of ``probes`` this file must give (each encoded alone), float32 little-endian, base64:
    torch's for the fp32 export, the int8 copy's own for an int8 file."""
    quantized: str = ""
    """Empty for the fp32 export; for an int8 copy, :func:`precision_label`'s ``int8-...``."""
    source_sha256: str = ""
    """For an int8 copy, the SHA-256 of the checked fp32 export it was made from."""
    batch_reference: str = ""
    """For an int8 copy, its vectors of ``probes`` encoded as one batch (as ``reference``): dynamic
    quantisation scales activations per batch, so these differ a little from the ones encoded alone."""

    def vectors(self, dim: int, batch: bool = False) -> NDArray[np.float32]:
        """The recorded vectors of the probes: each encoded alone, or (``batch``) all in one batch."""
        encoded = self.batch_reference if batch else self.reference
        raw = np.frombuffer(base64.b64decode(encoded), dtype="<f4").astype(np.float32)
        if raw.size != len(self.probes) * dim:
            raise OnnxError(f"the check record holds {raw.size} floats, not {len(self.probes)} x {dim}")
        return raw.reshape(len(self.probes), dim)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_file(cls, path: Path) -> Check:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data["preprocessing"] = Preprocessing(**data["preprocessing"])
            return cls(**data)
        except FileNotFoundError:
            raise OnnxError("the cached export has no check record") from None
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise OnnxError(f"the cached export has an unreadable check record: {reason(exc)}") from exc


def encode_reference(vectors: NDArray[np.float32]) -> str:
    return base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode("ascii")


# ---------------------------------------------------------------------------------------------
# the session


class OnnxEncoder:
    """An ONNX Runtime session over an exported model, fed by the model's own ``tokenizer.json`` with the
    preprocessing sentence-transformers applies (checked equal by the probes)."""

    def __init__(self, path: Path, model_dir: Path, prep: Preprocessing, threads: int) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise OnnxError(f"onnxruntime or tokenizers is not installed ({exc})") from exc
        try:
            self.tokenizer = Tokenizer.from_file(str(model_dir / prep.tokenizer))
        except Exception as exc:
            raise OnnxError(f"the model's {prep.tokenizer} does not load: {reason(exc)}") from exc
        self.tokenizer.no_padding()  # padded here, per batch, to its longest text
        self.tokenizer.enable_truncation(max_length=prep.max_seq_length)
        padding = self.tokenizer.padding
        self.pad_id = int(padding["pad_id"]) if padding else 0
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        # With more than one thread, idle pool threads sleep instead of spinning: other workers need the cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxError(f"{path.name} does not load: {reason(exc)}") from exc
        self.path, self.prep, self.threads = path, prep, threads
        self.inputs: list[str] = [i.name for i in self.session.get_inputs()]
        unknown = [n for n in self.inputs if n not in ("input_ids", "attention_mask", "token_type_ids")]
        if unknown:
            raise OnnxError(f"{path.name} wants inputs the tokenizer does not give: {', '.join(unknown)}")
        self.output: str = self.session.get_outputs()[0].name

    def tokenize(self, texts: Sequence[str]) -> list[Encoding]:
        """As sentence-transformers does: its prompt prepended, then stripped, lower-cased if it says so."""
        prep = self.prep
        prepared = [(prep.prompt + t).strip() for t in texts]
        if prep.do_lower_case:
            prepared = [t.lower() for t in prepared]
        return list(self.tokenizer.encode_batch(prepared, add_special_tokens=True))

    def run(self, encodings: Sequence[Encoding]) -> NDArray[np.float32]:
        """One L2-normalised float32 row per encoding, in one forward pass padded to the longest."""
        rows, width = len(encodings), max((len(e.ids) for e in encodings), default=0)
        ids = np.full((rows, width), self.pad_id, dtype=np.int64)
        mask = np.zeros((rows, width), dtype=np.int64)
        types = np.zeros((rows, width), dtype=np.int64)
        for i, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[i, :n], mask[i, :n], types[i, :n] = enc.ids, enc.attention_mask, enc.type_ids
        given = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        raw = np.asarray(self.session.run([self.output], {n: given[n] for n in self.inputs})[0], dtype=np.float32)
        if raw.ndim != 2 or raw.shape[0] != rows:
            raise OnnxError(f"the session returned shape {raw.shape} for {rows} texts")
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        return np.ascontiguousarray(raw / np.maximum(norms, 1e-12), dtype=np.float32)

    def encode(self, texts: list[str]) -> NDArray[np.float32]:
        """One L2-normalised float32 row per text, all in one padded batch."""
        return self.run(self.tokenize(texts))

    def encode_longest_first(self, texts: list[str], batch_size: int, streams: int = 1) -> NDArray[np.float32]:
        """Bulk vectors: the texts sorted by token count, longest first, cut into batches of ``batch_size``
        (so each batch pads to texts of about its own length, and in one stream a too-large batch fails on
        the first one), the rows put back in the callers' order.

        ``streams`` > 1 runs that many batches at once on threads of their own (ONNX Runtime releases the
        GIL), each taking the next batch when it is done. With one intra-op thread per stream, no thread
        ever waits for another inside a pass, which on a busy machine is ~10% faster than one pass on two
        intra-op threads (docs/tuning.md#embedder). The batches are the same either way, so the vectors are
        identical (int8 quantises activations per batch)."""
        encodings = self.tokenize(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        batches = [order[at : at + batch_size] for at in range(0, len(order), batch_size)]
        out: NDArray[np.float32] | None = None

        def run(rows: list[int]) -> NDArray[np.float32]:
            return self.run([encodings[i] for i in rows])

        if streams > 1 and len(batches) > 1:
            with ThreadPoolExecutor(min(streams, len(batches)), thread_name_prefix="onnx-stream") as pool:
                results = list(pool.map(run, batches))
        else:
            results = [run(rows) for rows in batches]
        for rows, vectors in zip(batches, results, strict=True):
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def agreement(
    encoder: OnnxEncoder,
    reference: Callable[[list[str]], NDArray[np.float32]],
    probes: Sequence[str] = PROBES,
    batch_reference: NDArray[np.float32] | None = None,
) -> float:
    """The least cosine between ONNX and ``reference`` (torch) vectors of ``probes``: one text at a
    time (as queries are) and all in one padded batch (against ``batch_reference`` when given: an int8
    model quantises its activations per batch, so a text's vector depends a little on its batch)."""
    want = np.asarray(reference(list(probes)), dtype=np.float32)
    single = np.concatenate([encoder.encode([p]) for p in probes])
    batch = encoder.encode(list(probes))
    if want.shape != single.shape:
        raise OnnxError(f"ONNX gives {single.shape[1]}-d vectors, torch {want.shape[1]}-d")
    want = want / np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)
    batch_want = want if batch_reference is None else np.asarray(batch_reference, dtype=np.float32)
    if batch_want.shape != batch.shape:
        raise OnnxError(f"the batched reference holds {batch_want.shape}, ONNX gives {batch.shape}")
    cosines = np.concatenate([np.sum(want * single, axis=1), np.sum(batch_want * batch, axis=1)])
    if not np.all(np.isfinite(cosines)):
        return float("nan")
    return float(cosines.min())


# ---------------------------------------------------------------------------------------------
# a cached export, checked against its record (no torch)


def load_cached(path: Path, model_dir: Path, threads: int) -> tuple[OnnxEncoder, Check, float]:
    """The export at ``path``, its check record and the least probe cosine of this load, if it is the file
    its record describes and still agrees with the recorded torch vectors; else :class:`OnnxError` saying
    how it differs."""
    check = Check.from_file(check_file(path))
    quantized = precision_label("int8") if path.name.endswith(INT8_SUFFIX) else ""
    if check.digest != name_digest(path) or check.export_format != EXPORT_FORMAT or check.quantized != quantized:
        other = f"{check.digest}, format {check.export_format}{', ' + check.quantized if check.quantized else ''}"
        raise OnnxError(f"the cached export has a check record of another export ({other})")
    try:
        size = path.stat().st_size
        if size != check.onnx_bytes or file_sha256(path) != check.onnx_sha256:
            raise OnnxError("the cached export is not the file its check record describes (changed or corrupt)")
    except OSError as exc:
        raise OnnxError(f"the cached export is unreadable: {reason(exc)}") from exc
    encoder = OnnxEncoder(path, model_dir, check.preprocessing, threads)
    try:
        dim = dimension(encoder)
        recorded = check.vectors(dim)
        batched = check.vectors(dim, batch=True) if check.batch_reference else None
        cosine = agreement(encoder, lambda texts: recorded, check.probes, batched)
    except OnnxError:
        raise
    except Exception as exc:
        raise OnnxError(f"the cached export fails on the probe sentences: {reason(exc)}") from exc
    if not cosine >= MIN_COSINE:  # NaN fails too
        raise OnnxError(f"the cached export disagrees with its recorded torch vectors (least cosine {cosine:.6f})")
    with contextlib.suppress(OSError):
        os.utime(check_file(path))  # "in use": another home's tidy keeps it (onnx_export.UNUSED_EXPORT_S)
    return encoder, check, cosine


def dimension(encoder: OnnxEncoder) -> int:
    """The session's vector size (from the graph's output shape, else by encoding one text)."""
    shape = encoder.session.get_outputs()[0].shape
    last = shape[-1] if shape else None
    return last if isinstance(last, int) else int(encoder.encode(["x"]).shape[1])


def reason(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return (f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__)[:300]


def version(dist: str) -> str:
    """An installed distribution's version (without importing it), else empty."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""
