"""The model's part of document analysis, driven from the ingest thread.

Every indexed document gets its deterministic analysis (:mod:`.analysis`, made by :mod:`.analyzer` once
nothing is left to parse or embed). This adds the summary and named entities written by the llm worker: one
``llm.analyze`` request at a time, sent only while the ingest queue is idle (nothing to parse, nothing to
embed), so analysis never delays indexing and never queues more than one job in front of a chat, and only
once the embedder has let its model go (:mod:`.turns`: the two models are never resident together). While
the model is not ready it retries every ``[llm] analysis_retry_s``; a document whose analysis twice
costs the llm worker its life (or that the model cannot take) is marked given-up and keeps its
deterministic analysis.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, ErrorInfo, Fault
from foldermind.protocol.messages import AnalyzeReply, AnalyzeRequest
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.indexer.ingest.turns import LLM, Turns
from foldermind.workers.indexer.storage.extracted import rebuild
from foldermind.workers.indexer.storage.store import Store

log = logging.getLogger("foldermind.indexer.enrich")

DONE, GAVE_UP = 1, 2
LEAD_CHARS = 4000
"""Leading text sent per document: the worker cuts it further, by tokens."""


class Enricher:
    def __init__(self, store: Store, policy: LlmPolicy) -> None:
        self.store, self.policy = store, policy
        self.inflight: str | None = None
        self.doc_id = 0
        self.fields: dict[str, Any] = {}
        self.analyzed_at = 0.0
        self.retry_at = 0.0
        self.attempts: dict[int, int] = {}

    def fill(self, client: BusClient, idle: Callable[[], bool], turns: Turns) -> None:
        """Send the next document's request, if analysis is on, none is in flight, ``idle()`` (asked last:
        it queries the store) says the ingest queue is empty and the embedder has been released (``turns``)."""
        if not self.policy.analysis or self.inflight is not None or time.monotonic() < self.retry_at or not idle():
            return
        pending = self.store.analyses.pending_enrichment(1)
        if not pending:
            return
        doc_id, path, fields, analyzed_at = pending[0]
        text = self.lead_text(doc_id)
        if not text.strip():
            self.store.analyses.enrich(doc_id, {}, DONE)  # nothing to summarise beyond what is stored
            return
        if not turns.take(LLM, client):
            return  # the embedder's model goes first (the release is on its way)
        done, waiting = self.store.analyses.enrichment_counts()
        request = AnalyzeRequest(file_name=os.path.basename(path), text=text, number=done + 1, of=done + waiting)
        env = client.send("llm", request, timeout=self.policy.analysis_timeout_s)
        self.inflight, self.doc_id, self.fields, self.analyzed_at = env.id, doc_id, fields, analyzed_at

    def lead_text(self, doc_id: int) -> str:
        """The document's first LEAD_CHARS characters of text, rebuilt from its overlapping chunks."""
        chunks = self.store.chunks.from_ordinal(doc_id, 0)
        first = next(chunks, None)
        if first is None:
            return ""
        end = first.char_start + LEAD_CHARS
        head = [first, *itertools.takewhile(lambda c: c.char_start < end, chunks)]
        return rebuild(head, first.char_start, first.line_start)[:LEAD_CHARS]

    def owns(self, cid: str) -> bool:
        return cid == self.inflight

    def answered(self, packet: frames.Packet) -> None:
        doc_id = self.doc_id
        self.inflight = None
        if packet.env.status == "error":
            self._failed(doc_id, packet.env.error or ErrorInfo(ErrorCode.INTERNAL, "error without detail"))
            return
        body = packet.body()
        assert isinstance(body, AnalyzeReply)
        row = self.fields
        updates: dict[str, object] = {"summary_model": body.model}
        if body.summary:
            updates["summary"] = body.summary
        if body.entities:
            known = [e for e in row.get("key_entities", []) if e.lower() not in {x.lower() for x in body.entities}]
            updates["key_entities"] = (list(body.entities) + known)[:8]
            updates["entity"] = body.entities[0]
        confidence = row.get("confidence")
        if isinstance(confidence, int) and body.summary:
            updates["confidence"] = min(100, confidence + 20)
        # Refused when the file was re-analysed meanwhile: the fresh analysis waits for its own turn.
        self.store.analyses.enrich(doc_id, updates, DONE, analyzed_at=self.analyzed_at)

    def _failed(self, doc_id: int, error: ErrorInfo) -> None:
        if error.code.fault is Fault.UNAVAILABLE:
            # No model to ask now: the document stays waiting, nothing is lost.
            self.retry_at = time.monotonic() + self.policy.analysis_retry_s
            return
        if error.code.fault in (Fault.LOST, Fault.TIMEOUT):
            self.attempts[doc_id] = self.attempts.get(doc_id, 0) + 1
            if self.attempts[doc_id] < 2:
                self.retry_at = time.monotonic() + 1.0
                return
        log.warning("document %d keeps its deterministic analysis: %s", doc_id, error.code)
        self.attempts.pop(doc_id, None)
        self.store.analyses.enrich(doc_id, {}, GAVE_UP)
