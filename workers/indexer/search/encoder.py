"""Query vectors for semantic and hybrid search.

With ``[search] query_encoder = "local"`` the indexer loads the embedder's own model (the same directory, the same
normalisation) in a background thread at start, and encodes queries itself, never queued behind an indexing batch at
the embedder. Until that model is ready, or if it failed to load, or if it is not the model the index was built
with, the query goes to the embedder over the bus (``query_embed_timeout_s``); when that fails too, the caller
answers from keyword search.

Two local backends (``query_backend``). With ``"onnx"`` (the default) that thread opens the checked ONNX export the
embedder shares (:mod:`foldermind.workers.embedding.onnx_export`: exported once per machine by a child process, checked
there against torch, then verified on every load against the recorded torch vectors), and ONNX Runtime answers,
tokenized by ``tokenizers``: torch and sentence-transformers are never imported (measured: docs/tuning.md#embedder).
Until it is ready (a first export takes ~10 s) queries go to the embedder. Only if onnxruntime is missing or the export
fails or disagrees is torch loaded (~16-19 ms a query), and :meth:`QueryEncoder.describe` says why; ``"torch"`` never
tries ONNX.

The precision is the embedder's (``[ingest] embed_quantize``): ``"int8"`` opens the int8 copy of the export
(:mod:`foldermind.workers.embedding.onnx_int8`). A query vector is only compared with stored vectors of the same model
AND precision (:func:`~foldermind.workers.embedding.model_files.vectors_key`, recorded by the index): while an index of
another precision is being re-embedded, the caller answers from keyword search and says why. Torch, the fallback, runs
fp32 only.

Recent query vectors are kept (``query_cache_size``, keyed by the model, its precision and the exact query text), so
a repeated query skips the encode whichever way its vector came.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import EmbedReply, EmbedRequest
from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.protocol.runtime.home import model_cache_dir
from foldermind.workers.embedding import model_files, onnx_int8, onnx_model
from foldermind.workers.framework import memory, unanswered

# Before the indexer imports usearch (its vector index, imported after this module): otherwise
# loading onnxruntime later in this process crashes it. See onnx_model.init_cxx_locale.
onnx_model.init_cxx_locale()

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


log = logging.getLogger("foldermind.indexer.encoder")

State = Literal["off", "loading", "ready", "failed"]
Backend = Literal["onnx", "torch"]

SENTENCE_BATCH = 1
"""Sentences encoded per call (see :meth:`QueryEncoder.encode_sentences`): one. The int8 copy's dynamic quantisation
scales a batch as a whole, so a sentence encoded beside others got a vector that depended on them (its cosine with a
question moved by up to 0.05, across the answer floor's thresholds); alone, its vector is a function of its text, and
without padding it costs no more (docs/benchmarks/answer-relevance.md "Repeatable answers")."""


class VectorCache:
    """The last ``size`` query vectors, keyed by (model, exact query text); ``size`` 0 keeps none."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hits = self.misses = 0
        self._items: OrderedDict[tuple[str, str], NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: str, text: str) -> NDArray[np.float32] | None:
        if self.size <= 0:
            return None
        with self._lock:
            vector = self._items.get((model, text))
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end((model, text))
            self.hits += 1
            return vector.copy()  # the caller may keep or change its copy

    def put(self, model: str, text: str, vector: NDArray[np.float32]) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[(model, text)] = np.array(vector, dtype=np.float32, copy=True)
            self._items.move_to_end((model, text))
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def describe(self) -> dict[str, int]:
        return {"size": self.size, "entries": len(self._items), "hits": self.hits, "misses": self.misses}


class QueryEncoder:
    def __init__(
        self,
        policy: SearchPolicy,
        ingest: IngestPolicy,
        bus_endpoint: str,
        name: str,
        cache_dir: Path | None = None,
    ) -> None:
        """``cache_dir`` is where the ONNX export is kept; default: ``[ingest] model_cache_dir``'s."""
        self.policy, self.ingest = policy, ingest
        self.bus_endpoint, self.worker_name = bus_endpoint, name
        self.cache_dir = cache_dir or model_cache_dir(ingest.model_cache_dir)
        self.state: State = "off"
        self.error = ""
        self.model_name: str | None = None
        self.dim: int | None = None
        self.load_s: float | None = None
        self.threads = policy.query_threads
        self.backend: Backend | None = None
        """The local backend that answers queries now (None until the model is loaded)."""
        self.backend_note = ""
        """Why the backend is not the configured one (or what it waits for), or that a cached ONNX export
        had to be replaced; empty otherwise."""
        self.onnx_file: str | None = None
        self.onnx_s: float | None = None
        self.onnx_exported: bool | None = None
        self.onnx_cosine: float | None = None
        self.precision: str | None = None
        """The precision label of the local model's vectors (None until it is loaded)."""
        self.cache = VectorCache(policy.query_cache_size)
        self._model: SentenceTransformer | None = None
        self._model_path: Path | None = None
        self._onnx: onnx_model.OnnxEncoder | None = None
        # One bus client per thread: searches run on several threads at once ([search] search_threads), and
        # a ZeroMQ socket is not thread-safe; a shared one let a thread take another's reply and the other
        # wait out query_embed_timeout_s (test_load: p95 4 s with torch queries sent to the embedder).
        self._clients = threading.local()
        self._all_clients: list[BusClient] = []
        self._threads_set: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self) -> None:
        """Start loading the model in the background (policy ``local``); returns at once."""
        if self.policy.query_encoder != "local":
            return
        self.state = "loading"
        threading.Thread(target=self._load, name="query-model", daemon=True).start()

    def close(self) -> None:
        self._stop.set()  # an ONNX export in progress is abandoned (its child process killed)
        with self._lock:
            clients, self._all_clients = self._all_clients, []
        for client in clients:
            client.close()

    # ---------------------------------------------------------------------------------------
    # loading (the background thread)

    def _load(self) -> None:
        started = time.monotonic()
        try:
            path = model_files.model_dir(
                os.environ.get(model_files.MODEL_DIR_ENV) or self.ingest.embed_model_dir or None
            )
            name = model_files.model_name(path)
        except Exception as exc:
            self._failed(exc)
            return
        why_torch = ""
        if self.policy.query_backend == "onnx":
            with self._lock:
                self.backend_note = "onnx loading; queries go to the embedder meanwhile"
            with memory.gc_paused():  # loading or exporting the ONNX graph is a model load too
                why_torch = self._load_onnx(path, name, started)
            if not why_torch or self._stop.is_set():
                return
        try:
            with self._lock:
                self._load_torch_locked(path)
        except Exception as exc:
            self._failed(exc)
            return
        with self._lock:
            self.model_name, self.state, self.load_s = name, "ready", time.monotonic() - started
            self.backend, self.backend_note = "torch", why_torch
            self.precision = onnx_model.precision_label("fp32")  # torch runs the model's own weights
        log.info("query model %s ready (%s-d, torch, %d threads) in %.1f s", name, self.dim, self.threads, self.load_s)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.state, self.error = "failed", onnx_model.reason(exc)
        log.warning("query model unavailable (%s); queries go to the embedder", self.error)

    def _load_torch_locked(self, path: Path) -> SentenceTransformer:
        """The torch model (loaded now if it is not yet: the fallback); the caller holds ``self._lock``."""
        if self._model is None:
            model, dim = model_files.load_model(path, self.threads)
            self._model, self._model_path, self.dim = model, path, dim
        return self._model

    def _load_onnx(self, path: Path, name: str, started: float) -> str:
        """Open the checked export and answer with it; returns why it cannot be used, else empty."""
        if importlib.util.find_spec("onnxruntime") is None:
            return self._keep_torch("onnxruntime is not installed")
        unsafe = onnx_model.onnxruntime_unsafe()
        if unsafe:
            return self._keep_torch(unsafe)
        try:
            quantize = self.ingest.embed_quantize
            loaded = onnx_int8.open_precision(path, name, self.cache_dir, self.threads, quantize, stop=self._stop)
            dim = onnx_model.dimension(loaded.encoder)
        except Exception as exc:
            if self._stop.is_set():
                with self._lock:
                    self.state, self.backend_note = "off", "onnx not loaded: the encoder was closed"
                log.info("ONNX query backend not loaded: the encoder was closed")
                return "the encoder was closed"
            return self._keep_torch(str(exc) if isinstance(exc, onnx_model.OnnxError) else onnx_model.reason(exc))
        with self._lock:
            self._onnx, self.backend, self.backend_note = loaded.encoder, "onnx", loaded.note
            self.onnx_file, self.onnx_s, self.onnx_exported = str(loaded.path), loaded.seconds, loaded.exported
            self.onnx_cosine, self._model_path = loaded.cosine, path
            self.precision = onnx_model.precision_label(quantize)
            self.model_name, self.dim, self.state, self.load_s = name, dim, "ready", time.monotonic() - started
        log.info(
            "query model %s ready (%d-d, onnx, %s %s in %.1f s, least probe cosine %.6f, %d threads)",
            name,
            dim,
            "exported" if loaded.exported else "loaded",
            loaded.path.name,
            loaded.seconds,
            loaded.cosine,
            self.threads,
        )
        return ""

    def _keep_torch(self, why: str) -> str:
        log.warning("ONNX query backend unavailable (%s); loading torch", why)
        return f"onnx unavailable: {why}"

    # ---------------------------------------------------------------------------------------
    # queries

    @property
    def vectors_key(self) -> str | None:
        """What the local model's vectors are (model and precision), None until it is loaded."""
        if self.model_name is None:
            return None
        return model_files.vectors_key(self.model_name, self.precision or "fp32")

    def encode(self, query: str, ndim: int, index_model: str | None) -> tuple[NDArray[np.float32] | None, str]:
        """The query's normalised vector, else ``None`` and why. ``ndim`` and ``index_model`` (a
        :func:`~foldermind.workers.embedding.model_files.vectors_key`: model and precision) are those of the stored
        vectors: a vector of another model or precision would rank nonsense."""
        key_model = index_model or self.vectors_key
        if key_model:
            cached = self.cache.get(key_model, query)
            if cached is not None and cached.shape == (ndim,):
                return cached, ""
        local_why = self._local_unusable(ndim, index_model)
        if not local_why:
            with self._lock:
                key = self.vectors_key
            vector = self._encode_local(query)
            if key is None or self.vectors_key != key:  # ONNX failed meanwhile: torch made an fp32 vector
                return None, f"the query model changed to {self.vectors_key} while encoding"
            self.cache.put(key, query, vector)
            return vector, ""
        try:
            reply = self.client.request(
                "embedder", EmbedRequest([query]), EmbedReply, timeout=self.policy.query_embed_timeout_s
            )
        except BusError as exc:
            timeout_s = self.policy.query_embed_timeout_s
            return None, f"{local_why}; {unanswered.why(exc, 'the embedder', 'encoding it', f'{timeout_s:g} s')}"
        body = reply.body
        if not reply.buffers or body.dim != ndim or body.count != 1:
            return None, f"{local_why}; the embedder answered no usable vector"
        made_by = model_files.vectors_key(body.model, body.precision)
        if index_model and made_by != index_model:
            return None, f"{local_why}; the embedder runs {made_by}, the index holds {index_model} vectors"
        vector = np.frombuffer(frames.buffer_bytes(reply.buffers[0]), dtype=np.float32)[:ndim]
        vector = np.array(vector, dtype=np.float32, copy=True)
        if body.model:
            self.cache.put(made_by, query, vector)
        return vector, ""

    def encode_sentences(
        self, texts: list[str], ndim: int, index_model: str | None
    ) -> tuple[NDArray[np.float32] | None, str]:
        """Normalised vectors of short ``texts`` (evidence sentences, generated claims), one row each, made
        here only (never queued at the embedder behind indexing); ``None`` and why when the local model
        cannot make vectors comparable with the index's. Texts go :data:`SENTENCE_BATCH` at a time, in length order
        (a padded batch pays for its longest: docs/tuning.md#embedder)."""
        if not texts:
            return np.zeros((0, ndim), dtype=np.float32), ""
        why = self._local_unusable(ndim, index_model)
        if why:
            return None, why
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), ndim), dtype=np.float32)
        key = self.vectors_key
        for at in range(0, len(order), SENTENCE_BATCH):
            rows = order[at : at + SENTENCE_BATCH]
            out[rows] = self._encode_batch([texts[i] for i in rows])
        if self.vectors_key != key:  # ONNX failed meanwhile: some rows are torch's fp32 vectors
            return None, f"the query model changed to {self.vectors_key} while encoding"
        return out, ""

    def _encode_batch(self, texts: list[str], what: str = "sentences") -> NDArray[np.float32]:
        """Vectors of ``texts`` from ONNX Runtime when it is loaded; if it ever fails (never seen), torch
        answers from then on and the note says on what it failed."""
        onnx = self._onnx
        if onnx is not None:
            try:
                return np.asarray(onnx.encode(texts), dtype=np.float32)
            except Exception as exc:
                why = onnx_model.reason(exc)
                log.warning("ONNX query backend failed (%s); loading torch, which answers from now on", why)
                with self._lock:
                    self._onnx, self.backend, self.backend_note = None, "torch", f"onnx failed on {what}: {why}"
                    self.precision = onnx_model.precision_label("fp32")
        with self._lock:
            assert self._model_path is not None
            model = self._load_torch_locked(self._model_path)
        import torch

        model_files.torch_threads_here(self.threads, self._threads_set)
        with torch.inference_mode():
            raw = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(raw, dtype=np.float32)

    @property
    def client(self) -> BusClient:
        """This thread's client for the embedder (made on first use)."""
        client: BusClient | None = getattr(self._clients, "client", None)
        if client is None:
            thread = threading.current_thread().name
            client = self._clients.client = BusClient(self.bus_endpoint, name=f"{self.worker_name}.search.{thread}")
            with self._lock:
                self._all_clients.append(client)
        return client

    def _local_unusable(self, ndim: int, index_model: str | None) -> str:
        if self.state != "ready" or (self._model is None and self._onnx is None):
            return f"query model {self.state}"
        if self.dim != ndim:
            return f"the query model makes {self.dim}-d vectors, the index holds {ndim}-d"
        if index_model and self.vectors_key != index_model:
            return f"the query model is {self.vectors_key}, the index holds {index_model} vectors"
        return ""

    def _encode_local(self, query: str) -> NDArray[np.float32]:
        return np.ascontiguousarray(self._encode_batch([query], "a query")[0], dtype=np.float32)

    def summary(self) -> str:
        """One line for the indexer's ``status`` note: what answers queries, and why when not ONNX."""
        if self.policy.query_encoder != "local":
            return ""
        if self.state != "ready":
            return f"queries: model {self.state}" + (f" ({self.error})" if self.error else "")
        line = f"queries: {self.backend} {self.precision}"
        return line + (f" ({self.backend_note})" if self.backend_note else "")

    def describe(self) -> dict[str, object]:
        return {
            "policy": self.policy.query_encoder,
            "state": self.state,
            "model": self.model_name,
            "dim": self.dim,
            "load_s": self.load_s,
            "error": self.error or None,
            "backend": self.backend,
            "backend_wanted": self.policy.query_backend,
            "backend_note": self.backend_note or None,
            "precision": self.precision,
            "precision_wanted": self.ingest.embed_quantize,
            "threads": self.threads,
            "onnx_file": self.onnx_file,
            "onnx_s": self.onnx_s,
            "onnx_exported": self.onnx_exported,
            "onnx_cosine": self.onnx_cosine,
            "model_cache_dir": str(self.cache_dir),
            "torch_loaded": "torch" in sys.modules,
            "cache": self.cache.describe(),
        }
