"""The keyword index's boosted fields beside ``text`` (:mod:`.bm25`): ``heading``, ``title`` and ``name``.

A query term scores in ``text`` at 1 and in each of these at its boost (:data:`BOOSTS`), summed (BM25 per field).
``title`` is the document's title and ``name`` its file name's stem as words (:func:`name_words`), both in every
chunk of the file: a word of either lifts all of the file's chunks alike, so the file ranks and its best passage
still decides which chunk leads; a ``heading`` word lifts its section.

The boosts stay below 1: a boost of 1 or more in any field let a word of a long manual's name or title outweigh the
page that answers (``tests/bench/fields.py``; measured: docs/tuning.md#field-boosts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NAME_SEPARATORS = re.compile(r"[-_.\s]+")


@dataclass(frozen=True, slots=True)
class Boosts:
    """What a query term matching each field adds, beside ``text``'s 1 (0: the field is not searched)."""

    heading: float = 0.25
    title: float = 0.25
    name: float = 0.5

    def fields(self) -> list[tuple[str, float]]:
        """(field, boost) of every field a query term is looked for in."""
        boosted = (("heading", self.heading), ("title", self.title), ("name", self.name))
        return [("text", 1.0), *((field, boost) for field, boost in boosted if boost > 0)]


BOOSTS = Boosts()
"""The boosts searches use."""


def name_words(path: str) -> str:
    """A file name's stem as words: cut at ``-``, ``_``, ``.``, blanks and camelCase (``readHTTPHeader_v2.txt``
    is "read HTTP Header v2"). Case boundaries are read in ASCII letters only; any other letter stays in its
    word."""
    return " ".join(_CAMEL.sub(" ", _NAME_SEPARATORS.sub(" ", PurePath(path).stem)).split())
