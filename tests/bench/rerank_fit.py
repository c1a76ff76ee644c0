"""A second stage over ``evidence``'s first passages, from what the indexer holds per candidate, fitted offline.

``python -m tests.bench.rerank_fit --lists LIST.json@HOME ... --cache FILE [--compare VARIANT,A,B,T]`` from the
repository root. Each ``LIST.json`` is what :mod:`tests.bench.fusion_lists` wrote, ``HOME`` the stopped home it was
dumped from (opened read-only). The first run reads, per query, the head of the shipped ``evidence`` ranking
(:data:`HEAD` passages, after the coverage rerank, before the repeat penalty) and for each of them:

- ``cos1`` its best unit's cosine to the query and ``cos2`` the mean of its two best (:mod:`.units`: every
  candidate's unit vectors from SQLite, the BM25-only ones too, whose semantic score the fusion takes as 0);
- ``near`` the largest share of the query's IDF mass within :data:`WINDOW` consecutive terms of heading and text;
- ``title`` the share of the query's IDF mass its document's title holds (the parser's, else the first short line).

The query vectors come from the product's :class:`QueryEncoder` (the index's model and precision); they are checked
against the dumped semantic cosines. The same pass times, query by query, the stage's reads and arithmetic against
the search's own in-process work (the query's encode, BM25 40 deep, the vector search 40 deep). All of it is kept
in ``--cache``.

The stage rescores the head ``(1 - a - b - t) * F + a * C + b * near + t * title`` (``F`` the ``evidence`` score and
``C`` the cosine, each min-max within the head), mapped back onto the head's own score range; the tail stays
beneath, then the repeat penalty as shipped. Each query's score is tabulated on the grid once; leaving one set out
picks a feature set, and ``--compare`` reads the held-out parts (once per decision) beside the shipped ``evidence``.
``--scaled`` weighs the cosine by the query's semantic share; ``--fill`` gives the BM25-only passages of the head
their own cosine on the semantic side instead (no parameter). The rules and figures: docs/benchmarks/fusion.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.protocol.runtime.home import Home
from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.ingest.units import title_of, unpack
from foldermind.workers.indexer.search import fusion, fusion_evidence
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.keyword.languages import stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import query_tokens, stem, text_terms
from foldermind.workers.indexer.storage.vectors import VectorIndex
from tests.bench import fusion_eval
from tests.bench.fusion_eval import Query, covers, documents_of, fixed, score
from tests.bench.kernels import say

HEAD = 30
WINDOW = 20
DEPTH = 40
POLICY = SearchPolicy()
SHIPPED = fusion_evidence.EvidenceWeights.of(POLICY)
PENALTY = POLICY.evidence_repeat_penalty
STEP = 0.1
GRID = [
    (v, a, b, t)
    for v in ("c1", "c2")
    for a, b, t in itertools.product(*([round(x * STEP, 2) for x in range(n)] for n in (9, 7, 5)))
    if a + b + t <= 0.9 + 1e-9 and (v == "c1" or a > 0)
]
SCALED_GRID = [
    ("s1", a, b, 0.0) for a, b in itertools.product(*([round(x * STEP, 2) for x in range(n)] for n in (9, 7)))
]
"""``--scaled``: the cosine's weight times the query's semantic share, ``a * (1 - w)`` (``w`` evidence's keyword
weight for that query)."""
FEATURE_SETS = ("c1", "c2", "p", "c1p", "c2p", "c1pt", "c2pt")
SCALED_SETS = ("p", "s1", "s1p")
SIMPLER = {"c1p": ("c1", "p"), "c2p": ("c2", "p"), "c1pt": ("c1p",), "c2pt": ("c2p",), "s1p": ("s1", "p")}
KNOWN = ("known", "remembered", "shape-fragment", "shape-scramble", "shape-keywords", "shape-heading", "shape-command")


@dataclass(slots=True)
class Head:
    ids: list[int]
    fused: NDArray[np.float64]
    cos1: NDArray[np.float64]
    cos2: NDArray[np.float64]
    near: NDArray[np.float64]
    title: NDArray[np.float64]
    tail: list[tuple[int, float]]
    check: list[float] = field(default_factory=list)  # |cos1 - dumped cosine| of the semantic side's candidates


def window_share(terms: list[str], wanted: dict[str, float], width: int = WINDOW) -> float:
    """The largest share of ``wanted``'s mass (term -> IDF) held within ``width`` consecutive ``terms``."""
    mass = sum(wanted.values())
    if mass <= 0:
        return 0.0
    at = [(i, t) for i, t in enumerate(terms) if t in wanted]
    counts: dict[str, int] = {}
    held = best = 0.0
    lo = 0
    for i, term in at:
        counts[term] = counts.get(term, 0) + 1
        if counts[term] == 1:
            held += wanted[term]
        while i - at[lo][0] >= width:
            old = at[lo][1]
            counts[old] -= 1
            if counts[old] == 0:
                held -= wanted[old]
            lo += 1
        best = max(best, held)
    return best / mass


def share(terms: set[str], wanted: dict[str, float]) -> float:
    mass = sum(wanted.values())
    return sum(v for t, v in wanted.items() if t in terms) / mass if mass > 0 else 0.0


class Reader:
    """A stopped home's rows, vectors and searches, read-only."""

    def __init__(self, home: Path) -> None:
        data = Home.resolve(home).data_dir
        self.db = sqlite3.connect(f"file:{data / 'index.sqlite'}?mode=ro", uri=True)
        meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        self.key = model_files.vectors_key(meta["embed_model"], meta["embed_precision"])
        self.bm25 = KeywordIndex(data / "tantivy")
        self.vectors = VectorIndex(data / "vectors.usearch", 384)

    def head(
        self, ids: list[int], qv: NDArray[np.float32], tokens: list[str], idfs: list[float]
    ) -> dict[str, list[float]]:
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            "SELECT c.id, c.text, c.heading, c.vector, c.doc_id, d.title, d.language FROM chunks c"
            f" JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({marks})",
            ids,
        ).fetchall()
        docs = sorted({r[4] for r in rows}) or [-1]
        firsts = dict(
            self.db.execute(
                f"SELECT doc_id, text FROM chunks WHERE doc_id IN ({','.join('?' * len(docs))}) AND ordinal = 0", docs
            ).fetchall()
        )
        out: dict[str, list[float]] = {"cos1": [], "cos2": [], "near": [], "title": []}
        by_id = {int(r[0]): r for r in rows}
        for cid in ids:
            r = by_id.get(cid)
            if r is None:
                for k in out:
                    out[k].append(0.0)
                continue
            _, text, heading, blob, doc, title, language = r
            lang = stemmed_as(language)
            wanted: dict[str, float] = {}
            for tok, v in zip(tokens, idfs, strict=True):
                s = stem(tok, lang)
                wanted[s] = wanted.get(s, 0.0) + v
            units = unpack(blob, len(qv)) if blob else None
            if units is None or not len(units):
                c1 = c2 = float("nan")
            else:
                cos = np.sort(units @ qv)[::-1]
                c1, c2 = float(cos[0]), float(cos[:2].mean())
            out["cos1"].append(c1)
            out["cos2"].append(c2)
            out["near"].append(window_share(text_terms(f"{heading or ''}\n{text}", lang), wanted))
            named = title_of(title, firsts.get(doc, ""))
            out["title"].append(share(set(text_terms(named, lang)), wanted) if named else 0.0)
        return out


def gather(lists: list[tuple[Path, Path]], cache: Path) -> dict[tuple[int, int], Head]:
    encoder = QueryEncoder(POLICY, IngestPolicy(), "tcp://127.0.0.1:9", "bench-rerank")
    encoder.start()
    while encoder.state == "loading":
        time.sleep(0.2)  # a bench's wait for the model thread, not a test
    if encoder.state != "ready":
        raise SystemExit(f"query model {encoder.state}: {encoder.error}")
    heads: dict[tuple[int, int], Head] = {}
    stage_ms: list[float] = []
    own_ms: list[float] = []
    for n, (path, home) in enumerate(lists):
        reader = Reader(home)
        raw = json.loads(path.read_text("utf-8"))
        qs = load(path)
        for i, (d, q) in enumerate(zip(raw, qs, strict=True)):
            text = d["item"]["text"]
            started = time.perf_counter()
            qv, why = encoder.encode(text + " ", 384, reader.key)  # a space: no cached vector, a real encode
            if qv is None:
                raise SystemExit(f"no query vector: {why}")
            reader.bm25.search(text, DEPTH)
            reader.vectors.search(qv, DEPTH)
            own = time.perf_counter() - started
            ranked = fusion_evidence.evidence(q.keyword, q.semantic, partial(covers, q), SHIPPED)
            ids = [c for c, _ in ranked[:HEAD]]
            tokens = list(dict.fromkeys(query_tokens(text)))
            started = time.perf_counter()
            f = reader.head(ids, qv, tokens, d["terms"]) if ids else {"cos1": [], "cos2": [], "near": [], "title": []}
            head = Head(
                ids,
                np.array([s for _, s in ranked[:HEAD]]),
                *(np.array(f[k]) for k in ("cos1", "cos2", "near", "title")),
                list(ranked[HEAD:]),
            )
            rescored(head, "c1", 0.3, 0.2, 0.1)  # the arithmetic, timed with the reads
            stage = time.perf_counter() - started
            own_ms.append(own * 1000)
            stage_ms.append(stage * 1000)
            sem = dict(q.semantic)
            head.check = [abs(c - sem[cid]) for cid, c in zip(ids, f["cos1"], strict=True) if cid in sem]
            heads[(n, i)] = head
        say(f"{path.name}: {len(qs)} queries")
    report = {
        "stage_ms": stage_ms,
        "own_ms": own_ms,
        "check": [x for h in heads.values() for x in h.check],
    }
    cache.write_bytes(pickle.dumps({"heads": heads, "report": report}))
    return heads


def load(path: Path) -> list[Query]:
    fusion_eval.W_GRID = np.array([0.5])  # fusion_eval's own weight table is not used here
    return fusion_eval.load([path])


def minmax(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], float, float]:
    x = np.where(np.isnan(x), np.nanmin(x) if not np.isnan(x).all() else 0.0, x)
    lo, hi = float(x.min()), float(x.max())
    return ((x - lo) / (hi - lo) if hi - lo > 1e-12 else np.ones_like(x)), lo, hi


def rescored(h: Head, variant: str, a: float, b: float, t: float) -> fusion.Ranking:
    """The head rescored at (a, b, t) with the cosine ``variant``, the tail beneath; (0, 0, 0) is the fusion's own."""
    if not h.ids:
        return list(h.tail)
    f, lo, hi = minmax(h.fused)
    c, _, _ = minmax(h.cos1 if variant == "c1" else h.cos2)
    keep = 1.0 - a - b - t
    s = keep * f + a * c + b * h.near + t * h.title
    order = sorted(range(len(h.ids)), key=lambda i: (-s[i], i))
    # Back on the fusion's scale (the repeat penalty is in its units); the tail, below ``lo``, stays beneath.
    return [(h.ids[i], lo + (hi - lo) * float(s[i])) for i in order] + list(h.tail)


def at(q: Query, h: Head, v: str, a: float, b: float, t: float) -> fusion.Ranking:
    """``rescored`` at a grid point; an ``s1`` point weighs the best unit's cosine by the query's semantic share."""
    if v == "s1":
        v, a = "c1", a * (1.0 - fusion_evidence.keyword_weight(q.keyword, SHIPPED))
    return rescored(h, v, a, b, t)


def filled(q: Query, h: Head) -> fusion.Ranking:
    """``--fill``: the head's passages only BM25 found join the semantic side at their own best unit's cosine, then
    ``evidence`` as shipped (no new parameter)."""
    have = {cid for cid, _ in q.semantic}
    extra = [(cid, float(c)) for cid, c in zip(h.ids, h.cos1, strict=True) if cid not in have and not np.isnan(c)]
    semantic = sorted([*q.semantic, *extra], key=lambda x: (-x[1], x[0]))
    return fusion_evidence.evidence(q.keyword, semantic, partial(covers, q), SHIPPED)


def filling(qs: list[Query], heads: list[Head], held_out: bool) -> None:
    for split in ("tune", "held_out") if held_out else ("tune",):
        rows, means = [], {}
        for s in sorted({q.set for q in qs}):
            mine = [(q, h) for q, h in zip(qs, heads, strict=True) if q.set == s and q.split == split]
            if not mine:
                continue
            got = [np.mean([score(q, final(q, f(q, h)))[0] for q, h in mine]) for f in (_shipped, filled)]
            kw, se = (np.mean([fixed(q, n)[0] for q, _ in mine]) for n in ("keyword", "semantic"))
            means[s] = (got[0], got[1], kw, se)
            rows.append(f"| {s} | {len(mine)} | {kw:.3f} | {se:.3f} | {got[0]:.3f} | {got[1]:.3f} |")
        print(f"\n| set ({split}) | n | keyword | semantic | shipped | fill |\n|---|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
        shapes = [s for s in means if s.startswith("shape-")]
        for k, name in ((0, "shipped"), (1, "fill")):
            every, shape = np.mean([m[k] for m in means.values()]), np.mean([means[s][k] for s in shapes])
            misses = [s for s, m in means.items() if m[k] < (m[2] if s.startswith(KNOWN) else max(m[2], m[3])) - 1e-12]
            print(f"- {split}, {name}: 21 sets {every:.4f}, shape sets {shape:.4f}; below target: {misses or 'none'}")
        print(f"- {split}, fill below shipped on: {[s for s, m in means.items() if m[1] < m[0] - 1e-12] or 'none'}")
    sf = [(q, h) for q, h in zip(qs, heads, strict=True) if q.set == "scifact"]
    for name, f in (("shipped", _shipped), ("fill", filled)):
        parts = [("tune",)] + ([("held_out",), ("tune", "held_out")] if held_out else [])
        vals = [np.mean([score(q, final(q, f(q, h)))[0] for q, h in sf if q.split in p]) for p in parts]
        print(f"- SciFact {name}: " + " / ".join(f"{v:.4f}" for v in vals))


def _shipped(q: Query, h: Head) -> fusion.Ranking:
    return rescored(h, "c1", 0.0, 0.0, 0.0)


def final(q: Query, ranked: fusion.Ranking) -> list[int]:
    files = documents_of({cid: f for cid, (f, _, _) in q.where.items()})
    return [c for c, _ in fusion.spread(ranked, files, PENALTY)]


def tabulate(qs: list[Query], heads: list[Head]) -> NDArray[np.float64]:
    out = np.zeros((len(qs), len(GRID)))
    for i, (q, h) in enumerate(zip(qs, heads, strict=True)):
        for g, (v, a, b, t) in enumerate(GRID):
            out[i, g] = score(q, final(q, at(q, h, v, a, b, t)))[0]
    return out


def allowed(fs: str) -> NDArray[np.bool_]:
    variant = next((v for v in ("c1", "c2", "s1") if v in fs), None)
    return np.array(
        [
            (a == 0 or (variant is not None and v == variant))
            and (variant is not None or a == 0)
            and (b == 0 or "p" in fs)
            and (t == 0 or "t" in fs)
            for v, a, b, t in GRID
        ]
    )


def pick(values: NDArray[np.float64], mask: NDArray[np.bool_]) -> int:
    vals = np.where(mask, values, -np.inf)
    best = vals.max()
    ties = [g for g in range(len(GRID)) if vals[g] >= best - 1e-12]
    return min(ties, key=lambda g: (sum(GRID[g][1:]), GRID[g][1:]))


def fit(qs: list[Query], tables: NDArray[np.float64], feature_sets: tuple[str, ...]) -> tuple[str, int]:
    tune = [i for i, q in enumerate(qs) if q.split == "tune"]
    names = sorted({qs[i].set for i in tune})
    members = [np.array([i for i in tune if qs[i].set == s]) for s in names]
    means = np.stack([tables[m].mean(axis=0) for m in members])  # set x grid
    shipped = means[:, 0].mean()  # GRID[0] is (c1, 0, 0, 0): no stage
    print(f"tune, shipped evidence (no stage): mean of {len(names)} sets {shipped:.4f}\n")
    print("| features | " + " | ".join(n.replace("shape-", "") for n in names) + " | LOSO mean | fit (a, b, t) |")
    print("|---|" + "---:|" * (len(names) + 2))
    print("| none | " + " | ".join(f"{x:.3f}" for x in means[:, 0]) + f" | {shipped:.4f} | |")
    loso: dict[str, float] = {}
    fits: dict[str, int] = {}
    for fs in feature_sets:
        mask = allowed(fs)
        cv = [means[k, pick(np.delete(means, k, axis=0).mean(axis=0), mask)] for k in range(len(names))]
        loso[fs] = float(np.mean(cv))
        fits[fs] = pick(means.mean(axis=0), mask)
        g = GRID[fits[fs]]
        print(f"| {fs} | " + " | ".join(f"{x:.3f}" for x in cv) + f" | {loso[fs]:.4f} | {g} |")
    chosen = max(feature_sets, key=lambda fs: loso[fs])
    while chosen in SIMPLER and any(loso[chosen] - loso[s] < 0.003 for s in SIMPLER[chosen]):
        chosen = max(SIMPLER[chosen], key=lambda s: loso[s])
    g = fits[chosen]
    obj = means[:, g].mean()
    print(f"\npick: {chosen}, LOSO {loso[chosen]:.4f} against no stage {shipped:.4f}; fit {GRID[g]}, tune {obj:.4f}")
    if loso[chosen] < shipped + 0.003:
        print("the pick does not beat the shipped tune mean by 0.003: nothing to read held out")
    return chosen, g


def compare(qs: list[Query], heads: list[Head], given: tuple[str, float, float, float]) -> None:
    names = ("keyword", "semantic", "blend", "shipped", "given")

    def run(q: Query, h: Head, name: str) -> tuple[float, float, float]:
        if name == "shipped":
            return score(q, final(q, rescored(h, "c1", 0.0, 0.0, 0.0)))
        if name == "given":
            return score(q, final(q, at(q, h, *given)))
        return fixed(q, name)

    for split in ("tune", "held_out"):
        means: dict[str, dict[str, float]] = {}
        print(f"\n| set ({split}) | n | " + " | ".join(names) + " |\n|---|---:|" + "---:|" * len(names))
        for s in sorted({q.set for q in qs}):
            mine = [(q, h) for q, h in zip(qs, heads, strict=True) if q.set == s and q.split == split]
            if not mine:
                continue
            got = {n: np.array([run(q, h, n) for q, h in mine]) for n in names}
            means[s] = {n: float(g[:, 0].mean()) for n, g in got.items()}
            top = mine[0][0].metric == "top1"
            cells = [f"{int(g[:, 1].sum())}" if top else f"{g[:, 0].mean():.3f}" for g in got.values()]
            print(f"| {s} [{mine[0][0].metric}] | {len(mine)} | " + " | ".join(cells) + " |")
        shapes = [s for s in means if s.startswith("shape-")]
        for n in names:
            every, shape = np.mean([m[n] for m in means.values()]), np.mean([means[s][n] for s in shapes])
            print(f"- {split}, {n}: mean over {len(means)} sets {every:.4f}, over {len(shapes)} shape sets {shape:.4f}")
        for n in ("shipped", "given"):
            misses = [
                s
                for s, m in means.items()
                if m[n] < (m["keyword"] if s.startswith(KNOWN) else max(m["keyword"], m["semantic"])) - 1e-12
            ]
            worse = [s for s, m in means.items() if m[n] < m["shipped"] - 1e-12]
            print(f"- {split}, {n}: below the issue's target on {', '.join(misses) or 'no set'}")
            if n == "given":
                print(f"- {split}, given below shipped on: {', '.join(worse) or 'no set'}")
    sf = [(q, h) for q, h in zip(qs, heads, strict=True) if q.set == "scifact"]
    print("\n| SciFact nDCG@10 | tune | held out | all |\n|---|---:|---:|---:|")
    for n in names:
        parts = [
            np.mean([run(q, h, n)[0] for q, h in sf if part in (q.split, "all")])
            for part in ("tune", "held_out", "all")
        ]
        print(f"| {n} | " + " | ".join(f"{v:.4f}" for v in parts) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.rerank_fit", description=__doc__.split("\n")[0])
    parser.add_argument("--lists", nargs="+", required=True, help="LIST.json@HOME, as fusion_lists wrote them")
    parser.add_argument("--cache", required=True, help="the features and timings (written on the first run)")
    parser.add_argument("--compare", default="", help="variant,a,b,t: read the held-out parts for these (once)")
    parser.add_argument("--scaled", action="store_true", help="the cosine weighed by the query's semantic share")
    parser.add_argument("--fill", choices=("tune", "held-out"), help="BM25-only passages' own cosines, no fit")
    args = parser.parse_args(argv)
    if args.scaled:
        GRID[:] = SCALED_GRID
    lists = [(Path(p.split("@")[0]), Path(p.split("@")[1])) for p in args.lists]
    cache = Path(args.cache)
    if not cache.exists():
        gather(lists, cache)
    saved = pickle.loads(cache.read_bytes())
    rep = saved["report"]
    med = statistics.median
    print(
        f"stage {med(rep['stage_ms']):.3f} ms median (p90 {np.percentile(rep['stage_ms'], 90):.3f}); search's own"
        f" work {med(rep['own_ms']):.3f} ms (p90 {np.percentile(rep['own_ms'], 90):.3f}); cos1 against the dumped"
        f" cosine: median |diff| {med(rep['check']):.5f}, max {max(rep['check']):.5f}\n"
    )
    qs: list[Query] = []
    heads: list[Head] = []
    for n, (path, _) in enumerate(lists):
        mine = load(path)
        qs += mine
        heads += [saved["heads"][(n, i)] for i in range(len(mine))]
    if args.fill:
        filling(qs, heads, args.fill == "held-out")
        return 0
    tables = np.zeros((0, len(GRID)))
    tfile = cache.with_suffix(".scaled.tables.npy" if args.scaled else ".tables.npy")
    if tfile.exists():
        tables = np.load(tfile)
    if tables.shape != (len(qs), len(GRID)):
        tables = tabulate(qs, heads)
        np.save(tfile, tables)
    same = sum(
        final(q, rescored(h, "c1", 0, 0, 0)) == fusion_eval.evidence_module(q, SHIPPED)
        for q, h in zip(qs, heads, strict=True)
    )
    print(f"no stage = the shipped evidence on {same} of {len(qs)} queries\n")
    fit(qs, tables, SCALED_SETS if args.scaled else FEATURE_SETS)
    if args.compare:
        v, *abt = args.compare.split(",")
        a, b, t = (float(x) for x in abt)
        compare(qs, heads, (v, a, b, t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
