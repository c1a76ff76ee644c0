"""What a search query asks beyond its words: ``"quoted phrases"`` and ``-excluded`` words.

The query is read here, by our own rules, never by Tantivy's query parser: a user's ``AND``, ``field:``,
``*`` or brackets stay plain words (:mod:`foldermind.workers.indexer.bm25`), and the two operators below are
turned into Tantivy queries built term by term from the same analysis the index was written with.

- ``"write-ahead log"``: a phrase. Its words must stand in a chunk in that order, next to each other (after
  the index's analysis: lower case, stems of the chunk's language, so ``"Write-Ahead Logs"`` matches too).
  A quote that is not closed is an ordinary character. A phrase of one word is that word, required.
- ``-word`` (a minus at the start of the query or after a space, then a letter or digit): no result holds
  the word (any of its forms). ``x-ray``, ``-5`` after a space excepted: a minus inside a word or before a
  number is not an operator, so ``-5`` stays a search for 5.

The operators are kept as the words' tokens before stemming: each language's fields stem them their own way
(:mod:`.languages`).

Every word of a phrase stays in the query's text too (it is embedded and scored as usual): the phrase only
narrows, it never changes what "relevant" means. Excluded words leave the text. A query that is only
exclusions has nothing to look for and finds nothing.

The semantic side cannot be told about either, so :func:`admits` checks a chunk's own text after the fact:
one pass of the analyzer over the chunk (~0.1-0.9 ms for 1.5 kB, idle to a load average of 18 on the
2-core machine), only when the query has an operator, and only for the chunks the keyword side did not
return (Tantivy held those to the operators already).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from foldermind.workers.indexer.bm25 import query_tokens, stem, text_terms
from foldermind.workers.indexer.languages import ENGLISH

_QUOTE = re.compile(r'["“”„]([^"“”„]*)["“”„]')
_EXCLUDE = re.compile(r"(?:(?<=\s)|^)-([^\W\d_][\w'\u2019-]*)", re.UNICODE)


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
    text = _QUOTE.sub(lambda m: f" {m.group(1)} ", query)
    excluded = [token for word in _EXCLUDE.findall(text) for token in query_tokens(word)]
    text = _EXCLUDE.sub(" ", text)
    return Query(
        text=" ".join(text.split()),
        phrases=tuple(dict.fromkeys(phrases)),
        required=tuple(dict.fromkeys(required)),
        excluded=tuple(dict.fromkeys(excluded)),
    )


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
