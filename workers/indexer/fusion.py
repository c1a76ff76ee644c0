"""Merging the keyword and the semantic ranking into one (hybrid search).

Both take rankings of ``(chunk_id, score)``, best first, and return one, best first. The bench
(``tests/bench/retrieval.py``) imports them to sweep their parameters on the same lists.
"""

from __future__ import annotations

from collections.abc import Sequence

Ranking = list[tuple[int, float]]
FUSIONS = ("rrf", "weighted")


def rrf(rankings: Sequence[Ranking], k: int = 60) -> Ranking:
    """Reciprocal-rank fusion: each list adds ``1 / (k + rank)`` to a chunk's score. Scores are
    ignored, so BM25's unbounded scale and cosine's narrow one need no calibration."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, 1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return _sorted(fused)


def min_max(ranking: Ranking) -> dict[int, float]:
    """Scores mapped onto 0..1 within the list (all 1.0 when they are all equal)."""
    if not ranking:
        return {}
    scores = [score for _, score in ranking]
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return {chunk_id: 1.0 for chunk_id, _ in ranking}
    return {chunk_id: (score - lo) / (hi - lo) for chunk_id, score in ranking}


def weighted(keyword: Ranking, semantic: Ranking, keyword_weight: float = 0.5) -> Ranking:
    """``keyword_weight * bm25 + (1 - keyword_weight) * cosine``, each min-max normalised within its
    list; a chunk missing from a list scores 0 there. Unlike RRF it keeps how far apart the scores
    are, so a chunk far ahead in one list is not levelled down to its rank."""
    kw, sem = min_max(keyword), min_max(semantic)
    fused = {cid: keyword_weight * kw.get(cid, 0.0) + (1.0 - keyword_weight) * sem.get(cid, 0.0) for cid in kw | sem}
    return _sorted(fused)


def _sorted(scores: dict[int, float]) -> Ranking:
    # Ties broken by chunk id, so a result order never depends on dict order.
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
