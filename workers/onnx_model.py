"""ONNX Runtime for the sentence-transformers model: exported once, cached, checked against torch.

The whole sentence-transformers pipeline (transformer, pooling, normalisation: whatever modules the
model directory names) is exported to ONNX, so a configured model's own pooling is in the graph too.
The export runs in a child process (``python -m foldermind.workers.onnx_model MODEL_DIR OUT``):
the exporters trace for seconds and switch global torch state, which has no place in a worker that
answers searches meanwhile, and a crash there costs only the export. It tries the TorchScript
exporter first (~1.5 s here, needs ``onnx``), then torch.export's (~9 s, needs ``onnxscript``).

The file is cached as ``<data>/models/<name>-<digest>.onnx``; the digest covers the model's weights,
configs and tokenizer files and this module's export format, so a changed model gets a new file.
It is written under a temporary name and renamed, so a reader never sees half a file.

Every load is checked (:func:`load_or_export`): probe sentences (short, non-ASCII, one past the
model's max length) are encoded by torch and by ONNX Runtime, one at a time and as one padded
batch, and the session is used only if every pair has cosine >= :data:`MIN_COSINE`. A cached file
that does not load or does not agree is exported again, once; otherwise the caller keeps torch.

Its length (~480 lines): the export, its check against torch and the runtime session of one model
file, which must agree on the same inputs and outputs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("foldermind.onnx")

MODULE = "foldermind.workers.onnx_model"
EXPORT_FORMAT = 1
"""Bump when the exported graph changes (inputs, outputs, wrapper): every cached file is then redone."""
OPSET = 17
DYNAMO_OPSET = 18
"""torch.export's exporter writes opset 18 at least."""
OUTPUT = "sentence_embedding"
MIN_COSINE = 0.9999
EXPORT_TIMEOUT_S = 600.0
EXPORT_NICE = 10
"""The export child yields the CPU to the workers that are serving or indexing meanwhile."""
MODELS_SUBDIR = "models"
EXPORTERS = ("auto", "torchscript", "dynamo")

EXPORT_SAMPLE = (
    "a short query",
    "a longer sentence, so the sample batch is padded and the attention mask is part of the graph",
)
PROBES = (
    "x",
    "How does the immune system respond to a viral infection?",
    "Größenwahn, café crème, naïve façade — 東京の天気 🚀 Ελληνικά",
    "Long text past the model's limit: "
    + "the quick brown fox jumps over the lazy dog near the riverbank at dawn while birds sing. " * 40,
)
"""Checked on every load; the last one is far longer than 256 tokens, so truncation is checked too."""

_HASHED_SUFFIXES = frozenset({".json", ".txt", ".safetensors", ".bin", ".model"})
_SKIPPED_DIRS = frozenset({"onnx", "openvino", ".git", ".cache", "__pycache__"})
_TEMP_RE = re.compile(r"^\..+\.onnx\.\d+-[0-9a-f]+\.tmp$")
_STALE_TEMP_S = 3600.0

export_count = 0
"""Exports this process has run (the tests check that a cached file is reused)."""


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
        "crash onnxruntime); call foldermind.workers.onnx_model.init_cxx_locale() before importing it"
    )


# ---------------------------------------------------------------------------------------------
# the cache file


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


def cache_file(data_dir: Path, name: str, digest: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return data_dir / MODELS_SUBDIR / f"{safe}-{digest}.onnx"


def _tidy(dest: Path) -> None:
    """Remove this model's exports for other digests, and temporary files a killed export left."""
    prefix = dest.name[: -len("-0123456789abcdef.onnx")]
    pattern = re.compile(rf"^{re.escape(prefix)}-[0-9a-f]{{16}}\.onnx$")
    now = time.time()
    for path in dest.parent.iterdir():
        with contextlib.suppress(OSError):
            if path.name != dest.name and pattern.match(path.name):
                path.unlink()
                log.info("removed %s (an export of another version of the model)", path.name)
            elif _TEMP_RE.match(path.name) and now - path.stat().st_mtime > _STALE_TEMP_S:
                path.unlink()


# ---------------------------------------------------------------------------------------------
# export (in a child process)


def export(model_dir: Path, dest: Path, stop: threading.Event | None = None, exporter: str = "auto") -> None:
    """Export the model at ``model_dir`` to ``dest`` (atomically) in a child process.

    Raises :class:`OnnxError` with the child's reason when it fails, times out or ``stop`` is set.
    """
    global export_count
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", MODULE, str(model_dir), str(tmp), "--exporter", exporter]
    started = time.monotonic()
    export_count += 1
    try:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
            while True:
                try:
                    code = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    stopped = stop is not None and stop.is_set()
                    if stopped or time.monotonic() - started > EXPORT_TIMEOUT_S:
                        proc.kill()
                        proc.wait()
                        why = "export stopped" if stopped else f"export took over {EXPORT_TIMEOUT_S:.0f} s"
                        raise OnnxError(why) from None
            if code != 0:
                out.seek(0)
                raise OnnxError(f"export failed (exit {code}): {_last_line(out.read())}")
        if not tmp.is_file() or tmp.stat().st_size == 0:
            raise OnnxError("the export wrote no file")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("exported %s to %s in %.1f s", model_dir, dest, time.monotonic() - started)


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in raw[-8000:].decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _export_here(model_dir: Path, out: Path, exporter: str) -> str:
    """The child's work: load the model and export it; returns the exporter that succeeded."""
    if not (model_dir / "config.json").is_file():  # before seconds of imports
        raise OnnxError(f"{model_dir} is not a model directory (no config.json)")
    import warnings

    import torch
    from sentence_transformers import SentenceTransformer

    warnings.simplefilter("ignore")  # tracer and deprecation warnings are expected, and verified away
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.eval()
    sample = features(model, list(EXPORT_SAMPLE))
    names = [key for key, value in sample.items() if isinstance(value, torch.Tensor)]
    if "input_ids" not in names:
        raise OnnxError(f"the model's preprocessing gives no input_ids ({', '.join(sample)})")

    class Pipeline(torch.nn.Module):
        """The model's modules in order, from tensors (in ``names`` order) to the sentence embedding."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            result: torch.Tensor = self.model(dict(zip(names, tensors, strict=True)))[OUTPUT]
            return result

    wrapper = Pipeline().eval()
    args = tuple(sample[n] for n in names)
    failures: list[str] = []
    for way in ("torchscript", "dynamo") if exporter == "auto" else (exporter,):
        try:
            with torch.no_grad():
                if way == "torchscript":
                    axes = {n: {0: "batch", 1: "sequence"} for n in names}
                    torch.onnx.export(
                        wrapper,
                        args,
                        str(out),
                        input_names=names,
                        output_names=[OUTPUT],
                        dynamic_axes={**axes, OUTPUT: {0: "batch"}},
                        opset_version=OPSET,
                        dynamo=False,
                    )
                else:
                    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
                    torch.onnx.export(
                        wrapper,
                        args,
                        str(out),
                        input_names=names,
                        output_names=[OUTPUT],
                        dynamic_shapes=(tuple({0: batch, 1: sequence} for _ in names),),
                        opset_version=DYNAMO_OPSET,
                        dynamo=True,
                        external_data=False,
                    )
            return way
        except Exception as exc:
            failures.append(f"{way}: {_reason(exc)}")
            out.unlink(missing_ok=True)
    raise OnnxError("; ".join(failures))


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="Export a model to ONNX.")
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--exporter", choices=EXPORTERS, default="auto")
    args = parser.parse_args(argv)
    with contextlib.suppress(OSError):
        os.nice(EXPORT_NICE)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
    try:
        way = _export_here(args.model_dir, args.out, args.exporter)
    except Exception as exc:
        print(_reason(exc), file=sys.stderr, flush=True)
        return 1
    print(f"exported with the {way} exporter", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# load and check


def features(model: SentenceTransformer, texts: list[str]) -> dict[str, Any]:
    """The model's own preprocessing (tokenizer, truncation at its max length, its default prompt)."""
    prompt = _default_prompt(model)
    if prompt:
        texts = [prompt + t for t in texts]
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # preprocess: sentence-transformers >= 6
    result: dict[str, Any] = preprocess(texts)
    return result


def _default_prompt(model: SentenceTransformer) -> str:
    name = getattr(model, "default_prompt_name", None)
    prompts = getattr(model, "prompts", None) or {}
    return str(prompts.get(name) or "") if name else ""


class OnnxEncoder:
    """An ONNX Runtime session over an exported model, fed by the sentence-transformers model's preprocessing."""

    def __init__(self, path: Path, model: SentenceTransformer, threads: int) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
        except ImportError as exc:
            raise OnnxError(f"onnxruntime is not installed ({exc})") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        # With more than one thread, idle pool threads sleep instead of spinning: the embedder needs the cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxError(f"{path.name} does not load: {_reason(exc)}") from exc
        self.path, self.model, self.threads = path, model, threads
        self.inputs: list[str] = [i.name for i in self.session.get_inputs()]
        self.output: str = self.session.get_outputs()[0].name

    def encode(self, texts: list[str]) -> NDArray[np.float32]:
        """One L2-normalised float32 row per text."""
        found = features(self.model, texts)
        feeds: dict[str, NDArray[np.int64]] = {}
        for name in self.inputs:
            value = found.get(name)
            if value is None:
                raise OnnxError(f"the model's preprocessing gives no {name}")
            array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            feeds[name] = np.ascontiguousarray(array, dtype=np.int64)
        raw = np.asarray(self.session.run([self.output], feeds)[0], dtype=np.float32)
        if raw.ndim != 2 or raw.shape[0] != len(texts):
            raise OnnxError(f"the session returned shape {raw.shape} for {len(texts)} texts")
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        return np.ascontiguousarray(raw / np.maximum(norms, 1e-12), dtype=np.float32)


def agreement(
    encoder: OnnxEncoder, reference: Callable[[list[str]], NDArray[np.float32]], probes: Sequence[str] = PROBES
) -> float:
    """The least cosine between ONNX and ``reference`` (torch) vectors of ``probes``: one text at a
    time (as queries are) and all in one padded batch."""
    want = np.asarray(reference(list(probes)), dtype=np.float32)
    single = np.concatenate([encoder.encode([p]) for p in probes])
    batch = encoder.encode(list(probes))
    if want.shape != single.shape:
        raise OnnxError(f"ONNX gives {single.shape[1]}-d vectors, torch {want.shape[1]}-d")
    want = want / np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)
    cosines = np.concatenate([np.sum(want * single, axis=1), np.sum(want * batch, axis=1)])
    if not np.all(np.isfinite(cosines)):
        return float("nan")
    return float(cosines.min())


@dataclass(frozen=True, slots=True)
class Loaded:
    encoder: OnnxEncoder
    path: Path
    exported: bool
    """True when this load exported the file; False when a cached file was reused."""
    cosine: float
    seconds: float
    note: str
    """Why a cached file was replaced, else empty."""


def load_or_export(
    model: SentenceTransformer,
    model_dir: Path,
    name: str,
    data_dir: Path,
    threads: int,
    reference: Callable[[list[str]], NDArray[np.float32]],
    stop: threading.Event | None = None,
    exporter: str = "auto",
) -> Loaded:
    """A checked ONNX encoder for ``model``: the cached export if it loads and agrees with
    ``reference``, else a fresh export. Raises :class:`OnnxError` when neither is usable."""
    started = time.monotonic()
    path = cache_file(data_dir, name, model_digest(model_dir))
    note = ""
    if path.is_file():
        try:
            encoder, cosine = _checked(path, model, threads, reference)
            return Loaded(encoder, path, False, cosine, time.monotonic() - started, "")
        except OnnxError as exc:
            note = f"the cached {path.name} was unusable ({exc}); exported again"
            log.warning("%s", note)
    if stop is not None and stop.is_set():
        raise OnnxError("export stopped")
    export(model_dir, path, stop, exporter)
    try:
        encoder, cosine = _checked(path, model, threads, reference)
    except OnnxError:
        path.unlink(missing_ok=True)  # never leave a file that fails its check to the next start
        raise
    with contextlib.suppress(OSError):
        _tidy(path)
    return Loaded(encoder, path, True, cosine, time.monotonic() - started, note)


def _checked(
    path: Path, model: SentenceTransformer, threads: int, reference: Callable[[list[str]], NDArray[np.float32]]
) -> tuple[OnnxEncoder, float]:
    encoder = OnnxEncoder(path, model, threads)
    try:
        cosine = agreement(encoder, reference)
    except OnnxError:
        raise
    except Exception as exc:
        raise OnnxError(f"{path.name} fails on the probe sentences: {_reason(exc)}") from exc
    if not cosine >= MIN_COSINE:  # NaN fails too
        raise OnnxError(f"{path.name} disagrees with torch (least cosine {cosine:.6f} < {MIN_COSINE})")
    return encoder, cosine


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return (f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__)[:300]


if __name__ == "__main__":
    sys.exit(_main())
