"""``evidence`` fusion's three parameters fitted across every query shape at once, chosen by leaving one set out.

``python -m tests.bench.fusion_fit LISTS.json ...`` from the repository root, on what
:mod:`tests.bench.fusion_lists` wrote (loaded and scored as :mod:`tests.bench.fusion_eval` does). Each query's
score is tabulated once on a grid of keyword weights (:data:`W_GRID`) times coverage weights (:data:`C_GRID`), each
cell the module's own :func:`~foldermind.workers.indexer.search.fusion_evidence.rerank` of ``weighted`` at that keyword
weight; a parameter set (bias, margin slope, coverage weight) then costs a table look-up per query. Printed: for
each variant (the coverage weight fixed at 0: the margin alone; the three), every set's tune score under the
parameters fitted on every other set's tune part, and the fit on every tune part. The objective is the mean over
sets of each set's own score, every set weighing the same; the held-out parts are not read here
(``fusion_eval --held-out`` reads them, once per decision). The repeat penalty that follows the fusion in the
indexer (``[search] evidence_repeat_penalty``) is left out of the fit: it was chosen after it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.indexer.search import fusion, fusion_evidence
from tests.bench.fusion_eval import Query, covers, load, score

W_GRID = np.linspace(0.0, 1.0, 51)
C_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
BIASES = np.arange(-3.0, 3.0001, 0.5)
MARGINS = np.arange(0.0, 10.0001, 1.0)


def tabulate(q: Query) -> NDArray[np.float64]:
    """The query's score for every (keyword weight, coverage weight) of the grids."""
    out = np.zeros((len(W_GRID), len(C_GRID)))
    for i, w in enumerate(W_GRID):
        fused = fusion.weighted(q.keyword, q.semantic, float(w)) if q.keyword else list(q.semantic)
        for j, c in enumerate(C_GRID):
            ranked = fusion_evidence.rerank(fused, partial(covers, q), float(c)) if q.keyword else fused
            out[i, j] = score(q, [cid for cid, _ in ranked])[0]
    return out


def objective(qs: Sequence[Query], tables: NDArray[np.float64], grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """The mean over sets of each set's mean score, for every row (bias, margin slope, coverage weight) of ``grid``."""
    margins = np.array([q.margin for q in qs])
    members = [np.array([i for i, q in enumerate(qs) if q.set == s]) for s in sorted({q.set for q in qs})]
    x = grid[:, :1] + grid[:, 1:2] * margins[None, :]
    w = 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))
    wi = np.rint(w * (len(W_GRID) - 1)).astype(np.int64)
    ci = np.rint(grid[:, 2] / 0.05).astype(np.int64)[:, None].repeat(len(qs), axis=1)
    scores = tables[np.arange(len(qs))[None, :], wi, ci]
    result: NDArray[np.float64] = np.mean([scores[:, m].mean(axis=1) for m in members], axis=0)
    return result


def candidates(coverage: bool) -> NDArray[np.float64]:
    return np.array(list(itertools.product(BIASES, MARGINS, C_GRID if coverage else [0.0])))


def fit(qs: Sequence[Query], tables: NDArray[np.float64], coverage: bool) -> tuple[NDArray[np.float64], float]:
    grid = candidates(coverage)
    values = objective(qs, tables, grid)
    best = float(values.max())
    # Among ties, the least committed: the smallest coverage weight, then slope, then the bias nearest 0.
    ties = [i for i in range(len(grid)) if values[i] >= best - 1e-12]
    i = min(ties, key=lambda j: (float(grid[j][2]), abs(float(grid[j][1])), abs(float(grid[j][0]))))
    return grid[i], best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_fit", description=__doc__.split("\n")[0])
    parser.add_argument("lists", nargs="+", help="the JSON files tests.bench.fusion_lists wrote")
    args = parser.parse_args(argv)
    tune = [q for q in load([Path(p) for p in args.lists]) if q.split == "tune"]
    tables = np.stack([tabulate(q) for q in tune])
    sets = sorted({q.set for q in tune})
    print(f"{len(tune)} tune queries, {len(sets)} sets\n")
    print("| variant | " + " | ".join(sets) + " | mean |")
    print("|---|" + "---:|" * (len(sets) + 1))
    fits = {}
    for name, coverage in (("margin", False), ("margin+coverage", True)):
        cv = {}
        for s in sets:
            rest = np.array([q.set != s for q in tune])
            params, _ = fit([q for q in tune if q.set != s], tables[rest], coverage)
            mine = [q for q in tune if q.set == s]
            cv[s] = float(objective(mine, tables[~rest], params[None, :])[0])
        print(f"| {name} | " + " | ".join(f"{cv[s]:.3f}" for s in sets) + f" | {np.mean(list(cv.values())):.4f} |")
        fits[name] = fit(tune, tables, coverage)
    for name, (params, best) in fits.items():
        print(f"\nfitted on every tune part ({name}): bias {params[0]}, margin {params[1]}, coverage {params[2]}")
        print(f"(objective {best:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
