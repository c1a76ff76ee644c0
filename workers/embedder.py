"""The embedder worker: turns batches of chunks into normalised float32 vectors.

The model is the bundled all-MiniLM-L6-v2 or a sentence-transformers directory named by
``FOLDERMIND_EMBED_MODEL_DIR`` (:func:`.embedding.model_files.model_dir`); nothing is downloaded. It runs on
ONNX Runtime from the checked export in the machine's model cache (:mod:`.embedding.onnx_export`), at the
precision of ``[ingest] embed_quantize`` (int8 by default: :mod:`.embedding.onnx_int8`), and never imports
torch unless no checked export can be had (``describe`` and ``status`` say why; torch runs fp32 only). Every reply
names its vectors' precision, so the indexer never stores two precisions side by side.

Batching: the texts are tokenized once and sorted longest first; the usable CPUs (``FOLDERMIND_EMBED_THREADS``) run
as that many streams, each on one intra-op thread, each taking the next batch of :data:`DEFAULT_ONNX_BATCH` (1)
texts when it is done, so no thread waits for another on a busy machine and a vector does not depend on its batch
mates. Measured: docs/tuning.md#embedder.

READY goes out at once and the model loads on a thread: a request meanwhile waits for it (within its deadline), and
a failed load answers ``model_unavailable`` (retryable; tried again at most every :data:`RETRY_AFTER_S`). After
``[ingest] embed_idle_unload_s`` idle, or at a ``release.request`` (:mod:`foldermind.workers.indexer.ingest.turns`), the
model is freed and, on demand, the worker exits.

Vectors travel as one raw buffer frame (``count`` x ``dim`` float32, C order). Also read: ``FOLDERMIND_EMBED_BATCH``
(texts per pass: 1 under ONNX, 32 under torch) and ``FOLDERMIND_EMBED_RETRY_S`` (least time between load attempts).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import EmbedReply, EmbedRequest
from foldermind.protocol.runtime.config import ingest_from_env
from foldermind.protocol.runtime.home import model_cache_dir
from foldermind.workers.embedding import model_files, onnx_int8, onnx_model
from foldermind.workers.framework import memory
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("foldermind.embedder")

ROLE = "Turns batches of chunks into normalised float32 vectors."
BATCH_ENV = "FOLDERMIND_EMBED_BATCH"
THREADS_ENV = "FOLDERMIND_EMBED_THREADS"
RETRY_ENV = "FOLDERMIND_EMBED_RETRY_S"
DEFAULT_BATCH = 32
"""Texts per forward pass under torch (sentence-transformers' own default, measured best here before ONNX)."""
DEFAULT_ONNX_BATCH = 1
"""Texts per ONNX Runtime pass (each stream's batch; measured: docs/tuning.md#embedder)."""
RETRY_AFTER_S = 30.0
"""After a failed load, the next load attempt (made by a request) waits at least this long."""
NO_DEADLINE_WAIT_S = 20.0
"""How long a request without a deadline waits for a load in progress (under the broker's default deadline)."""
DEADLINE_MARGIN_S = 2.0
"""Give up waiting for a load this long before the request's deadline: the broker replaces a worker that
overruns one, which would restart the load from scratch."""
ONNX_INTRA_OP = 1
"""Intra-op threads of the ONNX session: the usable CPUs run as that many streams of one thread each
(:meth:`~foldermind.workers.embedding.onnx_model.OnnxEncoder.encode_longest_first`), which lose less to the parsers
and the ingest thread taking a core now and then than one pass on several threads that wait for each other."""
MAX_TEXTS = 4096
"""Refuse bigger requests: the worker serves one job at a time and its reply must fit a message."""

State = Literal["unloaded", "loading", "ready", "failed"]
Backend = Literal["onnx", "torch"]


def _positive_int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        log.warning("%s=%r is not an integer; using %d", name, raw, default)
        return default
    if value < 1:
        log.warning("%s=%d is below 1; using %d", name, value, default)
        return default
    return value


def _seconds_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        log.warning("%s=%r is not a number; using %g", name, raw, default)
        return default
    return value if value >= 0 else default


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


class EmbedderWorker(Worker):
    status_note: str
    """A short state line for heartbeats and ``status`` (never document text)."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = ingest_from_env()
        self.cache_dir = model_cache_dir(self.policy.model_cache_dir)
        self.threads = _positive_int_env(THREADS_ENV, _usable_cpus())
        self.retry_after_s = _seconds_env(RETRY_ENV, RETRY_AFTER_S)
        self.state: State = "loading"
        self.error: str | None = None
        self.model_dir: str | None = None
        self.model_name: str | None = None
        self.dim: int | None = None
        self.load_s: float | None = None
        self.loads = 0
        self.texts_embedded = 0
        self.status_note = "model loading"
        self.backend: Backend | None = None
        """What encodes now (None until a model is loaded)."""
        self.backend_note = ""
        """Why the backend is not the configured one, or that a cached ONNX export had to be replaced."""
        self.onnx_file: str | None = None
        self.onnx_exported: bool | None = None
        self.onnx_cosine: float | None = None
        self.precision: str | None = None
        """The precision label of the vectors this worker makes now (None until a model is loaded)."""
        self._model: SentenceTransformer | None = None
        self._onnx: onnx_model.OnnxEncoder | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._last_attempt = 0.0  # monotonic start of the latest load attempt
        self._last_used = time.monotonic()  # end of the latest embed request
        self._encoding = 0  # embed requests encoding now (the unloader leaves their model alone)
        self.unloads = 0
        self._torch_threads_set: set[int] = set()  # thread idents torch.set_num_threads ran in

    @property
    def batch_size(self) -> int:
        default = DEFAULT_ONNX_BATCH if self.backend == "onnx" else DEFAULT_BATCH
        return _positive_int_env(BATCH_ENV, default)

    # ---------------------------------------------------------------------------------------
    # lifecycle

    def setup(self) -> None:
        # Keep READY immediate: the model loads in the background.
        with self._cond:
            self._start_load_locked()
        if self.policy.embed_idle_unload_s:
            threading.Thread(target=self._unload_when_idle, name="embedder-unload", daemon=True).start()

    def teardown(self) -> None:
        self._stop.set()  # an export in progress is abandoned (its child process killed)

    def handlers(self) -> dict[str, Handler]:
        return dict([*super().handlers().items(), route(EmbedRequest, self.on_embed)])

    def details(self) -> dict[str, Any]:
        with self._cond:
            return {
                "role": ROLE,
                "implemented": True,
                "state": self.state,
                "error": self.error,
                "model": self.model_name,
                "model_dir": self.model_dir,
                "dim": self.dim,
                "device": "cpu",
                "backend": self.backend,
                "backend_wanted": self.policy.embed_backend,
                "backend_note": self.backend_note or None,
                "precision": self.precision,
                "precision_wanted": self.policy.embed_quantize,
                "torch_loaded": "torch" in sys.modules,
                "model_cache_dir": str(self.cache_dir),
                "onnx_file": self.onnx_file,
                "onnx_exported": self.onnx_exported,
                "onnx_cosine": self.onnx_cosine,
                "batch_size": self.batch_size,
                "threads": self.threads,
                "intra_op_threads": ONNX_INTRA_OP if self.backend == "onnx" else self.threads,
                "load_s": self.load_s,
                "loads": self.loads,
                "unloads": self.unloads,
                "idle_unload_s": self.policy.embed_idle_unload_s,
                "retry_after_s": self.retry_after_s,
                "texts_embedded": self.texts_embedded,
            }

    # ---------------------------------------------------------------------------------------
    # loading

    def _start_load_locked(self, torch_only: bool = False) -> None:
        """Start a load attempt in a daemon thread; the caller holds ``self._cond``."""
        self.state = "loading"
        self.status_note = "model loading"
        self._last_attempt = time.monotonic()
        self.loads += 1
        threading.Thread(target=self._load, args=(torch_only,), name="embedder-load", daemon=True).start()

    def _load(self, torch_only: bool) -> None:
        started = time.monotonic()
        why_torch = ""
        try:
            path = model_files.model_dir()
            name = model_files.model_name(path)
            if self.policy.embed_backend == "onnx" and not torch_only:
                try:
                    self._load_onnx(path, name, started)
                    return
                except onnx_model.OnnxError as exc:
                    why_torch = f"onnx unavailable: {exc}"
                    log.warning("ONNX embedding backend unavailable (%s); loading torch", exc)
            model, dim = model_files.load_model(path, self.threads)
        except Exception as exc:
            reason = _reason(exc)
            log.warning("embedding model unavailable: %s", reason)
            with self._cond:
                self.state, self.error = "failed", reason
                self.backend_note = why_torch
                self.status_note = f"model failed: {reason}"[:200]
                self._cond.notify_all()
            return
        elapsed = time.monotonic() - started
        log.info("embedding model %s ready (%d-d, torch, %d threads) in %.1f s", name, dim, self.threads, elapsed)
        with self._cond:
            self._model, self._onnx, self.backend = model, None, "torch"
            self.backend_note = why_torch or self.backend_note
            self.precision = onnx_model.precision_label("fp32")  # torch runs the model's own weights
            self._ready_locked(name, path, dim, elapsed)

    def _load_onnx(self, path: Path, name: str, started: float) -> None:
        """The checked ONNX export, exported first when there is none (torch runs in the export child only)."""
        unsafe = onnx_model.onnxruntime_unsafe()
        if unsafe:
            raise onnx_model.OnnxError(unsafe)
        quantize = self.policy.embed_quantize
        with memory.gc_paused():
            loaded = onnx_int8.open_precision(path, name, self.cache_dir, ONNX_INTRA_OP, quantize, stop=self._stop)
        dim = onnx_model.dimension(loaded.encoder)
        elapsed = time.monotonic() - started
        log.info(
            "embedding model %s ready (%d-d, onnx, %s %s, least probe cosine %.6f, %d threads) in %.1f s",
            name,
            dim,
            "exported" if loaded.exported else "loaded",
            loaded.path.name,
            loaded.cosine,
            self.threads,
            elapsed,
        )
        with self._cond:
            self._onnx, self._model, self.backend, self.backend_note = loaded.encoder, None, "onnx", loaded.note
            self.precision = onnx_model.precision_label(quantize)
            self.onnx_file, self.onnx_exported, self.onnx_cosine = str(loaded.path), loaded.exported, loaded.cosine
            self._ready_locked(name, path, dim, elapsed)

    def _ready_locked(self, name: str, path: Path, dim: int, elapsed: float) -> None:
        self.dim, self.model_name, self.model_dir = dim, name, str(path)
        self.state, self.error, self.load_s = "ready", None, elapsed
        note = f"; {self.backend_note}" if self.backend_note else ""
        self.status_note = f"model ready ({name}, {dim}-d, {self.precision}, {self.backend}{note})"[:200]
        self._cond.notify_all()

    def _unload_when_idle(self) -> None:
        """Free the model once no request has used it for ``embed_idle_unload_s``."""
        idle_s = self.policy.embed_idle_unload_s
        while not self._stop.wait(memory.idle_check_every(idle_s)):
            self._unload(idle_s, f"after {idle_s:g} s idle")

    def _unload(self, idle_s: float, why: str) -> None:
        """Free the model if no request has used it for ``idle_s`` and none is encoding."""
        with self._cond:
            if self.state != "ready" or self._encoding or time.monotonic() - self._last_used < idle_s:
                return
            self._model = self._onnx = None
            self.state, self.unloads = "unloaded", self.unloads + 1
            self.status_note = f"model unloaded {why}: the next request loads it"[:200]
        memory.return_memory()
        log.info("embedding model unloaded %s", why)

    def release(self) -> None:
        self._unload(0.0, "when released")

    def release_window_s(self) -> float:
        return self.policy.embed_idle_unload_s

    def _wait_ready(self, deadline: float) -> None:
        """Wait for a load in progress (start one for a model unloaded when idle, retry a failed one,
        rate-limited); raises unless a model is ready."""
        with self._cond:
            if self.state == "unloaded":
                self._start_load_locked()
            if self.state == "failed" and time.monotonic() - self._last_attempt >= self.retry_after_s:
                log.info("retrying the embedding model load")
                self._start_load_locked()
            wait_s = max(deadline - time.time() - DEADLINE_MARGIN_S, 0.0) if deadline > 0 else NO_DEADLINE_WAIT_S
            self._cond.wait_for(lambda: self.state != "loading", timeout=wait_s)
            if self.state == "ready":
                return
            if self.state == "loading":
                raise JobError(ErrorCode.MODEL_UNAVAILABLE, "the embedding model is still loading")
            raise JobError(ErrorCode.MODEL_UNAVAILABLE, self.error or "the embedding model failed to load")

    # ---------------------------------------------------------------------------------------
    # jobs

    def on_embed(self, req: Request[EmbedRequest]) -> Result:
        texts = req.body.texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise JobError(ErrorCode.BAD_REQUEST, "embed.request: texts must be a list of strings")
        if len(texts) > MAX_TEXTS:
            raise JobError(ErrorCode.BAD_REQUEST, f"embed.request: {len(texts)} texts, at most {MAX_TEXTS} per request")
        with self._cond:
            self._encoding += 1
        try:
            self._wait_ready(req.env.deadline)
            assert self.dim is not None and self.model_name is not None
            if not texts:
                reply = EmbedReply(count=0, dim=self.dim, model=self.model_name, precision=self.precision or "fp32")
                return reply, [b""]
            vectors, precision = self._encode(texts, req.env.deadline)
        finally:
            with self._cond:
                self._encoding -= 1
                self._last_used = time.monotonic()
        count, dim = vectors.shape
        return (
            EmbedReply(count=count, dim=dim, model=self.model_name, dtype="float32", precision=precision),
            [vectors.data.cast("B")],
        )

    def _encode(self, texts: list[str], deadline: float) -> tuple[npt.NDArray[np.float32], str]:
        """The vectors of ``texts`` and the precision label of the model that made them (read together
        with it: a fallback to torch between the two would otherwise mislabel a batch)."""
        started = time.perf_counter()
        with self._cond:
            onnx, precision = self._onnx, self.precision or "fp32"
        if onnx is not None:
            try:
                raw = onnx.encode_longest_first(texts, self.batch_size, streams=self.threads)
            except Exception as exc:  # never seen: torch takes over, and the note says on what ONNX failed
                why = _reason(exc)
                log.warning("ONNX embedding failed (%s); loading torch", why)
                with self._cond:
                    self._onnx, self.backend_note = None, f"onnx failed on a batch: {why}"
                    self._start_load_locked(torch_only=True)
                self._wait_ready(deadline)
                return self._encode(texts, deadline)
        else:
            raw = self._encode_torch(texts)
            precision = onnx_model.precision_label("fp32")
        vectors = np.ascontiguousarray(raw, dtype=np.float32)
        elapsed = time.perf_counter() - started
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or vectors.shape[1] != self.dim:
            raise JobError(ErrorCode.INTERNAL, f"the model returned shape {vectors.shape} for {len(texts)} texts")
        self.texts_embedded += len(texts)
        log.debug(
            "embedded %d texts (%d chars) in %.3f s (%.1f texts/s)",
            len(texts),
            sum(len(t) for t in texts),
            elapsed,
            len(texts) / elapsed if elapsed > 0 else 0.0,
        )
        return vectors, precision

    def _encode_torch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import torch

        model = self._model
        assert model is not None
        model_files.torch_threads_here(self.threads, self._torch_threads_set)
        # encode() sorts the texts by length and batches them in that order, then restores the order.
        with torch.inference_mode():
            raw = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(raw, dtype=np.float32)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, model_files.ModelNotFound):
        return text
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


WORKER = EmbedderWorker
