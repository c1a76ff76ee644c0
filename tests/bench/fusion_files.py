"""``evidence`` with each side's score pooled by file, against the shipped one, and SciFact's split read per mode.

``python -m tests.bench.fusion_files LISTS.json ... [--pool both|semantic] [--held-out] [--scifact-split]`` from
the repository root, on what :mod:`tests.bench.fusion_lists` wrote (loaded and scored as :mod:`tests.bench.fusion_eval`
does; each hit's file stands for its document). Two fusions per query, at the ``[search]`` defaults, the repeat
penalty after each: the shipped ``evidence``, and ``evidence`` with its weighted sum pooled by file (:func:`pooled`:
each passage's normalised score raised to its file's best on both sides, or on the semantic side only). Pooling was
tried and not adopted (docs/benchmarks/fusion.md, fifth slice); it is not in the indexer.

Printed, tune parts only unless ``--held-out`` (read once per decision): per set the score of each, the queries that
gain and lose, the sum of per-query scores, the mean over sets; and the shape bench's "which" rows as that bench
splits them (``shape-which`` and the reused factoid "Which ..." questions, split by
:func:`tests.bench.shapes.rules.split_of` of ``i-<id>``). ``--scifact-split`` (the shipped fusions only): SciFact's
held-out less tune nDCG@10 in every mode with a bootstrap interval (claims resampled within each part), the gap
random splits of the same claims into parts of the same sizes make (a permutation test), and each fusion's gap less
each single mode's, paired per claim.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search import fusion, fusion_evidence
from tests.bench import fusion_eval
from tests.bench.fusion_eval import Query, covers, documents_of, fixed, score
from tests.bench.shapes.sets import reused

POLICY = SearchPolicy()
WEIGHTS = fusion_evidence.EvidenceWeights.of(POLICY)
BOOTSTRAP = 10_000


POOL = ["both"]
"""The sides :func:`pooled` raises to their file's best (``--pool``): ``both`` or ``semantic``."""


def pooled(keyword: fusion.Ranking, semantic: fusion.Ranking, w: float, documents: dict[int, int]) -> fusion.Ranking:
    """``weighted`` at ``w`` with each passage's min-max score on the pooled sides raised to its file's best there: a
    file whose words are in one passage and its meaning in another scores as one passage holding both. A file's
    passages, which then tie, keep the order of their own sum (and the coverage rerank's sort is stable)."""
    sides = [fusion.min_max(keyword), fusion.min_max(semantic)]
    pool = (0, 1) if POOL[0] == "both" else (1,)
    best: dict[tuple[int, int], float] = {}
    for side in pool:
        for cid, s in sides[side].items():
            key = (side, documents[cid])
            best[key] = max(best.get(key, 0.0), s)

    def of(cid: int, side: int) -> float:
        return best.get((side, documents[cid]), 0.0) if side in pool else sides[side].get(cid, 0.0)

    ids = sides[0] | sides[1]
    own = {cid: w * sides[0].get(cid, 0.0) + (1.0 - w) * sides[1].get(cid, 0.0) for cid in ids}
    fused = {cid: w * of(cid, 0) + (1.0 - w) * of(cid, 1) for cid in ids}
    return [(cid, fused[cid]) for cid in sorted(ids, key=lambda cid: (-fused[cid], -own[cid], cid))]


def rerank(fused: fusion.Ranking, q: Query) -> fusion.Ranking:
    """:func:`.fusion_evidence.rerank` with a stable sort of the head (ties keep ``fused``'s order)."""
    head = fused[: fusion_evidence.RERANK]
    cov = covers(q, [cid for cid, _ in head])
    beta = WEIGHTS.coverage * max(cov.values(), default=0.0)
    if beta <= 0:
        return list(fused)
    scored = sorted(((cid, (1.0 - beta) * s + beta * cov[cid]) for cid, s in head), key=lambda item: -item[1])
    return scored + [(cid, (1.0 - beta) * s) for cid, s in fused[fusion_evidence.RERANK :]]


def run(q: Query, pool: bool) -> list[int]:
    """``evidence`` as the indexer runs it (the repeat penalty after it); ``pool``: its sum pooled by file."""
    documents = documents_of({cid: f for cid, (f, _, _) in q.where.items()})
    if not pool or not q.keyword:
        ranked = fusion_evidence.evidence(q.keyword, q.semantic, partial(covers, q), WEIGHTS)
    else:
        w = fusion_evidence.keyword_weight(q.keyword, WEIGHTS)
        ranked = rerank(pooled(q.keyword, q.semantic, w, documents), q)
    return [cid for cid, _ in fusion.spread(ranked, documents, POLICY.evidence_repeat_penalty)]


FUSIONS: dict[str, Callable[[Query], list[int]]] = {
    "shipped": partial(run, pool=False),
    "pooled": partial(run, pool=True),
}


def per_set(qs: Sequence[Query], split: str) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Per set: keyword, semantic, shipped and pooled scores, pooled's gains and losses against shipped."""
    lines = [
        f"| set ({split}) | n | keyword | semantic | shipped | pooled | gains / losses | sum shipped -> pooled |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    means: dict[str, dict[str, float]] = {}
    for s in sorted({q.set for q in qs}):
        mine = [q for q in qs if q.set == s and q.split == split]
        if not mine:
            continue
        got = {name: np.array([fixed(q, name)[0] for q in mine]) for name in ("keyword", "semantic")}
        got |= {name: np.array([score(q, fn(q))[0] for q in mine]) for name, fn in FUSIONS.items()}
        means[s] = {name: float(v.mean()) for name, v in got.items()}
        means[s]["drop"] = float(got["shipped"].sum() - got["pooled"].sum())
        diff = got["pooled"] - got["shipped"]
        top = mine[0].metric == "top1"
        cells = [f"{int(v.sum())}" if top else f"{v.mean():.4f}" for v in got.values()]
        lines.append(
            f"| {s} [{mine[0].metric}] | {len(mine)} | " + " | ".join(cells) + f" | {int((diff > 1e-9).sum())} /"
            f" {int((diff < -1e-9).sum())} | {got['shipped'].sum():.2f} -> {got['pooled'].sum():.2f} |"
        )
    names = ("keyword", "semantic", *FUSIONS)
    lines.append(
        f"| mean of {len(means)} sets | | "
        + " | ".join(f"{np.mean([m[n] for m in means.values()]):.4f}" for n in names)
        + " | | |"
    )
    return lines, means


def which_rows(qs: Sequence[Query], split: str) -> list[str]:
    """The shape bench's (i) rows in this bench's lists, split as the shape bench splits them: MRR@10 per mode."""
    rows = {item.id.removeprefix("i-"): item.split for item in reused()[0] if item.shape == "which"}
    mine = [
        q
        for q in qs
        if (q.set == "shape-which" and q.split == split) or (q.set.startswith("factoid-") and rows.get(q.id) == split)
    ]
    if not mine:
        return []
    cells = [f"{np.mean([fixed(q, n)[0] for q in mine]):.3f}" for n in ("keyword", "semantic")]
    cells += [f"{np.mean([score(q, fn(q))[0] for q in mine]):.3f}" for fn in FUSIONS.values()]
    return [
        f"(i) which as the shape bench splits it, {split} ({len(mine)} rows; factoid rows over this bench's homes):"
        f" MRR@10 keyword {cells[0]}, semantic {cells[1]}, shipped {cells[2]}, pooled {cells[3]}"
    ]


def scifact_split(qs: Sequence[Query], seed: int = 38) -> list[str]:
    """SciFact's held-out less tune nDCG@10 per mode, with a 95% bootstrap interval (claims resampled within each
    part); then each fusion's gap less each single mode's, paired per claim."""
    sf = [q for q in qs if q.set == "scifact"]
    modes: dict[str, Callable[[Query], float]] = {
        "keyword": lambda q: fixed(q, "keyword")[0],
        "semantic": lambda q: fixed(q, "semantic")[0],
        "weighted": lambda q: fixed(q, "weighted")[0],
        "rrf": lambda q: fixed(q, "rrf")[0],
        "blend": lambda q: fixed(q, "blend")[0],
        "evidence": lambda q: score(q, run(q, pool=False))[0],
    }
    parts = {p: [q for q in sf if q.split == p] for p in ("tune", "held_out")}
    got = {m: {p: np.array([fn(q) for q in mine]) for p, mine in parts.items()} for m, fn in modes.items()}
    rng = np.random.default_rng(seed)
    picks = {p: rng.integers(0, len(mine), size=(BOOTSTRAP, len(mine))) for p, mine in parts.items()}

    def gaps(values: dict[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        held: NDArray[np.float64] = values["held_out"][picks["held_out"]].mean(axis=1)
        tune: NDArray[np.float64] = values["tune"][picks["tune"]].mean(axis=1)
        return held - tune

    lines = [
        f"SciFact nDCG@10, tune ({len(parts['tune'])}) / held out ({len(parts['held_out'])}); gap = held out - tune,"
        f" 95% bootstrap interval ({BOOTSTRAP} resamples of the claims within each part)",
        "",
        "| mode | tune | held out | gap | 95% interval | resamples with abs(gap) <= 0.01 |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for m, v in got.items():
        g = gaps(v)
        lo, hi = np.percentile(g, [2.5, 97.5])
        seen = v["held_out"].mean() - v["tune"].mean()
        lines.append(
            f"| {m} | {v['tune'].mean():.4f} | {v['held_out'].mean():.4f} | {seen:+.4f} | {lo:+.3f} .. {hi:+.3f}"
            f" | {(np.abs(g) <= 0.01).mean():.3f} |"
        )
    # Random splits of the same 150 claims into parts of the same sizes: how large a gap the split alone makes.
    every = {m: np.concatenate([v["tune"], v["held_out"]]) for m, v in got.items()}
    n_tune = len(parts["tune"])
    orders = np.argsort(rng.random((BOOTSTRAP, n_tune + len(parts["held_out"]))), axis=1)
    lines += [
        "",
        f"Random splits ({BOOTSTRAP}) of the same claims into {n_tune} / {len(parts['held_out'])}: the gap a split"
        " makes by itself",
        "",
        "| mode | random splits: sd of the gap | share with abs(gap) <= 0.01 | share with abs(gap) >= this split's |",
        "|---|---:|---:|---:|",
    ]
    for m, both in every.items():
        shuffled = both[orders]
        g = shuffled[:, n_tune:].mean(axis=1) - shuffled[:, :n_tune].mean(axis=1)
        seen = abs(got[m]["held_out"].mean() - got[m]["tune"].mean())
        lines.append(
            f"| {m} | {g.std():.4f} | {(np.abs(g) <= 0.01).mean():.3f} | {(np.abs(g) >= seen - 1e-12).mean():.3f} |"
        )
    lines += [
        "",
        "| fusion | its gap less keyword's | 95% interval | less semantic's | 95% interval |",
        "|---|---:|---|---:|---|",
    ]
    for m in ("weighted", "rrf", "blend", "evidence"):
        cells = []
        for single in ("keyword", "semantic"):
            d = {p: got[m][p] - got[single][p] for p in parts}
            g = gaps(d)
            lo, hi = np.percentile(g, [2.5, 97.5])
            cells.append(f"{d['held_out'].mean() - d['tune'].mean():+.4f} | {lo:+.3f} .. {hi:+.3f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_files", description=__doc__.split("\n")[0])
    parser.add_argument("lists", nargs="+", help="the JSON files tests.bench.fusion_lists wrote")
    parser.add_argument("--held-out", action="store_true", help="also the held-out parts (read once per decision)")
    parser.add_argument("--scifact-split", action="store_true", help="SciFact's tune / held-out gap per mode")
    parser.add_argument("--pool", choices=("both", "semantic"), default="both", help="the sides pooled by file")
    args = parser.parse_args(argv)
    POOL[0] = args.pool
    fusion_eval.W_GRID = np.array([0.5])  # fusion_eval's own weight table is not used here
    paths = [Path(p) for p in args.lists]
    qs = fusion_eval.load(paths)
    for split in ("tune", "held_out") if args.held_out else ("tune",):
        lines, _ = per_set(qs, split)
        print("\n".join(["", *lines, "", *which_rows(qs, split)]))
    if args.scifact_split:
        print("\n".join(["", *scifact_split(qs)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
