"""How text becomes the keyword index's terms: one rule for documents and queries.

A word is a run of letters and digits (CJK runs apart: they become overlapping bigrams, which the stemmed fields
never match). A language's documents are analysed as Tantivy's ``en_stem`` is (simple tokenizer, words over 40
bytes dropped, lower case) with that language's Snowball stemmer; a query's words go through the same chain, so a
query term comes out exactly as the indexed one did. A query keeps its first :data:`MAX_QUERY_TERMS` tokens.
The index itself (fields, queries, filters): :mod:`.bm25`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable

import tantivy

from foldermind.workers.indexer.storage.keyword.languages import ENGLISH, STEMMERS

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+", re.UNICODE)
MAX_QUERY_TERMS = 64
"""Past this many terms a query gets no better, only slower (a 1000-character query is ~150 words)."""
OTHER_LANGUAGES = tuple(sorted(code for code in STEMMERS if code != ENGLISH))


def _builder() -> tantivy.TextAnalyzerBuilder:
    # Tantivy's built-in en_stem without its stemmer: simple tokenizer, words over 40 bytes dropped, lower case.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
    )


@functools.cache
def analyzer(language: str) -> tantivy.TextAnalyzer:
    """The analysis of a language's documents (for English, en_stem rebuilt). Query terms must come out exactly
    as the indexed ones did."""
    return _builder().filter(tantivy.Filter.stemmer(STEMMERS[language])).build()


_TOKENS = _builder().build()


@functools.lru_cache(maxsize=65536)
def idf(doc_freq: int, total: int) -> float:
    """BM25's IDF of a term that ``doc_freq`` of ``total`` texts hold (Tantivy's formula; a count past the total,
    as deleted chunks leave, is capped)."""
    df = min(doc_freq, total)
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


@functools.lru_cache(maxsize=65536)
def stems(word: str, language: str = ENGLISH) -> tuple[str, ...]:
    """The indexed terms of one word of a language's documents (usually one; none for an over-long word)."""
    return tuple(analyzer(language).analyze(word))


@functools.lru_cache(maxsize=65536)
def stem(token: str, language: str = ENGLISH) -> str:
    """A token of :func:`query_tokens` as a language's documents index it (a stemmer maps one token to one
    term)."""
    terms = analyzer(language).analyze(token)
    return terms[0] if terms else token


def cjk_grams(text: str) -> list[str]:
    """Bigrams of every CJK run (a lone character stands for itself)."""
    grams: list[str] = []
    for run in _CJK_RUN.findall(text):
        grams.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return grams


def query_words(query: str) -> list[str]:
    """The query's words (letters and digits), lower-cased; everything else separates words."""
    return [w.lower() for w in _WORD.findall(query)]


def query_tokens(query: str) -> list[str]:
    """The query's tokens before stemming, in order: what :func:`query_terms` stems, for any language."""
    tokens = [token for word in query_words(query) for token in _TOKENS.analyze(word)]
    return tokens[:MAX_QUERY_TERMS]


def query_terms(query: str, language: str = ENGLISH) -> list[str]:
    """The query's indexed terms in a language's documents, in order (a repeated word counts twice, as it
    would in BM25)."""
    return [stem(token, language) for token in query_tokens(query)]


def text_terms(text: str, language: str = ENGLISH) -> list[str]:
    """Every indexed term of ``text`` in a language's documents, in order (the whole text: no cap, unlike a
    query)."""
    return list(analyzer(language).analyze(text))


def has_searchable_text(query: str) -> bool:
    """Whether the query holds any word or CJK character: ``!!!`` or ``"*"`` do not."""
    return bool(_WORD.search(query) or _CJK_RUN.search(query))


def word_spans(text: str) -> Iterable[tuple[int, str]]:
    """(offset, word) of every word of ``text``, as the stemmed fields see words."""
    for m in _WORD.finditer(text):
        yield m.start(), m.group()
