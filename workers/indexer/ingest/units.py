"""What a chunk is embedded as: one vector per sentence, each read with its document's title.

A chunk's dense score is its best unit's cosine, where a unit is ``"<title>. <sentence>"``: the chunk's sentences
as :mod:`.sentences` splits them, a sentence of fewer than :data:`SHORT_WORDS` words (a heading, a list item's
label) joined to the next one, and the document's title in front of each; the title line itself is a unit of its
own. One vector for a whole chunk of up to 256 tokens averages what it says; a query that matches one sentence of
it matches that sentence's vector far better, and the title carries the topic a sentence leaves out. The cost is
~5.5-7.3 vectors a chunk: usearch's memory for them (half floats), its inserts while indexing, and a search over
more vectors (exact up to ``[search] exact_search_vectors``, a wider beam above). Measured:
docs/tuning.md#sentence-vectors.

The title is the parser's, else the document's first line (at most :data:`TITLE_CHARS` characters): a plain
text file's title is its first line by custom (a corpus of abstracts is "title, blank line, abstract"). A chunk
whose text is unchanged when its file is parsed again keeps its vectors (``Documents.write``) even if the
title changed meanwhile: a retitled file is embedded again only where its text changed.

SQLite keeps a chunk's units as one blob (:func:`foldermind.workers.indexer.storage.embeddings.pack`: its unit
vectors one after another), so "a chunk has a vector" stays one column, and usearch holds each unit under its
chunk's id (a multi-key index, :mod:`foldermind.workers.indexer.storage.vectors`). :data:`VERSION` names this
scheme in the index (``embed_units``): an index embedded otherwise (one vector per chunk, before it) is embedded
again.
"""

from __future__ import annotations

from foldermind.workers.indexer.evidence.sentences import split

VERSION = "title-sentence-1"
"""Recorded as the index's ``embed_units``; a change of what a unit is must change it."""
TITLE_CHARS = 200
"""A first line longer than this is a paragraph, not a title: no title then."""
SHORT_WORDS = 4
"""A sentence of fewer words is joined to the next (a heading, a list item's label, a figure's number)."""


def title_of(title: str | None, first_text: str) -> str:
    """The title a document's units carry: the parser's, else the first line of its first chunk when short."""
    if title and title.strip():
        return " ".join(title.split())
    for line in first_text.splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= TITLE_CHARS else ""
    return ""


def units(text: str, title: str) -> list[str]:
    """The texts a chunk is embedded as, at least one (a chunk without a sentence is embedded whole)."""
    head = title.rstrip(". ")
    sentences: list[str] = []
    pending = ""
    for s in split(text):
        if head and s.text.rstrip(". ") == head:  # the title line: a unit of its own, the bare title
            sentences.append(head)
            continue
        pending = f"{pending} {s.text}" if pending else s.text
        if len(pending.split()) >= SHORT_WORDS:
            sentences.append(pending)
            pending = ""
    if pending:
        if sentences:
            sentences[-1] = f"{sentences[-1]} {pending}"
        else:
            sentences.append(pending)
    if not sentences:  # no sentence
        return [_with(head, " ".join(text.split()))]
    return [_with(head, s) for s in sentences]


def _with(head: str, sentence: str) -> str:
    return f"{head}. {sentence}" if head and sentence != head else sentence
