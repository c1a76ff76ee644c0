"""Which language a document is written in, and which stemmer its words get.

Each document is stemmed with the stemmer of its language, so German "Genehmigung" finds "Genehmigungen" (the
English stemmer leaves both as they are). Tantivy ships Snowball stemmers for the 18 languages of :data:`STEMMERS`;
a document in any other language (Polish, Chinese, ...) or in no clear language is stemmed as English, as every
document was before. Chinese, Japanese and Korean are found by their bigrams (:mod:`.bm25`) whatever the language.

The language is detected once per content, from the document's first :data:`SAMPLE_CHARS` characters, by CLD2
(``pycld2``: Google's Compact Language Detector 2, Apache-2.0, its tables compiled into the wheel; over 80
languages; nothing to load at run time): a fraction of a millisecond and a few MiB, where py3langid, the other
small, well-kept candidate, loads a model of ~80 MiB into the indexer, whose idle memory is budgeted. Indexing a
document costs that detection, once, and stemming its chunks in Python instead of inside Tantivy (:mod:`.bm25`): a
small share of indexing with embeddings, and searching got faster (the chunk text is no longer stored in Tantivy).
Measured: docs/tuning.md#keyword-index.

CLD2 says whether it is sure: a short or mixed text it is not sure of is :data:`UNDETERMINED` and stemmed as
English. CLD2 refuses text that is not valid UTF-8 (lone surrogates) and some control characters: those are dropped
from the sample first, and any refusal left is :data:`UNDETERMINED` too, never an indexing failure.
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
