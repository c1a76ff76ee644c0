"""``evidence`` fusion: one convex combination whose keyword weight is read from the result lists, not the query.

``w * bm25 + (1 - w) * cosine``, each min-max normalised within its list (a chunk missing from a list scores 0
there), as ``weighted``; but ``w`` is a smooth function of how the lists look (:class:`Signals`):

- ``gap``: the share of the query's IDF mass (BM25's IDF of each distinct query term) that BM25's first hit
  holds in its text or heading, less the share the semantic side's first hit holds. When the page BM25 puts
  first holds the query's rare words and the semantic winner does not, the words are what the user remembers;
  when both hold as much, the semantic side's reading of the whole query decides;
- ``margin``: how far BM25's first hit stands above its second (``1 - second / first``, 1 for a lone hit).

``w = sigmoid(bias + gap_slope * gap + margin_slope * margin)``: three parameters (:class:`EvidenceWeights`,
``[search] evidence_*``), fitted at once on the tune parts of every query shape the benches have (known items,
remembered words, questions, claims; ``tests/bench/fusion_eval.py``, which also tried the first hit's share alone
and the semantic side's margin), with the held-out parts read apart. No query is sorted into a kind by its wording
and no rank rule overrides the sum: a chunk at least as high as another in both lists is never ranked below it.
Figures and the fit: docs/benchmarks-fusion.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.fusion import Ranking, weighted


@dataclass(frozen=True, slots=True)
class EvidenceWeights:
    """The three parameters of the keyword weight (``[search] evidence_*``)."""

    bias: float
    gap: float
    margin: float

    @classmethod
    def of(cls, policy: SearchPolicy) -> EvidenceWeights:
        return cls(policy.evidence_bias, policy.evidence_gap, policy.evidence_margin)


@dataclass(frozen=True, slots=True)
class Signals:
    """What the two lists say (see the module's docstring): :func:`idf_share` of BM25's first hit and of the
    semantic side's, and BM25's :func:`margin`."""

    keyword_share: float
    semantic_share: float
    margin: float


def idf_share(idfs: Sequence[float], held: Sequence[bool]) -> float:
    """The share of ``idfs`` (one value per distinct query term) whose terms are ``held``; 0 without terms."""
    mass = sum(idfs)
    return sum(v for v, h in zip(idfs, held, strict=True) if h) / mass if mass > 0 else 0.0


def margin(keyword: Ranking) -> float:
    """``1 - second / first`` of BM25's first two scores (1 for a lone hit, 0 for none)."""
    if not keyword or keyword[0][1] <= 0:
        return 0.0
    if len(keyword) == 1:
        return 1.0
    return max(0.0, 1.0 - keyword[1][1] / keyword[0][1])


def keyword_weight(signals: Signals, weights: EvidenceWeights) -> float:
    """The keyword side's share ``w`` in 0..1."""
    gap = signals.keyword_share - signals.semantic_share
    x = weights.bias + weights.gap * gap + weights.margin * signals.margin
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))


def evidence(keyword: Ranking, semantic: Ranking, shares: tuple[float, float], weights: EvidenceWeights) -> Ranking:
    """The two rankings fused, best first; ``shares``: :func:`idf_share` of BM25's first hit and of the semantic
    side's (0 for an empty list)."""
    if not keyword:
        return list(semantic)
    return weighted(keyword, semantic, keyword_weight(Signals(shares[0], shares[1], margin(keyword)), weights))
