"""Why a worker gave a step of a person's call no answer, in that person's words (:func:`why`).

A search that falls back to keywords because the embedder did not answer, an answer the model did not read: the
call is answered without that step, and its note says why. Not the bus's message ("deadline_exceeded: embed.request
missed its deadline ...", "retry shortly"), which names codes and asks for a retry the person need not make: one
mapping of a bus fault (:class:`~foldermind.protocol.errors.Fault`) to words, shared by every worker that asks.
"""

from __future__ import annotations

from foldermind.protocol.errors import BusError, ErrorCode, Fault, JobError

WORDS: dict[Fault, str] = {
    Fault.TIMEOUT: "{who}, busy or starting, did not answer within {within}",
    Fault.UNAVAILABLE: "{who} is not running",
    Fault.LOST: "{who} was lost while {doing}",
}
"""A bus fault in words; any other fault is ``{who} failed: `` and the error's own message."""


def why(exc: BusError, who: str, doing: str, within: str) -> str:
    """Why ``who`` ("the embedder", "the llm worker") did not answer while ``doing`` ("encoding it"), asked to
    answer within ``within`` ("3 s", "[llm] likely_wait_s, 20 s"). A bus that failed outside a job (no kernel,
    a garbled frame) is a worker that is not running; a model still loading, or one that cannot load, says so."""
    if not isinstance(exc, JobError):
        return WORDS[Fault.UNAVAILABLE].format(who=who)
    if exc.code is ErrorCode.MODEL_NOT_READY:
        return "its model is still loading" if exc.retryable else exc.message[:200]
    words = WORDS.get(exc.code.fault)
    return words.format(who=who, doing=doing, within=within) if words else f"{who} failed: {exc.message[:200]}"
