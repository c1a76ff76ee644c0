"""Making the checked ONNX export of a model (:mod:`foldermind.workers.onnx_model` loads it), and the
workers' way to get one: :func:`open_checked` reuses the cached file when it matches its check record,
else exports it again, once per machine.

The export runs in a child process (``python -m foldermind.workers.onnx_export MODEL_DIR OUT RECORD``):
the exporters trace for seconds and switch global torch state, which has no place in a worker that
answers meanwhile, a crash there costs only the export, and the worker never imports torch. The child
loads the model with sentence-transformers, exports the whole pipeline (the TorchScript exporter first,
~1.5 s here, needs ``onnx``; then torch.export's, ~9 s, needs ``onnxscript``), then checks the file the
way the workers will run it (ONNX Runtime fed by ``tokenizers`` with the preprocessing it read from the
model) against torch on the probe sentences, and writes the check record with torch's vectors of them.
The parent renames both into place only when the child succeeded; an advisory lock beside the file
keeps a second home (or the other worker of this one) from exporting the same model meanwhile: it waits,
then loads what the first one wrote. When that export failed, the waiter gets its reason (kept beside the
file until an export succeeds) instead of running the same child on the same files again.

Its length (~520 lines): the two halves of one protocol, the parent's (cache, lock, child process, renames)
and the child's (load, trace with either exporter, check against torch, record), which share the file names,
the record's fields and the child's last-line report; split, each half would restate them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.runtime.home import fsync_path
from foldermind.workers.onnx_model import (
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
    cache_file,
    check_file,
    encode_reference,
    file_sha256,
    int8_file,
    load_cached,
    model_digest,
    reason,
    version,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("foldermind.onnx")

MODULE = "foldermind.workers.onnx_export"
DYNAMO_OPSET = 18
"""torch.export's exporter writes opset 18 at least."""
EXPORT_TIMEOUT_S = 600.0
EXPORT_NICE = 10
"""The export child yields the CPU to the workers that are serving or indexing meanwhile."""
LOCK_POLL_S = 0.2
EXPORTERS = ("auto", "torchscript", "dynamo")
EXPORT_SAMPLE = (
    "a short query",
    "a longer sentence, so the sample batch is padded and the attention mask is part of the graph",
)
UNUSED_EXPORT_S = 30 * 86400.0
"""An export of another version of the model is removed once no home has loaded it for this long: the
cache is shared, and two homes may well run two versions."""
_TEMP_RE = re.compile(r"^\..+\.onnx(\.checked\.json)?\.\d+-[0-9a-f]+\.tmp$")
_STALE_TEMP_S = 3600.0

export_count = 0
"""Exports this process has run (the tests check that a cached file is reused)."""


# ---------------------------------------------------------------------------------------------
# the workers' entry point


@dataclass(frozen=True, slots=True)
class Loaded:
    encoder: OnnxEncoder
    path: Path
    check: Check
    exported: bool
    """True when this load exported the file; False when a cached, checked file was reused."""
    cosine: float
    """The least cosine of this load's probes against the recorded torch vectors."""
    seconds: float
    note: str
    """Why a cached file was replaced, else empty."""


def open_checked(
    model_dir: Path,
    name: str,
    cache_dir: Path,
    threads: int,
    stop: threading.Event | None = None,
    exporter: str = "auto",
    asked: float | None = None,
) -> Loaded:
    """A checked ONNX encoder for the model at ``model_dir``: the cached export if it matches its check
    record, else a fresh export (by a child process, checked there against torch). Never imports torch in
    this process. Raises :class:`OnnxError` when neither is usable, also when an export of the same files
    failed since ``asked`` (wall clock; default now: a caller that waited on a lock of its own first, as the
    int8 copy's, passes when it began)."""
    started = time.monotonic()
    asked = time.time() if asked is None else asked
    try:
        path = cache_file(cache_dir, name, model_digest(model_dir))
    except OSError as exc:
        raise OnnxError(f"the model's files are unreadable: {reason(exc)}") from exc
    why = ""
    if path.is_file():
        try:
            return _loaded(path, model_dir, threads, started)
        except OnnxError as exc:
            why = str(exc)
    with export_lock(path, stop):
        if path.is_file():  # another process may have exported it while this one waited for the lock
            with contextlib.suppress(OnnxError):
                return _loaded(path, model_dir, threads, started)
        failed = _failed_since(path, asked)
        if failed:  # the export this one waited for failed on the same model files: it would fail alike
            raise OnnxError(failed)
        if why:
            log.warning("%s (%s); exporting it again", why, path.name)
        if stop is not None and stop.is_set():
            raise OnnxError("export stopped")
        try:
            export(model_dir, path, stop, exporter)
        except OnnxError as exc:
            _note_failure(path, str(exc))
            raise
        failure_file(path).unlink(missing_ok=True)
        note = f"exported again: {why}" if why else ""
        try:
            loaded = _loaded(path, model_dir, threads, started, note, exported=True)
        except OnnxError:
            path.unlink(missing_ok=True)  # never leave a file that fails its check to the next start
            check_file(path).unlink(missing_ok=True)
            raise
    with contextlib.suppress(OSError):
        _tidy(path)
    return loaded


def _loaded(
    path: Path, model_dir: Path, threads: int, started: float, note: str = "", exported: bool = False
) -> Loaded:
    encoder, check, cosine = load_cached(path, model_dir, threads)
    return Loaded(encoder, path, check, exported, cosine, time.monotonic() - started, note)


def failure_file(dest: Path) -> Path:
    """Where the reason of the last failed export of ``dest`` is kept (beside it, hidden; removed by the
    next export that succeeds)."""
    return dest.with_name(f".{dest.name}.failed")


def _note_failure(dest: Path, why: str) -> None:
    if why.endswith(" stopped"):  # this process was told to stop: says nothing of the model's files
        return
    with contextlib.suppress(OSError):
        failure_file(dest).write_text(why, encoding="utf-8")


def _failed_since(dest: Path, since: float) -> str:
    """The reason of an export of ``dest`` that failed after ``since`` (wall clock), else "".

    The embedder and the indexer's query encoder ask for the same export at once: one exports, the other
    waits on the lock. When the first one fails, its waiter would run the same child on the same files
    (its name holds their digest) and fail alike: a damaged model cost two exports of ~4-9 CPU-s each at
    every start (tests/test_resource_faults.py's corrupt model: 3 export children in one run, 2 at start).
    A later attempt (the embedder's retry, a restart) still exports again."""
    marker = failure_file(dest)
    try:
        if marker.stat().st_mtime < since:
            return ""
        return marker.read_text(encoding="utf-8")
    except OSError:
        return ""


@contextlib.contextmanager
def export_lock(dest: Path, stop: threading.Event | None) -> Iterator[None]:
    """One export of ``dest`` at a time on this machine (any home, any worker): an advisory lock file
    beside it, polled so that ``stop`` still ends the wait."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the renames alone keep the files whole; two exports may both run
        yield
        return
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(dest.with_name(f".{dest.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OnnxError(f"cannot use the model cache {dest.parent}: {reason(exc)}") from exc
    try:
        waited = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - waited > EXPORT_TIMEOUT_S + 60:
                    raise OnnxError("another process has been exporting this model for too long") from None
                if (stop or threading.Event()).wait(LOCK_POLL_S) and stop is not None:
                    raise OnnxError("export stopped") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _tidy(dest: Path) -> None:
    """Remove this model's exports for other digests that no home has loaded for a month, and temporary
    files a killed export left."""
    prefix = dest.name[: -len("-0123456789abcdef.onnx")]
    pattern = re.compile(rf"^{re.escape(prefix)}-[0-9a-f]{{16}}(\.int8)?\.onnx$")
    now = time.time()
    for path in dest.parent.iterdir():
        with contextlib.suppress(OSError):
            if path.name not in (dest.name, int8_file(dest).name) and pattern.match(path.name):
                record = check_file(path)
                used = record.stat().st_mtime if record.exists() else path.stat().st_mtime
                if now - used > UNUSED_EXPORT_S:
                    path.unlink()
                    record.unlink(missing_ok=True)
                    log.info("removed %s (an export of another version of the model, unused for 30 days)", path.name)
            elif _TEMP_RE.match(path.name) and now - path.stat().st_mtime > _STALE_TEMP_S:
                path.unlink()


# ---------------------------------------------------------------------------------------------
# the parent's side of an export


def export(model_dir: Path, dest: Path, stop: threading.Event | None = None, exporter: str = "auto") -> None:
    """Export the model at ``model_dir`` to ``dest`` and check it against torch, in a child process; the
    file and its check record are renamed into place only when both are complete.

    Raises :class:`OnnxError` with the child's reason when it fails, times out or ``stop`` is set.
    """
    global export_count
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OnnxError(f"cannot create the model cache {dest.parent}: {reason(exc)}") from exc
    started = time.monotonic()
    export_count += 1
    run_child([MODULE, str(model_dir), "{file}", "{record}", "--exporter", exporter], dest, stop, "export")
    log.info("exported and checked %s as %s in %.1f s", model_dir, dest.name, time.monotonic() - started)


def run_child(args: list[str], dest: Path, stop: threading.Event | None, what: str) -> None:
    """Run ``python -m <args>`` (``{file}`` and ``{record}`` in them replaced by temporary names beside
    ``dest``), and when it succeeded move the file it wrote to ``dest`` and its check record beside it.

    Raises :class:`OnnxError` with the child's last line when it fails, takes over
    :data:`EXPORT_TIMEOUT_S` or ``stop`` is set (the child is killed)."""
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = dest.with_name(f".{dest.name}.{tag}.tmp")
    record = check_file(dest)
    tmp_record = dest.with_name(f".{record.name}.{tag}.tmp")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", *(a.replace("{file}", str(tmp)).replace("{record}", str(tmp_record)) for a in args)]
    started = time.monotonic()
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
                        why = f"{what} stopped" if stopped else f"{what} took over {EXPORT_TIMEOUT_S:.0f} s"
                        raise OnnxError(why) from None
            if code != 0:
                out.seek(0)
                raise OnnxError(f"{what} failed (exit {code}): {_last_line(out.read())}")
        if not tmp.is_file() or tmp.stat().st_size == 0 or not tmp_record.is_file():
            raise OnnxError(f"the {what} wrote no file")
        for path in (tmp, tmp_record):
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
        # The file first, its record after: a reader between the two finds a record of another file (the
        # hash differs) and takes the lock; never a record that vouches for half a file.
        os.replace(tmp, dest)
        os.replace(tmp_record, record)
        with contextlib.suppress(OSError):
            fsync_path(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)
        tmp_record.unlink(missing_ok=True)


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in raw[-8000:].decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


# ---------------------------------------------------------------------------------------------
# the child: export, check against torch, record


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


def child_main(work: Callable[[], str]) -> int:
    """The main of a child :func:`run_child` starts: at a low priority and offline, run ``work``; print the
    line it returns (success) or the reason it failed on stderr, which :func:`run_child` reports."""
    with contextlib.suppress(OSError):
        os.nice(EXPORT_NICE)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
    try:
        done = work()
    except Exception as exc:
        print(reason(exc), file=sys.stderr, flush=True)
        return 1
    print(done, flush=True)
    return 0


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
