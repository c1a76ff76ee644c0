"""Search snippets: the part of a chunk where the query's words are, as plain text."""

from __future__ import annotations

from foldermind.workers.indexer.bm25 import cjk_grams, query_terms, stems, word_spans
from foldermind.workers.indexer.languages import ENGLISH

WIDTH = 240
LEAD = 60
"""How much text before the first match a snippet keeps, so the match reads in context."""


def first_match(text: str, query: str, language: str = ENGLISH) -> int | None:
    """Offset of the first word of ``text`` that matches a query term (stemmed for ``language``, any case), or
    of the first of the query's CJK bigrams; ``None`` when neither occurs."""
    terms = set(query_terms(query, language))
    best: int | None = None
    if terms:
        for offset, word in word_spans(text):
            if terms.intersection(stems(word, language)):
                best = offset
                break
    for gram in dict.fromkeys(cjk_grams(query)):
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
