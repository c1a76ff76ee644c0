"""Which language a document is written in, and which stemmer its words get.

Each document is stemmed with the stemmer of its language, so German "Genehmigung" finds "Genehmigungen" (the
English stemmer leaves both as they are). Tantivy ships Snowball stemmers for the 18 languages of :data:`STEMMERS`;
a document in any other language (Polish, Chinese, ...) or in no clear language is stemmed as English, as every
document was before. Chinese, Japanese and Korean are found by their bigrams (:mod:`.terms`) whatever the language.

The language is detected once per content, from the document's first :data:`SAMPLE_CHARS` characters, by CLD2
(``pycld2``: Google's Compact Language Detector 2, Apache-2.0, its tables compiled into the wheel; over 80
languages; nothing to load at run time): a fraction of a millisecond and a few MiB, where py3langid, the other
small, well-kept candidate, loads a model of ~80 MiB into the indexer, whose idle memory is budgeted. Indexing a
document costs that detection, once, and stemming its chunks in Python instead of inside Tantivy (:mod:`.terms`): a
small share of indexing with embeddings, and searching got faster (the chunk text is no longer stored in Tantivy).
Measured: docs/tuning.md#keyword-index.

CLD2 says whether it is sure: a short or mixed text it is not sure of is :data:`UNDETERMINED` and stemmed as
English. CLD2 refuses text that is not valid UTF-8 (lone surrogates) and some control characters: those are dropped
from the sample first, and any refusal left is :data:`UNDETERMINED` too, never an indexing failure.

:data:`STOP_WORDS` are English's function words, which a search reads a query's words by (:mod:`.bm25`'s word
pairs, the lookup rule of :mod:`foldermind.workers.indexer.search.fusion`, snippets).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pycld2

STEMMERS = {
    "ar": "arabic",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}
"""ISO 639-1 code -> the name of Tantivy's Snowball stemmer for it (every one Tantivy ships)."""
ENGLISH = "en"
UNDETERMINED = "und"
"""ISO 639-2's code for "undetermined": too little text, or no language CLD2 is sure of."""
ALIASES = {"nn": "no"}
"""Detected languages stemmed as a close one: Nynorsk with the (Bokmål) Norwegian stemmer."""
SAMPLE_CHARS = 4000
"""Detection reads the document's start, this many characters: 0.25 ms with CLD2, and past ~2,000 characters
of prose it is sure already."""

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
"""English function words (lower case), for the places a search reads a query's words by their kind:

- :func:`foldermind.workers.indexer.search.fusion.is_lookup`: a query with none of them is a list of words a user
  remembers, not a sentence;
- the keyword side's proximity bonus (:mod:`.bm25`): two words of a query that follow each other once these are
  left out form a pair that scores more where the text holds them as the query does, the gap included ("rate
  of decline" pairs "rate" and "decline", one word apart).

A small hand list rather than a library's: it only has to tell a sentence from a word list and skip the words
that separate a query's content words; a larger list (answers' evidence uses one,
:data:`foldermind.workers.indexer.evidence.sentences.STOPWORDS`) would make more sentences and questions read as
word lists (docs/tuning.md#keyword-index)."""

_REFUSED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters (CLD2 rejects some as invalid input) and lone surrogates (not encodable as UTF-8)."""


def detect(texts: Iterable[str]) -> str:
    """The language of a document whose text is ``texts`` (read in order, up to :data:`SAMPLE_CHARS`):
    CLD2's ISO 639-1 code (``zh-Hant`` for traditional Chinese), or :data:`UNDETERMINED`."""
    parts: list[str] = []
    room = SAMPLE_CHARS
    for text in texts:
        if room <= 0:
            break
        parts.append(text[:room])
        room -= len(parts[-1]) + 1
    sample = _REFUSED.sub(" ", "\n".join(parts))
    try:
        reliable, _, found = pycld2.detect(sample)
    except (pycld2.error, ValueError):  # whatever CLD2 still refuses: no language, never a failure
        return UNDETERMINED
    code = str(found[0][1])
    return code if reliable and code not in ("un", "xxx") else UNDETERMINED


def stemmed_as(language: str | None) -> str:
    """The language whose stemmer a document detected as ``language`` gets: one of :data:`STEMMERS`."""
    code = ALIASES.get(language or "", language or "")
    return code if code in STEMMERS else ENGLISH
