"""foldermind's internal bus protocol: msgpack messages over ZeroMQ.

Every message kind is declared once, in :mod:`foldermind.protocol.messages`; the wire layout lives
in :mod:`foldermind.protocol.frames`, the only module that builds or parses ZeroMQ frames.
"""

from foldermind.protocol.errors import (
    BusError,
    DeadlineExceeded,
    ErrorCode,
    ErrorInfo,
    JobError,
    KernelUnavailable,
    ProtocolError,
    ServiceUnavailable,
    WorkerLost,
)
from foldermind.protocol.messages import PROTOCOL_VERSION, REGISTRY, Envelope, Message

__all__ = [
    "PROTOCOL_VERSION",
    "REGISTRY",
    "BusError",
    "DeadlineExceeded",
    "Envelope",
    "ErrorCode",
    "ErrorInfo",
    "JobError",
    "KernelUnavailable",
    "Message",
    "ProtocolError",
    "ServiceUnavailable",
    "WorkerLost",
]
