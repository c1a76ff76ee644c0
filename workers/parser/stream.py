"""A long document's pages chunked and sent as they are read, so the indexer can make them searchable early.

A format that reads page by page says which pages are read for good (:func:`.formats.progress.pages_read`).
:class:`PageStream` chunks those pages and sends their chunks in ``parse.partial`` replies that name how far the
parse has got (``pages_read`` of ``pages``). The first goes once the parse has run :data:`FIRST_AFTER_S` (a
document parsed quicker than that goes in one reply, as before); the next once the pages read have doubled
since, or grown by a quarter and :data:`AT_MOST_S` has passed. The indexer rewrites a document's keyword entries
whole at each, so growing parts bound its work for a long parse: twice that of one write when they double, five
times at worst. When the parse ends, :meth:`PageStream.finish` chunks only the pages not yet sent.

The chunks are those of a parse in one go: a chunk never crosses a page (:mod:`.chunker`), so the pages are
chunked apart and their chunks shifted to where their pages start (ordinal, character and line).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from foldermind.protocol.messages import ChunkInfo, ParsePartial
from foldermind.workers.parser import parts
from foldermind.workers.parser.chunker import chunk
from foldermind.workers.parser.formats import Segment
from foldermind.workers.parser.formats.progress import Segments

if TYPE_CHECKING:
    from tokenizers import Tokenizer

FIRST_AFTER_S = 1.0
"""A parse sends its first pages once it has run this long (a quicker one sends none ahead of its reply)."""
AT_MOST_S = 10.0
"""Pages read are sent this long after the last, though they have not doubled, if they grew by a quarter."""


class PageStream:
    """The pages of one parse sent ahead of its reply; ``send`` posts one ``parse.partial``."""

    def __init__(
        self,
        send: Callable[[ParsePartial], None],
        tokenizer: Tokenizer,
        max_tokens: int,
        overlap_tokens: int,
        max_message_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.send, self.tokenizer, self.clock = send, tokenizer, clock
        self.max_tokens, self.overlap_tokens, self.max_message_bytes = max_tokens, overlap_tokens, max_message_bytes
        self.chunks: list[ChunkInfo] = []
        """Every chunk sent so far, in order."""
        self.segments = 0
        """How many of the document's segments they cover."""
        self.pages_sent = 0
        self._char = self._line = 0  # where the next segment starts in the extracted text (line: 0-based)
        self._started = self._sent_at = clock()

    def offer(self, segments: Segments, read: int, total: int, title: str | None) -> None:
        """Pages 1..``read`` of ``total`` are read for good: sent when it is time (see the module), with the
        document's ``title`` (its chunks are embedded with it)."""
        now = self.clock()
        if now - self._started < FIRST_AFTER_S or read <= self.pages_sent:
            return
        waited = now - self._sent_at >= AT_MOST_S
        if self.pages_sent and read < 2 * self.pages_sent and not (waited and 4 * read >= 5 * self.pages_sent):
            return
        new = self._chunked(segments()[self.segments :])
        self.pages_sent, self._sent_at = read, now
        for part in parts.split(new, self.max_message_bytes):
            self.send(ParsePartial(part, pages_read=read, pages=total, title=title))

    def finish(self, segments: Sequence[Segment]) -> list[ChunkInfo]:
        """The chunks not sent yet, ``segments`` being all of the document's (those sent come first)."""
        return self._chunked(segments[self.segments :])

    def _chunked(self, segments: Sequence[Segment]) -> list[ChunkInfo]:
        """The chunks of ``segments``, the next of the document's, placed where they are in it (and kept)."""
        made = chunk(segments, self.tokenizer, self.max_tokens, self.overlap_tokens) if segments else []
        for info in made:
            info["ordinal"] += len(self.chunks)
            info["char_start"] += self._char
            info["char_end"] += self._char
            info["line_start"] += self._line
            info["line_end"] += self._line
        self.chunks += made
        self.segments += len(segments)
        self._char += sum(len(s.text) + 1 for s in segments)
        self._line += sum(s.text.count("\n") + 1 for s in segments)
        return made
