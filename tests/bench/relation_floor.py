"""The relation cover (:mod:`foldermind.workers.answers.relation`) beside the running floor, offline.

``python -m tests.bench.relation_floor sweep --floor FLOOR.json [--shapes SHAPES.json] [--out DIR]`` from the
repository root. The rows are the floor bench's kept ``--json`` (:mod:`tests.bench.answer_floor`, which keeps each
answer's floorless citations) and the shape bench's; the model's query likelihood for the rows in its band is read
from ``DIR/qlik-<split>.jsonl`` (:mod:`tests.bench.answer_judge` ``score --measure qlik --band 0.61``). The running
floor (*main*) refuses a row when the evidence floor does, the quotes are none, or the row is in the model's band and
its likelihood gain is under ``likely.LIKELY_GAIN``. The relation floor (c, r) refuses, besides, an answer whose best
cosine is under c and whose relation cover is under r. ``sweep`` scores the grid on tune and picks by the rule in
docs/benchmarks/s51-na-rule.txt; ``read --at C,R`` reads one floor on both halves, by kind and answer shape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from foldermind.workers.answers import likely, relation
from tests.bench import answer_floor as af
from tests.bench import answer_judge as aj

COVERS = [0.2, 0.25, 0.34, 0.4, 0.5, 0.6, 0.67, 0.75, 0.8, 1.0]  # refused under: 1.0 is "any relation term missing"
BANDS = [round(0.55 + 0.025 * i, 3) for i in range(11)] + [1.01]  # 0.55 .. 0.80, and every cosine
Floor = tuple[float, float] | None


def cover(a: af.Asked) -> float | None:
    """``a``'s relation cover over its floorless quotes (None without quotes)."""
    cited = [relation.Cited.of(c) for c in a.cited]
    return relation.cover(a.question, cited) if cited else None


def main_refuses(a: af.Asked) -> bool:
    """The running floor: the evidence floor, no quote, or the model's reading in its band."""
    if af._refused(a, af.CURRENT) or a.answer.startswith(aj.REFUSAL):
        return True
    gain = (a.support or {}).get("qlik")
    return aj.in_band(a, likely.LIKELY_BAND) and gain is not None and gain < likely.LIKELY_GAIN


def refuses(a: af.Asked, at: Floor) -> bool:
    if main_refuses(a) or at is None:
        return main_refuses(a)
    c, r = at
    got = cover(a)
    return got is not None and max(a.semantic, a.clause) < c and got < r


def score(asked: list[af.Asked], split: str, at: Floor) -> tuple[int, int, int, int]:
    none = [a for a in asked if a.kind != "answerable" and a.split == split]
    held = [a for a in asked if a.kind == "answerable" and a.split == split and a.holds_gold]
    return sum(refuses(a, at) for a in none), len(none), sum(refuses(a, at) for a in held), len(held)


def sweep(asked: list[af.Asked]) -> list[str]:
    """Every (band, cover) on tune and the pick: the most tune no-answer refused at no more than one more tune answer
    lost than main and at most 2%; ties to fewer lost, the lower band, the lower cover."""
    base = score(asked, "tune", None)
    limit = min(base[2] + 1, int(0.02 * base[3]))
    lines = [f"main: tune refused {base[0]}/{base[1]}, lost {base[2]}/{base[3]}; allowed loss {limit}", ""]
    lines += ["| band | cover under | tune refused | tune lost |", "|---:|---:|---:|---:|"]
    best: tuple[int, int, float, float] | None = None
    for c in BANDS:
        for r in COVERS:
            refused, _n, lost, _h = score(asked, "tune", (c, r))
            lines.append(f"| {c} | {r} | {refused} | {lost} |")
            key = (-refused, lost, c, r)
            if lost <= limit and refused > base[0] and (best is None or key < best):
                best = key
    pick = f"{best[2]},{best[3]}" if best else "none (no floor refuses more on tune within the loss)"
    return [*lines, "", f"Chosen on tune: {pick}."]


def read(asked: list[af.Asked], at: tuple[float, float]) -> list[str]:
    """Main and the floor ``at`` on both halves, by kind and by answer shape."""
    lines = [f"| group | split | main | relation floor {at} |", "|---|---|---:|---:|"]
    groups = sorted({a.kind for a in asked}) + sorted({f"lost {af._shape(a)}" for a in asked if a.kind == "answerable"})
    for split in ("tune", "held_out"):
        refused, n, lost, h = score(asked, split, None)
        r2, _n, l2, _h = score(asked, split, at)
        lines += [f"| no-answer refused | {split} | {refused}/{n} | {r2}/{n} |"]
        lines += [f"| gold answers lost | {split} | {lost}/{h} | {l2}/{h} |"]
        for g in groups:
            if g.startswith("lost "):
                rows = [a for a in asked if a.kind == "answerable" and a.holds_gold and f"lost {af._shape(a)}" == g]
            else:
                rows = [a for a in asked if a.kind == g and g != "answerable"]
            rows = [a for a in rows if a.split == split]
            if rows:
                before, after = sum(refuses(a, None) for a in rows), sum(refuses(a, at) for a in rows)
                lines.append(f"| {g} | {split} | {before}/{len(rows)} | {after}/{len(rows)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.relation_floor", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("sweep", "read"))
    parser.add_argument("--floor", required=True, help="the floor bench's --json")
    parser.add_argument("--shapes", help="the shape bench's --json")
    parser.add_argument("--out", default=".", help="where answer_judge kept its qlik scores")
    parser.add_argument("--at", help="read: band,cover")
    args = parser.parse_args(argv)
    asked = aj.rows(Path(args.floor), Path(args.shapes) if args.shapes else None)
    splits = ("tune",) if args.step == "sweep" else ("tune", "held_out")
    missing = aj.attach(asked, Path(args.out), splits, "qlik", likely.LIKELY_BAND)
    lines = [f"rows in the model's band without a kept reading: {missing}"]
    if args.step == "sweep":
        lines += sweep(asked)
    else:
        if not args.at:
            parser.error("read needs --at band,cover")
        c, r = (float(v) for v in args.at.split(","))
        lines += read(asked, (c, r))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
