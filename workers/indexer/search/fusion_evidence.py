"""``evidence`` fusion: a weighted sum whose keyword weight is read from BM25's list, then its first passages
reranked by how much of the query each holds. No query is sorted into a kind by its wording.

1. ``w * bm25 + (1 - w) * cosine``, each min-max normalised within its list (a chunk missing from a list scores 0
   there), as ``weighted``, with ``w = sigmoid(bias + margin_slope * margin)``: ``margin`` is how far BM25's first
   hit stands above its second (``1 - second / first``). A clear keyword winner weighs the keyword side up.
2. The first :data:`RERANK` passages of that sum are rescored ``(1 - beta) * fused + beta * coverage``:
   ``coverage`` is the share of the query's IDF mass (BM25's IDF of each distinct query term) that the passage
   holds in its text or heading, and ``beta = coverage_weight * the best coverage among them``. When a passage
   holds every word of the query, holding them counts most (the words a user remembers of one page, in any
   order, a fragment, a list of keywords); when no passage holds much of it (a question in other words), the sum
   stands. The passages below the first :data:`RERANK` keep their order beneath them.

Three parameters (:class:`EvidenceWeights`, ``[search] evidence_*``), fitted at once on every query shape the
benches have (``tests/bench/fusion_eval.py``). Measured: docs/tuning.md#fusion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search.fusion import Ranking, by_score, weighted

RERANK = 20
"""How many passages of the weighted sum are rescored by their coverage (one SQLite read of their rows)."""

Coverage = Callable[[Sequence[int]], Mapping[int, float]]
"""The coverage (0..1) of each of these chunks; a chunk left out holds nothing of the query."""


@dataclass(frozen=True, slots=True)
class EvidenceWeights:
    """The three parameters (``[search] evidence_*``)."""

    bias: float
    margin: float
    coverage: float

    @classmethod
    def of(cls, policy: SearchPolicy) -> EvidenceWeights:
        return cls(policy.evidence_bias, policy.evidence_margin, policy.evidence_coverage)


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


def keyword_weight(keyword: Ranking, weights: EvidenceWeights) -> float:
    """The keyword side's share ``w`` in 0..1."""
    x = weights.bias + weights.margin * margin(keyword)
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))


def rerank(fused: Ranking, coverage: Coverage, coverage_weight: float) -> Ranking:
    """Step 2 of the module's docstring on a fused ranking (best first)."""
    head = fused[:RERANK]
    covers = coverage([cid for cid, _ in head]) if head and coverage_weight > 0 else {}
    beta = coverage_weight * max(covers.values(), default=0.0)
    if beta <= 0:
        return list(fused)
    scores = {cid: (1.0 - beta) * s + beta * covers.get(cid, 0.0) for cid, s in head}
    return by_score(scores) + [(cid, (1.0 - beta) * s) for cid, s in fused[RERANK:]]


def evidence(keyword: Ranking, semantic: Ranking, coverage: Coverage, weights: EvidenceWeights) -> Ranking:
    """The two rankings fused, best first."""
    if not keyword:
        return list(semantic)
    return rerank(weighted(keyword, semantic, keyword_weight(keyword, weights)), coverage, weights.coverage)
