"""The llm worker: local generation for grounded chat (``llm.chat``) and document analysis
(``llm.analyze``).

The model is loaded when it is needed and freed when it is not (:mod:`.residency`): by default in the first request
that needs it (``[llm] load = "on_use"``; the converted copy for ctransformers is made once, on the first load; a
reading, ``llm.likely``, starts the load and is told ``MODEL_NOT_READY`` at once), and it is unloaded after ``[llm]
idle_unload_s`` without a request, or when the indexer's ingest releases it (``release.request``, before it sends
chunks to the embedder: unless a chat used it within that time; :mod:`foldermind.workers.indexer.ingest.turns`); a
summary of the ingest's in hand then stops at its next step, ``MODEL_NOT_READY`` retryable, before the model goes.
With ``load = "at_start"`` it loads on a background thread after READY, and requests meanwhile fail with
``MODEL_NOT_READY`` (retryable). A model that cannot load fails requests with ``MODEL_NOT_READY`` and the reason,
and ``foldermind status`` shows the state on this worker's line. Chats and readings run on the serving thread, one
at a time: a chat streams ``llm.chat.partial`` replies and stops at its deadline, or at a stop of this worker
(``worker_lost``, retryable: a stop does not wait for a whole answer). A summary is a background job (the
kernel hands one beside them) on a thread of its own, and gives the model's context to a chat or a reading between
two of its steps (:mod:`.lanes`): a person never waits for more than a step of it. A summary kept waiting for the
context until near its deadline answers ``MODEL_NOT_READY`` (retryable: the indexer asks again later). A generation
stuck inside the native library is the broker's to end (a worker that overruns a job's deadline is replaced).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    AnalyzeReply,
    AnalyzeRequest,
    ChatPartial,
    ChatReply,
    ChatRequest,
    LikelyReply,
    LikelyRequest,
)
from foldermind.protocol.runtime.config import LlmPolicy, ingest_from_env, llm_from_env
from foldermind.protocol.runtime.home import model_cache_dir
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route, testing
from foldermind.workers.framework.memory import gc_paused
from foldermind.workers.llm import citations, likelihood, prompt
from foldermind.workers.llm.backends import (
    Backend,
    ContextOverflow,
    Generation,
    GenParams,
    load_backend,
)
from foldermind.workers.llm.lanes import Cancelled, Lanes
from foldermind.workers.llm.model_file import resolve
from foldermind.workers.llm.residency import NotReady, Residency

log = logging.getLogger("foldermind.llm")

ROLE = "Local generation for grounded chat and document analysis."

PARTIAL_EVERY_S = 0.1
"""Streamed text is batched this long: a partial per token would cost more than the token."""


class LlmWorker(Worker):
    background = frozenset({AnalyzeRequest.KIND})

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy: LlmPolicy = llm_from_env()
        # The converted copy for ctransformers is keyed by the source's digest: one per machine, like the
        # embedder's ONNX export (a new home's first answer does not pay a ~3 s conversion again).
        self.cache_dir = model_cache_dir(ingest_from_env().model_cache_dir)
        self.model_path = ""
        self.cores = os.cpu_count() or 1
        # Background summaries (and llama-cpp, whose count is fixed at load) get half the cores at most.
        self.threads = self.policy.threads or max(1, self.cores // 2)
        self.last_chat_threads = 0
        self.cancelled = 0  # chat answers stopped because their caller gave them up
        self.summarising = ""  # what a background summary is at, for the status note
        self.model = Residency(self._load, self.policy.idle_unload_s, self._noted)
        self.lanes = Lanes()
        self.status_note = ""
        self._noted()

    def setup(self) -> None:
        self.model.start(at_start=self.policy.load == "at_start")

    def teardown(self) -> None:
        self.model.stop()

    def _load(self) -> Backend:
        path = resolve(self.policy.model_path)
        self.model_path = str(path)
        # Converting and loading the model holds the GIL in long GC passes otherwise (see gc_paused).
        with gc_paused():
            return load_backend(
                self.policy.backend,
                path,
                self.cache_dir,
                self.policy.context_length,
                self.threads,
                self.policy.batch_size,
                self.policy.seed,
            )

    def _noted(self) -> None:
        """The status line for the model's state (the heartbeat carries it to ``foldermind status``)."""
        model, backend = self.model, self.model.backend
        if backend is not None:
            note = f"{backend.model.name} ({backend.NAME}, ctx {backend.context_length}): ready"
        elif model.state == "failed":
            note = f"model failed: {model.reason}"
        elif model.state == "loading":
            note = f"loading ({self.policy.backend})"
        else:
            freed = f" (freed after idle, {model.unloads}x)" if model.unloads else ""
            note = f"model unloaded: loads on first use{freed}"
        if self.summarising:
            note = f"{self.summarising}; model {note}"
        self.status_note = note[:300]

    def details(self) -> dict[str, Any]:
        backend = self.model.backend
        model = backend.model if backend else None
        return {
            "role": ROLE,
            "state": self.model.state,
            "reason": self.model.reason,
            "backend": self.policy.backend,
            "model": model.name if model else "",
            "model_path": self.model_path,
            "architecture": model.architecture if model else "",
            "context_length": backend.context_length if backend else 0,
            "load_s": round(self.model.load_s, 2),
            "load": self.policy.load,
            "loads": self.model.loads,
            "unloads": self.model.unloads,
            "idle_unload_s": self.policy.idle_unload_s,
            "idle_s": round(self.model.idle_s(), 1),
            "threads": self.last_chat_threads or self.threads,
            "threads_auto": not self.policy.threads,
            "cancelled": self.cancelled,
            "asides": self.lanes.asides,
        }

    def release(self) -> None:
        self.model.unload_if_idle(0.0)

    def release_window_s(self) -> float:
        return self.policy.idle_unload_s

    def handlers(self) -> dict[str, Handler]:
        return dict(
            [
                *super().handlers().items(),
                route(ChatRequest, self.on_chat),
                route(AnalyzeRequest, self.on_analyze),
                route(LikelyRequest, self.on_likely),
            ]
        )

    @contextlib.contextmanager
    def _using(self, wait: bool = True) -> Iterator[Backend]:
        """The model for this request (loaded now if it was unloaded; unless ``wait``, loaded behind while this
        request is told it is loading); ``MODEL_NOT_READY`` if it cannot be."""
        try:
            with self.model.use(wait) as backend:
                yield backend
        except NotReady as exc:
            if exc.state == "loading":
                raise JobError(
                    ErrorCode.MODEL_NOT_READY, "the local model is still loading; retry shortly", retryable=True
                ) from None
            raise JobError(ErrorCode.MODEL_NOT_READY, f"the local model could not be loaded: {exc.reason}") from None

    def chat_threads(self) -> int:
        """Threads for one chat answer: the configured count, else the cores nobody else is using now.

        ggml's threads spin while they wait for each other, so one more thread than there are free cores
        makes generation several times slower, while on an idle machine every core nearly doubles the speed
        (docs/tuning.md#llm-load). A 50 ms look at the machine's CPU use before each answer picks the side."""
        if self.policy.threads:
            return self.policy.threads
        busy = psutil.cpu_percent(interval=0.05) / 100 * self.cores
        return max(1, min(self.cores, int(self.cores - busy + 0.5)))

    def _params(self, max_tokens: int) -> GenParams:
        p = self.policy
        return GenParams(
            max_tokens=max_tokens,
            stop=("<|im_end|>", "<|endoftext|>", "</s>", "\nUser:", "\nQuestion:"),
            temperature=p.temperature,
            repetition_penalty=p.repetition_penalty,
            seed=p.seed,
        )

    def on_chat(self, req: Request[ChatRequest]) -> Result:
        with self._using() as backend, self.lanes.foreground():
            return self._chat(req, backend)

    def _chat(self, req: Request[ChatRequest], backend: Backend) -> Result:
        body = req.body
        max_tokens = body.max_tokens or self.policy.max_answer_tokens
        started = time.monotonic()
        passages = [prompt.Passage(p["file_name"], p["text"]) for p in body.passages]
        history = [(t["question"], citations.strip_markers(t["answer"])) for t in body.history]
        try:
            built = prompt.build_chat(
                backend, body.question, passages, history, body.persona, max_tokens, self.policy.max_prompt_tokens
            )
        except prompt.PromptTooLong as exc:
            raise JobError(ErrorCode.PROMPT_TOO_LONG, str(exc)) from None
        prompt_s = time.monotonic() - started
        out = Generation()
        deadline = req.env.deadline
        pieces: list[str] = []
        pending: list[str] = []
        last_sent = time.monotonic()

        def flush() -> None:
            nonlocal last_sent
            if pending and body.stream:
                req.partial(ChatPartial("".join(pending), out.completion_tokens, max_tokens))
            pending.clear()
            last_sent = time.monotonic()

        # Stop a little before the caller's deadline, so it hears LLM_TIMEOUT from us, not a lost worker; and at once
        # when the caller gives the answer up (its MCP client went away) or this worker is asked to stop.
        def late() -> bool:
            return req.cancelled() or req.stopping() or (bool(deadline) and time.time() > deadline - 0.5)

        try:
            params = self._params(max_tokens)
            params.threads = self.last_chat_threads = self.chat_threads()
            scripted: str | None = None
            if testing():  # test switches; chat only, so summaries never trip them
                from foldermind.workers.framework import faults

                params.fault_hang, params.fault_delay_s, scripted = (
                    faults.llm_hang(),
                    faults.llm_slow(),
                    faults.llm_say(),
                )
            stream = backend.stream(built.tokens, params, out, cancelled=late) if scripted is None else [scripted]
            if scripted is not None:
                out.completion_tokens, out.finish = backend.count(scripted), "stop"
            for delta in stream:
                pieces.append(delta)
                pending.append(delta)
                if time.monotonic() - last_sent >= PARTIAL_EVERY_S:
                    flush()
        except ContextOverflow as exc:
            raise JobError(ErrorCode.PROMPT_TOO_LONG, str(exc)) from None
        flush()
        if out.finish == "cancelled" and req.cancelled():
            self.cancelled += 1
            log.info("chat answer cancelled by its caller after %d tokens", out.completion_tokens)
            raise JobError(ErrorCode.CANCELLED, f"cancelled by the caller after {out.completion_tokens} tokens")
        if out.finish == "cancelled" and req.stopping():
            log.info("chat answer stopped after %d tokens: the worker is stopping", out.completion_tokens)
            raise _stopping(f"the chat answer was stopped after {out.completion_tokens} tokens")
        if out.finish == "cancelled":
            raise JobError(
                ErrorCode.LLM_TIMEOUT, f"no answer within the deadline ({out.completion_tokens} tokens generated)"
            )
        raw = citations.strip_controls("".join(pieces), backend.model.control_tokens)
        attributed = 0
        if self.policy.attribute_uncited:
            raw, attributed = citations.attribute(raw, [p.text for p in passages[: built.passages_used]])
        answer, cited = citations.resolve(raw, built.passages_used)
        model = backend.model
        return ChatReply(
            answer=answer,
            cited=cited,
            grounded=bool(cited),
            prompt_tokens=len(built.tokens),
            completion_tokens=out.completion_tokens,
            passages_used=built.passages_used,
            finish=out.finish,
            attributed=attributed,
            model=model.name,
            backend=backend.NAME,
            timings={
                "prompt_build_s": round(prompt_s, 4),
                "first_token_s": round(out.first_token_s, 4),
                "generate_s": round(out.seconds, 4),
            },
        )

    def on_likely(self, req: Request[LikelyRequest]) -> Result:
        deadline = req.env.deadline

        def late() -> bool:  # as a chat: stop before the caller's deadline, so it hears LLM_TIMEOUT from us
            return req.cancelled() or req.stopping() or (bool(deadline) and time.time() > deadline - 0.5)

        # An answer can do without the reading: it does not wait for a cold model's load (seconds, more on a busy
        # machine or with the first conversion), which goes on behind for the next question.
        with self._using(wait=False) as backend, self.lanes.foreground():
            try:
                got = likelihood.likelihood(backend, req.body.question, req.body.text, self.chat_threads(), late)
            except likelihood.Late:
                if req.stopping():
                    raise _stopping("the reading was stopped") from None
                raise JobError(ErrorCode.LLM_TIMEOUT, "no query likelihood within the deadline") from None
            except likelihood.Unsupported as exc:
                raise JobError(ErrorCode.GENERATION_FAILED, str(exc)) from None
            return LikelyReply(
                gain=got.gain,
                with_text=got.with_text,
                without_text=got.without_text,
                question_tokens=got.question_tokens,
                seconds=round(got.seconds, 4),
                model=backend.model.name,
            )

    def on_analyze(self, req: Request[AnalyzeRequest]) -> Result:
        body = req.body
        # What the model is busy with, for `status` (a summary can hold a core for many seconds).
        which = f"document {body.number} of {body.of}" if 0 < body.number <= body.of else "a document"
        self.summarising = f"summarising {which} in the background (chats go first)"
        self._noted()
        deadline = req.env.deadline

        def stopped() -> bool:  # its caller went, or released the model (the summary is asked for again)
            return req.cancelled() or self.withdrawn(req.env.id)

        def gave_up() -> bool:  # while it waits for chats and readings: stopped, or its deadline is near
            return stopped() or (bool(deadline) and time.time() > deadline - 1.0)

        try:
            self._withdrawn(req)
            with self._using() as backend, self.lanes.background(gave_up):
                self._withdrawn(req)  # released while the model loaded: freed before a token is made
                return self._analyze(req, backend, gave_up, stopped)
        except Cancelled:
            if req.cancelled():
                raise JobError(ErrorCode.CANCELLED, "cancelled while waiting for the model") from None
            self._withdrawn(req)
            raise JobError(
                ErrorCode.MODEL_NOT_READY, "the model was busy with questions until this summary's deadline", True
            ) from None
        finally:
            self.summarising = ""
            self._noted()

    def _withdrawn(self, req: Request[AnalyzeRequest]) -> None:
        """Its caller released the model (the indexer hands the memory to the embedder): stop, retryable."""
        if self.withdrawn(req.env.id) and not req.cancelled():
            raise JobError(ErrorCode.MODEL_NOT_READY, "the model was released by its caller; ask again", True)

    def _analyze(
        self, req: Request[AnalyzeRequest], backend: Backend, gave_up: Callable[[], bool], stopped: Callable[[], bool]
    ) -> Result:
        tokens = prompt.build_analysis(backend, req.body.file_name, req.body.text, self.policy.analysis_input_tokens)
        out = Generation()
        params = self._params(self.policy.analysis_max_tokens)
        params.step_aside = lambda: self.lanes.step_aside(gave_up)
        try:
            text = "".join(backend.stream(tokens, params, out, stopped))
        except ContextOverflow as exc:
            raise JobError(ErrorCode.PROMPT_TOO_LONG, str(exc)) from None
        if out.finish == "cancelled":
            self._withdrawn(req)
            raise JobError(ErrorCode.CANCELLED, f"cancelled by the caller after {out.completion_tokens} tokens")
        summary, entities = prompt.parse_analysis(text)
        return AnalyzeReply(
            summary=summary,
            entities=entities,
            model=backend.model.name,
            prompt_tokens=len(tokens),
            completion_tokens=out.completion_tokens,
        )


def _stopping(what: str) -> JobError:
    """A job this worker ended because it was asked to stop (a restart, ``foldermind stop``): its caller may ask
    again, and the worker that serves then answers."""
    return JobError(ErrorCode.WORKER_LOST, f"the llm worker is stopping: {what}", retryable=True)


WORKER = LlmWorker
