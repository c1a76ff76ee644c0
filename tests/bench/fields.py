"""Field boosts (title, heading, file name) and per-document evidence, swept offline on the lookup bench's homes.

``python -m tests.bench.fields --home DIR --scifact-home DIR --lists OUT [--report h,t,n,e ...] [--latency]``
from the repository root, after ``python -m tests.bench.lookup --home DIR --scifact-home DIR --lists OUT`` has
indexed both homes (the manuals and the SciFact subset) with this version's Tantivy fields and written each
query's semantic ranking. The kernels are stopped; this opens each home's Tantivy index and SQLite read-only in
this process and, for every combination of boosts
(:class:`foldermind.workers.indexer.storage.keyword.fields.Boosts`) in the grid, runs every query's keyword search
with :class:`~foldermind.workers.indexer.storage.keyword.bm25.KeywordIndex` itself, then
fuses it with the written semantic ranking by :func:`foldermind.workers.indexer.search.fusion.blend` for each evidence
share (:func:`~foldermind.workers.indexer.search.fusion.with_evidence`), exactly as the indexer does (depth 40 per side:
top_k 10; SciFact 200 deep, for Recall@100).

Only the ``tune`` split of each set is printed for the grid (lookups: known-item and natural questions, see
``lookup_data/README.md``; SciFact: :func:`tests.bench.lookup.scifact_split`). ``held_out`` is printed only for the
configurations named by ``--report`` (``heading,title,name,evidence``), once they are chosen. ``--latency``
times the keyword search of the SciFact queries with the first and the last ``--report`` boosts in turn (the same
process and index, alternating query by query), so that the cost of the added fields is read against the old
fields in one run on a shared machine.
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from foldermind.protocol.runtime.home import Home
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.search import query as operators
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.keyword.fields import Boosts
from foldermind.workers.indexer.storage.keyword.languages import stemmed_as
from tests.bench.lookup import KINDS, Hit, Lists, Scores, load_lists, load_queries, scifact_split
from tests.bench.retrieval import ndcg, recall
from tests.bench.scifact import judged_queries
from tests.bench.stats import pct

LOOKUP_DEPTH = 40
"""The indexer's depth per side for top_k 10 (``max(4 * top_k, depth_min)``)."""
SCIFACT_DEPTH = 200
HEADINGS = (0.0, 0.5, 1.0)
TITLES = (0.0, 0.5, 1.0, 2.0)
NAMES = (0.0, 0.5, 1.0, 2.0)
EVIDENCE = (0.0, 0.1, 0.2, 0.3, 0.5)


@dataclass(frozen=True, slots=True)
class Config:
    heading: float
    title: float
    name: float
    evidence: float

    @property
    def boosts(self) -> Boosts:
        return Boosts(self.heading, self.title, self.name)

    def label(self) -> str:
        return f"h{self.heading:g} t{self.title:g} n{self.name:g} e{self.evidence:g}"


def parse_config(text: str) -> Config:
    h, t, n, e = (float(x) for x in text.split(","))
    return Config(h, t, n, e)


class Corpus:
    """One stopped home's Tantivy index and the chunk -> (file, pages) of its SQLite."""

    def __init__(self, home: Path) -> None:
        data = Home.resolve(home).data_dir
        self.index = KeywordIndex(data / "tantivy")
        db = sqlite3.connect(f"file:{data / 'index.sqlite'}?mode=ro", uri=True)
        (root,) = db.execute("SELECT path FROM folders").fetchone()
        self.chunks: dict[int, tuple[str, int | None, int | None]] = {}
        self.texts: dict[int, tuple[str, str, str]] = {}
        for cid, path, p0, p1, text, heading, language in db.execute(
            "SELECT c.id, d.path, c.page_start, c.page_end, c.text, c.heading, d.language FROM chunks c"
            " JOIN documents d ON d.id = c.doc_id"
        ):
            self.chunks[int(cid)] = (Path(path).relative_to(root).as_posix(), p0, p1)
            self.texts[int(cid)] = (text, heading or "", stemmed_as(language))
        db.close()

    def keyword(self, query: str, boosts: Boosts, depth: int) -> list[Hit]:
        """The keyword side as the indexer asks it: the query's operators (a phrase, ``-word``) parsed."""
        self.index.boosts = boosts
        q = operators.parse(query)
        hits, _ = self.index.search(q.text, depth, None, q.phrases, q.required, q.excluded)
        return [Hit(h.chunk_id, h.score, *self.chunks[h.chunk_id]) for h in hits if h.chunk_id in self.chunks]

    def admitted(self, query: str, hits: list[Hit], matched: set[int]) -> list[Hit]:
        """``hits`` without the semantic neighbours the query's operators exclude (the indexer's cut)."""
        q = operators.parse(query)
        if not q.filters:
            return hits
        return [h for h in hits if h.chunk_id in matched or operators.admits(q, *self.texts[h.chunk_id])]


RULES = fusion.DEFAULT_RULES
"""The blend's rules of this run (``--evidence-chunks`` replaces the default's)."""


def fuse(
    keyword: list[Hit], semantic: list[Hit], query: str, rules: fusion.BlendRules, same_file: bool = True
) -> list[Hit]:
    """The two sides fused by the indexer's ``blend`` under ``rules``, each hit's file standing for its document
    (the evidence and the same-file rule; ``same_file=False`` turns that rule off)."""
    by_id = {h.chunk_id: h for h in keyword + semantic}
    files = {name: i for i, name in enumerate(dict.fromkeys(h.file for h in by_id.values()))}
    documents = {cid: files[h.file] for cid, h in by_id.items()}
    ranked = fusion.blend(
        [(h.chunk_id, h.score) for h in keyword],
        [(h.chunk_id, h.score) for h in semantic],
        rules,
        fusion.is_question(query),
        documents,
        None if same_file else lambda a, b: False,
    )
    return [by_id[c] for c, _ in ranked]


Row = dict[tuple[str, str, str], object]  # (set, split, mode) -> Scores or (nDCG, recall, n)


def measure(config: Config, manuals: Corpus, scifact: Corpus, lists: Lists, sf_lists: Lists) -> Row:
    out: Row = {}
    keyword_cache: dict[str, list[Hit]] = {}
    for q in load_queries():
        kw = keyword_cache.setdefault(q.id, manuals.keyword(q.query, config.boosts, LOOKUP_DEPTH))
        sem = lists[q.id]["semantic"][:LOOKUP_DEPTH]
        fused = manuals.admitted(
            q.query, fuse(kw, sem, q.query, replace(RULES, evidence=config.evidence)), {h.chunk_id for h in kw}
        )
        for mode, hits in (("keyword", kw), ("hybrid", fused)):
            score = out.setdefault((q.kind, q.split, mode), Scores())
            assert isinstance(score, Scores)
            score.add(hits[:10], q)
    for i, sq in enumerate(judged_queries()):
        kw = scifact.keyword(sq.text, config.boosts, SCIFACT_DEPTH)
        sem = sf_lists[sq.id]["semantic"][:SCIFACT_DEPTH]
        for mode, hits in (
            ("keyword", kw),
            ("hybrid", fuse(kw, sem, sq.text, replace(RULES, evidence=config.evidence))),
        ):
            docs = list(dict.fromkeys(Path(h.file).stem for h in hits))
            acc = out.setdefault(("scifact", scifact_split(i), mode), [0.0, 0.0, 0])
            assert isinstance(acc, list)
            acc[0] += ndcg(docs[:10], sq.relevant)
            acc[1] += recall(docs[:100], sq.relevant, 100)
            acc[2] += 1
    return out


def cells(row: Row, split: str, mode: str) -> list[str]:
    out: list[str] = []
    for kind in KINDS:
        s = row.get((kind, split, mode), Scores())
        assert isinstance(s, Scores)
        out += [f"{s.top1}/{s.n}", f"{s.page}/{s.n}", f"{s.mrr / max(s.n, 1):.3f}", f"{s.hit5}/{s.n}"]
    acc = row.get(("scifact", split, mode), [0.0, 0.0, 1])
    assert isinstance(acc, list)
    return [*out, f"{acc[0] / acc[2]:.4f}", f"{acc[1] / acc[2]:.4f}"]


_LOOKUP_COLUMNS = [f"{k} {m}" for k in ("KI", "NQ") for m in ("top1", "page", "MRR", "hit5")]
HEADER = " | ".join(["config", "mode", *_LOOKUP_COLUMNS, "SF nDCG@10", "SF R@100"])


def latency(scifact: Corpus, configs: Sequence[Config], rounds: int = 3) -> None:
    times: dict[str, list[float]] = {c.label(): [] for c in configs}
    queries = judged_queries()
    for c in configs:  # warm: the first search of a field reads its postings from disk
        for q in queries[:10]:
            scifact.keyword(q.text, c.boosts, 40)
    for _ in range(rounds):
        for q in queries:
            for c in configs:
                t0 = time.perf_counter()
                scifact.keyword(q.text, c.boosts, 40)
                times[c.label()].append((time.perf_counter() - t0) * 1000)
    for label, values in times.items():
        print(
            f"keyword search (depth 40, in process) {label}: median {pct(values, 0.5):.3f} ms,"
            f" p95 {pct(values, 0.95):.3f} ms, n {len(values)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fields", description=__doc__.split("\n")[0])
    parser.add_argument("--home", required=True, help="the lookup bench's manuals home (kept, stopped)")
    parser.add_argument("--scifact-home", required=True, help="its SciFact home (kept, stopped)")
    parser.add_argument("--lists", required=True, help="the lists the lookup bench wrote (--lists)")
    parser.add_argument("--report", nargs="*", default=[], help="heading,title,name,evidence: held_out too")
    parser.add_argument("--no-grid", dest="grid", action="store_false")
    for name, values in (("headings", HEADINGS), ("titles", TITLES), ("names", NAMES), ("evidence", EVIDENCE)):
        parser.add_argument(f"--{name}", default=",".join(f"{v:g}" for v in values), help="the grid's values")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--evidence-chunks", type=int, default=fusion.DEFAULT_RULES.evidence_chunks)
    args = parser.parse_args(argv)
    global RULES
    RULES = replace(fusion.DEFAULT_RULES, evidence_chunks=args.evidence_chunks)
    lists = load_lists(Path(args.lists))
    out = Path(args.lists)
    sf_lists = load_lists(out.with_name(out.stem + ".scifact" + out.suffix))
    manuals, scifact = Corpus(Path(args.home)), Corpus(Path(args.scifact_home))
    print(HEADER)
    if args.grid:
        grid = [
            [float(v) for v in str(values).split(",")]
            for values in (args.headings, args.titles, args.names, args.evidence)
        ]
        for h, t, n, e in itertools.product(*grid):
            config = Config(h, t, n, e)
            row = measure(config, manuals, scifact, lists, sf_lists)
            for mode in ("keyword", "hybrid") if e == grid[3][0] else ("hybrid",):
                print(" | ".join([config.label(), mode, *cells(row, "tune", mode)]), flush=True)
    reported = [parse_config(c) for c in args.report]
    for config in reported:
        row = measure(config, manuals, scifact, lists, sf_lists)
        for split in ("tune", "held_out"):
            for mode in ("keyword", "hybrid"):
                print(" | ".join([f"{config.label()} {split}", mode, *cells(row, split, mode)]), flush=True)
    if args.latency and reported:
        latency(scifact, [reported[0], reported[-1]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
