"""What a failed parse does next: a pure function of the error, the attempt and where the job was sent.

A parse whose parser died or stalled is tried once more on a fresh one, then quarantined with a reason a
user can act on; one that never reached a parser (expired in the queue, a named parser that left, a parser
that wants the file's bytes) is sent again without counting an attempt; one no parser can take now stays
pending. Whether the file changed meanwhile is the caller's question, asked before a final outcome is kept
(:class:`~foldermind.workers.indexer.ingest.parses.ParseWindow`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from foldermind.protocol.errors import ErrorCode, ErrorInfo, Fault

LOST = (Fault.LOST, Fault.TIMEOUT)
"""Faults of a parse that died with its parser or ran past its deadline: tried once more, then quarantined."""


class Next(Enum):
    """What the ingest thread does with a failed parse."""

    TO_SOURCE = "send the bytes to the parser that asked for them"
    AGAIN = "send again to the pool; the attempt was not the file's fault"
    FRESH = "try once more on a fresh parser"
    WAIT = "stay pending; no parser can take it now"
    QUARANTINE = "mark the file failed with the reason"


@dataclass(frozen=True, slots=True)
class Decision:
    next: Next
    reason: str = ""
    """For :attr:`Next.QUARANTINE`: the failure a user reads."""

    @property
    def final(self) -> bool:
        """Whether the job ends here (a file changed meanwhile is looked at again instead)."""
        return self.next in (Next.WAIT, Next.QUARANTINE)


def decide(error: ErrorInfo, attempt: int, named: bool, deadline_s: float) -> Decision:
    """The next step for a parse that failed with ``error`` on its ``attempt``-th try; ``named``: it was sent
    to one parser by name (a remote one that asked for the bytes), not to the pool."""
    code = error.code
    if code == ErrorCode.FILE_CONTENT_NEEDED and not named:
        return Decision(Next.TO_SOURCE)  # a parser of an older version, which reads no path of ours
    if named and code == ErrorCode.SERVICE_UNAVAILABLE:
        return Decision(Next.AGAIN)  # that parser left before it had the bytes: nothing ran
    if code == ErrorCode.DEADLINE_EXCEEDED and error.retryable:
        return Decision(Next.AGAIN)  # expired in the queue, never reached a parser: not its fault
    if code.fault in LOST and attempt == 1:
        return Decision(Next.FRESH)
    if code == ErrorCode.DEADLINE_EXCEEDED:
        stalled = f"{deadline_s:.3g} s"
        reason = f"quarantined: its parse made no progress (no page read, no CPU used) for {stalled}, twice"
        return Decision(Next.QUARANTINE, reason)
    if code.fault in LOST:
        return Decision(Next.QUARANTINE, f"quarantined: the parser failed twice on this file ({error.message})")
    if error.retryable or code.fault is Fault.UNAVAILABLE:
        return Decision(Next.WAIT)  # all parsers FAILED, stopping, a tokenizer missing
    return Decision(Next.QUARANTINE, error.message)
