"""What kind of failure an error code is (:class:`Fault`): the one thing a caller decides on, whatever the code."""

from __future__ import annotations

from enum import StrEnum


class Fault(StrEnum):
    """What kind of failure a code is: the one thing a caller decides on (wait, retry once, give up)."""

    meaning: str

    def __new__(cls, value: str, meaning: str) -> Fault:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    UNAVAILABLE = (
        "unavailable",
        "No worker can take the job now (none running, a model still loading, the kernel stopping): wait, "
        "then ask again.",
    )
    TIMEOUT = "timeout", "The job ran past its deadline."
    LOST = "lost", "The job died with its worker or inside its handler: asking once more may work."
    REJECTED = (
        "rejected",
        "The request cannot be served as asked (its fields, its target, its size, the index's state): the "
        "same request fails the same way.",
    )
    FAILED = (
        "failed",
        "The work itself failed: a file that cannot be parsed, a full disk, a secret that cannot be stored.",
    )
    CANCELLED = "cancelled", "The caller gave the job up."
