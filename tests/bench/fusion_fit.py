"""``evidence`` fusion's parameters fitted across every query shape at once, chosen by leaving one set out.

``python -m tests.bench.fusion_fit LISTS.json ... [--signals m,mt,...] [--bm25 top] [--compare B,M,K,T,S,L,C]``
from the repository root, on what :mod:`tests.bench.fusion_lists` wrote (loaded and scored as
:mod:`tests.bench.fusion_eval` does). The keyword weight is ``sigmoid(b + m * margin + k * cosine + t * top + s *
spread + l * level)``: ``margin`` BM25's first-two margin (the shipped signal), ``cosine`` the semantic side's margin,
``top`` the share of the query's IDF mass BM25's first hit holds, ``spread`` ``1 - last / first`` of the semantic
list's cosines, ``level`` its first cosine; then the module's coverage rerank at weight ``c`` and the repeat
penalty (``[search] evidence_repeat_penalty``), as the indexer runs them (``--bm25 top``: BM25 divided by its first
score instead of min-max, a candidate not shipped). Each query's score is tabulated once on a grid of keyword weights
(:data:`W_GRID`) times coverage weights (:data:`C_GRID`); a parameter set then costs a table look-up per query, and
every set's mean under every grid row is one matrix, from which each leave-one-set-out fit is read.

Printed, tune parts only: per signal set (``--signals``: letters of m, k, t, s, l), every set's tune score under the
parameters fitted on every other set's tune part, and the fit on every tune part. The objective is the mean over
sets of each set's own score, every set weighing the same. ``--compare`` reads the held-out parts (once per
decision): every fusion per set, tune and held out, the shipped ``evidence`` beside the given parameters, with
the issue's targets checked per set.
"""

from __future__ import annotations

import argparse
import itertools
import math
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

W_GRID = np.linspace(0.0, 1.0, 51)
C_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
BIASES = np.arange(-3.0, 3.0001, 0.5)
SLOPES = {
    "m": np.arange(0.0, 10.0001, 1.0),
    "k": np.arange(-4.0, 4.0001, 2.0),
    "t": np.arange(-4.0, 4.0001, 2.0),
    "s": np.arange(-8.0, 8.0001, 2.0),
    "l": np.arange(-8.0, 8.0001, 2.0),
}
LETTERS = "mktsl"
POLICY = SearchPolicy()
SHIPPED = (POLICY.evidence_bias, POLICY.evidence_margin, 0.0, 0.0, 0.0, 0.0, POLICY.evidence_coverage)
KNOWN = ("known", "remembered", "shape-fragment", "shape-scramble", "shape-keywords", "shape-heading", "shape-command")


def signals(q: Query) -> tuple[float, ...]:
    """In :data:`LETTERS` order: BM25's margin, the cosine margin, the top hit's IDF share, the semantic list's
    spread (``1 - last / first`` cosine: 0 when the list does not tell its hits apart) and its first cosine."""
    cos = [s for _, s in q.semantic]
    first = cos[0] if cos else 0.0
    spread = 1.0 - cos[-1] / first if cos and first > 0 else 0.0
    return q.margin, q.cosine, q.coverage, spread, first


def top_scaled(keyword: fusion.Ranking, semantic: fusion.Ranking, w: float) -> fusion.Ranking:
    """``weighted`` with BM25's scores divided by its first instead of min-max (``--bm25 top``; not shipped)."""
    first = keyword[0][1] if keyword and keyword[0][1] > 0 else 1.0
    kw, sem = {cid: s / first for cid, s in keyword}, fusion.min_max(semantic)
    return fusion.by_score({cid: w * kw.get(cid, 0.0) + (1.0 - w) * sem.get(cid, 0.0) for cid in kw | sem})


SCALES: dict[str, Callable[[fusion.Ranking, fusion.Ranking, float], fusion.Ranking]] = {
    "minmax": fusion.weighted,
    "top": top_scaled,
}
SCALE = ["minmax"]
"""How the fit and ``--compare``'s "given" scale BM25 (the shipped ``evidence`` is always min-max)."""


def ranked(q: Query, w: float, c: float, scale: str = "minmax") -> list[int]:
    """``weighted`` at ``w``, the coverage rerank at ``c``, then the repeat penalty: the indexer's ``evidence``."""
    fused = SCALES[scale](q.keyword, q.semantic, w) if q.keyword else list(q.semantic)
    out = fusion_evidence.rerank(fused, partial(covers, q), c) if q.keyword else fused
    files = documents_of({cid: f for cid, (f, _, _) in q.where.items()})
    return [cid for cid, _ in fusion.spread(out, files, POLICY.evidence_repeat_penalty)]


def tabulate(q: Query) -> NDArray[np.float64]:
    """The query's score for every (keyword weight, coverage weight) of the grids."""
    out = np.zeros((len(W_GRID), len(C_GRID)))
    for i, w in enumerate(W_GRID):
        for j, c in enumerate(C_GRID):
            out[i, j] = score(q, ranked(q, float(w), float(c), SCALE[0]))[0]
    return out


def weight(params: Sequence[float], sig: tuple[float, ...]) -> float:
    x = params[0] + sum(p * s for p, s in zip(params[1:], sig, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))


def grid_of(letters: str) -> NDArray[np.float64]:
    """Rows (b, m, k, t, s, l) of the grid for a signal set."""
    slopes = [SLOPES[name] if name in letters else [0.0] for name in LETTERS]
    return np.array(list(itertools.product(BIASES, *slopes)))


def set_means(
    sig: NDArray[np.float64], tables: NDArray[np.float64], members: list[NDArray[np.int64]], grid: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``[row, set, c]``: each set's mean score under each grid row and coverage weight."""
    x = grid[:, :1] + grid[:, 1:] @ sig.T
    wi = np.rint(1.0 / (1.0 + np.exp(-np.clip(x, -50, 50))) * (len(W_GRID) - 1)).astype(np.int64)
    out = np.zeros((len(grid), len(members), len(C_GRID)))
    for start in range(0, len(grid), 256):
        got = tables[np.arange(len(sig))[None, :], wi[start : start + 256], :]
        for k, m in enumerate(members):
            out[start : start + 256, k, :] = got[:, m, :].mean(axis=1)
    return out


def pick(grid: NDArray[np.float64], values: NDArray[np.float64]) -> tuple[int, int]:
    """The best (row, c); among ties the least committed: the smallest c, then slopes, then the bias nearest 0."""
    ties = np.argwhere(values >= values.max() - 1e-12)
    r, c = min(ties, key=lambda rc: (C_GRID[rc[1]], float(np.abs(grid[rc[0]][1:]).sum()), abs(grid[rc[0]][0])))
    return int(r), int(c)


def fit(qs: Sequence[Query], letters: Sequence[str]) -> list[str]:
    tables = np.stack([tabulate(q) for q in qs])
    sig = np.array([signals(q) for q in qs])
    names = sorted({q.set for q in qs})
    members = [np.array([i for i, q in enumerate(qs) if q.set == s]) for s in names]
    shipped = set_means(sig, tables, members, np.array([SHIPPED[:-1]]))[0, :, list(C_GRID).index(SHIPPED[-1])]
    lines = ["| signals | " + " | ".join(names) + " | mean |", "|---|" + "---:|" * (len(names) + 1)]
    lines.append(
        "| shipped weights, no fit | " + " | ".join(f"{v:.3f}" for v in shipped) + f" | {shipped.mean():.4f} |"
    )
    fits = []
    for sigs in letters:
        grid = grid_of(sigs)
        means = set_means(sig, tables, members, grid)
        cv = [
            means[(rc := pick(grid, np.delete(means, k, axis=1).mean(axis=1)))[0], k, rc[1]] for k in range(len(names))
        ]
        lines.append(f"| {sigs} | " + " | ".join(f"{v:.3f}" for v in cv) + f" | {np.mean(cv):.4f} |")
        r, c = pick(grid, means.mean(axis=1))
        got = means[r, :, c].mean()
        fits.append(f"{sigs}: b, m, k, t, s, l = {grid[r].tolist()}, c = {C_GRID[c]} (objective {got:.4f})")
    return [*lines, "", "Fitted on every tune part:", "", *(f"- {f}" for f in fits)]


def compare(qs: Sequence[Query], params: Sequence[float]) -> list[str]:
    """Every fusion per set, tune and held out; "shipped" is ``evidence`` at the ``[search]`` defaults."""
    names = ("keyword", "semantic", "weighted", "rrf", "blend", "shipped", "given")

    def run(q: Query, name: str) -> tuple[float, float, float]:
        if name in ("shipped", "given"):
            p, scale = (SHIPPED, "minmax") if name == "shipped" else (params, SCALE[0])
            return score(q, ranked(q, weight(p[:-1], signals(q)), p[-1], scale))
        return fixed(q, name)

    out = []
    for split in ("tune", "held_out"):
        means: dict[str, dict[str, float]] = {}
        out += ["", f"| set ({split}) | n | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
        for s in sorted({q.set for q in qs}):
            mine = [q for q in qs if q.set == s and q.split == split]
            if not mine:
                continue
            got = {n: np.array([run(q, n) for q in mine]) for n in names}
            means[s] = {n: float(g[:, 0].mean()) for n, g in got.items()}
            top = mine[0].metric == "top1"
            cells = [
                f"{int(g[:, 1].sum())}" if top else f"{g[:, 0].mean():.3f} ({g[:, 0].sum():.2f})" for g in got.values()
            ]
            out.append(f"| {s} [{mine[0].metric}] | {len(mine)} | " + " | ".join(cells) + " |")
        shapes = [s for s in means if s.startswith("shape-")]
        out.append("")
        for n in names:
            every, shape = np.mean([m[n] for m in means.values()]), np.mean([means[s][n] for s in shapes])
            out.append(
                f"- {split}, {n}: mean over {len(means)} sets {every:.4f}, over {len(shapes)} shape sets {shape:.4f}"
            )
        for n in ("shipped", "given"):
            misses = [
                s
                for s, m in means.items()
                if m[n] < (m["keyword"] if s.startswith(KNOWN) else max(m["keyword"], m["semantic"])) - 1e-12
            ]
            out.append(f"- {split}, {n}: below the issue's target on {', '.join(misses) or 'no set'}")
    sf = [q for q in qs if q.set == "scifact"]
    out += ["", "| SciFact nDCG@10 | tune | held out | all |", "|---|---:|---:|---:|"]
    for n in names:
        parts = [
            np.mean([run(q, n)[0] for q in sf if part in (q.split, "all")]) for part in ("tune", "held_out", "all")
        ]
        out.append(f"| {n} | " + " | ".join(f"{v:.4f}" for v in parts) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_fit", description=__doc__.split("\n")[0])
    parser.add_argument("lists", nargs="+", help="the JSON files tests.bench.fusion_lists wrote")
    parser.add_argument("--signals", default="m,mk,mt,mkt", help="signal sets to fit (letters of m, k, t, s, l)")
    parser.add_argument("--compare", default="", help="b,m,k,t,s,l,c: read the held-out parts (once)")
    parser.add_argument("--bm25", choices=tuple(SCALES), default="minmax", help="BM25's scaling in the fit and given")
    args = parser.parse_args(argv)
    SCALE[0] = args.bm25
    fusion_eval.W_GRID = np.array([0.5])  # fusion_eval's own weight table is not used here
    qs = fusion_eval.load([Path(p) for p in args.lists])
    tune = [q for q in qs if q.split == "tune"]
    print(f"{len(tune)} tune queries, {len({q.set for q in tune})} sets\n")
    print("\n".join(fit(tune, args.signals.split(","))))
    if args.compare:
        print("\n".join(compare(qs, [float(x) for x in args.compare.split(",")])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
