"""A long document indexed page by page while it is parsed: what was read is searchable before the end.

A parser reading a long PDF sends the chunks of the pages read so far in ``parse.partial`` replies that name
how far it has got (``pages_read`` of ``pages``, :mod:`foldermind.workers.parser.stream`). Each is written at
once (:meth:`PageWriter.write`): its chunks go into SQLite in one transaction and the journal, so Tantivy takes
them at its next commit and the embedder the next batch; the document is ``indexing``, its reason "n of N pages
indexed", and it counts as pending (its folder is not ready). Searches find its pages meanwhile.

When the parse ends, only the chunks not yet written are added (the pipeline's ``_store``): the document ends
as a parse in one go leaves it, the same chunks with the same ordinals, each once. The rules:

- A file that changed on disk since its bytes were read is not written page by page (its watcher event has
  queued it again; the reply, as before, writes it and queues it again): the newer version wins.
- A retry on a fresh parser (the first parser died) starts from page 1 again: its pages replace the first
  try's, which stay searchable until they do.
- A parse that fails after pages were written (no progress for its deadline twice, the parser lost twice, a
  page it cannot read) keeps them: the document is ``failed`` with the reason and "n of N pages indexed", and
  its pages stay searchable (:meth:`.Documents.failed_with_pages`). Any other failure (the file gone, grown too
  large, unreadable) drops them, as before.
- A document left ``indexing`` by a parse that no longer runs (the indexer or the kernel killed midway, a reply
  that could not be stored) is parsed again from the start, as a pending one is (:meth:`.Documents.pending`); its
  pages stay searchable until the new parse's replace them, and the vectors of replaced chunks go to new chunks
  of the same text (``reusable``), so nothing is embedded twice. SQLite stays the source of truth: Tantivy and
  usearch follow its journal and its vectors, as for any write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from foldermind.protocol.messages import ChunkInfo, ParsePartial
from foldermind.workers.indexer.storage import embeddings
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex


@dataclass(slots=True)
class PagesRead:
    """How far a parse in flight has been written page by page."""

    written: int = 0
    """Chunks of this attempt in SQLite: ordinals 0 to this one less."""
    pages_read: int = 0
    """The pages those chunks (of this attempt, or of the one before until this one writes) cover."""
    pages: int = 0
    """The document's page count."""

    def note(self) -> str:
        return f"{self.pages_read} of {self.pages} pages indexed"


class PageWriter:
    """Writes the pages read of parses in flight (on the ingest thread)."""

    def __init__(self, store: Store, vectors: VectorIndex) -> None:
        self.store, self.vectors = store, vectors

    def write(self, doc_id: int, read: PagesRead, chunks: Sequence[ChunkInfo], part: ParsePartial) -> None:
        """``chunks``: every chunk this attempt has received, ``part``'s last; those not yet written are."""
        assert part.pages_read is not None
        new = [dict(c) for c in chunks[read.written :]]
        done = PagesRead(len(chunks), part.pages_read, part.pages or 0)
        with self.vectors.arrival():
            with self.store.tx() as db:
                ids = self.store.documents.write_pages(
                    db, doc_id, read.written, new, part.title, done.note() + ", reading on"
                )
                self.vectors.arriving = tuple(ids)
            if reused := self.store.embeddings.get(ids):  # pages that an earlier parse had embedded
                self.vectors.add(*embeddings.stack(reused, self.vectors.ndim))
        read.written, read.pages_read, read.pages = done.written, done.pages_read, done.pages

    def may_write(self, doc_id: int, path: str, read: PagesRead) -> bool:
        """Whether the document at ``path`` is still the one parsed and has not been touched since this parse's
        last write (queued again, failed or skipped by a change seen meanwhile)."""
        state = self.store.documents.state(path)
        if state is None or state[0] != doc_id:
            return False
        return state[1] == "indexing" if read.written else state[1] in ("pending", "indexing")

    def failed(self, doc_id: int, path: str, read: PagesRead, reason: str) -> bool:
        """The parse failed with ``reason``: its pages read stay, if it wrote any that are still there (then True)."""
        state = self.store.documents.state(path)
        if not read.pages_read or state is None or state[0] != doc_id or state[1] != "indexing":
            return False
        self.store.documents.failed_with_pages(doc_id, f"{reason} ({read.note()}; they stay searchable)")
        return True
