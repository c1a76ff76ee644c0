"""The export child: load a model with sentence-transformers, export it to ONNX, check it against torch.

Run as ``python -m foldermind.workers.embedding.onnx_trace MODEL_DIR OUT RECORD`` by :func:`.onnx_export.export`
(through :mod:`.onnx_child`), the only place torch is imported. It reads the model's preprocessing first (a
model ONNX Runtime cannot be fed fails fast), exports the whole pipeline, from tensors to the sentence
embedding (the TorchScript exporter first, which needs ``onnx``; then torch.export's, which needs
``onnxscript``), then runs the file the way the workers will (ONNX Runtime fed by ``tokenizers``) against
torch on the probe sentences, and writes the check record with torch's vectors of them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.embedding.onnx_child import child_main
from foldermind.workers.embedding.onnx_model import (
    EXPORT_FORMAT,
    MIN_COSINE,
    OPSET,
    OUTPUT,
    PROBES,
    Check,
    OnnxEncoder,
    OnnxError,
    Preprocessing,
    agreement,
    encode_reference,
    file_sha256,
    model_digest,
    reason,
    version,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("foldermind.onnx")

MODULE = "foldermind.workers.embedding.onnx_trace"
DYNAMO_OPSET = 18
"""torch.export's exporter writes opset 18 at least."""
EXPORTERS = ("auto", "torchscript", "dynamo")
EXPORT_SAMPLE = (
    "a short query",
    "a longer sentence, so the sample batch is padded and the attention mask is part of the graph",
)


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


def preprocessing(model: SentenceTransformer, model_dir: Path) -> Preprocessing:
    """What the loaded model does before its transformer, for the workers' tokenizers-only path."""
    first = model[0]
    folder = Path(getattr(first, "path", "") or "")  # sentence-transformers >= 5 keeps the module's folder
    candidates = [model_dir / "tokenizer.json"]
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        import json

        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        candidates.insert(0, model_dir / modules[0]["path"] / "tokenizer.json")
    if folder.is_absolute():
        candidates.insert(0, folder / "tokenizer.json")
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise OnnxError("the model has no tokenizer.json (ONNX is fed by the tokenizers package)")
    limit = model.max_seq_length
    if not isinstance(limit, int) or limit < 1:
        raise OnnxError(f"the model states no max sequence length ({limit!r})")
    return Preprocessing(
        tokenizer=os.path.relpath(found, model_dir),
        max_seq_length=limit,
        prompt=_default_prompt(model),
        do_lower_case=bool(getattr(first, "do_lower_case", False)),
    )


def torch_reference(model: SentenceTransformer, texts: list[str]) -> NDArray[np.float32]:
    """Torch's normalised vectors of ``texts``, each encoded alone (as a query is)."""
    import torch

    with torch.inference_mode():
        rows = [
            model.encode([t], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)[0]
            for t in texts
        ]
    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


def _export_here(model_dir: Path, out: Path, record: Path, exporter: str) -> str:
    """The child's work: load the model, export it, check it against torch, write the record; returns the
    exporter that succeeded."""
    if not (model_dir / "config.json").is_file():  # before seconds of imports
        raise OnnxError(f"{model_dir} is not a model directory (no config.json)")
    import warnings

    import torch

    warnings.simplefilter("ignore")  # tracer and deprecation warnings are expected, and verified away
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    model = _eager(model_dir)
    model.eval()
    prep = preprocessing(model, model_dir)  # before the export: a model ONNX cannot be fed fails fast
    way = _trace(model, out, exporter)
    encoder = OnnxEncoder(out, model_dir, prep, 1)
    reference = torch_reference(model, list(PROBES))
    cosine = agreement(encoder, lambda texts: reference)
    if not cosine >= MIN_COSINE:  # NaN fails too
        raise OnnxError(f"the export disagrees with torch (least cosine {cosine:.6f} < {MIN_COSINE})")
    check = Check(
        digest=model_digest(model_dir),
        export_format=EXPORT_FORMAT,
        onnx_bytes=out.stat().st_size,
        onnx_sha256=file_sha256(out),
        preprocessing=prep,
        cosine=cosine,
        min_cosine=MIN_COSINE,
        onnxruntime=version("onnxruntime"),
        torch=str(torch.__version__),
        exporter=way,
        checked_at=time.time(),
        probes=list(PROBES),
        reference=encode_reference(reference),
    )
    record.write_text(check.to_json(), encoding="utf-8")
    return way


def _eager(model_dir: Path) -> SentenceTransformer:
    """The model with its attention written out (``attn_implementation="eager"``: matmul, scale, mask, softmax),
    not torch's fused ``scaled_dot_product_attention``: the same vectors, but traced into a graph ONNX Runtime runs
    ~22% faster at fp32 (docs/tuning.md#embedder), and whose int8 copy onnxruntime's BERT optimizer can fuse
    (onnx_int8). A model that cannot load so loads as it would."""
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(model_dir), device="cpu", model_kwargs={"attn_implementation": "eager"})
    except (TypeError, ValueError) as exc:
        log.info("the model does not load with eager attention (%s); exported as it loads", reason(exc))
        return SentenceTransformer(str(model_dir), device="cpu")


def _trace(model: SentenceTransformer, out: Path, exporter: str) -> str:
    import torch

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
            failures.append(f"{way}: {reason(exc)}")
            out.unlink(missing_ok=True)
    raise OnnxError("; ".join(failures))


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="Export a model to ONNX and check it.")
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("record", type=Path)
    parser.add_argument("--exporter", choices=EXPORTERS, default="auto")
    args = parser.parse_args(argv)

    def export() -> str:
        way = _export_here(args.model_dir, args.out, args.record, args.exporter)
        return f"exported with the {way} exporter and checked against torch"

    return child_main(export)


if __name__ == "__main__":
    sys.exit(_main())
