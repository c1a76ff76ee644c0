"""Query likelihood (``llm.likely``): how much a text makes a question likely, read from the model's own words.

The model is asked to "write the question this text answers" and, instead of writing, reads the user's question as
its answer, one token at a time: the mean log-probability of those tokens after the text, less the same after
"(no text)", is the text's gain (pointwise mutual information per token; UPR, Sachan et al. 2022). A page about the
subject that lacks the relation asked ("Which company first sold metformin?" over metformin's pharmacology) predicts
the question little better than no text; the page that answers it predicts its words. Every pass starts from a
reset context, as chat does, so the same question over the same text reads the same. The measure and its threshold
were chosen on the no-answer and answer benches: docs/benchmarks/answer-relevance.md (tenth pass).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from foldermind.workers.llm import prompt
from foldermind.workers.llm.backends import Backend, CTransformersBackend

WRITE = "Text: {text}\n\nWrite the question this text answers."
NO_TEXT = "(no text)"
MAX_TEXT_TOKENS = 1200
"""The text is cut to this many tokens (three quotes with their labels rarely reach it)."""


class Unsupported(Exception):
    """The backend cannot give the next token's log-probabilities."""


class Late(Exception):
    """The caller's deadline is near: stopped between two model steps."""


@dataclass(slots=True)
class Likelihood:
    gain: float
    with_text: float
    without_text: float
    question_tokens: int
    seconds: float


def cut(backend: Backend, text: str, most: int = MAX_TEXT_TOKENS) -> str:
    """``text`` cut to its longest head of at most ``most`` tokens."""
    return text if backend.count(text) <= most else prompt.head_within(backend, text, most)


def _mean_logprob(
    backend: CTransformersBackend, text: str, asked: list[int], threads: int, late: Callable[[], bool]
) -> float:
    """The mean log-probability of the ``asked`` tokens as the model's answer to :data:`WRITE` over ``text``."""
    import numpy as np

    llm = backend.llm
    llm._context.clear()
    llm.ctransformers_llm_reset()
    head = prompt.render(backend, [("user", WRITE.format(text=text))])
    llm.eval(head, batch_size=backend.batch_size, threads=threads)
    total = 0.0
    for token in asked:
        if late():
            raise Late
        size = llm.ctransformers_llm_logits_size()
        x = np.ctypeslib.as_array(llm.ctransformers_llm_logits_data(), shape=(size,)).astype(np.float64)
        top = float(x.max())
        total += float(x[token]) - top - math.log(float(np.exp(x - top).sum()))
        llm.eval([token], batch_size=backend.batch_size, threads=threads)
    return total / max(1, len(asked))


def likelihood(
    backend: Backend, question: str, text: str, threads: int, late: Callable[[], bool] = lambda: False
) -> Likelihood:
    """The text's gain in the question's mean token log-probability over no text (:class:`Late` past the caller's
    deadline, :class:`Unsupported` on a backend without per-token log-probabilities)."""
    if not isinstance(backend, CTransformersBackend):
        raise Unsupported(f"query likelihood needs the ctransformers backend, not {backend.NAME}")
    started = time.monotonic()
    asked = backend.tokenize(question.strip())
    own = _mean_logprob(backend, cut(backend, text.strip()), asked, threads, late)
    none = _mean_logprob(backend, NO_TEXT, asked, threads, late)
    return Likelihood(own - none, own, none, len(asked), time.monotonic() - started)
