"""The typed errors of the bus: what an error reply carries (:class:`ErrorInfo`) and the exceptions a caller
catches (their hierarchy is drawn in :mod:`foldermind.protocol.errors`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from foldermind.protocol.errors.codes import ErrorCode


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The typed error carried by an error reply."""

    code: ErrorCode
    message: str
    retryable: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"code": str(self.code), "message": self.message, "retryable": self.retryable}

    @classmethod
    def from_wire(cls, raw: Any) -> ErrorInfo:
        if not isinstance(raw, dict):
            raise ProtocolError("error field is not a map")
        return cls(
            code=ErrorCode.of(raw.get("code", ErrorCode.INTERNAL)),
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


class JobError(BusError):
    """A job that ended with a typed error.

    Raised by a handler (the worker framework answers with :attr:`info`), raised again by the client that
    receives the error reply (:meth:`of`), and raised by the MCP front door for a tool's own failures.
    ``retryable`` defaults to the code's catalogue entry.
    """

    def __init__(self, code: ErrorCode, message: str, retryable: bool | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = code.retryable if retryable is None else retryable

    @property
    def info(self) -> ErrorInfo:
        return ErrorInfo(self.code, self.message, self.retryable)

    @classmethod
    def of(cls, info: ErrorInfo) -> JobError:
        """The exception for an error reply: the subclass that matches its code, else a JobError."""
        kind: type[JobError] = next((sub for sub in _ACTIONABLE if info.code in sub.codes), JobError)
        return kind(info.code, info.message, info.retryable)

    codes: ClassVar[frozenset[ErrorCode]] = frozenset()
    """The codes a subclass is raised for."""


class WorkerLost(JobError):
    """The worker died holding the job (``worker_lost``)."""

    codes = frozenset({ErrorCode.WORKER_LOST})


class DeadlineExceeded(JobError):
    """The job missed its deadline (``deadline_exceeded``)."""

    codes = frozenset({ErrorCode.DEADLINE_EXCEEDED})


class ServiceUnavailable(JobError):
    """No worker can take the job (``service_unavailable``, ``shutting_down``)."""

    codes = frozenset({ErrorCode.SERVICE_UNAVAILABLE, ErrorCode.SHUTTING_DOWN})


_ACTIONABLE = (WorkerLost, DeadlineExceeded, ServiceUnavailable)
