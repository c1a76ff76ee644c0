"""What a search query asks beyond its words: ``"quoted phrases"`` and ``-excluded`` words.

The query is read here, by our own rules, never by Tantivy's query parser: a user's ``AND``, ``field:``,
``*`` or brackets stay plain words (:mod:`foldermind.workers.indexer.storage.keyword.bm25`), and the two operators
below are turned into Tantivy queries built term by term from the same analysis the index was written with.

- ``"write-ahead log"``: a phrase. Its words must stand in a chunk in that order, next to each other (after
  the index's analysis: lower case, stems of the chunk's language, so ``"Write-Ahead Logs"`` matches too).
  A quote that is not closed is an ordinary character. A phrase of one word is that word, required.
- ``-word``: no result holds the word (any of its forms). The command-line flags users paste (``asy -V``,
  ``rm -rf``, ``gcc -fPIC -O2``, ``--long-flag``) stay words of the search: :func:`_is_exclusion` has the rule.
  A query of only exclusions (``-draft``) finds nothing: reading its words as the search would return the very
  documents it asked to leave out.

The operators are kept as the words' tokens before stemming: each language's fields stem them their own way
(:mod:`foldermind.workers.indexer.storage.keyword.languages`). Every word of a phrase stays in the query's text too
(it is embedded and scored as usual): the phrase only narrows, it never changes what "relevant" means. Excluded
words leave the text; a minus inside quotes is never an operator.

The semantic side cannot be told about either, so :func:`admits` checks a chunk's own text after the fact (one
pass of the analyzer), only when the query has an operator, and only for the chunks the keyword side did not
return (Tantivy held those to the operators already). Measured: docs/tuning.md#query-operators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from foldermind.workers.indexer.storage.keyword.languages import ENGLISH
from foldermind.workers.indexer.storage.keyword.terms import query_tokens, stem, text_terms

_QUOTE = re.compile(r'["“”„]([^"“”„]*)["“”„]')
_MINUS_WORD = re.compile(r"(?:(?<=\s)|^)-([^\W\d_][\w'\u2019-]*)", re.UNICODE)
"""A candidate: a minus at the start or after a space, then a letter; :func:`_is_exclusion` decides."""
_WORD = re.compile(r"[^\W\d_]{1,}(?:['\u2019-][^\W\d_]+)*", re.UNICODE)
MIN_EXCLUDED_LETTERS = 3
"""Shorter minus words are flags (``-V``, ``-rf``, ``-la``): see :func:`_is_exclusion`."""


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    """The words to look for: the query without its operators (a phrase's words stay)."""
    phrases: tuple[tuple[str, ...], ...] = ()
    """Each phrase as tokens, in order (two or more; a one-word phrase is in ``required``)."""
    required: tuple[str, ...] = ()
    """Tokens every result must hold (the words of one-word phrases)."""
    excluded: tuple[str, ...] = ()
    """Tokens no result may hold (in any form: they are compared stemmed)."""

    @property
    def filters(self) -> bool:
        """Whether results must be checked against the phrases, the required or the excluded terms."""
        return bool(self.phrases or self.required or self.excluded)


def parse(query: str) -> Query:
    phrases: list[tuple[str, ...]] = []
    required: list[str] = []
    for inner in _QUOTE.findall(query):
        tokens = tuple(query_tokens(inner))
        if len(tokens) > 1:
            phrases.append(tokens)
        elif tokens:
            required.append(tokens[0])
    excluded: list[str] = []
    pieces, pos = [], 0
    for m in _QUOTE.finditer(query):  # a quoted "-name" is looked for, not left out
        pieces += [_drop_exclusions(query[pos : m.start()], excluded), f" {m.group(1)} "]
        pos = m.end()
    pieces.append(_drop_exclusions(query[pos:], excluded))
    text = "".join(pieces)
    return Query(
        text=" ".join(text.split()),
        phrases=tuple(dict.fromkeys(phrases)),
        required=tuple(dict.fromkeys(required)),
        excluded=tuple(dict.fromkeys(excluded)),
    )


def _drop_exclusions(text: str, excluded: list[str]) -> str:
    """``text`` without its ``-word`` exclusions, whose tokens are added to ``excluded``."""

    def drop(m: re.Match[str]) -> str:
        if not _is_exclusion(m.group(1)):
            return m.group(0)
        excluded.extend(query_tokens(m.group(1)))
        return " "

    return _MINUS_WORD.sub(drop, text)


def _is_exclusion(word: str) -> bool:
    """Whether ``-word`` leaves the word out rather than being a command-line flag.

    An exclusion is a minus at the start of the query or after a space, then a word of at least 3 letters (inner
    ``-`` or ``'`` allowed) written in lower case or with one initial capital (``-checkpoint``, ``-Windows``). Not
    an operator, and so searched as text: a minus inside a word (``x-ray``), two minuses (``--verbose``), one or
    two letters (``-V``, ``-rf``, ``-la``), a digit (``-5``, ``-O2``, ``-print0``), a capital after the first
    letter (``-fPIC``, ``-DNDEBUG``). Why 3: short flags are one or two letters, and a word a user leaves out rarely
    is. A flag that reads like a word (``find -name``, ``tar -xzvf``) is still an exclusion: quote it
    (``"-name"``) to look for it."""
    letters = sum(ch.isalpha() for ch in word)
    return letters >= MIN_EXCLUDED_LETTERS and bool(_WORD.fullmatch(word)) and not any(c.isupper() for c in word[1:])


def admits(q: Query, chunk_text: str, heading: str = "", language: str = ENGLISH) -> bool:
    """Whether a chunk (its text, or its heading for a phrase or a required word) satisfies ``q``; ``language``:
    the one its fields are stemmed in (:func:`~.languages.stemmed_as`)."""
    if not q.filters:
        return True
    terms = text_terms(chunk_text, language)
    head = text_terms(heading, language) if heading else []
    present = set(terms) | set(head)
    if any(stem(t, language) in present for t in q.excluded):
        return False
    if any(stem(t, language) not in present for t in q.required):
        return False
    phrases = [tuple(stem(t, language) for t in p) for p in q.phrases]
    return all(_contains(terms, p) or _contains(head, p) for p in phrases)


def _contains(terms: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    first = phrase[0]
    return any(terms[i] == first and tuple(terms[i : i + n]) == phrase for i in range(len(terms) - n + 1))
