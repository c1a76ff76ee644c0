"""The model's reading beside the evidence floor: a question the floor only just answers is refused when its quotes do
not make it likely.

The indexer's floor (:mod:`foldermind.workers.indexer.evidence.floor`) judges words and cosines; it cannot tell a
page about the subject that lacks the relation asked ("Which company first sold metformin?") from a paraphrase of a
real answer. The llm worker's query likelihood (``llm.likely``) can: how much the quotes raise the question's mean
token log-probability. It costs seconds, so it is asked only where the floor is near refusing, when the evidence's
best cosine is under :data:`LIKELY_BAND`; above it the floor decides alone. When the model is absent, failed, not
loaded yet (the reading starts its load and does not wait for it), busy past ``[llm] likely_wait_s`` or on a backend
without log-probabilities, the floor decides alone and the answer's ``floor`` and ``note`` say so, in a person's
words (:func:`skipped`): the reading never fails an answer. The answer's ``model`` names the model that read it. The
band and the threshold were chosen on the no-answer and answer benches: docs/benchmarks/answer-relevance.md (tenth
pass).
"""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import EvidenceReply, LikelyReply, LikelyRequest
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import schemas
from foldermind.workers.answers.quotes import Composed, evidence_text
from foldermind.workers.framework import unanswered
from foldermind.workers.framework.asyncbus import Bus

LIKELY_BAND = 0.61
"""The model reads a question whose evidence's best cosine (a sentence's or a clause's) is under this."""
LIKELY_GAIN = 0.55
"""Refused when the quotes raise the question's mean token log-probability by less than this (nats a token)."""


@dataclass(frozen=True, slots=True)
class Reading:
    refused: bool
    floor: schemas.FloorUsed
    note: str = ""
    model: str = ""
    """The model that read the question (its name), when one did."""


EVIDENCE_ONLY = Reading(False, "evidence")


def in_band(support: dict[str, float], band: float = LIKELY_BAND) -> bool:
    """Whether the evidence is close enough to refusing that the model should read the question too: its best
    cosine, a sentence's or a clause's, is under ``band``."""
    return max(support.get("semantic", 0.0), support.get("clause", 0.0)) < band


async def read(
    bus: Bus, policy: LlmPolicy, question: str, context: str, reply: EvidenceReply, quoted: Composed
) -> Reading:
    """The model's reading of the answer the evidence floor gives (``quoted``, the extractive answer), when it
    gives one. In a conversation a question the quotes do not make likely alone is read again with the previous
    one (``context``) in front, as it was searched ("and the year before?" alone says nothing the quotes could
    predict), and refused only if that reading is low too."""
    if not quoted.grounded or not policy.likely_floor or not in_band(reply.support or {}):
        return EVIDENCE_ONLY
    text = evidence_text(quoted.answer)
    readings = [question.strip()] + ([f"{context.strip()} {question.strip()}"] if context.strip() else [])
    gain = 0.0
    for asked in readings:
        try:
            got = await bus.call("llm", LikelyRequest(asked, text), LikelyReply, timeout=policy.likely_wait_s)
        except JobError as exc:
            return Reading(False, "evidence, model skipped", skipped(exc, policy.likely_wait_s))
        gain = got.gain
        if gain >= LIKELY_GAIN:
            return Reading(False, "evidence+model", model=got.model)
    note = f"the quotes do not make the question likely (query likelihood {gain:.2f} < {LIKELY_GAIN})"
    return Reading(True, "evidence+model", note, got.model)


def skipped(exc: JobError, wait_s: float) -> str:
    """The note of an answer the model did not read: what happened, in a person's words
    (:func:`.unanswered.why`): a model slower than ``likely_wait_s`` is not an absent one, and the answer has
    already been given."""
    why = unanswered.why(exc, "the llm worker", "reading it", f"[llm] likely_wait_s, {wait_s:g} s")
    return f"the model did not read the question ({why}); the evidence floor decided alone"
