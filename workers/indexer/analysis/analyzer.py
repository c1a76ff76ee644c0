"""The deterministic analysis of a stored document, made after search is ready.

A written document is marked due (``analysis_due``, in the transaction that writes its chunks), and the
ingest thread analyses due documents only once nothing is left to parse or embed: analysis made while files are
parsed takes CPU from the embedder and delays both keyword and semantic search (docs/tuning.md#ingest-priority).
Made after the folder is indexed, keywords are also weighted by the whole
folder's word counts rather than by the part indexed before them. Meanwhile ``get_document_summary``
analyses a due document on the spot (:func:`analyze_stored`, ~2 ms) without storing it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import traceback

from foldermind.workers.indexer.analysis import MAX_CHARS, Analysis, analyze
from foldermind.workers.indexer.storage.analyses import DueDocument
from foldermind.workers.indexer.storage.extracted import rebuild
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store

log = logging.getLogger("foldermind.indexer.analyzer")

SLICE = 32
"""Due documents analysed per step of the ingest thread (~60 ms): a new file or reply waits at most that."""


def analyze_stored(store: Store, bm25: KeywordIndex, doc: DueDocument) -> Analysis:
    """The analysis of ``doc`` as stored now: its text rebuilt from its chunks (a section's chunks overlap:
    no word counts twice), up to :data:`.analysis.MAX_CHARS`."""
    chunks = store.chunks.from_ordinal(doc.id, 0)
    head = list(itertools.takewhile(lambda c: c.char_start < MAX_CHARS, chunks))
    chunks.close()
    doc_freq, total = bm25.term_stats(doc.language or "")
    return analyze(
        path=doc.path,
        fmt=doc.format,
        title=doc.title,
        texts=[rebuild(head, head[0].char_start, head[0].line_start)] if head else [],
        mtime=doc.mtime_ns / 1e9,
        doc_freq=doc_freq,
        total_docs=total,
    )


def analyze_due(store: Store, bm25: KeywordIndex, limit: int = SLICE) -> int:
    """Analyse and store up to ``limit`` due documents; returns how many were due. An analysis never fails
    indexing: on any error the document stays without one."""
    due = store.analyses.due(limit)
    done: list[tuple[DueDocument, Analysis | None]] = []
    for doc in due:
        try:
            fields = analyze_stored(store, bm25, doc)
            json.dumps(fields)  # refused here rather than inside the transaction that stores the slice
            done.append((doc, fields))
        except Exception as exc:
            done.append((doc, None))
            # Where it broke, never the message: an exception's text can quote the document.
            frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            where = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
            log.warning(
                "analysis of document %d failed (%s%s); it stays without one", doc.id, type(exc).__name__, where
            )
    if done:
        store.analyses.store(done)
    return len(due)
