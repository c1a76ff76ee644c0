"""One set of rules for reading a document's extracted text, whoever asks: the ``read_document`` tool and
the ``foldermind://document/{path}`` resource.

A read is a line range (1-based, ``end_line`` inclusive, omitted: to the end) of at most
:data:`MAX_READ_CHARS` characters. The path's shape is checked here (:func:`~.paths.check_path`); whether
it lies inside a Smart Folder, symlinks followed, is the indexer's call. Keeping the bounds in one place
means a client cannot get through a resource what the tool would refuse, or the other way round.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ReadDocumentReply, ReadDocumentRequest
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.frontdoor.paths import check_path

MAX_READ_CHARS = 100_000
MAX_LINE = 10_000_000

StartLine = Annotated[int, Field(ge=1, le=MAX_LINE, description="first line (1-based)")]
EndLine = Annotated[int | None, Field(ge=1, le=MAX_LINE, description="last line, inclusive; omit: to the end")]
MAX_AROUND = 10_000
ChunkId = Annotated[
    int | None,
    Field(
        ge=1,
        le=2**63 - 1,
        description="read around this chunk (a search result's chunk_id) instead of a line range",
    ),
]
Around = Annotated[int, Field(ge=0, le=MAX_AROUND, description="with chunk_id: how many chunks (or lines) around it")]
Unit = Annotated[Literal["chunks", "lines"], Field(description="what before and after count: chunks or lines")]


async def read_lines(bus: Bus, file_path: str, start_line: int = 1, end_line: int | None = None) -> ReadDocumentReply:
    """Lines ``start_line..end_line`` of an indexed file, bounds already validated against
    :data:`StartLine` / :data:`EndLine`; a typed :class:`JobError` otherwise."""
    if end_line is not None and end_line < start_line:
        raise JobError(ErrorCode.INVALID_ARGUMENT, "end_line is before start_line")
    check_path(file_path)
    request = ReadDocumentRequest(path=file_path, start_line=start_line, end_line=end_line, max_chars=MAX_READ_CHARS)
    return await bus.call("indexer", request, ReadDocumentReply)


async def read_around(
    bus: Bus, file_path: str | None, chunk_id: int, before: int = 0, after: int = 0, unit: str = "chunks"
) -> ReadDocumentReply:
    """The lines of chunk ``chunk_id`` of an indexed file (None: the chunk's own) and ``before`` / ``after``
    chunks or lines around it, bounds already validated against :data:`ChunkId` / :data:`Around` / :data:`Unit`."""
    if file_path is not None:
        check_path(file_path)
    request = ReadDocumentRequest(
        path=file_path or "", max_chars=MAX_READ_CHARS, chunk_id=chunk_id, before=before, after=after, unit=unit
    )
    return await bus.call("indexer", request, ReadDocumentReply)
