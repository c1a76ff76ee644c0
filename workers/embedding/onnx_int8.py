"""The int8 copy of the checked ONNX export (``[ingest] embed_quantize = "int8"``), and the workers' one way
to open the model at the configured precision (:func:`open_precision`).

The copy is made from the checked fp32 export by onnxruntime's dynamic quantisation (``quantize_dynamic``,
QInt8 weights; activations quantised per batch at run time), in a child process
(``python -m foldermind.workers.embedding.onnx_int8 MODEL_DIR FP32 OUT RECORD``): the quantiser loads the whole
graph with ``onnx`` (~200 MiB for a moment), which a serving worker should not keep. The child checks the
copy on the probe sentences against the torch vectors in the fp32 export's record (least cosine at least
:data:`~foldermind.workers.embedding.onnx_model.INT8_MIN_COSINE`: int8 moves vectors, a broken quantisation moves them
everywhere) and records the copy's own vectors of them. It is kept beside the fp32 export in the machine's
cache, ``<name>-<digest>.int8.onnx`` with its own ``.checked.json``, made once per machine under the same kind
of lock; every load verifies its hash and probes against that record, as for the fp32 file, and a file that
fails is made again with the reason in the note.

It encodes up to 2.75x faster at the same retrieval quality, from a quarter of the file (measured:
docs/tuning.md#int8).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from foldermind.workers.embedding import onnx_child, onnx_export
from foldermind.workers.embedding.onnx_export import Loaded
from foldermind.workers.embedding.onnx_model import (
    EXPORT_FORMAT,
    INT8_MIN_COSINE,
    MIN_COSINE,
    PRECISIONS,
    Check,
    OnnxEncoder,
    OnnxError,
    agreement,
    cache_file,
    check_file,
    encode_reference,
    file_sha256,
    int8_file,
    load_cached,
    model_digest,
    precision_label,
    reason,
    version,
)

log = logging.getLogger("foldermind.onnx")

MODULE = "foldermind.workers.embedding.onnx_int8"

quantize_count = 0
"""int8 copies this process has made (the tests check that a cached copy is reused)."""


def open_precision(
    model_dir: Path,
    name: str,
    cache_dir: Path,
    threads: int,
    quantize: str = "fp32",
    stop: threading.Event | None = None,
) -> Loaded:
    """A checked encoder of the model at ``model_dir`` at the precision ``quantize`` (``fp32``: the checked
    export itself, :func:`~foldermind.workers.embedding.onnx_export.open_checked`; ``int8``: its int8 copy, made first
    when there is none or it fails its record). Never imports torch in this process; raises
    :class:`OnnxError` when the precision cannot be had."""
    if quantize not in PRECISIONS:
        raise OnnxError(f"unknown precision {quantize!r} (one of {', '.join(PRECISIONS)})")
    if quantize == "fp32":
        return onnx_export.open_checked(model_dir, name, cache_dir, threads, stop=stop)
    started, asked = time.monotonic(), time.time()
    try:
        path = int8_file(cache_file(cache_dir, name, model_digest(model_dir)))
    except OSError as exc:
        raise OnnxError(f"the model's files are unreadable: {reason(exc)}") from exc
    why = ""
    if path.is_file():
        try:
            return _loaded(path, model_dir, threads, started)
        except OnnxError as exc:
            why = str(exc)
    with onnx_export.export_lock(path, stop):
        if path.is_file():  # made by another process while this one waited for the lock
            with contextlib.suppress(OnnxError):
                return _loaded(path, model_dir, threads, started)
        if why:
            log.warning("%s (%s); making it again", why, path.name)
        # The fp32 source, checked (exported first if need be); its session is dropped at once.
        source = onnx_export.open_checked(model_dir, name, cache_dir, 1, stop=stop, asked=asked).path
        quantize_file(model_dir, source, path, stop)
        note = f"int8 copy made again: {why}" if why else ""
        try:
            loaded = _loaded(path, model_dir, threads, started, note, made=True)
        except OnnxError:
            path.unlink(missing_ok=True)  # never leave a file that fails its check to the next start
            check_file(path).unlink(missing_ok=True)
            raise
    return loaded


def _loaded(path: Path, model_dir: Path, threads: int, started: float, note: str = "", made: bool = False) -> Loaded:
    encoder, check, cosine = load_cached(path, model_dir, threads)
    return Loaded(encoder, path, check, made, cosine, time.monotonic() - started, note)


def quantize_file(model_dir: Path, source: Path, dest: Path, stop: threading.Event | None = None) -> None:
    """Make ``dest``, the int8 copy of the checked export ``source`` of the model at ``model_dir``, and its
    check record, in a child."""
    global quantize_count
    started = time.monotonic()
    quantize_count += 1
    args = [MODULE, str(model_dir), str(source), "{file}", "{record}"]
    onnx_child.run_child(args, dest, stop, "int8 quantisation")
    log.info("made and checked the int8 copy %s in %.1f s", dest.name, time.monotonic() - started)


# ---------------------------------------------------------------------------------------------
# the child


def _fused(model_dir: Path, source: Path, out: Path) -> Path | None:
    """``source`` with onnxruntime's BERT optimizer's fusions (embedding + LayerNorm, attention, bias + GELU,
    skip + LayerNorm) written to ``out``, or None when they do not apply (another kind of model) or fail: then
    the plain graph is quantised. Fused, the int8 copy encodes ~35% faster than format 1's at the same quality;
    unfused, the eager graph runs a little faster still but loses more (docs/tuning.md#int8)."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])  # not found in the graph
        model = optimize_model(str(source), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0)
        if not model.get_fused_operator_statistics().get("Attention"):
            return None
        model.save_model_to_file(str(out))
    except Exception as exc:
        log.info("the BERT fusions do not apply (%s); the plain graph is quantised", reason(exc))
        out.unlink(missing_ok=True)
        return None
    return out


def _quantize_here(model_dir: Path, source: Path, out: Path, record: Path) -> float:
    """Quantise ``source`` into ``out``, check it on the probes against the torch vectors of the source's
    record, write ``record``; returns the least cosine."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    check = Check.from_file(check_file(source))
    if file_sha256(source) != check.onnx_sha256:
        raise OnnxError("the fp32 export is not the file its check record describes")
    fused = _fused(model_dir, source, out.with_name(out.name + ".fused"))
    try:
        quantize_dynamic(
            str(fused or source),
            str(out),
            weight_type=QuantType.QInt8,
            # The fused graph's contrib ops give shape inference no type: their weights are float.
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
    finally:
        if fused is not None:
            fused.unlink(missing_ok=True)
    encoder = OnnxEncoder(out, model_dir, check.preprocessing, 1)
    torch_vectors = check.vectors(int(encoder.encode(["x"]).shape[1]))
    cosine = agreement(encoder, lambda texts: torch_vectors, check.probes)
    if not cosine >= INT8_MIN_COSINE:  # NaN fails too
        raise OnnxError(f"the int8 copy strays from torch (least cosine {cosine:.4f} < {INT8_MIN_COSINE})")
    own = np.concatenate([encoder.encode([p]) for p in check.probes])
    own_batch = encoder.encode(list(check.probes))
    if not agreement(encoder, lambda texts: own, check.probes, own_batch) >= MIN_COSINE:
        raise OnnxError("the int8 copy does not give the same vectors twice")
    made = Check(
        digest=check.digest,
        export_format=EXPORT_FORMAT,
        onnx_bytes=out.stat().st_size,
        onnx_sha256=file_sha256(out),
        preprocessing=check.preprocessing,
        cosine=cosine,
        min_cosine=INT8_MIN_COSINE,
        onnxruntime=version("onnxruntime"),
        torch=check.torch,
        exporter=f"{check.exporter}, then quantize_dynamic (QInt8 weights)" + (", BERT-fused" if fused else ""),
        checked_at=time.time(),
        probes=list(check.probes),
        reference=encode_reference(own),
        batch_reference=encode_reference(own_batch),
        quantized=precision_label("int8"),
        source_sha256=check.onnx_sha256,
    )
    record.write_text(made.to_json(), encoding="utf-8")
    return cosine


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="Make the int8 copy of an export.")
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("record", type=Path)
    args = parser.parse_args(argv)

    def quantize() -> str:
        cosine = _quantize_here(args.model_dir, args.source, args.out, args.record)
        return f"made the int8 copy; least probe cosine to torch {cosine:.4f}"

    return onnx_child.child_main(quantize)


if __name__ == "__main__":
    sys.exit(_main())
