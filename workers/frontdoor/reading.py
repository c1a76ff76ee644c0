"""One set of rules for reading a document's extracted text, whoever asks: the ``read_document`` tool and
the ``foldermind://document/{path}`` resource.

A read is a line range (1-based, ``end_line`` inclusive, omitted: to the end) of at most
:data:`MAX_READ_CHARS` characters. The path's shape is checked here (:func:`~.paths.check_path`); whether
it lies inside a Smart Folder, symlinks followed, is the indexer's call. Keeping the bounds in one place
means a client cannot get through a resource what the tool would refuse, or the other way round.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ReadDocumentReply, ReadDocumentRequest
from foldermind.workers.frontdoor.bus import Bus
from foldermind.workers.frontdoor.paths import check_path

MAX_READ_CHARS = 100_000
MAX_LINE = 10_000_000

StartLine = Annotated[int, Field(ge=1, le=MAX_LINE, description="first line (1-based)")]
EndLine = Annotated[int | None, Field(ge=1, le=MAX_LINE, description="last line, inclusive; omit: to the end")]


async def read_lines(bus: Bus, file_path: str, start_line: int = 1, end_line: int | None = None) -> ReadDocumentReply:
    """Lines ``start_line..end_line`` of an indexed file, bounds already validated against
    :data:`StartLine` / :data:`EndLine`; a typed :class:`JobError` otherwise."""
    if end_line is not None and end_line < start_line:
        raise JobError(ErrorCode.INVALID_ARGUMENT, "end_line is before start_line")
    check_path(file_path)
    request = ReadDocumentRequest(path=file_path, start_line=start_line, end_line=end_line, max_chars=MAX_READ_CHARS)
    return await bus.call("indexer", request, ReadDocumentReply)
