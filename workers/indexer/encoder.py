"""Query vectors for semantic and hybrid search.

With ``[search] query_encoder = "local"`` the indexer loads the embedder's own model (the same
directory, the same normalisation) in a background thread at start, and encodes queries itself:
~12 ms on one thread, never queued behind an indexing batch at the embedder. Until that model is
ready, or if it failed to load, or if it is not the model the index was built with, the query goes
to the embedder over the bus (``query_embed_timeout_s``); when that fails too, the caller answers
from keyword search.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from foldermind.kernel.config import IngestPolicy, SearchPolicy
from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import EmbedReply, EmbedRequest
from foldermind.workers import model_files

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("foldermind.indexer.encoder")

State = Literal["off", "loading", "ready", "failed"]
TORCH_THREADS = 1
"""A query is a few tokens: one thread is as fast as two here, and leaves the embedder its cores."""


class QueryEncoder:
    def __init__(self, policy: SearchPolicy, ingest: IngestPolicy, bus_endpoint: str, name: str) -> None:
        self.policy, self.ingest = policy, ingest
        self.bus_endpoint, self.worker_name = bus_endpoint, name
        self.state: State = "off"
        self.error = ""
        self.model_name: str | None = None
        self.dim: int | None = None
        self.load_s: float | None = None
        self._model: SentenceTransformer | None = None
        self._client: BusClient | None = None
        self._threads_set: set[int] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start loading the model in the background (policy ``local``); returns at once."""
        if self.policy.query_encoder != "local":
            return
        self.state = "loading"
        threading.Thread(target=self._load, name="query-model", daemon=True).start()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _load(self) -> None:
        started = time.monotonic()
        try:
            path = model_files.model_dir(
                os.environ.get(model_files.MODEL_DIR_ENV) or self.ingest.embed_model_dir or None
            )
            os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            from foldermind.workers.embedder import model_name

            torch.set_num_threads(TORCH_THREADS)
            model = SentenceTransformer(str(path), device="cpu")
            model.eval()
            getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            dim = int(getter() or 0)
            name = model_name(path)
        except Exception as exc:
            with self._lock:
                self.state, self.error = "failed", f"{exc.__class__.__name__}: {exc}".splitlines()[0][:300]
            log.warning("query model unavailable (%s); queries go to the embedder", self.error)
            return
        with self._lock:
            self._model, self.model_name, self.dim = model, name, dim
            self.state, self.load_s = "ready", time.monotonic() - started
        log.info("query model %s ready (%d-d) in %.1f s", name, dim, self.load_s)

    def encode(self, query: str, ndim: int, index_model: str | None) -> tuple[NDArray[np.float32] | None, str]:
        """The query's normalised vector, else ``None`` and why. ``ndim`` and ``index_model`` are
        those of the stored vectors: a vector of another model would rank nonsense."""
        local_why = self._local_unusable(ndim, index_model)
        if not local_why:
            return self._encode_local(query), ""
        try:
            reply = self.client.request(
                "embedder", EmbedRequest([query]), EmbedReply, timeout=self.policy.query_embed_timeout_s
            )
        except BusError as exc:
            return None, f"embedder: {exc}"
        body = reply.body
        if not reply.buffers or body.dim != ndim or body.count != 1:
            return None, "the embedder answered no usable vector"
        if index_model and body.model != index_model:
            return None, f"the embedder runs {body.model}, the index holds {index_model} vectors"
        vector = np.frombuffer(frames.buffer_bytes(reply.buffers[0]), dtype=np.float32)[:ndim]
        return np.array(vector, dtype=np.float32, copy=True), ""

    @property
    def client(self) -> BusClient:
        if self._client is None:
            self._client = BusClient(self.bus_endpoint, name=f"{self.worker_name}.search")
        return self._client

    def _local_unusable(self, ndim: int, index_model: str | None) -> str:
        if self.state != "ready" or self._model is None:
            return f"query model {self.state}"
        if self.dim != ndim:
            return f"the query model makes {self.dim}-d vectors, the index holds {ndim}-d"
        if index_model and self.model_name != index_model:
            return f"the query model is {self.model_name}, the index holds {index_model} vectors"
        return ""

    def _encode_local(self, query: str) -> NDArray[np.float32]:
        import torch

        assert self._model is not None
        # Thread counts can be per thread (OpenMP): set it in the serving thread too, once.
        me = threading.get_ident()
        if me not in self._threads_set:
            torch.set_num_threads(TORCH_THREADS)
            self._threads_set.add(me)
        with torch.inference_mode():
            raw = self._model.encode([query], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(raw[0], dtype=np.float32)

    def describe(self) -> dict[str, object]:
        return {
            "policy": self.policy.query_encoder,
            "state": self.state,
            "model": self.model_name,
            "dim": self.dim,
            "load_s": self.load_s,
            "error": self.error or None,
        }
