"""Search snippets: the part of a chunk where the query's words are, as plain text, and where in it they are
(``marks``, for a search that asks ``with_marks``)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from foldermind.protocol.messages import SearchHit
from foldermind.workers.indexer.search.query import parse
from foldermind.workers.indexer.storage.keyword.languages import ENGLISH, STOP_WORDS, stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import (
    cjk_grams,
    query_terms,
    query_tokens,
    stem,
    stems,
    word_spans,
)

if TYPE_CHECKING:
    from foldermind.workers.indexer.storage.store import Store

WIDTH = 240
LEAD = 60
"""How much text before the first match a snippet keeps, so the match reads in context."""


@functools.lru_cache(maxsize=256)
def looked_for(query: str, language: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The query's terms in a language's documents and its distinct CJK bigrams: the same for every hit of one
    search, so they are worked out once."""
    return frozenset(query_terms(query, language)), tuple(dict.fromkeys(cjk_grams(query)))


def first_match(text: str, query: str, language: str = ENGLISH) -> int | None:
    """Offset of the first word of ``text`` that matches a query term (stemmed for ``language``, any case), or
    of the first of the query's CJK bigrams; ``None`` when neither occurs."""
    terms, grams = looked_for(query, language)
    best: int | None = None
    if terms:
        for offset, word in word_spans(text):
            if terms.intersection(stems(word, language)):
                best = offset
                break
    for gram in grams:
        found = text.find(gram, 0, best if best is not None else len(text))
        if found >= 0 and (best is None or found < best):
            best = found
    return best


def snippet(text: str, query: str, width: int = WIDTH, language: str = ENGLISH) -> str:
    """At most ``width`` characters of ``text`` around the first match (else its start), cut at
    spaces where one is near, stripped; a verbatim slice of the chunk, never markup."""
    at = first_match(text, query, language) if query else None
    if at is None or len(text) <= width:
        start = 0
    else:
        start = max(0, min(at - LEAD, len(text) - width))
        if start > 0:
            # Start on a word: the next whitespace after the cut, if it does not skip the match.
            space = next((i for i in range(start, min(at, start + 20)) if text[i].isspace()), None)
            if space is not None:
                start = space + 1
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", max(start, at or start) + 1, end)
        if space > start + width // 2:
            end = space
    return text[start:end].strip()


def marks(text: str, query: str, language: str = ENGLISH) -> list[list[int]]:
    """The ``[start, end)`` spans of the words of ``text`` that a query word matches as the index stems both for
    ``language`` ("indexing" marks "indexed"; the query's function words, "the", "of", mark nothing), and of the
    query's CJK bigrams, in order and not overlapping: what a reader sees marked in a snippet."""
    terms = {stem(token, language) for token in query_tokens(query) if token not in STOP_WORDS}
    spans: list[list[int]] = []
    if terms:
        spans = [[at, at + len(w)] for at, w in word_spans(text) if terms.intersection(stems(w, language))]
    for gram in dict.fromkeys(cjk_grams(query)):
        at = text.find(gram)
        while at >= 0:
            spans.append([at, at + len(gram)])
            at = text.find(gram, at + 1)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def mark(hits: list[SearchHit], query: str, store: Store) -> None:
    """Set each hit's ``marks`` (:func:`marks`) for the words ``query`` looks for (its operators parsed out, as the
    search does), in its document's language: one SQLite read of the hits' rows."""
    words = parse(query).text
    rows = store.chunks.hits([hit["chunk_id"] for hit in hits])
    for hit in hits:
        row = rows.get(hit["chunk_id"])
        hit["marks"] = marks(hit["snippet"], words, stemmed_as(row["language"]) if row is not None else ENGLISH)
