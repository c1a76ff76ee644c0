"""foldermind's internal bus protocol: msgpack messages over ZeroMQ.

Every message kind is declared once, in :mod:`foldermind.protocol.messages`; the wire layout lives
in :mod:`foldermind.protocol.frames`, the only module that builds or parses ZeroMQ frames.

The names below are loaded on first use (PEP 562), not with the package: every ``foldermind`` command imports
:mod:`.runtime.home` under this package, and ``--version`` or ``config snippet`` need no message kind
(docs/benchmarks/console.md, "The Clients page and CLI start-up").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from foldermind.protocol.errors import (
        BusError,
        ErrorCode,
        ErrorInfo,
        JobError,
        KernelUnavailable,
        ProtocolError,
    )
    from foldermind.protocol.messages import PROTOCOL_VERSION, REGISTRY, Envelope, Message

_HOME = {
    **dict.fromkeys(["PROTOCOL_VERSION", "REGISTRY", "Envelope", "Message"], "messages"),
    **dict.fromkeys(
        [
            "BusError",
            "ErrorCode",
            "ErrorInfo",
            "JobError",
            "KernelUnavailable",
            "ProtocolError",
        ],
        "errors",
    ),
}

__all__ = [
    "PROTOCOL_VERSION",
    "REGISTRY",
    "BusError",
    "Envelope",
    "ErrorCode",
    "ErrorInfo",
    "JobError",
    "KernelUnavailable",
    "Message",
    "ProtocolError",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
