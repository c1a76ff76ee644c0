"""The embed window: chunks without vectors sent to the embedder, ``embed_window`` requests at a time.

Chunks are fetched :attr:`EmbedWindow.LOOKAHEAD` batches at a time and sent longest-first, so one request
holds texts of similar length (less padding) while requests stay small. A reply's vectors go to SQLite,
then usearch; an embedder that cannot load leaves documents keyword-searchable and is asked again later.
The index holds vectors of one model and precision: a change the configuration asks for re-embeds all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, ErrorInfo
from foldermind.protocol.messages import EmbedReply, EmbedRequest
from foldermind.protocol.runtime.config import IngestPolicy
from foldermind.workers.embedding import model_files, onnx_model
from foldermind.workers.indexer.ingest import units
from foldermind.workers.indexer.ingest.retry import LOST
from foldermind.workers.indexer.ingest.turns import EMBEDDER, Turns
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

log = logging.getLogger("foldermind.indexer.pipeline")


@dataclass(slots=True)
class _Embedding:
    """An embedding request in flight: its chunks, and how many units (texts) each sent, in order."""

    ids: list[int]
    counts: list[int]


class EmbedWindow:
    LOOKAHEAD = 8
    """Batches of chunks fetched at once and sent longest-first."""

    def __init__(
        self,
        store: Store,
        vectors: VectorIndex,
        policy: IngestPolicy,
        turns: Turns,
        wrote: Callable[[], None],
        hold: Callable[[], None] | None,
    ) -> None:
        self.store, self.vectors, self.policy, self.turns = store, vectors, policy, turns
        self._wrote, self._hold = wrote, hold
        self.inflight: dict[str, _Embedding] = {}
        self.backlog: list[tuple[int, str, str]] = []
        self._retry_at = 0.0
        self.error: str | None = None
        """Why no chunk can be embedded now (the model cannot load, another dimension); None when they can."""
        self.embedded_with = store.embeddings.model()
        """(model, precision) of the stored vectors, ("", "") before any."""
        self._probed = False  # asked the embedder what it runs since this start
        self.probe = "not yet"
        """Whether (and why) the embedder was asked what it runs since this start (describe shows it)."""

    def owns(self, cid: str) -> bool:
        return cid in self.inflight

    def busy(self) -> bool:
        return bool(self.inflight or self.backlog)

    def fill(self, client: BusClient) -> None:
        if time.monotonic() < self._retry_at:
            return
        if not self._probed:
            self._maybe_probe(client)
        size = self.policy.embed_batch
        while len(self.inflight) < self.policy.embed_window:
            if not self.backlog:
                busy = {i for sent in self.inflight.values() for i in sent.ids}
                rows = self.store.embeddings.unembedded(size * self.LOOKAHEAD, busy)
                if not rows:
                    if not self.inflight and self.store.embeddings.reembedding():
                        self.store.embeddings.reembedded()
                        log.info("re-embedding done: every chunk has a %s vector", " ".join(self.embedded_with))
                    return
                backlog = [(chunk_id, text, units.title_of(title, first)) for chunk_id, text, title, first in rows]
                self.backlog = sorted(backlog, key=lambda row: len(row[1]), reverse=True)
            if not self.turns.take(EMBEDDER, client):
                return  # the llm's model goes first (the release is on its way; the backlog is kept)
            # Chunks until their units fill the request (a chunk's units go in one request).
            sent, texts = _Embedding([], []), list[str]()
            taken = 0
            for chunk_id, text, title in self.backlog:
                if len(texts) >= size:
                    break
                made = units.units(text, title)
                sent.ids.append(chunk_id)
                sent.counts.append(len(made))
                texts += made
                taken += 1
            self.backlog = self.backlog[taken:]
            env = client.send(EMBEDDER, EmbedRequest(texts), timeout=600)
            self.inflight[env.id] = sent

    def _maybe_probe(self, client: BusClient) -> None:
        """An empty request: its reply names the model and precision the embedder runs now, so an index whose
        every chunk is embedded still learns that the configuration changed (and re-embeds). Sent only when
        vectors exist and the configuration names other vectors than the index holds: otherwise it would
        start an on-demand embedder at every kernel start to learn nothing (a fallback precision is still
        found out by the first batch). The embedder's turn is taken only for a probe sent."""
        if not len(self.vectors):
            self._probed, self.probe = True, "not needed: no vectors yet"
        elif self.embedded_with == self.configured_vectors():
            self._probed, self.probe = True, "not needed: the index holds the configured vectors"
        elif self.turns.take(EMBEDDER, client):
            self._probed, self.probe = True, "asked: the configuration names other vectors than the index holds"
            self.inflight[client.send(EMBEDDER, EmbedRequest([]), timeout=600).id] = _Embedding([], [])

    def answered(self, packet: frames.Packet) -> None:
        sent = self.inflight.pop(packet.env.cid)
        ids = sent.ids
        if packet.env.status == "error":
            error = packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error without detail")
            if not ids:
                self._probed = False  # ask again with the next batches
            if error.code.fault in LOST:
                return  # the chunks stay unembedded and go out again with the next batch
            # The model cannot load (or no embedder runs): documents stay keyword-searchable and
            # are embedded once it can, without anyone asking.
            self._unavailable(error.message)
            log.warning("embedding unavailable (%s); retrying in %.0f s", error.message, self.policy.embed_retry_s)
            return
        body = packet.body()
        assert isinstance(body, EmbedReply)
        if not self._same_vectors(body) or not ids:
            return  # refused (a fallback precision) or the probe: nothing to store
        if body.count != sum(sent.counts) or not packet.buffers:
            log.error("embed reply holds %d vectors for %d units; dropped", body.count, sum(sent.counts))
            return
        matrix = np.frombuffer(frames.buffer_bytes(packet.buffers[0]), dtype=np.float32).reshape(body.count, body.dim)
        if body.dim != self.vectors.ndim and not self.store.embeddings.ids():
            self.vectors.reset(body.dim)  # first vectors of a (re)configured model: size the index to it
            with self.store.tx() as db:
                self.store.set_meta(db, "vector_dim", str(body.dim))
        if body.dim != self.vectors.ndim:
            self._unavailable(f"the model makes {body.dim}-d vectors; the index holds {self.vectors.ndim}-d")
            return
        self.error = None
        ends = np.cumsum(sent.counts)
        spans = zip(ids, sent.counts, ends, strict=True)
        blobs = {chunk_id: embeddings.pack(matrix[end - n : end]) for chunk_id, n, end in spans}
        with self.vectors.arrival(ids):
            kept = self.store.embeddings.store(ids, [blobs[i] for i in ids])
            self._wrote()
            keys, rows = embeddings.stack([(k, blobs[k]) for k in kept], body.dim)
            self.vectors.add(keys, rows, self._hold)

    def _unavailable(self, why: str) -> None:
        self.error = why
        # The fetched chunks stay unembedded in the store and are fetched again at the retry; kept here, they
        # would count as work in hand (the pipeline never idle: no compaction, no analysis) and outlive deletes.
        self.backlog = []
        self._retry_at = time.monotonic() + self.policy.embed_retry_s

    def configured_vectors(self) -> tuple[str, str] | None:
        """(model, precision) of the vectors the configuration asks the embedder for, resolved as the
        embedder resolves them; None when the model directory cannot be found (the embedder will say why)."""
        try:
            name = model_files.model_name(model_files.model_dir(self.policy.embed_model_dir or None))
        except model_files.ModelNotFound:
            return None
        torch = self.policy.embed_backend == "torch"  # torch runs the model's own weights: fp32
        return name, onnx_model.precision_label("fp32" if torch else self.policy.embed_quantize)

    def _same_vectors(self, body: EmbedReply) -> bool:
        """Make the index hold only vectors of the model and precision that made ``body``'s: on a change,
        every stored vector is dropped (the chunks and keyword search stay) and all chunks are embedded again;
        searches compare their query vector's model and precision with what the store records, so vectors of
        two never meet. Returns whether ``body``'s vectors may be stored.

        One change is refused: vectors of the configured precision (``[ingest] embed_quantize``) are not
        dropped for another precision of the same model. That is an embedder that fell back (torch makes fp32
        only, when the int8 copy or ONNX Runtime fails): dropping would re-embed the whole index twice, once
        into the fallback and again once ONNX is back. The new chunks wait (keyword search finds them) and
        the status says why; a precision change the configuration asks for still re-embeds."""
        made = (body.model, body.precision or "fp32")
        if made == self.embedded_with:
            return True
        before = self.embedded_with
        holds = bool(len(self.vectors) or self.store.embeddings.ids())
        wanted = onnx_model.precision_label(self.policy.embed_quantize)
        if before[1] == wanted != made[1] and before[0] == made[0] and holds:
            self._unavailable(
                f"the embedder makes {made[1]} vectors, not the {wanted} the index holds and [ingest] embed_quantize"
                " asks for (its status says why): new chunks wait for it, and keyword search finds them"
            )
            log.warning("embedder makes %s vectors, the index holds %s: kept; retrying later", made[1], wanted)
            return False
        if before != ("", "") and holds:
            # The usearch index first: a search between the two steps finds no vector (and answers from
            # keyword search), never an old vector beside the new record.
            self.vectors.reset(self.vectors.ndim)
            dropped = self.store.embeddings.drop_all(*made, reembedding=model_files.vectors_key(*before))
            self.backlog = []
            log.info(
                "the embedder now makes %s vectors, the index held %s: %d vectors dropped, every chunk is"
                " embedded again",
                model_files.vectors_key(*made),
                model_files.vectors_key(*before),
                dropped,
            )
        else:
            with self.store.tx() as db:
                self.store.set_meta(db, "embed_model", made[0])
                self.store.set_meta(db, "embed_precision", made[1])
        self.embedded_with = made
        return True
