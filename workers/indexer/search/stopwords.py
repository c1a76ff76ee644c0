"""English function words, for the two places a search reads a query's words by their kind.

- :func:`foldermind.workers.indexer.search.fusion.is_lookup`: a query with none of them is a list of words a user
  remembers, not a sentence;
- the keyword side's proximity bonus (:mod:`.bm25`): two words of a query that follow each other once these are
  left out form a pair that scores more where the text holds them as the query does, the gap included ("rate
  of decline" pairs "rate" and "decline", one word apart).

A small hand list rather than a library's: it only has to tell a sentence from a word list and skip the words
that separate a query's content words; a larger list (the indexer's summaries use one, :mod:`.sentences`) would
make more sentences and questions read as word lists (docs/tuning.md#keyword-index).
"""

from __future__ import annotations

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "which",
        "will",
        "with",
        "we",
        "our",
        "you",
        "your",
        "if",
        "when",
        "than",
        "also",
    ]
)
"""English function words (lower case)."""
