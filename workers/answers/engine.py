"""The answer engine of chat_with_documents and the console's Ask: sessions, evidence, the llm call and its check.

An answer starts from evidence: the indexer picks the sentences of the best passages that answer the
question (``evidence.request``). Quoted, each with its ``[n]``, they are the extractive answer, which needs
no model and is right by construction. With the model (``answer_mode`` auto or generative) those sentences,
with their neighbours, are all the model is shown; each sentence it writes is checked by the indexer
(``evidence.check.request``) and kept only when a passage of the file it credits (any, when it credits none)
backs it and it is about what the question asks (its subject, not only its topic). When the model cannot
answer (loading, failed, timed out, lost) or none of its sentences holds, the quotes are the answer and
``fallback_reason`` says why. A question no passage answers gets a plain
"the documents do not say", and no model call. ``auto`` asks the model only for the question shapes of
``[llm] auto_model_shapes``; a streaming client is sent the quotes, then only what the check kept (:class:`Shown`).

Sessions live in this process's memory, under keys namespaced by who asks (the front door's ``mcp:`` and the asking
client key's name, the console's ``console:``), so a session id can never name another caller's conversation; their
turns are kept in the home's SQLite too (:mod:`.conversations`), so a restarted process goes on with them. They end
after ``[llm] session_ttl_s`` idle (the oldest go first beyond ``max_sessions``). Each
holds an asyncio lock: one generation per session at a time, a second call on the same session waits its turn
instead of racing (and a client cannot fan one session out into many). A follow-up is retrieved with its subject in
front of it (and alone), so "and the year before?" finds it: the previous question as it was resolved (:func:`subject`;
after "why?", the question "why?" asked about), so a follow-up of a follow-up keeps its subject.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foldermind.protocol.errors import ErrorCode, Fault, JobError
from foldermind.protocol.messages import (
    ChatPartial,
    ChatReply,
    ChatRequest,
    ChatTurn,
    CheckReply,
    CheckRequest,
    EvidenceReply,
    EvidenceRequest,
    Message,
)
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import likely, measure, schemas
from foldermind.workers.answers import quotes as answers
from foldermind.workers.answers.conversations import Conversations
from foldermind.workers.answers.quotes import Composed, Evidence
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.questions import small_talk, words_of_its_own

QUESTION_MAX = 2000
"""The longest question an answer takes (characters), from an MCP client or the console."""
SESSION_ID_MAX = 200
"""The longest session id a caller may name."""
CONTEXT_FILES = 5
"""Files an answer draws on unless the caller asks for another number."""
HISTORY_TURNS = 6
"""Turns a session remembers; the llm worker keeps as many of the latest as fit its window."""
SUBJECT_CHARS = 500
"""The longest subject a follow-up is retrieved with (characters, the latest kept)."""

SMALL_TALK_NOTE = "a greeting or thanks, not a question about the documents: ask what they say about something"
"""The note of small talk (:func:`.questions.small_talk`), which asks the documents nothing and is never grounded."""

TRANSIENT = frozenset({Fault.UNAVAILABLE, Fault.TIMEOUT, Fault.LOST})
"""A step's failures the caller did not cause: the chat reports them as the step's own code."""


def _step_failed(exc: JobError, code: ErrorCode) -> JobError:
    """A search or check step that failed for a transient reason is ``code`` (RETRIEVAL_FAILED,
    CHECK_FAILED); a rejection keeps its own code (an invalid folder, a request too large)."""
    return JobError(code, exc.message) if exc.code.fault in TRANSIENT else exc


def _generation_failed(exc: JobError) -> JobError:
    """The model's failure as the fallback's reason: a model that is not there (loading, failed, its worker
    down) is MODEL_NOT_READY, a deadline LLM_TIMEOUT (the broker replaces a worker stuck past it), a
    question too long for the window PROMPT_TOO_LONG, anything else GENERATION_FAILED."""
    if exc.code is ErrorCode.PROMPT_TOO_LONG:
        return exc
    if exc.code.fault is Fault.UNAVAILABLE:
        return JobError(ErrorCode.MODEL_NOT_READY, exc.message)
    if exc.code.fault is Fault.TIMEOUT:
        return JobError(ErrorCode.LLM_TIMEOUT, exc.message)
    return JobError(ErrorCode.GENERATION_FAILED, exc.message)


def subject(history: list[ChatTurn]) -> str:
    """What the next turn of a conversation leans on: its previous question as it was resolved. A question that
    names something (:func:`.questions.words_of_its_own`) is its own subject; one that names nothing ("why?", "is
    that so?") was about the subject it leaned on, so that goes in front of it, back to the latest question that named
    something. Small talk ("hi", "thanks") asked nothing and is passed over. The latest :data:`SUBJECT_CHARS`."""
    asked: list[str] = []
    for turn in reversed(history):
        if small_talk(turn["question"]):
            continue
        asked.insert(0, turn["question"].strip())
        if words_of_its_own(turn["question"]):
            break
    return " ".join(asked)[-SUBJECT_CHARS:].strip()


def evidence_request(
    policy: LlmPolicy, question: str, context: str, max_files: int, folder_id: str | None = None
) -> EvidenceRequest:
    """The ``evidence.request`` an answer sends: ``context`` is the subject it leans on (:func:`subject`, which
    keeps its latest :data:`SUBJECT_CHARS`), or ``""``; ``folder_id``: only that Smart Folder's documents."""
    return EvidenceRequest(
        question=question[:1000],
        context=context,
        max_files=max_files,
        per_file=policy.chunks_per_file,
        max_spans=max(policy.evidence_sources, policy.max_quotes, policy.yes_no_files),
        folder_id=folder_id,
    )


@dataclass(frozen=True, slots=True)
class Quoted:
    """An answer's first step: the evidence, the evidence floor's quotes, the model's reading of them, the note."""

    evidence: Evidence
    quotes: Composed
    reading: likely.Reading
    note: str | None

    @property
    def answer(self) -> Composed:
        """The extractive answer a user gets: the quotes, unless the model's reading refuses them."""
        return Composed(answers.NOT_FOUND) if self.reading.refused else self.quotes


async def quote(
    bus: Bus, policy: LlmPolicy, question: str, previous: str, max_files: int, folder_id: str | None = None
) -> Quoted:
    """Evidence, its quotes, and the model's reading where the evidence floor is near refusing: every answer's first
    step (and the answer benches' own, so they measure what a user gets). ``previous``: :func:`subject`'s, or ``""``;
    ``folder_id``: only that Smart Folder's documents."""
    request = evidence_request(policy, question, previous, max_files, folder_id)
    try:
        reply = await bus.call("indexer", request, EvidenceReply)
    except JobError as exc:
        raise _step_failed(exc, ErrorCode.RETRIEVAL_FAILED) from None
    evidence = Evidence(reply, question)
    quoted = answers.extractive(evidence, answers.Quoting.of(policy))
    reading = await likely.read(bus, policy, question, previous, reply, quoted)
    if quoted.grounded and not reading.refused and not measure.answers(question, quoted.answer):
        reading = likely.Reading(True, reading.floor, measure.NOTE, reading.model)
    note = reply.note
    if not quoted.grounded and small_talk(question):
        note = SMALL_TALK_NOTE
    elif not reply.passages:
        note = "no document matched the question"
    elif not quoted.grounded or reading.refused:
        note = f"the closest passage (in {reply.passages[0]['file_name']}) does not answer the question"
    if reading.note:
        note = f"{note}: {reading.note}" if note else reading.note
    return Quoted(evidence, quoted, reading, note)


class Shown:
    """What a streaming client is sent: pieces of the final answer only, in order, so that what it has shown
    is always a prefix of the answer. The quotes go at once (progress 1); while the model writes, progress
    without text (2 + n for its n-th token: the values only grow, MCP's rule); the rest of the answer (its
    checked sentences, or the quotes it falls back to) once the check is done (the total)."""

    def __init__(self, on_progress: Callable[[ChatPartial], None] | None, max_tokens: int) -> None:
        self.on_progress, self.total, self.text = on_progress, max_tokens + 2, ""

    def quotes(self, answer: str) -> None:
        self._send(answer, 1)

    def working(self, tokens: int) -> None:
        if self.on_progress is not None:
            self.on_progress(ChatPartial("", min(tokens + 2, self.total - 1), self.total))

    def rest(self, answer: str) -> None:
        """The part of ``answer`` not sent yet (an answer never drops what was sent: it starts with it)."""
        if answer.startswith(self.text) and len(answer) > len(self.text):
            self._send(answer[len(self.text) :], self.total)

    def _send(self, text: str, value: int) -> None:
        if self.on_progress is not None:
            self.on_progress(ChatPartial(text, value, self.total))
            self.text += text


@dataclass(slots=True)
class Session:
    id: str
    key: str
    history: list[ChatTurn] = field(default_factory=list)
    last_used: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    busy: int = 0


def nobody() -> str:
    return ""


class Sessions:
    """The conversations of one caller kind (``prefix``: ``mcp``, ``console``); ``owner`` names who asks now; ``kept``
    holds their turns where a restart finds them."""

    def __init__(
        self,
        ttl_s: float,
        max_sessions: int,
        clock: Callable[[], float] = time.monotonic,
        owner: Callable[[], str] = nobody,
        prefix: str = "mcp",
        kept: Conversations | None = None,
    ) -> None:
        self.ttl_s, self.max_sessions, self.clock = ttl_s, max_sessions, clock
        self.owner, self.prefix = owner, prefix
        self.kept = kept or Conversations(None, prefix, ttl_s, max_sessions)
        self._by_key: OrderedDict[str, Session] = OrderedDict()

    def key(self, session_id: str) -> str:
        """The session's key in the asker's own namespace: another client's session id names a new, empty
        conversation, never theirs (whose turns quote documents it may not see)."""
        return f"{self.prefix}:{self.owner()}:{session_id}"

    def open(self, session_id: str | None, kept: list[ChatTurn] | None = None) -> Session:
        """The session named ``session_id`` (this process's, else the kept one, else a new one); a new
        ``<prefix>-<uuid>`` when absent. ``kept``: its turns as :meth:`kept_turns` read them (None: read now)."""
        self.sweep()
        sid = session_id or f"{self.prefix}-{uuid.uuid4()}"
        key = self.key(sid)
        session = self._by_key.get(key)
        if session is None:
            history = (self.kept.load(key) if kept is None else kept) if session_id else []
            session = Session(id=sid, key=key, history=history)
            self._by_key[key] = session
            while len(self._by_key) > self.max_sessions:
                oldest = next((k for k, s in self._by_key.items() if not s.busy), None)
                if oldest is None:
                    break
                del self._by_key[oldest]
        self._by_key.move_to_end(key)
        session.last_used = self.clock()
        return session

    def keep(self, session: Session) -> None:
        """Write the session's turns where a restarted process finds them (before its answer is returned)."""
        self.kept.save(session.key, session.history)

    async def kept_turns(self, session_id: str | None) -> list[ChatTurn] | None:
        """The kept turns of a session this process does not hold, read on a thread (None: none to read)."""
        if not session_id or session_id in self:
            return None
        return await asyncio.to_thread(self.kept.load, self.key(session_id))

    def sweep(self) -> None:
        cutoff = self.clock() - self.ttl_s
        for key in [k for k, s in self._by_key.items() if s.last_used < cutoff and not s.busy]:
            del self._by_key[key]

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, session_id: str) -> bool:
        return self.key(session_id) in self._by_key


class Chat:
    """Answers over ``bus``: ``evidence.request`` and ``evidence.check.request`` to the indexer, ``llm.chat.request``
    to the llm; ``owner`` and ``prefix`` namespace its sessions (:class:`Sessions`), whose turns are kept in the
    SQLite file ``kept`` (:mod:`.conversations`; None: in memory only)."""

    def __init__(
        self,
        bus: Bus,
        policy: LlmPolicy,
        owner: Callable[[], str] = nobody,
        prefix: str = "mcp",
        kept: Path | None = None,
    ) -> None:
        self.bus = bus
        self.policy = policy
        ttl_s, most = policy.session_ttl_s, policy.max_sessions
        conversations = Conversations(kept, prefix, ttl_s, most)
        self.sessions = Sessions(ttl_s, most, owner=owner, prefix=prefix, kept=conversations)

    async def answer(
        self,
        query: str,
        session_id: str | None,
        max_context_files: int,
        persona: str | None,
        on_progress: Callable[[ChatPartial], None] | None,
        answer_mode: schemas.AnswerMode | None = None,
        folder_id: str | None = None,
    ) -> schemas.ChatOutput:
        """The answer to ``query`` in the session ``session_id`` (a new one when None); ``folder_id``: its evidence
        only from that Smart Folder (an id or path, a criteria folder's id or name: ``search.request``'s)."""
        session = self.sessions.open(session_id, await self.sessions.kept_turns(session_id))
        session.busy += 1
        try:
            async with session.lock:
                mode = answer_mode or self.policy.answer_mode
                out = await self._answer(session, query, max_context_files, persona or "", mode, on_progress, folder_id)
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
        mode: schemas.AnswerMode,
        on_progress: Callable[[ChatPartial], None] | None,
        folder_id: str | None,
    ) -> schemas.ChatOutput:
        previous = subject(session.history)
        first = await quote(self.bus, self.policy, query, previous, max_files, folder_id)
        evidence, quoted, note, read = first.evidence, first.answer, first.note, first.reading
        shown = Shown(on_progress, self.policy.max_answer_tokens)
        if not quoted.grounded or mode == "extractive":
            return await self._done(session, query, quoted, "extractive", note, read, shown)
        if mode == "auto":
            shown.quotes(quoted.answer)
            if not answers.model_adds(query, self.policy.auto_model_shapes):
                return await self._done(session, query, quoted, "extractive", note, read, shown)
        try:
            generated, dropped, out = await self._generate(session, query, persona, evidence, shown)
        except JobError as failure:
            fallback = f"{failure.code.mcp}: {failure.message}"
            return await self._done(session, query, quoted, "fallback", note, read, shown, reason=fallback)
        if not generated.grounded:
            reason = (
                f"UNSUPPORTED: none of the model's {dropped} sentence(s) is backed by a passage and about the question"
                f" ({generated.aside} backed but about something else)"
            )
            return await self._done(session, query, quoted, "fallback", note, read, shown, dropped, reason, out)
        if mode == "auto" and not generated.carries:
            # Backed, but it states none of the best quote's figures or names: it talks around the question.
            note = note or "the model's answer added nothing to the quoted sentences"
            return await self._done(session, query, quoted, "extractive", note, read, shown, dropped, llm=out)
        used: schemas.AnswerModeUsed = "generative" if dropped == 0 else "generative+checked"
        if mode == "auto":
            generated = answers.after_quotes(quoted, generated)
        return await self._done(session, query, generated, used, note, read, shown, dropped, llm=out)

    async def _generate(
        self,
        session: Session,
        query: str,
        persona: str,
        evidence: Evidence,
        progress: Shown,
    ) -> tuple[Composed, int, ChatReply]:
        """The model's answer from the evidence only, checked sentence by sentence."""
        shown = evidence.sources(self.policy.evidence_sources)
        files = evidence.reply.passages
        request = ChatRequest(
            question=query,
            passages=[{"file_name": files[s["passage"]]["file_name"], "text": evidence.window(s)} for s in shown],
            history=session.history[-HISTORY_TURNS:],
            persona=persona,
            stream=progress.on_progress is not None,
        )

        def partial(msg: Message) -> None:
            if isinstance(msg, ChatPartial):  # its raw text is not shown: only what the check keeps is
                progress.working(msg.completion_tokens)

        try:
            reply = await self.bus.call("llm", request, ChatReply, timeout=self.policy.timeout_s, on_partial=partial)
        except JobError as exc:
            raise _generation_failed(exc) from None
        paths = [files[s["passage"]]["file_path"] for s in shown]
        found = answers.credited_files(answers.claims(reply.answer, reply.cited), paths)
        if not found:
            return Composed(""), 0, reply
        sources = [evidence.window(s) for s in shown]
        try:
            check = await self.bus.call(
                "indexer",
                CheckRequest(query, found, sources, reference=evidence.spans[0]["text"] if evidence.spans else ""),
                CheckReply,
            )
        except JobError as exc:
            raise _step_failed(exc, ErrorCode.CHECK_FAILED) from None
        composed, dropped = answers.checked(evidence, found, check.checks, len(shown))
        composed.carries = check.carries
        return composed, dropped, reply

    async def _done(
        self,
        session: Session,
        query: str,
        composed: Composed,
        used: schemas.AnswerModeUsed,
        note: str | None,
        read: likely.Reading,
        shown: Shown,
        dropped: int = 0,
        reason: str | None = None,
        llm: ChatReply | None = None,
    ) -> schemas.ChatOutput:
        shown.rest(composed.answer)
        session.history.append({"question": query, "answer": composed.answer})
        del session.history[:-HISTORY_TURNS]
        # On a thread: the file's write lock may be another process's (the console's Ask, a backup) for seconds,
        # and the front door's event loop serves every other client meanwhile.
        await asyncio.to_thread(self.sessions.keep, session)
        return schemas.ChatOutput(
            answer=composed.answer,
            citations=composed.citations,
            grounded=composed.grounded,
            session_id=session.id,
            tokens_used=schemas.TokensUsed(
                prompt=llm.prompt_tokens if llm else 0, completion=llm.completion_tokens if llm else 0
            ),
            model=llm.model if llm else read.model,
            note=note,
            answer_mode_used=used,
            dropped_sentences=dropped,
            fallback_reason=reason[:500] if reason else None,
            floor=read.floor,
        )
