"""``evidence`` fusion on constructed lists, with the shipped ``[search] evidence_*`` parameters: a lookup whose
words a page holds keeps BM25's clear winner, a passage holding every remembered word rises over one repeating a
rare word, a paraphrase reaches the semantic winner, and the fused order is monotone in each list and in coverage.
Pure functions: the real-kernel test of the setting is in test_search.py."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import pytest

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.search.fusion_evidence import (
    RERANK,
    Coverage,
    EvidenceWeights,
    evidence,
    idf_share,
    keyword_weight,
    margin,
    rerank,
)
from foldermind.workers.indexer.storage.keyword.terms import idf

SHIPPED = EvidenceWeights.of(SearchPolicy())


def holding(shares: Mapping[int, float], default: float = 0.0) -> Coverage:
    """A coverage function: each chunk's share of the query's IDF mass, ``default`` for the others."""

    def coverage(chunks: Sequence[int]) -> dict[int, float]:
        return {c: shares.get(c, default) for c in chunks}

    return coverage


def test_a_lookup_of_common_words_keeps_bm25s_clear_winner() -> None:
    # "which command can change the expiry date of an account": the page holding every word scores far above the
    # rest in BM25; the semantic side does not have it in its list at all and prefers BM25's second, a neighbour
    # about passwords that holds less of the words.
    keyword = [(1, 21.0), (2, 9.5), (3, 9.0), (4, 8.7), (5, 8.1), (6, 7.9)]
    semantic = [(2, 0.71), (7, 0.70), (8, 0.69), (9, 0.68), (3, 0.66), (4, 0.60)]
    assert fusion.weighted(keyword, semantic, 0.5)[0][0] == 2  # half and half loses it
    assert evidence(keyword, semantic, holding({1: 1.0}, 0.4), SHIPPED)[0][0] == 1


def test_a_passage_holding_every_remembered_word_rises_over_one_repeating_a_rare_word() -> None:
    # Words remembered from one page, in any order: BM25's first hit repeats the rarest of them (60% of the IDF
    # mass), the page itself, a hair behind, holds all of them; the semantic side has neither first.
    keyword = [(1, 20.2), (2, 20.0), (3, 14.8), (4, 12.0), (5, 11.0)]
    semantic = [(3, 0.40), (1, 0.39), (6, 0.38), (2, 0.33), (7, 0.30)]
    coverage = holding({1: 0.6, 2: 1.0, 3: 0.45})
    assert evidence(keyword, semantic, coverage, SHIPPED)[0][0] == 2
    assert evidence(keyword, semantic, coverage, EvidenceWeights(SHIPPED.bias, SHIPPED.margin, 0.0))[0][0] != 2


def test_a_paraphrase_reaches_the_semantic_winner() -> None:
    # A question in other words: every passage holds a common word or two of it (a fifth of the IDF mass) and
    # BM25's first barely leads; the semantic side has one clear winner, which BM25 ranks fourth.
    keyword = [(1, 6.1), (2, 5.9), (3, 5.8), (4, 5.6), (5, 5.2), (6, 5.0)]
    semantic = [(4, 0.83), (7, 0.64), (8, 0.63), (1, 0.62), (9, 0.61), (2, 0.60)]
    assert fusion.weighted(keyword, semantic, 0.7)[0][0] == 1  # a keyword-heavy mix loses it
    assert evidence(keyword, semantic, holding({}, 0.2), SHIPPED)[0][0] == 4


def test_the_keyword_weight_rises_with_bm25s_margin_and_stays_in_0_1() -> None:
    low = keyword_weight([(1, 10.0), (2, 9.8)], SHIPPED)
    high = keyword_weight([(1, 10.0), (2, 4.0)], SHIPPED)
    assert 0.0 <= low < high <= 1.0
    lone = [(1, 3.0)]
    assert keyword_weight(lone, EvidenceWeights(1e6, 1e6, 0.5)) == pytest.approx(1.0)  # no overflow
    assert keyword_weight(lone, EvidenceWeights(-1e6, 0.0, 0.5)) == pytest.approx(0.0)


def _rank(fused: fusion.Ranking) -> dict[int, int]:
    return {cid: i for i, (cid, _) in enumerate(fused)}


@pytest.mark.parametrize("seed", range(20))
def test_a_chunk_at_least_as_high_in_both_lists_and_holding_as_much_is_never_ranked_below(seed: int) -> None:
    rng = random.Random(seed)
    ids = rng.sample(range(100), 30)
    keyword = sorted(((c, rng.uniform(1, 30)) for c in ids[:20]), key=lambda x: -x[1])
    semantic = sorted(((c, rng.uniform(0.2, 0.9)) for c in ids[10:]), key=lambda x: -x[1])
    shares = {c: rng.choice((0.3, 0.6, 1.0)) for c in ids}
    fused = evidence(keyword, semantic, holding(shares), SHIPPED)
    rank = _rank(fused)
    kw, sem = dict(keyword), dict(semantic)
    for a in rank:
        for b in rank:
            higher = kw.get(a, -1) >= kw.get(b, -1) and sem.get(a, -1) >= sem.get(b, -1) and a < b
            if higher and shares[a] >= shares[b] and rank[b] < RERANK:
                assert rank[a] < rank[b], (a, b)


def test_raising_a_chunks_score_in_one_list_never_lowers_it() -> None:
    keyword = [(1, 20.0), (2, 12.0), (3, 8.0), (4, 4.0)]
    semantic = [(5, 0.8), (3, 0.7), (6, 0.6), (4, 0.5)]
    coverage = holding({1: 0.6, 2: 0.5, 3: 0.7, 4: 0.6, 5: 0.4, 6: 0.3})
    before = _rank(evidence(keyword, semantic, coverage, SHIPPED))[4]
    raised_kw = [(1, 20.0), (2, 12.0), (4, 10.0), (3, 8.0)]  # 4 rises in BM25, the first two scores unchanged
    raised_sem = [(5, 0.8), (4, 0.75), (3, 0.7), (6, 0.6)]
    assert _rank(evidence(raised_kw, semantic, coverage, SHIPPED))[4] <= before
    assert _rank(evidence(keyword, raised_sem, coverage, SHIPPED))[4] <= before


def test_only_the_first_passages_are_rescored_and_the_rest_keep_their_order_beneath() -> None:
    fused = [(c, 1.0 - c / 100) for c in range(RERANK + 10)]
    asked: list[int] = []

    def coverage(chunks: Sequence[int]) -> dict[int, float]:
        asked.extend(chunks)
        return {c: 1.0 if c == RERANK - 1 else 0.0 for c in chunks}

    out = rerank(fused, coverage, 0.8)
    assert asked == list(range(RERANK))
    assert out[0][0] == RERANK - 1  # the one holding the query rises first
    assert [c for c, _ in out[RERANK:]] == list(range(RERANK, RERANK + 10))
    assert rerank(fused, holding({}), 0.8) == fused  # nothing held: the sum stands


def test_the_signals() -> None:
    assert margin([]) == 0.0 and margin([(1, 3.0)]) == 1.0 and margin([(1, 4.0), (2, 3.0)]) == pytest.approx(0.25)
    assert margin([(1, 0.0), (2, 0.0)]) == 0.0
    assert idf_share([2.0, 1.0, 1.0], [True, False, True]) == pytest.approx(0.75) and idf_share([], []) == 0.0
    assert idf(1, 100) == pytest.approx(math.log(1 + 99.5 / 1.5)) and idf(500, 100) > 0  # deleted chunks: capped
    assert evidence([], [(3, 0.5), (4, 0.4)], holding({}), SHIPPED) == [(3, 0.5), (4, 0.4)]
    assert [c for c, _ in evidence([(1, 2.0)], [], holding({1: 1.0}), SHIPPED)] == [1]
