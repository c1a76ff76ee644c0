"""One large model at a time for the ingest thread: the embedder's or the llm's, never both.

The ingest thread is the embedder's only caller (queries are encoded by the indexer's own ONNX copy) and the
llm's background caller (document summaries, sent only once every chunk is embedded). Both workers run on
demand and keep their model for their idle time (10 minutes): so when indexing ended and summaries began,
the tree held both models for 10 minutes, over the memory budget (``tests/bench/memory_budget.py``; measured:
docs/tuning.md#model-turns).

So before the ingest thread sends one of them work, it sends the other a ``release.request`` if it used it
since the last release (and the other's idle time has not already let it go), and waits for the answer: the
released worker frees its model before it answers, and on demand exits at once. A summary the llm is writing for
this thread stops at its next step (a token) and comes back retryable, asked again once the embedder is done.
A worker another caller used within its idle time (a chat, queries through the embedder) keeps its model and
says so; the ingest thread goes on either way. The wait costs indexing nothing in bulk (summaries never run
while files wait); a file saved while a summary runs waits for its next token (or a load in progress) before
its chunks go to the embedder.

Nor is the embedder released when it encodes the indexer's queries (``[search] query_encoder = "embedder"``):
a search may come at any moment, and one that found the model gone would wait for a start and a load (past
``query_embed_timeout_s``, answered from keyword search). Then both models stay, as the setting asks.

No hand-over while embedding fails (the model cannot load, or the embedder makes vectors of another
precision): the indexer retries it every ``[ingest] embed_retry_s`` between summaries, and releasing each time
would load a model every 30 s (a torch fallback ~5.6 CPU-s), so both stay for as long as that lasts.
"""

from __future__ import annotations

import logging
import time

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import ReleaseReply, ReleaseRequest

log = logging.getLogger("foldermind.indexer.turns")

EMBEDDER, LLM = "embedder", "llm"


class Turns:
    """Which of the two models the ingest thread used since it last released it, and the releases in flight."""

    def __init__(self, idle_s: dict[str, float], release_timeout_s: float, keep: frozenset[str] = frozenset()) -> None:
        self.idle_s = idle_s
        """Each service's model idle time (0 = kept): past it, the worker let go by itself."""
        self.keep = keep
        """Services never released: another part of the indexer needs them at any moment."""
        self.release_timeout_s = release_timeout_s
        self.used: dict[str, float] = {}
        self.releasing: dict[str, str] = {}
        """Release requests in flight: request id -> service."""
        self.hand_over = True
        """False while embedding fails: :meth:`take` then releases nothing (see the module's docstring)."""

    def take(self, service: str, client: BusClient) -> bool:
        """Whether ``service`` may be sent work now: every other model this thread used has been released
        (a release is sent here when it is not yet). True marks ``service`` used: the caller sends at once."""
        now = time.monotonic()
        if not self.hand_over:
            self.used[service] = now
            return True
        for other, last in list(self.used.items()):
            if other == service or other in self.releasing.values():
                continue
            if other in self.keep:
                del self.used[other]
                continue
            idle = self.idle_s.get(other, 0.0)
            if idle and now - last >= idle:
                del self.used[other]  # it let go by itself: a release now would only start it again
                continue
            env = client.send(other, ReleaseRequest(), timeout=self.release_timeout_s)
            self.releasing[env.id] = other
        if any(other != service for other in self.used):
            return False
        self.used[service] = now
        return True

    def owns(self, cid: str) -> bool:
        return cid in self.releasing

    def answered(self, packet: frames.Packet) -> None:
        """A release's answer: the worker let go, kept its model for another caller, or failed to answer (lost,
        timed out: gone or stuck, not this thread's to wait for). Either way, its turn is over."""
        service = self.releasing.pop(packet.env.cid or "", "")
        self.used.pop(service, None)
        if packet.env.status == "error":
            error = packet.env.error
            log.info("release of the %s not answered (%s)", service, error.code if error else "error")
            return
        body = packet.body()
        assert isinstance(body, ReleaseReply)
        log.info("%s %s: %s", service, "released" if body.released else "not released", body.reason)
