"""The blend's keep-the-exact-hit rules, swept offline on the lists the lookup bench wrote.

``python -m tests.bench.fusion_sweep OLD_LISTS NEW_LISTS [--held-out]`` from the repository root, after
``python -m tests.bench.lookup --home H --scifact-home S --lists OLD_LISTS`` (the first query set and SciFact)
and ``python -m tests.bench.lookup --home H --queries tests/bench/lookup_data/known2.jsonl --lists NEW_LISTS``
(the second known-item set) have written each query's keyword and semantic ranking (200 deep). Each rule set of
:func:`grid` fuses them with :func:`foldermind.workers.indexer.search.fusion.blend` itself at the indexer's depth (40 a
side for top_k 10; SciFact 200, as the lookup bench reads it), the file of each hit standing for its document
(the same-file rule). Printed per rule set: known-item top-1 file / page exact on both sets (keyword alone
beside them), natural questions' top-1 file, page exact, MRR@10 and hit@5, SciFact nDCG@10, and on how many
known items and SciFact queries the strong-keyword rule fires.

Only ``tune`` is printed for the grid. ``--held-out`` prints the held-out splits for the default rules
(``[search]``) and for the rules before this change, and nothing else: it is read once, after choosing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from foldermind.workers.indexer.search import fusion
from tests.bench import fields
from tests.bench.lookup import QUERIES, Hit, Lists, Query, Scores, load_lists, load_queries, scifact_split
from tests.bench.retrieval import ndcg
from tests.bench.scifact import judged_queries

KNOWN2 = QUERIES.with_name("known2.jsonl")
DEPTH, SCIFACT_DEPTH = 40, 200
BEFORE = replace(fusion.DEFAULT_RULES, tail_ratio=float("inf"))
"""The blend before the tail and same-file rules (the tail rule can never fire)."""
Rules = tuple[fusion.BlendRules, bool]  # the rules, and whether the same-file rule is on


def fuse(sides: dict[str, list[Hit]], query: str, rules: Rules, depth: int) -> list[Hit]:
    return fields.fuse(sides["keyword"][:depth], sides["semantic"][:depth], query, rules[0], rules[1])


def lookups(queries: list[Query], lists: Lists, rules: Rules, split: str, kind: str) -> tuple[Scores, Scores, int]:
    hybrid, keyword, fired = Scores(), Scores(), 0
    for q in queries:
        if q.kind == kind and q.split == split:
            hybrid.add(fuse(lists[q.id], q.query, rules, DEPTH), q)
            keyword.add(lists[q.id]["keyword"][:DEPTH], q)
            ranking = [(h.chunk_id, h.score) for h in lists[q.id]["keyword"][:DEPTH]]
            fired += fusion.strong_keyword_signal(ranking, rules[0])
    return hybrid, keyword, fired


def scifact(lists: Lists, rules: Rules, split: str) -> tuple[float, int, int]:
    total, n, fired = 0.0, 0, 0
    for i, q in enumerate(judged_queries()):
        if scifact_split(i) == split:
            hits = fuse(lists[q.id], q.text, rules, SCIFACT_DEPTH)
            docs = list(dict.fromkeys(Path(h.file).stem for h in hits))
            total += ndcg(docs[:10], q.relevant)
            n += 1
            ranking = [(h.chunk_id, h.score) for h in lists[q.id]["keyword"][:SCIFACT_DEPTH]]
            fired += fusion.strong_keyword_signal(ranking, rules[0])
    return total / n, fired, n


def grid() -> Iterator[tuple[str, Rules]]:
    yield "before (ratio to the 2nd 1.2)", (BEFORE, False)
    for ratio in (1.0, 1.05, 1.1, 1.15):
        yield f"ratio to the 2nd {ratio}", (replace(BEFORE, strong_ratio=ratio), False)
    yield "same-file rule alone", (BEFORE, True)
    for rank in (3, 4, 5, 6, 7, 8, 10, 20):
        for ratio in (1.2, 1.3, 1.4, 1.45, 1.5, 1.55, 1.6, 1.65, 1.7, 1.8, 2.0):
            rules = replace(fusion.DEFAULT_RULES, tail_rank=rank, tail_ratio=ratio)
            yield f"same file + tail rank {rank} x{ratio}", (rules, True)
    for bonus in (0.05, 0.15, 0.2):
        yield f"default, top bonus {bonus}", (replace(fusion.DEFAULT_RULES, top_bonus=bonus), True)
    yield "default ([search])", (fusion.DEFAULT_RULES, True)


def row(label: str, rules: Rules, split: str, sets: tuple[Lists, Lists, Lists]) -> str:
    old, new, sf = sets
    first = load_queries(QUERIES)
    a, ak, af = lookups(first, old, rules, split, "known-item")
    b, bk, bf = lookups(load_queries(KNOWN2), new, rules, split, "known-item")
    c, _, _ = lookups(first, old, rules, split, "natural")
    nd, sf_fired, sf_n = scifact(sf, rules, split)
    return (
        f"| {label} | {a.top1}/{a.page} (kw {ak.top1}/{ak.page}) | {b.top1}/{b.page} (kw {bk.top1}/{bk.page})"
        f" | {c.top1} / {c.page} / {c.mrr / c.n:.3f} / {c.hit5} | {nd:.4f} | {af + bf}/{a.n + b.n}, {sf_fired}/{sf_n} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_sweep", description=__doc__.split("\n")[0])
    parser.add_argument("old_lists", help="the lookup bench's lists of queries.jsonl (and its .scifact twin)")
    parser.add_argument("new_lists", help="the lookup bench's lists of known2.jsonl")
    parser.add_argument("--held-out", action="store_true", help="the held-out splits, default and before only")
    args = parser.parse_args(argv)
    old_path = Path(args.old_lists)
    sets = (
        load_lists(old_path),
        load_lists(Path(args.new_lists)),
        load_lists(old_path.with_name(old_path.stem + ".scifact" + old_path.suffix)),
    )
    split = "held_out" if args.held_out else "tune"
    print(
        f"| rules ({split}) | known items, set 1: top-1 / page | set 2: top-1 / page | natural: top-1 / page /"
        " MRR@10 / hit@5 | SciFact nDCG@10 | strong rule fires: known items, SciFact |"
    )
    print("|---|---|---|---|---:|---|")
    chosen = [("before", (BEFORE, False)), ("default ([search])", (fusion.DEFAULT_RULES, True))]
    for label, rules in chosen if args.held_out else grid():
        print(row(label, rules, split, sets), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
