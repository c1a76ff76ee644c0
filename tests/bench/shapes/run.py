"""Runs every shape's queries through a real kernel's search in each mode and scores them by file.

One kept kernel per corpus (:mod:`.kernel`); each item of that corpus (and each ``none`` item, asked of every
corpus) goes through ``search.request`` on the bus as keyword, semantic, and hybrid with each fusion of
:data:`foldermind.workers.indexer.search.fusion.FUSIONS` (a new fusion there is measured without a change here),
top_k 10 (SciFact's claims 200, as the lookup bench asks them, for nDCG@10 by abstract). Scores by gold file:
top-1 file, MRR@10 (1 / rank of the first hit from a gold file, 0 past 10), hit@5; ``none`` items keep their top
score only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.runtime.config import load
from foldermind.workers.indexer.search import fusion
from tests.bench.kernels import say
from tests.bench.lookup import Lists, search, side_lists
from tests.bench.retrieval import ndcg
from tests.bench.shapes.kernel import indexed
from tests.bench.shapes.sets import ANY, Item

TOP_K = 10
CLAIM_DEPTH = 200
Mode = tuple[str, str, str]  # label, search mode, fusion
MODES: tuple[Mode, ...] = (
    ("keyword", "keyword", ""),
    ("semantic", "semantic", ""),
    *((f"hybrid {name}", "hybrid", name) for name in fusion.FUSIONS),
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One item asked in one mode."""

    id: str
    shape: str
    corpus: str
    split: str
    new: bool
    mode: str
    files: list[str]  # the first TOP_K hits' files
    top_score: float | None
    ndcg: float | None = None


def rank(files: Sequence[str], gold: Sequence[str]) -> int:
    """1-based rank of the first hit from a gold file among the first TOP_K, 0 if none."""
    for i, f in enumerate(files[:TOP_K]):
        if f in gold:
            return i + 1
    return 0


def ask(client: BusClient, root: Path, item: Item, mode: Mode) -> Outcome:
    label, how, fuse = mode
    depth = CLAIM_DEPTH if item.shape == "claim" else TOP_K
    hits = search(client, root, item.query, how, depth, fuse)
    score = None
    if item.shape == "claim":
        docs = list(dict.fromkeys(Path(h.file).stem for h in hits))
        score = ndcg(docs[:10], item.relevant)
    top = hits[0].score if hits else None
    return Outcome(
        item.id,
        item.shape,
        item.corpus,
        item.split,
        item.source == "new",
        label,
        [h.file for h in hits[:TOP_K]],
        top,
        score,
    )


@dataclass(slots=True)
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    gold: dict[str, tuple[str, ...]] = field(default_factory=dict)  # item id -> gold files
    chunks: dict[str, int] = field(default_factory=dict)  # corpus -> chunks indexed
    files: dict[str, int] = field(default_factory=dict)
    default_fusion: str = ""
    lists: Lists | None = None  # item id -> keyword and semantic hits, 200 deep (``--lists``): fuse offline


def run_corpus(
    home: Path, corpus: str, items: Sequence[Item], modes: Sequence[Mode], out: Run, scifact_all: bool = False
) -> None:
    with indexed(home, corpus, scifact_all) as (kernel, built, index):
        out.chunks[corpus], out.files[corpus] = index.chunks, index.files
        out.default_fusion = load(kernel.home.supervisor_override).search.fusion
        mine = [i for i in items if i.corpus in (corpus, ANY)]
        with kernel.client("bench-shapes") as client:
            for mode in modes:
                for item in mine:
                    o = ask(client, built.folder, item, mode)
                    out.outcomes.append(
                        Outcome(
                            f"{o.id}@{corpus}" if item.corpus == ANY else o.id,
                            o.shape,
                            corpus,
                            o.split,
                            o.new,
                            o.mode,
                            o.files,
                            o.top_score,
                            o.ndcg,
                        )
                    )
                say(f"  {corpus}: {mode[0]}: {len(mine)} queries")
            if out.lists is not None:
                ids = [(f"{i.id}@{corpus}" if i.corpus == ANY else i.id, i.query) for i in mine]
                out.lists.update(side_lists(client, built.folder, ids))
        for item in mine:
            out.gold[item.id] = item.files


# --------------------------------------------------------------------------------------------
# scores


@dataclass(slots=True)
class Scores:
    n: int = 0
    top1: int = 0
    mrr: float = 0.0
    hit5: int = 0
    ndcg: float = 0.0
    ndcg_n: int = 0

    def add(self, o: Outcome, gold: Sequence[str]) -> None:
        r = rank(o.files, gold)
        self.n += 1
        self.top1 += r == 1
        self.mrr += 1.0 / r if r else 0.0
        self.hit5 += 0 < r <= 5
        if o.ndcg is not None:
            self.ndcg += o.ndcg
            self.ndcg_n += 1


def scores(run: Run, keep: object = None) -> dict[tuple[str, str, str, str, str], Scores]:
    """(shape, corpus or "all", split or "all", source "all"/"new", mode) -> scores, answerable items only."""
    out: dict[tuple[str, str, str, str, str], Scores] = {}
    for o in run.outcomes:
        if o.shape == "none":
            continue
        gold = run.gold[o.id]
        for corpus in (o.corpus, "all"):
            for split in (o.split, "all"):
                for source in ("all", "new") if o.new else ("all",):
                    out.setdefault((o.shape, corpus, split, source, o.mode), Scores()).add(o, gold)
    return out


def separation(run: Run, mode: str, split: str) -> tuple[float, float, float, int]:
    """For one mode and split ("all": both): the median top score of ``none`` items, of answerable ones, and the
    chance that an answerable item's top score beats a ``none`` item's of the same corpus (AUC; ties count half),
    and how many ``none`` items (times corpora). A search with no hit scores 0."""
    none_by: dict[str, list[float]] = {}
    ans_by: dict[str, list[float]] = {}
    for o in run.outcomes:
        if o.mode == mode and split in (o.split, "all"):  # no hit at all: score 0
            (none_by if o.shape == "none" else ans_by).setdefault(o.corpus, []).append(o.top_score or 0.0)
    wins = pairs = 0.0
    for corpus, nones in none_by.items():
        for a in ans_by.get(corpus, []):
            for b in nones:
                wins += 1.0 if a > b else 0.5 if a == b else 0.0
                pairs += 1
    every_none = [s for v in none_by.values() for s in v]
    every_ans = [s for v in ans_by.values() for s in v]
    med = statistics.median
    return (
        med(every_none) if every_none else float("nan"),
        med(every_ans) if every_ans else float("nan"),
        wins / pairs if pairs else float("nan"),
        len(every_none),
    )
