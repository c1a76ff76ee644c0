"""The deterministic half of document analysis: what ``get_document_summary`` serves before the LLM.

Every field is a pure function of the document's text, title, format, path and mtime (plus,
for keywords, how common each word is across the index). The indexer's ingest thread makes it from the
stored chunks once nothing is left to parse or embed (:mod:`.analyzer`); writing new content drops the
old analysis in the same transaction, so an analysis never describes content other than the indexed
one. It costs milliseconds, reads at most :data:`MAX_CHARS` characters and never raises. The LLM worker
later replaces the extractive ``summary`` and fills ``entity``; the other
fields are small, readable rules, one module each: :mod:`.text` (the prepared text), :mod:`.summary`,
:mod:`.dates`, :mod:`.doctype` (the type cues as a table), :mod:`.category` (the type's shelf),
:mod:`.keywords`, :mod:`.entities` and :mod:`.names` (the suggested file name). This module puts them
together (:func:`analyze`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from foldermind.workers.indexer.analysis.category import category_of
from foldermind.workers.indexer.analysis.dates import find_date, mtime_date
from foldermind.workers.indexer.analysis.doctype import infer_type
from foldermind.workers.indexer.analysis.entities import key_entities
from foldermind.workers.indexer.analysis.keywords import keywords
from foldermind.workers.indexer.analysis.names import JUNK_TITLE, leading_heading, suggested_name
from foldermind.workers.indexer.analysis.summary import summarize
from foldermind.workers.indexer.analysis.text import (
    DATE_HEAD,
    MAX_CHARS,
    TAIL,
    WORD,
    collapse,
    prepare,
    without_addresses,
)

__all__ = ["MAX_CHARS", "Analysis", "analyze", "find_date", "infer_type", "key_entities", "keywords", "summarize"]
"""``analyze`` is the whole analysis; the one-field functions are what the tests check one by one."""


class Analysis(TypedDict):
    """One document's deterministic analysis, as stored (JSON) and served by ``doc.summary``."""

    summary: str
    category: str
    entity: str | None
    type: str
    date: str | None
    keywords: list[str]
    key_entities: list[str]
    suggested_name: str
    confidence: int
    summary_model: str | None


def analyze(
    *,
    path: str,
    fmt: str,
    title: str | None,
    texts: list[str],
    mtime: float,
    doc_freq: Callable[[str], int] | None = None,
    total_docs: int = 0,
) -> Analysis:
    """The deterministic analysis of one document (JSON-able fields; see the module's docstring).

    ``texts`` are the document's text in order, in pieces that do not overlap (overlapping chunks
    would count their shared words twice). ``doc_freq(word)`` is the number of index units (chunks)
    holding the word and ``total_docs`` their number, for IDF; without them keywords rank by term
    frequency alone. Odd input (binary junk, empty text, a bad mtime) gives a valid result.
    """
    title = (collapse(title) or None) if isinstance(title, str) else None
    fmt = fmt if isinstance(fmt, str) else ""
    text = prepare(texts)
    # Only as many words as the confidence formula can use (it stops growing at 600).
    words = sum(1 for m in WORD.finditer(text, 0, 10_000) if len(m.group()) >= 2)
    summary = summarize(text, title)
    kind, by_rule = infer_type(text, fmt, title, path)
    # The first date of the head; a long document without one there may be dated at its end (a signature).
    text_date = find_date(text[:DATE_HEAD]) or (find_date(text[-TAIL:]) if len(text) > DATE_HEAD else None)
    plain = without_addresses(text)
    day = text_date or mtime_date(mtime)
    top = keywords(plain, doc_freq, total_docs)
    named = title if title and not JUNK_TITLE.search(title) else leading_heading(text)
    # Confidence in the deterministic fields, 0..100: 10 for the category (always known) + up to 30 for
    # the amount of text (1 per 20 words) + 20 for a date written in the text (not the mtime) + 20 for a
    # type chosen by a content rule (not the format) + 2 per keyword up to 10 + 10 for a summary.
    confidence = (
        10
        + min(30, words // 20)
        + (20 if text_date else 0)
        + (20 if by_rule else 0)
        + min(10, 2 * len(top))
        + (10 if summary else 0)
    )
    return Analysis(
        summary=summary,
        category=category_of(kind, by_rule),
        entity=None,
        type=kind,
        date=day,
        keywords=top,
        key_entities=key_entities(plain),
        suggested_name=suggested_name(day, named, top, path),
        confidence=max(0, min(100, confidence)),
        summary_model=None,
    )
