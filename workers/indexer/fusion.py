"""Merging the keyword and the semantic ranking into one (hybrid search).

Each takes rankings of ``(chunk_id, score)``, best first, and returns one, best first. The benches
(``tests/bench/retrieval.py``, ``tests/bench/lookup.py``) import them to sweep their parameters offline on
exactly the lists the indexer fuses.

``blend``, the default, was designed on the lookup bench (``tests/bench/lookup.py``: 72 known-item queries
and 36 natural questions over real PDF and HTML manuals, and the 150 SciFact queries), every constant below
chosen on the ``tune`` two thirds only; ``docs/benchmarks-lookup.md`` has the figures, ``held_out`` apart.
What it fixes: ``weighted`` (``keyword_weight`` 0.5) lost exact lookups that keyword search alone found
(known items, tune: page exact 41/48 against keyword's 46/48, top-1 file 46 against 48), because a page that
only BM25 finds gets at most half the score, and semantic neighbours that are also near the top of BM25
outrank it. ``blend`` is ``weighted`` plus two rank rules: a bonus for BM25's first hit, and a BM25 first hit
far above the second kept first (a user who typed the words of one page). On the tune split it reaches
top-1 file 48/48 and page exact 44/48 on known items (keyword 48, 46), MRR@10 0.894 on natural questions
(keyword 0.833, semantic 0.837, weighted 0.866), and SciFact nDCG@10 0.886 on a 644-abstract subset
(weighted 0.898, semantic 0.864, keyword 0.841; fused offline at the depth the indexer uses for top_k 20):
it gives up a little of SciFact for the lookups. Held out, it is not yet never worse than keyword on
known items (page exact 20 against 21 of 24) nor above semantic on questions (MRR@10 0.885 against 0.917).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

Ranking = list[tuple[int, float]]
FUSIONS = ("blend", "weighted", "rrf")

KEYWORD_WEIGHT = 0.5
"""blend's keyword share. Swept 0.5-0.9 (tune): 0.9 matched keyword's page-exact on known items (46/48) but
cost SciFact nDCG@10 0.04 (0.844 against 0.886); 0.6 cost it 0.008 for one page more. A separate share for
questions (0.3-0.6) changed nothing once the two rules below were in, so there is none."""
STRONG_KEYWORD_RATIO = 1.2
"""A BM25 first hit scoring at least this many times the second keeps first place (not for a question).
Swept 1.05-2.0 (tune): 1.2 lifted known-item page-exact from 43 to 44/48 beside the bonus, and changed
neither the natural questions (the rule is off for them) nor SciFact."""
TOP_RANK_BONUS = 0.1
"""Added to the keyword side's first hit. Swept 0-0.2 (tune): 0.1 took known-item top-1 file from 46 to
48/48 and natural MRR@10 from 0.866 to 0.894; 0.2 lost a natural question (0.873)."""

EVIDENCE_CHUNKS = 2
"""How many of a file's next-best chunks count as its evidence (:func:`with_evidence`; the share is ``[search]
doc_evidence``, off by default). Swept 1, 2, 4, 8 at shares 0.05-0.3 (tune): none beat no evidence steadily
(natural MRR@10 0.906 without; at 2 chunks 0.906, 0.905, 0.921, 0.879 for 0.05-0.2, one question moving; SciFact
nDCG@10 0.8830 without, 0.8781-0.8840 with), and 0.2 or more lost page-exact natural answers (18 -> 16 of 24)."""

_QUESTION = re.compile(
    r"^\s*(?:how|what|why|which|when|where|who|whom|whose|can|could|does|do|did|is|are|should|would|will|may"
    r"|is there|are there)\b|\?\s*$",
    re.IGNORECASE,
)


def is_question(query: str) -> bool:
    """Whether the query is written as a question (a question word first, or a question mark last)."""
    return bool(_QUESTION.search(query))


def blend(
    keyword: Ranking,
    semantic: Ranking,
    keyword_weight: float = KEYWORD_WEIGHT,
    question: bool = False,
    documents: Mapping[int, int] | None = None,
    evidence: float = 0.0,
) -> Ranking:
    """``w * bm25 + (1 - w) * cosine``, each min-max normalised within its list (a chunk missing from a
    list scores 0 there); the keyword side's first hit gets :data:`TOP_RANK_BONUS`; with ``documents``
    (chunk id -> document id) and an ``evidence`` share, each chunk gains its file's evidence
    (:func:`with_evidence`); and unless the query is a ``question``, a BM25 first hit
    :data:`STRONG_KEYWORD_RATIO` times above the second is put first whatever the blend says."""
    w = keyword_weight
    kw, sem = min_max(keyword), min_max(semantic)
    fused = {cid: w * kw.get(cid, 0.0) + (1.0 - w) * sem.get(cid, 0.0) for cid in kw | sem}
    if keyword:
        fused[keyword[0][0]] += TOP_RANK_BONUS
    if documents is not None and evidence > 0:
        fused = with_evidence(fused, documents, evidence)
    ranked = _sorted(fused)
    if not question and strong_keyword_signal(keyword) and ranked[0][0] != keyword[0][0]:
        top = keyword[0][0]
        ranked = [(top, ranked[0][1]), *(item for item in ranked if item[0] != top)]
    return ranked


def with_evidence(
    scores: Mapping[int, float], documents: Mapping[int, int], weight: float, chunks: int | None = None
) -> dict[int, float]:
    """Every chunk's score plus ``weight`` times the sum of its document's 2nd .. ``chunks + 1``-th best scores
    among ``scores`` (``chunks``: :data:`EVIDENCE_CHUNKS` unless given): the same lift for all of a file's
    chunks, so a file that matches in several places rises and its best chunk still leads it. A chunk without a
    document in ``documents`` stands alone."""
    chunks = EVIDENCE_CHUNKS if chunks is None else chunks
    by_doc: dict[int, list[float]] = {}
    for cid, score in scores.items():
        if cid in documents:
            by_doc.setdefault(documents[cid], []).append(score)
    lift = {doc: weight * sum(sorted(found, reverse=True)[1 : chunks + 1]) for doc, found in by_doc.items()}
    return {cid: score + (lift[documents[cid]] if cid in documents else 0.0) for cid, score in scores.items()}


def strong_keyword_signal(keyword: Ranking) -> bool:
    """Whether BM25's first hit scores :data:`STRONG_KEYWORD_RATIO` times its second (or stands alone)."""
    if not keyword or keyword[0][1] <= 0:
        return False
    return len(keyword) == 1 or keyword[0][1] >= STRONG_KEYWORD_RATIO * keyword[1][1]


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
