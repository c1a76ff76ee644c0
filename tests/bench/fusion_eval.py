"""Fusions measured offline on the dumped lists, and ``evidence`` fusion's parameters fitted across every shape.

``python -m tests.bench.fusion_eval LISTS.json ... [--held-out]`` from the repository root, on what
:mod:`tests.bench.fusion_lists` wrote. Each query's two lists are cut to the indexer's depth (``max(4 * top_k, 40)``
a side: top_k 10 for the lookups and questions, 20 for SciFact, as the MCP bench asks 2 chunks per abstract) and
fused as the indexer fuses them: keyword and semantic alone, ``weighted`` (0.5), ``rrf`` (k 60), ``blend`` (the
``[search]`` defaults, each hit's file standing for its document) and ``evidence``
(:mod:`foldermind.workers.indexer.search.fusion_evidence`).

Scores per set: known items (``top1``): the gold file first (page exact beside it); questions (``mrr``): MRR@10 of
the gold file among the first 10 chunks; SciFact (``ndcg``): nDCG@10 by abstract. The fit's objective is the mean
over sets of each set's own score, every set weighing the same, on the ``tune`` parts only.

Because ``evidence`` is ``weighted`` at a per-query weight, each query's score is tabulated once on a grid of
weights (:data:`W_GRID`); a parameter set then costs a table look-up per query, and a grid of 10^4 sets runs in
seconds. Printed: leave-one-set-out cross-validation (fit on the tune parts of all other sets, score the left-out
set's tune part), the fit on every tune part, and a table of every fusion per set on ``tune``; with ``--held-out``,
the same table on the ``held_out`` parts (read once per decision).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search import fusion, fusion_evidence
from foldermind.workers.indexer.search.fusion_evidence import EvidenceWeights
from tests.bench.retrieval import ndcg

W_GRID = np.linspace(0.0, 1.0, 101)
BIASES = np.linspace(-4.0, 4.0, 33)
SLOPES = np.linspace(-8.0, 8.0, 33)
MIN_DEPTH = 40


@dataclass(slots=True)
class Query:
    id: str
    set: str
    split: str
    metric: str
    gold: dict[str, int]
    page: int | None
    question: bool
    lookup: bool
    keyword: list[tuple[int, float]]
    semantic: list[tuple[int, float]]
    where: dict[int, tuple[str, int | None, int | None]]  # chunk -> file, page, page_end
    coverage: float
    margin: float
    cosine: float  # the semantic side's margin: (first - second) / (first - last) cosine
    gap: float  # coverage less the semantic first hit's share of the query's IDF mass
    covers: dict[int, float]  # chunk -> its share of the query's IDF mass (what ``evidence`` reranks by)
    table: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 3)))  # per w: score, top1, page


def top_k(metric: str) -> int:
    return 20 if metric == "ndcg" else 10


def load(paths: Sequence[Path]) -> list[Query]:
    out = []
    for path in paths:
        for d in json.loads(path.read_text("utf-8")):
            item = d["item"]
            depth = max(4 * top_k(item["metric"]), MIN_DEPTH)
            kw, sem = d["keyword"][:depth], d["semantic"][:depth]
            where = {int(h[0]): (str(h[2]), h[3], h[4]) for h in kw + sem}
            idf = d["terms"]
            coverage = share_of(idf, kw[0][5]) if kw else 0.0
            gap = coverage - (share_of(idf, sem[0][5]) if sem else 0.0)
            keyword = [(int(h[0]), float(h[1])) for h in kw]
            q = Query(
                item["id"],
                item["set"],
                item["split"],
                item["metric"],
                item["gold"],
                item["page"],
                fusion.is_question(item["text"]),
                fusion.is_lookup(item["text"]),
                keyword,
                [(int(h[0]), float(h[1])) for h in sem],
                where,
                coverage,
                fusion_evidence.margin(keyword),
                _cosine_margin([float(h[1]) for h in sem]),
                gap,
                {int(h[0]): share_of(idf, h[5]) for h in kw + sem},
            )
            q.table = np.array([score(q, weighted(q, w)) for w in W_GRID])
            out.append(q)
    return out


def share_of(idf: list[float], mask: object) -> float:
    """The share of the query's IDF mass a candidate holds, from its dumped bit mask of the query's terms."""
    bits = int(str(mask))
    return fusion_evidence.idf_share(idf, [bool(bits >> i & 1) for i in range(len(idf))])


def _cosine_margin(cosines: Sequence[float]) -> float:
    if len(cosines) < 2 or cosines[0] - cosines[-1] <= 1e-12:
        return 1.0 if cosines else 0.0
    return (cosines[0] - cosines[1]) / (cosines[0] - cosines[-1])


def weighted(q: Query, w: float) -> list[int]:
    return [c for c, _ in fusion.weighted(q.keyword, q.semantic, w)]


def score(q: Query, ranked: Sequence[int]) -> tuple[float, float, float]:
    """(the set's own score, top-1 file, page exact) of one ranking."""
    chunks = ranked[: top_k(q.metric)]
    files = [q.where[c][0] for c in chunks]
    top1 = float(bool(files) and files[0] in q.gold)
    page = 0.0
    if top1:
        _, p0, p1 = q.where[chunks[0]]
        page = float(q.page is None or (p0 is not None and p0 <= q.page <= (p1 or p0)))
    if q.metric == "ndcg":
        docs = list(dict.fromkeys(Path(f).stem for f in files))[:10]
        return ndcg(docs, {Path(k).stem: v for k, v in q.gold.items()}), top1, page
    if q.metric == "top1":
        return top1, top1, page
    rank = next((i for i, f in enumerate(files[:10]) if f in q.gold), None)
    return (0.0 if rank is None else 1.0 / (rank + 1)), top1, page


INF = float("inf")
ABLATIONS: dict[str, fusion.BlendRules] = {
    "blend": fusion.DEFAULT_RULES,
    "no top bonus": replace(fusion.DEFAULT_RULES, top_bonus=0.0),
    "no strong-keyword rule": replace(fusion.DEFAULT_RULES, strong_ratio=INF, tail_ratio=INF),
    "no repeat penalty": replace(fusion.DEFAULT_RULES, repeat_penalty=0.0),
}
"""``blend`` and ``blend`` less one rule; "no lookup weight" and "no same-file rule" are :func:`blend`'s flags."""


def blend(
    q: Query, rules: fusion.BlendRules = fusion.DEFAULT_RULES, lookup: bool = True, same: bool = True
) -> list[int]:
    documents = documents_of({cid: f for cid, (f, _, _) in q.where.items()})
    same_file = None if same else (lambda a, b: False)
    ranked = fusion.blend(q.keyword, q.semantic, rules, q.question, documents, same_file, q.lookup and lookup)
    return [c for c, _ in ranked]


def ablations(qs: Sequence[Query], split: str) -> list[str]:
    """``blend`` with each of its rules left out in turn, per set."""
    variants: dict[str, Callable[[Query], list[int]]] = {name: partial(blend, rules=r) for name, r in ABLATIONS.items()}
    variants["no lookup weight"] = partial(blend, lookup=False)
    variants["no same-file rule"] = partial(blend, same=False)
    variants["none (weighted at 0.45)"] = lambda q: weighted(q, fusion.DEFAULT_RULES.keyword_weight)
    sets = sorted({q.set for q in qs})
    lines = [f"| blend ({split}) | " + " | ".join(sets) + " |", "|---|" + "---:|" * len(sets)]
    for name, fn in variants.items():
        cells = []
        for s in sets:
            mine = [q for q in qs if q.set == s and q.split == split]
            cells.append(f"{np.mean([score(q, fn(q))[0] for q in mine]):.3f}" if mine else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def fixed(q: Query, name: str) -> tuple[float, float, float]:
    if name == "keyword":
        return score(q, [c for c, _ in q.keyword])
    if name == "semantic":
        return score(q, [c for c, _ in q.semantic])
    if name == "weighted":
        return score(q, weighted(q, 0.5))
    if name == "rrf":
        return score(q, [c for c, _ in fusion.rrf([q.keyword, q.semantic], 60)])
    return score(q, blend(q))


# --------------------------------------------------------------------------------------------
# the fit


SIGNALS = ("coverage", "margin", "cosine", "gap")


def _index(qs: Sequence[Query], weights: NDArray[np.float64]) -> NDArray[np.int64]:
    """Each query's row of W_GRID nearest its keyword weight, for every parameter set (rows: a bias, then a slope
    per name of :data:`SIGNALS`)."""
    x = weights[:, :1] + sum(
        weights[:, k + 1 : k + 2] * np.array([getattr(q, name) for q in qs])[None, :] for k, name in enumerate(SIGNALS)
    )
    w = 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))
    idx: NDArray[np.int64] = np.rint(w * (len(W_GRID) - 1)).astype(np.int64)
    return idx


def objective(qs: Sequence[Query], weights: NDArray[np.float64], block: int = 2048) -> NDArray[np.float64]:
    """The mean over sets of each set's mean score, for every row of ``weights``."""
    tables = np.stack([q.table[:, 0] for q in qs])  # queries x W_GRID
    sets = sorted({q.set for q in qs})
    members = [np.array([i for i, q in enumerate(qs) if q.set == s]) for s in sets]
    out = []
    for start in range(0, len(weights), block):
        idx = _index(qs, weights[start : start + block])
        scores = tables[np.arange(len(qs))[None, :], idx]
        out.append(np.mean([scores[:, m].mean(axis=1) for m in members], axis=0))
    return np.concatenate(out)


def candidates(features: str) -> NDArray[np.float64]:
    """The parameter grid for a feature set (``bias`` alone: weighted at a fitted w; ``bias+coverage``, ...)."""
    slopes = [SLOPES if name in features.split("+") else [0.0] for name in SIGNALS]
    return np.array(list(itertools.product(BIASES, *slopes)))


def fit(qs: Sequence[Query], features: str) -> tuple[NDArray[np.float64], float]:
    grid = candidates(features)
    values = objective(qs, grid)
    best = float(values.max())
    # Among ties, the smallest slopes (then the bias nearest 0): the least committed of the equally good.
    ties = [i for i in range(len(grid)) if values[i] >= best - 1e-12]
    i = min(ties, key=lambda j: (float(np.abs(grid[j][1:]).sum()), abs(grid[j][0])))
    return grid[i], best


def weight_of(q: Query, params: NDArray[np.float64]) -> float:
    x = params[0] + sum(params[k + 1] * getattr(q, name) for k, name in enumerate(SIGNALS))
    return float(1.0 / (1.0 + np.exp(-np.clip(x, -50, 50))))


FEATURES = (
    "bias",
    "bias+coverage",
    "bias+margin",
    "bias+cosine",
    "bias+coverage+margin",
    "bias+coverage+cosine",
    "bias+margin+cosine",
    "bias+gap",
    "bias+gap+margin",
    "bias+gap+coverage",
)


def cross_validate(qs: Sequence[Query], features: str) -> dict[str, float]:
    """Each set's tune score under the parameters fitted on every other set's tune part."""
    tune = [q for q in qs if q.split == "tune"]
    out = {}
    for s in sorted({q.set for q in tune}):
        params, _ = fit([q for q in tune if q.set != s], features)
        mine = [q for q in tune if q.set == s]
        out[s] = float(np.mean([score(q, weighted(q, weight_of(q, params)))[0] for q in mine]))
    return out


def evidence_module(q: Query, weights: EvidenceWeights, penalty: float | None = None) -> list[int]:
    """The indexer's own ``evidence`` fusion at ``weights``, each candidate's coverage read from the lists, then
    the repeat penalty (``[search] evidence_repeat_penalty`` unless given), each hit's file for its document."""
    ranked = fusion_evidence.evidence(q.keyword, q.semantic, partial(covers, q), weights)
    penalty = SearchPolicy().evidence_repeat_penalty if penalty is None else penalty
    if penalty <= 0:
        return [c for c, _ in ranked]
    return [c for c, _ in fusion.spread(ranked, documents_of({cid: f for cid, (f, _, _) in q.where.items()}), penalty)]


def documents_of(files: Mapping[int, str]) -> dict[int, int]:
    """Each chunk's document number, its file standing for its document (the dumped lists name files, not ids)."""
    numbers = {name: i for i, name in enumerate(dict.fromkeys(files.values()))}
    return {cid: numbers[f] for cid, f in files.items()}


def covers(q: Query, chunks: Sequence[int]) -> dict[int, float]:
    return {c: q.covers.get(c, 0.0) for c in chunks}


def table(
    qs: Sequence[Query], split: str, params: NDArray[np.float64], shipped: EvidenceWeights | None = None
) -> list[str]:
    """Every fusion per set; "weight fit" is ``weighted`` at the weight the fitted signals give (``params``),
    "evidence" the module at ``shipped`` (the ``[search]`` defaults unless given)."""
    shipped = shipped or EvidenceWeights.of(SearchPolicy())
    names = ("keyword", "semantic", "weighted", "rrf", "blend", "weight fit", "evidence")
    lines = [
        f"| set ({split}) | n | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for s in sorted({q.set for q in qs}):
        mine = [q for q in qs if q.set == s and q.split == split]
        if not mine:
            continue
        cells = []
        for name in names:
            if name == "evidence":
                got = np.array([score(q, evidence_module(q, shipped)) for q in mine])
            elif name == "weight fit":
                got = np.array([score(q, weighted(q, weight_of(q, params))) for q in mine])
            else:
                got = np.array([fixed(q, name) for q in mine])
            main = f"{got[:, 0].mean():.3f}" if mine[0].metric != "top1" else f"{int(got[:, 1].sum())}"
            cells.append(f"{main} ({int(got[:, 1].sum())}/{int(got[:, 2].sum())})")
        lines.append(f"| {s} [{mine[0].metric}] | {len(mine)} | " + " | ".join(cells) + " |")
    return lines


def verdicts(qs: Sequence[Query], split: str, shipped: EvidenceWeights | None = None) -> list[str]:
    """Per set: does ``evidence`` score at least ``blend``; on known items, does each hybrid put the gold file first
    at least as often as ``keyword``, and on questions score at least both single modes (the issue's targets)?
    ``<`` marks a miss."""
    shipped = shipped or EvidenceWeights.of(SearchPolicy())
    lines = [
        f"| set ({split}) | evidence >= blend | keyword | semantic | blend | evidence |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for s in sorted({q.set for q in qs}):
        mine = [q for q in qs if q.set == s and q.split == split]
        if not mine:
            continue
        ev = np.array([score(q, evidence_module(q, shipped)) for q in mine])
        bl, kw, se = (np.array([fixed(q, name) for q in mine]) for name in ("blend", "keyword", "semantic"))
        ok = "yes" if ev[:, 0].mean() >= bl[:, 0].mean() - 1e-12 else "no"
        if mine[0].metric == "top1":
            singles = [f"{int(x[:, 1].sum())}" for x in (kw, se)]
            cells = [f"{int(x[:, 1].sum())}" + ("" if x[:, 1].sum() >= kw[:, 1].sum() else " <") for x in (bl, ev)]
        else:
            best = max(kw[:, 0].mean(), se[:, 0].mean()) - 1e-12
            singles = [f"{x[:, 0].mean():.3f}" for x in (kw, se)]
            cells = [f"{x[:, 0].mean():.3f}" + ("" if x[:, 0].mean() >= best else " <") for x in (bl, ev)]
        lines.append(f"| {s} | {ok} | " + " | ".join(singles + cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_eval", description=__doc__.split("\n")[0])
    parser.add_argument("lists", nargs="+", help="the JSON files tests.bench.fusion_lists wrote")
    parser.add_argument("--held-out", action="store_true", help="also the held-out parts, for the chosen weights")
    parser.add_argument("--features", default="bias+gap+margin", help="the signals of the fit (FEATURES)")
    parser.add_argument("--weights", default="", help="bias,coverage,margin,cosine,gap: report these instead of a fit")
    parser.add_argument("--evidence", default="", help="bias,margin,coverage of evidence fusion (default: [search])")
    parser.add_argument("--no-cv", dest="cv", action="store_false")
    parser.add_argument("--cv-features", default=",".join(FEATURES), help="the feature sets cross-validated")
    parser.add_argument("--ablate", action="store_true", help="blend less each rule, per set (tune; --held-out too)")
    args = parser.parse_args(argv)
    qs = load([Path(p) for p in args.lists])
    tune = [q for q in qs if q.split == "tune"]
    print(f"{len(qs)} queries, {len({q.set for q in qs})} sets; {len(tune)} tune")
    if args.cv:
        print("\nLeave-one-set-out (tune parts): each set scored with the weights fitted on the others\n")
        results = {f: cross_validate(qs, f) for f in args.cv_features.split(",")}
        sets = sorted(next(iter(results.values())))
        print("| features | " + " | ".join(sets) + " | mean |")
        print("|---|" + "---:|" * (len(sets) + 1))
        for f, r in results.items():
            print(f"| {f} | " + " | ".join(f"{r[s]:.3f}" for s in sets) + f" | {np.mean(list(r.values())):.4f} |")
    if args.weights:
        params = np.array([float(x) for x in args.weights.split(",")])
    else:
        params, best = fit(tune, args.features)
        print(f"\nfitted on every tune part ({args.features}): {params.tolist()} (objective {best:.4f})")
    print("\nscore per set (known items: top-1 files; questions: MRR@10; SciFact: nDCG@10); (top-1 / page exact)\n")
    shipped = EvidenceWeights(*(float(x) for x in args.evidence.split(","))) if args.evidence else None
    for split in ("tune", "held_out") if args.held_out else ("tune",):
        print()
        print("\n".join(table(qs, split, params, shipped)))
        print()
        print("\n".join(verdicts(qs, split, shipped)))
    if args.ablate:
        for split in ("tune", "held_out") if args.held_out else ("tune",):
            print()
            print("\n".join(ablations(qs, split)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
