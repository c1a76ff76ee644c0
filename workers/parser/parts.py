"""A parse's chunks cut into replies that each fit the bus.

A reply carries its chunks' texts, so a document whose extracted text is near or past the bus's message limit
(``[bus] max_message_mb``) cannot go in one: a 50 MB one-line text file did not. Its chunks go instead in parts
of at most :data:`REPLY_HEADROOM` of the limit, in document order: ``parse.partial`` replies, then the
``parse.reply`` with the last part. A chunk is never cut here: the chunker bounds each chunk's tokens and
characters (:data:`.chunker.MAX_CHUNK_CHARS`), so one always fits a part.
"""

from __future__ import annotations

from collections.abc import Sequence

from foldermind.protocol.messages import ChunkInfo

REPLY_HEADROOM = 0.9
"""A reply may fill at most this share of the bus's message limit."""
PER_CHUNK = 200
"""Bytes a chunk costs on the wire beside its text and heading (its field names and numbers), rounded up."""


def chunk_bytes(chunk: ChunkInfo) -> int:
    """A chunk's size on the wire, from above."""
    return len(chunk["text"].encode()) + len((chunk["heading"] or "").encode()) + PER_CHUNK


def split(chunks: Sequence[ChunkInfo], max_message_bytes: int) -> list[list[ChunkInfo]]:
    """``chunks`` in order, in parts of at most ``REPLY_HEADROOM * max_message_bytes`` bytes each (a chunk
    bigger than that alone is a part of its own); one empty part when there are none."""
    limit = int(max_message_bytes * REPLY_HEADROOM)
    parts: list[list[ChunkInfo]] = [[]]
    size = 0
    for chunk in chunks:
        n = chunk_bytes(chunk)
        if parts[-1] and size + n > limit:
            parts.append([])
            size = 0
        parts[-1].append(chunk)
        size += n
    return parts
