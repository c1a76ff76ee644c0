"""Merging the keyword and the semantic ranking into one (hybrid search).

Each fusion takes rankings of ``(chunk_id, score)``, best first, and returns one, best first (``evidence``, the
default of :data:`FUSIONS`, is :mod:`.fusion_evidence`). The benches (``tests/bench/retrieval.py``,
``tests/bench/lookup.py``, ``tests/bench/fusion_sweep.py``) import them to sweep their parameters offline on exactly
the lists the indexer fuses. Measured: docs/tuning.md#fusion and docs/tuning.md#blend.

``weighted`` is ``keyword_weight * bm25 + (1 - keyword_weight) * cosine``, each min-max normalised. It loses exact
lookups that keyword search alone finds: a page only BM25 finds gets at most half the score, and semantic
neighbours that are also near the top of BM25 outrank it. ``blend`` (the default before ``evidence``) is
``weighted`` plus a weight for word lists and four rank rules, the first three keeping what a known-item lookup
(the words a user remembers of one page) needs from BM25; its constants are ``[search] blend_*`` settings:

- a bonus for BM25's first hit;
- the strong-keyword rule (not for a question): a BM25 first hit far above the second, or far above the hit at
  ``strong_keyword_tail_rank`` (a page's own next passage, or a near twin page, often scores close behind), is
  kept first;
- the lookup weight: a query that is a list of words (not a question, no stop word: :func:`is_lookup`) weighs
  BM25 at ``blend_lookup_keyword_weight``, as the semantic neighbours of a word list are weak;
- the same-file rule (every query): when the blend's first hit is another passage of the file BM25 ranks first,
  BM25's passage leads: the file is the same, and the exact page comes back;
- the repeat penalty (every query): a hit loses ``blend_repeat_penalty`` for each passage of its file above it, so
  five passages of one long manual do not push every other file out of the first five.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.storage.keyword.languages import STOP_WORDS

Ranking = list[tuple[int, float]]
FUSIONS = ("blend", "weighted", "rrf", "evidence")
SameFile = Callable[[int, int], bool]
"""Whether two chunks (by id) belong to the same document."""


@dataclass(frozen=True, slots=True)
class BlendRules:
    """``blend``'s constants, read from ``[search]`` (their meaning there; measured: docs/tuning.md#blend)."""

    keyword_weight: float
    lookup_keyword_weight: float
    top_bonus: float
    strong_ratio: float
    tail_rank: int
    tail_ratio: float
    evidence: float
    evidence_chunks: int
    repeat_penalty: float

    @classmethod
    def of(cls, policy: SearchPolicy) -> BlendRules:
        return cls(
            policy.blend_keyword_weight,
            policy.blend_lookup_keyword_weight,
            policy.blend_top_bonus,
            policy.strong_keyword_ratio,
            policy.strong_keyword_tail_rank,
            policy.strong_keyword_tail_ratio,
            policy.doc_evidence,
            policy.doc_evidence_chunks,
            policy.blend_repeat_penalty,
        )


DEFAULT_RULES = BlendRules.of(SearchPolicy())

_QUESTION = re.compile(
    r"^\s*(?:how|what|why|which|when|where|who|whom|whose|can|could|does|do|did|is|are|should|would|will|may"
    r"|is there|are there)\b|\?\s*$",
    re.IGNORECASE,
)


def is_question(query: str) -> bool:
    """Whether the query is written as a question (a question word first, or a question mark last)."""
    return bool(_QUESTION.search(query))


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


def is_lookup(query: str) -> bool:
    """Whether the query is a list of words a user remembers (``pause mouse close window``): not a question,
    and not one English stop word among its words. A sentence (most have a stop word) or a question is not."""
    words = [w.lower() for w in _WORD.findall(query)]
    return bool(words) and not is_question(query) and not any(w in STOP_WORDS for w in words)


def blend(
    keyword: Ranking,
    semantic: Ranking,
    rules: BlendRules = DEFAULT_RULES,
    question: bool = False,
    documents: Mapping[int, int] | None = None,
    same_file: SameFile | None = None,
    lookup: bool = False,
) -> Ranking:
    """``w * bm25 + (1 - w) * cosine``, each min-max normalised within its list (a chunk missing from a
    list scores 0 there), ``w`` the lookup weight for a ``lookup`` (:func:`is_lookup`); the keyword side's
    first hit gets the top bonus; with ``documents`` (chunk id ->
    document id) and an evidence share, each chunk gains its file's evidence (:func:`with_evidence`); unless
    the query is a ``question``, a BM25 first hit with a :func:`strong_keyword_signal` is put first whatever the
    blend says; and a first hit from the same file as BM25's first (``same_file``, else ``documents``) yields
    to it. Last, with ``documents``, a file's further passages yield to other files' by the repeat penalty
    (:func:`spread`)."""
    w = rules.lookup_keyword_weight if lookup else rules.keyword_weight
    kw, sem = min_max(keyword), min_max(semantic)
    fused = {cid: w * kw.get(cid, 0.0) + (1.0 - w) * sem.get(cid, 0.0) for cid in kw | sem}
    if keyword:
        fused[keyword[0][0]] += rules.top_bonus
    if documents is not None and rules.evidence > 0:
        fused = with_evidence(fused, documents, rules.evidence, rules.evidence_chunks)
    ranked = by_score(fused)
    if keyword and ranked[0][0] != keyword[0][0]:
        top, first = keyword[0][0], ranked[0][0]
        if same_file is None and documents is not None:
            same_file = _same_in(documents)
        strong = not question and strong_keyword_signal(keyword, rules)
        if strong or (same_file is not None and same_file(first, top)):
            ranked = [(top, ranked[0][1]), *(item for item in ranked if item[0] != top)]
    if documents is not None and rules.repeat_penalty > 0:
        ranked = spread(ranked, documents, rules.repeat_penalty)
    return ranked


def spread(ranked: Ranking, documents: Mapping[int, int], penalty: float) -> Ranking:
    """``ranked`` with each hit after the first lowered by ``penalty`` for every passage of its document ranked
    above it, and sorted again (ties keep their order): a file's best passage keeps its score, its fifth loses
    four times the penalty, so the next file's best can rise past it. The first hit stays first (the rules above
    chose it); a chunk without a document stands alone."""
    seen: dict[int, int] = {}
    lowered: list[tuple[float, int, int]] = []
    for place, (cid, score) in enumerate(ranked):
        doc = documents.get(cid)
        above = 0 if doc is None else seen.get(doc, 0)
        if doc is not None:
            seen[doc] = above + 1
        lowered.append((score - penalty * above, place, cid))
    rest = sorted(lowered[1:], key=lambda item: (-item[0], item[1]))
    return [(cid, score) for score, _, cid in lowered[:1] + rest]


def _same_in(documents: Mapping[int, int]) -> SameFile:
    return lambda a, b: a in documents and documents.get(a) == documents.get(b)


def with_evidence(
    scores: Mapping[int, float], documents: Mapping[int, int], weight: float, chunks: int
) -> dict[int, float]:
    """Every chunk's score plus ``weight`` times the sum of its document's 2nd .. ``chunks + 1``-th best scores
    among ``scores``: the same lift for all of a file's chunks, so a file that matches in several places rises
    and its best chunk still leads it. A chunk without a document in ``documents`` stands alone."""
    by_doc: dict[int, list[float]] = {}
    for cid, score in scores.items():
        if cid in documents:
            by_doc.setdefault(documents[cid], []).append(score)
    lift = {doc: weight * sum(sorted(found, reverse=True)[1 : chunks + 1]) for doc, found in by_doc.items()}
    return {cid: score + (lift[documents[cid]] if cid in documents else 0.0) for cid, score in scores.items()}


def strong_keyword_signal(keyword: Ranking, rules: BlendRules = DEFAULT_RULES) -> bool:
    """Whether BM25's first hit stands alone, scores ``strong_ratio`` times its second, or ``tail_ratio`` times
    the hit at ``tail_rank`` (the last hit when the list is shorter)."""
    if not keyword or keyword[0][1] <= 0:
        return False
    first = keyword[0][1]
    if len(keyword) == 1 or first >= rules.strong_ratio * keyword[1][1]:
        return True
    return first >= rules.tail_ratio * keyword[min(rules.tail_rank, len(keyword)) - 1][1]


def rrf(rankings: Sequence[Ranking], k: int = 60) -> Ranking:
    """Reciprocal-rank fusion: each list adds ``1 / (k + rank)`` to a chunk's score. Scores are
    ignored, so BM25's unbounded scale and cosine's narrow one need no calibration."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, 1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return by_score(fused)


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
    return by_score(fused)


def by_score(scores: Mapping[int, float]) -> Ranking:
    """``scores`` best first."""
    # Ties broken by chunk id, so a result order never depends on dict order.
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
