"""The typed errors of the bus: what an error reply carries (:class:`ErrorInfo`) and the exceptions a caller
catches (their hierarchy is drawn in :mod:`foldermind.protocol.errors`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
        """The exception for an error reply. A caller decides on its ``code`` (its ``code.fault``: wait, retry
        once or give up), not on a subclass."""
        return cls(info.code, info.message, info.retryable)
