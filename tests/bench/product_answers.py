"""The answer a user gets, as the answer benches ask for it: the answers engine's own first step
(:func:`foldermind.workers.answers.engine.quote`: the evidence, its quotes, and the model's reading where the
evidence floor is near refusing) over a bench kernel's bus, so that a bench and the product cannot drift apart.

The model is loaded once before the first question (:meth:`Asker.warm_up`), and its reading is waited for
(:data:`WAIT_S` for ``[llm] likely_wait_s``): past 20 s the product lets the evidence floor decide alone, which on a
busy machine would make a bench's verdicts depend on its load. A bench measures what the reading says; its time is
``tests.bench.answer_judge cost``'s. A reading skipped all the same shows in the answer's ``floor``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from types import TracebackType

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import LikelyReply, LikelyRequest
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import quotes as composer
from foldermind.workers.answers.engine import Quoted, quote
from foldermind.workers.framework.asyncbus import Bus

MAX_FILES = 5
"""Files an answer draws on: ``chat_with_documents``'s default."""
WAIT_S = 600.0
"""How long a bench waits for the model's reading (the product's ``likely_wait_s`` is 20 s)."""


def warm_up(bus: Bus, wait_s: float = 600) -> None:
    """The model loaded: a reading does not wait for a cold model (it starts the load and is told the model is
    loading), so one is asked for until it is read."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            bus.call_sync("llm", LikelyRequest("warm up", "the model loads"), LikelyReply, timeout=wait_s)
            return
        except JobError as exc:
            if exc.code is not ErrorCode.MODEL_NOT_READY or not exc.retryable or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


class Asker:
    def __init__(self, endpoint: str, policy: LlmPolicy | None = None, max_files: int = MAX_FILES) -> None:
        self.policy = policy or LlmPolicy(likely_wait_s=WAIT_S)
        self.max_files = max_files
        self.bus = Bus(endpoint, "bench-answers", deadline_s=300)
        self.runner = asyncio.Runner()

    def warm_up(self, wait_s: float = 600) -> None:
        warm_up(self.bus, wait_s)

    def ask(self, question: str) -> Quoted:
        """The extractive answer ``chat_with_documents`` gives ``question`` opening a conversation."""
        return self.runner.run(quote(self.bus, self.policy, question, "", self.max_files))

    def floorless(self, got: Quoted) -> composer.Composed:
        """The quotes ``got`` would give were its evidence judged to answer (what the evidence floor takes away)."""
        reply = dataclasses.replace(got.evidence.reply, supported=True)
        return composer.extractive(composer.Evidence(reply, got.evidence.question), composer.Quoting.of(self.policy))

    def close(self) -> None:
        self.runner.close()
        self.bus.close()

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
