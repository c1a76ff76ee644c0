"""Whether the documents answer a question at all: the weak-evidence floor of ``evidence.request``.

The evidence is the passages of the best :data:`SUPPORT_FROM` sentences. It answers when it is close to the
question (a sentence's or a clause's cosine reaches :data:`SUPPORT_SEMANTIC`, or a sentence holds
:data:`SUPPORT_LEXICAL` of the question's terms) and does not lack the thing asked: a name of the question
("Brotli" in "Which middleware compresses responses with Brotli?") that no leading passage holds and that is rare
in the index (``support["unheld_name"]`` at least :data:`UNHELD_NAME`) refuses the question unless it comes very
close (:data:`NAME_RESCUE`). A page about the subject is not an answer about a thing it never names; a
paraphrase's missing words are everyday words, not names, and do not count. A long sentence's cosine is diluted
by its other clauses ("An OS crash or power loss is weaker: with synchronous=NORMAL, SQLite ... may lose its most
recent transactions" for "What does a power cut lose?"), so when the sentences alone would not answer, the
clauses of the leading sentences (:func:`clauses`) are compared too (``support["clause"]``).

Beside it the reply reports the *rare share* (``support["rare"]``), measured and not judged: the best share of the
question's terms one leading passage holds with its heading, each term weighted by its idf over the whole index to
the power :data:`RARE_POWER`. As a floor it refuses paraphrased questions first. The choices and their counts:
docs/benchmarks/answer-relevance.md and docs/tuning.md#answer-evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from foldermind.workers.indexer.evidence import sentences
from foldermind.workers.indexer.storage.keyword import terms

SUPPORT_SEMANTIC = 0.47
SUPPORT_LEXICAL = 0.6
"""The evidence is close to the question when a sentence of a leading passage, or a clause of one, has a cosine of
SUPPORT_SEMANTIC or a sentence holds SUPPORT_LEXICAL of the question's terms (idf over the candidate sentences).
Its passage, not only itself: the sentence stating a figure often names little of the question its passage is
about."""
CLAUSE_WORDS = 3
"""A clause (:func:`clauses`) has at least this many words; shorter pieces ("Default", "Note") are labels."""
_CLAUSE_CUT = re.compile(r"[:;]| - | \u2013 ")
UNHELD_NAME = 0.7
NAME_RESCUE = 0.725
"""A question is refused when a name of it that no leading passage holds weighs UNHELD_NAME of a name no chunk holds
(index idf to :data:`RARE_POWER`), unless a sentence's cosine reaches NAME_RESCUE."""
RARE_POWER = 1.5
"""How much more a rare term weighs than a common one: its index idf to this power (1: plain idf)."""
SUPPORT_FROM = 3
"""Whether the documents answer is judged on the passages of the best SUPPORT_FROM sentences (those an extractive
answer may quote), not the best one's alone: a bonus can lift a sentence of a passage that names little of the
question (a table of options) over the passage that does."""


def rare_weights(
    question: str, context: str, context_weight: float, doc_freq: Callable[[str], int], total: int
) -> dict[str, float]:
    """Each content term of the question (and, at ``context_weight``, of the previous question) with its idf over
    the index's ``total`` chunks (its word's document frequency) to the power :data:`RARE_POWER`; a term no chunk
    holds weighs most."""
    asked = sentences.term_words(question)
    words = {t: (w, context_weight) for t, w in sentences.term_words(context).items() if t not in asked}
    words |= {t: (w, 1.0) for t, w in asked.items()}
    n = max(total, 1)
    return {t: weight * terms.idf(min(doc_freq(w), n), n) ** RARE_POWER for t, (w, weight) in words.items()}


def rare_most(total: int) -> float:
    """The weight :func:`rare_weights` gives a term of the question that no chunk of ``total`` holds."""
    n = max(total, 1)
    return float(terms.idf(0, n) ** RARE_POWER)


def rare_share(weights: dict[str, float], passages: Iterable[set[str]]) -> float:
    """The best share of the weighted terms one passage holds (0 without terms or passages)."""
    total = sum(weights.values())
    if not total:
        return 0.0
    return max((sum(w for t, w in weights.items() if t in held) / total for held in passages), default=0.0)


def unheld(weights: dict[str, float], passages: Iterable[set[str]], most: float) -> float:
    """The weight of the heaviest term no passage holds, as a share of ``most`` (the weight of a term no chunk holds):
    1 when the name asked about is in no chunk ("Brotli"), low when it is common in the index."""
    held = set().union(*passages)
    return max((w for t, w in weights.items() if t not in held), default=0.0) / most if most else 0.0


def clauses(sentence: str) -> list[str]:
    """The clauses of a sentence cut at ":", ";" and a dash, each of :data:`CLAUSE_WORDS` words or more; none when
    it has fewer than two (the sentence is its own clause)."""
    parts = [p.strip() for p in _CLAUSE_CUT.split(sentence)]
    parts = [p for p in parts if len(p.split()) >= CLAUSE_WORDS]
    return parts if len(parts) > 1 else []


def needs_clauses(support: dict[str, float]) -> bool:
    """Whether the clauses' cosine could change :func:`answers_at_all`: the sentences alone would refuse."""
    return not answers_at_all(support)


def answers_at_all(support: dict[str, float]) -> bool:
    """Whether evidence this strong answers the question at all: close to it (``semantic``, or ``clause`` when
    measured, or ``lexical``), and not lacking a rare name of the question unless very close."""
    cosine = max(support["semantic"], support.get("clause", 0.0))
    close = cosine >= SUPPORT_SEMANTIC or support["lexical"] >= SUPPORT_LEXICAL
    lacks = support.get("unheld_name", 0.0) >= UNHELD_NAME and cosine < NAME_RESCUE
    return close and not lacks
