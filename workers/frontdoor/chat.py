"""chat_with_documents: sessions, retrieval, the llm call and the citations (SPEC section 3, seed 000).

Sessions live in this process's memory only, under ``mcp:``-namespaced keys, so an MCP session id can
never name anything else; they end after ``[llm] session_ttl_s`` idle (the oldest go first beyond
``max_sessions``). Each holds an asyncio lock: one generation per session at a time, a second call on the
same session waits its turn instead of racing (and a client cannot fan one session out into many).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from foldermind.kernel.config import LlmPolicy
from foldermind.protocol.messages import (
    ChatPartial,
    ChatReply,
    ChatRequest,
    ChatTurn,
    Message,
    SearchHit,
    SearchReply,
    SearchRequest,
)
from foldermind.workers.frontdoor import schemas
from foldermind.workers.frontdoor.bus import Bus

HISTORY_TURNS = 6
"""Turns a session remembers; the llm worker keeps as many of the latest as fit its window."""

SEARCH_CODES = dict.fromkeys(
    ("worker_lost", "deadline_exceeded", "service_unavailable", "shutting_down", "internal"), "RETRIEVAL_FAILED"
)
# From the llm: a dead or missing worker is a model that is not ready; a job that ran past its deadline
# is LLM_TIMEOUT (the broker replaces the worker that held it); a lost worker is a failed generation.
LLM_CODES = {
    "deadline_exceeded": "LLM_TIMEOUT",
    "service_unavailable": "MODEL_NOT_READY",
    "shutting_down": "MODEL_NOT_READY",
    "worker_lost": "RETRIEVAL_FAILED",
    "internal": "RETRIEVAL_FAILED",
    "generation_failed": "RETRIEVAL_FAILED",
    "prompt_too_long": "INVALID_QUERY",
}


@dataclass(slots=True)
class Session:
    id: str
    key: str
    history: list[ChatTurn] = field(default_factory=list)
    last_used: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    busy: int = 0


class Sessions:
    def __init__(self, ttl_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_sessions, self.clock = ttl_s, max_sessions, clock
        self._by_key: OrderedDict[str, Session] = OrderedDict()

    @staticmethod
    def key(session_id: str) -> str:
        return f"mcp:{session_id}"

    def open(self, session_id: str | None) -> Session:
        """The session named ``session_id`` (created when unknown or expired); a new ``mcp-<uuid>`` when absent."""
        self.sweep()
        sid = session_id or f"mcp-{uuid.uuid4()}"
        key = self.key(sid)
        session = self._by_key.get(key)
        if session is None:
            session = Session(id=sid, key=key)
            self._by_key[key] = session
            while len(self._by_key) > self.max_sessions:
                oldest = next((k for k, s in self._by_key.items() if not s.busy), None)
                if oldest is None:
                    break
                del self._by_key[oldest]
        self._by_key.move_to_end(key)
        session.last_used = self.clock()
        return session

    def sweep(self) -> None:
        cutoff = self.clock() - self.ttl_s
        for key in [k for k, s in self._by_key.items() if s.last_used < cutoff and not s.busy]:
            del self._by_key[key]

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, session_id: str) -> bool:
        return self.key(session_id) in self._by_key


def pick_passages(hits: list[SearchHit], max_files: int, per_file: int) -> list[SearchHit]:
    """The best chunks of the ``max_files`` best files, at most ``per_file`` each, in rank order."""
    files: dict[str, int] = {}
    picked: list[SearchHit] = []
    for hit in hits:
        n = files.get(hit["file_path"])
        if n is None:
            if len(files) == max_files:
                continue
            n = 0
        if n < per_file:
            files[hit["file_path"]] = n + 1
            picked.append(hit)
    return picked


class Chat:
    def __init__(self, bus: Bus, policy: LlmPolicy) -> None:
        self.bus = bus
        self.policy = policy
        self.sessions = Sessions(policy.session_ttl_s, policy.max_sessions)

    async def answer(
        self,
        query: str,
        session_id: str | None,
        max_context_files: int,
        persona: str | None,
        on_progress: Callable[[ChatPartial], None] | None,
    ) -> schemas.ChatOutput:
        session = self.sessions.open(session_id)
        session.busy += 1
        try:
            async with session.lock:
                out = await self._answer(session, query, max_context_files, persona or "", on_progress)
                session.last_used = self.sessions.clock()
                return out
        finally:
            session.busy -= 1

    async def _answer(
        self,
        session: Session,
        query: str,
        max_files: int,
        persona: str,
        on_progress: Callable[[ChatPartial], None] | None,
    ) -> schemas.ChatOutput:
        depth = min(50, max(10, max_files * self.policy.chunks_per_file * 3))
        found = await self.bus.call(
            "indexer",
            SearchRequest(query=query[:1000], mode="hybrid", top_k=depth, with_text=True),
            SearchReply,
            codes=SEARCH_CODES,
        )
        hits = pick_passages(found.results, max_files, self.policy.chunks_per_file)
        request = ChatRequest(
            question=query,
            passages=[{"file_name": h["file_name"], "text": h.get("text", h["snippet"])} for h in hits],
            history=session.history[-HISTORY_TURNS:],
            persona=persona,
            stream=on_progress is not None,
        )

        def partial(msg: Message) -> None:
            if on_progress is not None and isinstance(msg, ChatPartial):
                on_progress(msg)

        reply = await self.bus.call(
            "llm", request, ChatReply, timeout=self.policy.timeout_s, codes=LLM_CODES, on_partial=partial
        )
        session.history.append({"question": query, "answer": reply.answer})
        del session.history[:-HISTORY_TURNS]
        citations = []
        for number, index in enumerate(reply.cited, start=1):
            hit = hits[index]
            loc = hit["location"]
            citations.append(
                schemas.Citation(
                    id=number,
                    file_path=hit["file_path"],
                    file_name=hit["file_name"],
                    snippet=hit["snippet"],
                    chunk_index=hit["chunk_index"],
                    chunk_id=hit["chunk_id"],
                    location=schemas.Location(
                        page=loc.get("page"),
                        heading=loc.get("heading"),
                        line_start=loc["line_start"],
                        line_end=loc["line_end"],
                    ),
                )
            )
        if not hits:
            note = "no document matched the question"
        elif reply.passages_used < len(hits):
            note = f"{reply.passages_used} of {len(hits)} passages fit the model's context window"
        else:
            note = None
        return schemas.ChatOutput(
            answer=reply.answer,
            citations=citations,
            grounded=bool(citations),
            session_id=session.id,
            tokens_used=schemas.TokensUsed(prompt=reply.prompt_tokens, completion=reply.completion_tokens),
            model=reply.model,
            note=note,
        )
