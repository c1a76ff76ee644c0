"""Whether the documents answer a question at all: the weak-evidence floor of ``evidence.request``.

The evidence is the passages of the best :data:`SUPPORT_FROM` sentences. It answers when it is close to the
question: a sentence's cosine reaches :data:`SUPPORT_SEMANTIC`, or it holds :data:`SUPPORT_LEXICAL` of the
question's terms.

Beside it the reply reports the *rare share* (``support["rare"]``), measured and not judged: the best share of the
question's terms one leading passage holds with its heading, each term weighted by its idf over the whole index to
the power :data:`RARE_POWER`, so the words naming what is asked ("Heroku" in "How do I deploy a Django project to
Heroku?") weigh most and the subject every page of the topic names weighs little. As a floor it refuses questions
that name what the documents hold and ask what they never say, and refuses paraphrased questions first: no rare
floor refused more without losing answers the floor above keeps (docs/tuning.md#answer-evidence), so it stays a
measure for the benches until a signal tells the two apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from foldermind.workers.indexer import bm25, sentences

SUPPORT_SEMANTIC = 0.475
SUPPORT_LEXICAL = 0.6
"""The evidence is close to the question when a sentence of a leading passage has a cosine of SUPPORT_SEMANTIC or
holds SUPPORT_LEXICAL of the question's terms (idf over the candidate sentences). Its passage, not only itself:
the sentence stating a figure often names little of the question its passage is about."""
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
    return {t: weight * bm25.idf(min(doc_freq(w), n), n) ** RARE_POWER for t, (w, weight) in words.items()}


def rare_share(weights: dict[str, float], passages: Iterable[set[str]]) -> float:
    """The best share of the weighted terms one passage holds (0 without terms or passages)."""
    total = sum(weights.values())
    if not total:
        return 0.0
    return max((sum(w for t, w in weights.items() if t in held) / total for held in passages), default=0.0)


def answers_at_all(support: dict[str, float]) -> bool:
    """Whether evidence this strong answers the question at all: close to it (``semantic`` or ``lexical``)."""
    return support["semantic"] >= SUPPORT_SEMANTIC or support["lexical"] >= SUPPORT_LEXICAL
