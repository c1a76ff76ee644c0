"""Text preparation shared by every field: the capped, cleaned text, words, addresses left out."""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_CHARS = 200_000
"""Work is capped to the document's first this many characters: its head says what it is, and a
50 MB log must not hold up indexing."""
SUMMARY_CHARS = 300
MAX_KEYWORDS = 8
MAX_ENTITIES = 8
SLUG_CHARS = 60
IDF_CANDIDATES = 256
"""Only the most frequent stems are weighted by IDF (one index lookup each): a word seen once in a long
document does not become a keyword by being rare elsewhere."""
HEAD, TAIL = 20_000, 5_000
"""Type cues, and a date when the head has none, are looked for at a document's start (headers, openings)
and end (references, signatures): what a document is shows there, and the middle of a long one costs."""
DATE_HEAD = 50_000
SUMMARY_HEAD = 6_000


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
APOSTROPHES = "'\u2019"  # typewriter and typographic
WORD = re.compile(rf"[^\W\d_]+(?:[{APOSTROPHES}][^\W\d_]+)*")
"""A word: letters, with inner apostrophes (don't, company's)."""


def prepare(texts: Iterable[object]) -> str:
    parts: list[str] = []
    room = MAX_CHARS
    for text in texts:
        if room <= 0:
            break
        if isinstance(text, str) and text:
            parts.append(text[:room])
            room -= len(parts[-1]) + 1
    joined = "\n".join(parts).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(" ", joined)


_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"@[\w-]+(?:\.[\w-]+)+")  # the domain: the local part may be a name worth keeping


def without_addresses(text: str) -> str:
    """The text without web and mail addresses: "https", "www" and "com" are no keywords."""
    text = _URL.sub(" ", text)
    return _EMAIL.sub(" ", text) if "@" in text else text


def collapse(text: str) -> str:
    return " ".join(text.split())


def norm(text: str) -> str:
    """Case, punctuation and spacing folded away: for comparing a line with a title."""
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())
