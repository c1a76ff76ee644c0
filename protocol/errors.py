"""Typed errors of the bus.

A failed job travels as an error reply whose ``error`` is ``{code, message, retryable}``. On the
client side it becomes one exception of a deliberately shallow hierarchy (the httpx idea): catch
``BusError`` for everything, or one subclass for the case you can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Error codes the bus itself produces. Workers may use their own codes (e.g. ``INVALID_QUERY``)."""

    WORKER_LOST = "worker_lost"
    """The worker serving the job died or stopped answering heartbeats; the job may be retried."""
    DEADLINE_EXCEEDED = "deadline_exceeded"
    """The job was not answered before its deadline; the worker that held it is replaced."""
    SERVICE_UNAVAILABLE = "service_unavailable"
    """No worker of that service is running or coming back (unknown, FAILED or stopped)."""
    BAD_REQUEST = "bad_request"
    """The message was well-framed but its body did not fit its kind."""
    UNKNOWN_KIND = "unknown_kind"
    """The receiver has no handler for that message kind."""
    INTERNAL = "internal"
    """The handler raised an unexpected exception (details are in that worker's log only)."""
    SHUTTING_DOWN = "shutting_down"
    """The kernel is stopping and takes no new jobs."""
    UNKNOWN_WORKER = "unknown_worker"
    """A control request named a worker or pool that is not in the process map."""
    MESSAGE_TOO_LARGE = "message_too_large"
    """The request was bigger than ``bus.max_message_mb``; it was not delivered."""
    CANCELLED = "cancelled"
    """The caller gave the job up (``job.cancel``): it was dropped from the queue, or its worker stopped early."""


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The typed error carried by an error reply."""

    code: str
    message: str
    retryable: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    @classmethod
    def from_wire(cls, raw: Any) -> ErrorInfo:
        if not isinstance(raw, dict):
            raise ProtocolError("error field is not a map")
        return cls(
            code=str(raw.get("code", ErrorCode.INTERNAL)),
            message=str(raw.get("message", "")),
            retryable=bool(raw.get("retryable", False)),
        )


class BusError(Exception):
    """Base of every error a bus caller can see."""


class ProtocolError(BusError):
    """A frame that is not a foldermind message: garbage, truncated, wrong version or oversized."""


class OversizedMessage(ProtocolError):
    """A well-formed message over the size limit; ``env`` lets the receiver answer its sender."""

    def __init__(self, message: str, env: object) -> None:
        super().__init__(message)
        self.env = env


class KernelUnavailable(BusError):
    """No kernel answers on this home's bus (not started, or it died)."""


class RemoteError(BusError):
    """A job ended with an error reply. ``info`` holds the typed code."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(f"{info.code}: {info.message}")
        self.info = info

    @property
    def code(self) -> str:
        return self.info.code

    @property
    def retryable(self) -> bool:
        return self.info.retryable


class WorkerLost(RemoteError):
    """The worker died holding the job (``worker_lost``)."""


class DeadlineExceeded(RemoteError):
    """The job missed its deadline (``deadline_exceeded``)."""


class ServiceUnavailable(RemoteError):
    """No worker can take the job (``service_unavailable``)."""


_BY_CODE: dict[str, type[RemoteError]] = {
    ErrorCode.WORKER_LOST: WorkerLost,
    ErrorCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    ErrorCode.SERVICE_UNAVAILABLE: ServiceUnavailable,
    ErrorCode.SHUTTING_DOWN: ServiceUnavailable,
}


def raise_for(info: ErrorInfo) -> None:
    """Raise the exception that matches an error reply's code."""
    raise _BY_CODE.get(info.code, RemoteError)(info)
