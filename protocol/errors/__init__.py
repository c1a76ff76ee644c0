"""The error catalogue and the typed errors of the bus.

Every error code is declared once, as a member of :class:`ErrorCode` (:mod:`.codes`, the catalogue); its
:class:`Fault` (:mod:`.fault`) is what a caller decides on: wait, retry once or give up. A failed job travels as
an error reply whose ``error`` is ``{code, message, retryable}`` (:class:`ErrorInfo`). One exception carries it
all the way (:mod:`.exceptions`, after httpx's shallow hierarchy): a handler raises :class:`JobError`, the worker
framework sends its ``info``, the client raises it again from the reply, and the MCP front door raises the same
class for its own failures and shows ``code.mcp`` to the client.

The exceptions (callers catch classes):

* BusError: every error a bus caller can see
  + ProtocolError: a frame that is not a foldermind message (garbage, truncated, wrong version)
    - OversizedMessage: a well-formed message over the size limit
  + KernelUnavailable: no kernel answers on this home's bus
  + JobError: a job that ended with a typed error (``code``, ``message``, ``retryable``); a caller decides on
    ``code.fault``, so the codes have no subclasses
"""

from foldermind.protocol.errors.codes import ErrorCode
from foldermind.protocol.errors.exceptions import (
    BusError,
    ErrorInfo,
    JobError,
    KernelUnavailable,
    OversizedMessage,
    ProtocolError,
)
from foldermind.protocol.errors.fault import Fault

__all__ = [
    "BusError",
    "ErrorCode",
    "ErrorInfo",
    "Fault",
    "JobError",
    "KernelUnavailable",
    "OversizedMessage",
    "ProtocolError",
]
