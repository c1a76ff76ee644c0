"""How a refusal reaches an MCP client as a typed error, whatever refused it.

A tool's failure is its result (``isError`` with ``{"code", "message"}``: see :mod:`.tools`); a prompt's or a
resource's is a JSON-RPC error, since those methods have no error result. Its message starts with the same
code a tool error carries (``INVALID_PATH: ...``), so a client can tell a refusal from a fault either way,
and the JSON-RPC code says which it is: invalid params for a request that cannot be served as asked, an
internal error for the rest (a worker unavailable, a crash). Messages name the argument and the rule
broken, never the rejected value: that is the caller's data.
"""

from __future__ import annotations

from typing import TypeVar

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import ValidationError

from foldermind.protocol.errors import ErrorCode, Fault, JobError

E = TypeVar("E", bound=BaseException)


def invalid_arguments(invalid: ValidationError) -> JobError:
    """Arguments that broke their bounds, as the code of the first argument that has one."""
    fields = sorted({str(err["loc"][0]) for err in invalid.errors() if err["loc"]})
    judged = [code for code in map(ErrorCode.for_argument, fields) if code is not None]
    # Field names and the rule broken only: the rejected values are the caller's data.
    detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in invalid.errors()[:5])
    return JobError(judged[0] if judged else ErrorCode.INVALID_ARGUMENT, f"invalid arguments: {detail}")


def cause(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes (``exc`` included)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None


def rpc_error(error: JobError, refused: bool | None = None) -> MCPError:
    """``error`` as a JSON-RPC error: ``CODE: message``, invalid params when the request itself is at fault
    (``refused``; by default, when the code's fault is ``rejected``), else an internal error."""
    if refused is None:
        refused = error.code.fault == Fault.REJECTED
    return MCPError(INVALID_PARAMS if refused else INTERNAL_ERROR, f"{error.code.mcp}: {error.message}")
