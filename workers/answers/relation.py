"""Whether the quotes say what a question asks of its subject, beyond naming the subject.

A near miss names a subject the documents hold and asks a relation its page never states ("Who first discovered
LytA?" over an abstract on LytA): the evidence floor and the model's reading pass it, because the page is about
the subject. Here the question's content terms are split in two: its *subject*, the terms a cited page's title
or heading path holds and the question's names ("LytA", "FileField"), and the rest, the *relation* asked. The
*cover* is the share of the relation's terms that the cited quotes and their passages hold. An answer whose cover
is under :data:`RELATION_COVER` while its evidence's best cosine is under :data:`RELATION_BAND` is refused: a close
sentence may say the relation in other words, a far one that lacks its words does not say it. The parameters and
their counts: docs/benchmarks/answer-relevance.md (s51-na).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from foldermind.workers.indexer.evidence import sentences

RELATION_COVER = 0.5
"""Refused when the quotes and their passages hold less than this share of the relation's terms."""
RELATION_BAND = 0.61
"""Only when the evidence's best cosine (a sentence's or a clause's) is under this."""
_NAME_SPLIT = re.compile(r"[\W_]+")


@dataclass(frozen=True, slots=True)
class Cited:
    """What a quote says and what its page is named: the quote, its passage, its file's name and heading path."""

    quote: str
    passage: str
    names: str

    @classmethod
    def of(cls, citation: Mapping[str, Any]) -> Cited:
        """From a citation as the answer carries it (``schemas.Citation`` dumped)."""
        heading = (citation.get("location") or {}).get("heading") or ""
        stem = citation.get("file_name", "").rsplit(".", 1)[0]
        return cls(citation.get("quote", ""), citation.get("snippet", ""), f"{heading} {_NAME_SPLIT.sub(' ', stem)}")


def cover(question: str, cited: Iterable[Cited]) -> float:
    """The share of the question's relation terms (content terms neither a cited page's name holds nor a name of
    the question) held by the quotes or their passages; 1 when the question asks nothing beyond its subject."""
    cited = list(cited)
    asked = sentences.content_terms(question)
    subject = sentences.name_terms(question) | set().union(*(sentences.content_terms(c.names) for c in cited))
    relation = asked - subject
    if not relation:
        return 1.0
    held = set().union(*(sentences.content_terms(f"{c.quote} {c.passage}") for c in cited))
    return len(relation & held) / len(relation)


def refuses(question: str, cited: Iterable[Cited], support: Mapping[str, float]) -> bool:
    """Whether an answer quoting ``cited`` leaves the relation asked unsaid (see the module's docstring)."""
    cosine = max(support.get("semantic", 0.0), support.get("clause", 0.0))
    return cosine < RELATION_BAND and cover(question, cited) < RELATION_COVER
