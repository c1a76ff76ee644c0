"""Lookups on real manuals: does each search mode put the remembered page first, and answer a question?

``python -m tests.bench.lookup [--home DIR] [--queries FILE ...] [--lists OUT] [--scifact-home DIR] [--no-write]``
from the repository root. A real kernel (default process map) indexes the manuals of :mod:`tests.bench.manuals`
(PDF pages and HTML from six Debian documentation packages) as one Smart Folder and waits until every
chunk is embedded; then every query of the query files (by default the three of ``lookup_data``, :data:`SETS`:
``queries.jsonl``, 72 known-item and 36 natural questions; ``known2.jsonl``, 45 known items; ``natural2.jsonl``, 59
natural questions; a third of each held out, see its README) runs through ``search.request`` on the bus in each
mode: keyword, semantic, and hybrid with each fusion (``weighted``, ``rrf``, ``blend``), top_k 10. Each file is
reported apart.

Scores, per query (the file is the path under ``manuals/``):

- **top-1 file**: the first result is from the gold file;
- **page exact**: the first result is from the gold file and, for a PDF, its pages hold the gold page
  (an HTML file has no pages: its file counts);
- **MRR@10**: 1 / the rank of the first result from the gold file (0 past 10);
- **hit@5**: a result from the gold file among the first five.

Each is reported per kind and split; tune on ``tune``, read ``held_out`` apart. ``--lists OUT`` also
writes each query's keyword and semantic rankings (200 deep, with file and pages) as JSON, so a fusion can
be tried offline on exactly the lists the indexer fuses (:func:`fused_hits`). With ``--scifact-home DIR``
(a home that :mod:`tests.bench.scifact` has indexed, or will) the 150 SciFact queries' lists are written
too (``OUT`` with ``.scifact`` before the suffix) and nDCG@10 and Recall@100 per mode and split are
reported (every third query in file order held out).

The report is printed and written to ``docs/benchmarks/lookup.md`` unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.protocol.runtime.config import load
from foldermind.workers.indexer.search import fusion
from tests.bench import machine
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.manuals import FILES, build, cache_dir
from tests.bench.markdown import para, table
from tests.bench.mcpclient import kernel_config, settings
from tests.bench.retrieval import ndcg, recall
from tests.bench.scifact import Query as SciFactQuery
from tests.bench.scifact import file_name, index_corpus, judged_queries, scifact_dir
from tests.bench.transports import REPO
from tests.config import Config

QUERIES = Path(__file__).with_name("lookup_data") / "queries.jsonl"
SETS = ("queries.jsonl", "known2.jsonl", "natural2.jsonl")
"""The query files of ``lookup_data``, in the order they were written."""
SHOWN_SETTINGS = ("fusion", "blend_keyword_weight", "blend_lookup_keyword_weight", "keyword_proximity")
"""The ``[search]`` settings the report names."""
REPORT = REPO / "docs" / "benchmarks" / "lookup.md"
TOP_K = 10
LIST_DEPTH = 200
SLOW_PARSES = {"parse_timeout_s": 900}
"""gnuplot's 311-page manual missed the default 60 s parse deadline twice on the shared 2-core machine under a
load average of 20, and was quarantined: the bench measures search, not parse speed."""
KINDS = ("known-item", "natural")
SPLITS = ("tune", "held_out")
MODES: tuple[tuple[str, str, str], ...] = (
    ("keyword", "keyword", ""),
    ("semantic", "semantic", ""),
    ("hybrid, weighted", "hybrid", "weighted"),
    ("hybrid, rrf", "hybrid", "rrf"),
    ("hybrid, blend", "hybrid", "blend"),
)


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    kind: str
    split: str
    query: str
    file: str
    page: int | None
    section: str | None = None


def load_queries(path: Path = QUERIES) -> list[Query]:
    return [Query(**json.loads(line)) for line in path.read_text("utf-8").splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class Hit:
    chunk_id: int
    score: float
    file: str  # under the corpus folder
    page: int | None
    page_end: int | None


def hits_of(reply: SearchReply, root: Path) -> list[Hit]:
    out = []
    for h in reply.results:
        loc = h["location"]
        page = loc.get("page")
        rel = Path(h["file_path"]).resolve().relative_to(root.resolve()).as_posix()
        out.append(Hit(h["chunk_id"], h["score"], rel, page, loc.get("page_end", page)))
    return out


# --------------------------------------------------------------------------------------------
# scores


@dataclass(slots=True)
class Scores:
    n: int = 0
    top1: int = 0
    page: int = 0
    hit5: int = 0
    mrr: float = 0.0

    def add(self, hits: Sequence[Hit], q: Query) -> None:
        self.n += 1
        files = [h.file for h in hits[:TOP_K]]
        if files and files[0] == q.file:
            self.top1 += 1
            first = hits[0]
            if q.page is None or (first.page is not None and first.page <= q.page <= (first.page_end or first.page)):
                self.page += 1
        if q.file in files[:5]:
            self.hit5 += 1
        if q.file in files:
            self.mrr += 1.0 / (files.index(q.file) + 1)

    def cells(self) -> list[str]:
        if not self.n:
            return ["-"] * 4
        return [f"{self.top1}/{self.n}", f"{self.page}/{self.n}", f"{self.mrr / self.n:.3f}", f"{self.hit5}/{self.n}"]


Lists = dict[str, dict[str, list[Hit]]]
"""query id -> {"keyword": hits, "semantic": hits}, each LIST_DEPTH deep."""
Merge = Callable[[fusion.Ranking, fusion.Ranking], fusion.Ranking]


def fused_hits(sides: dict[str, list[Hit]], merge: Merge, depth: int) -> list[Hit]:
    """The two sides cut to the indexer's depth and fused by ``merge`` offline, as hits."""
    keyword, semantic = sides["keyword"][:depth], sides["semantic"][:depth]
    by_id = {h.chunk_id: h for h in keyword + semantic}
    ranked = merge([(h.chunk_id, h.score) for h in keyword], [(h.chunk_id, h.score) for h in semantic])
    return [by_id[c] for c, _ in ranked]


# --------------------------------------------------------------------------------------------
# the run


def search(client: BusClient, root: Path, query: str, mode: str, top_k: int, fuse: str = "") -> list[Hit]:
    reply = client.request("indexer", SearchRequest(query, mode, top_k, None, fuse), SearchReply, timeout=60).body
    if reply.mode_used != mode:
        raise BenchFailure(f"{mode} answered as {reply.mode_used}: {reply.note}")
    return hits_of(reply, root)


def side_lists(client: BusClient, root: Path, queries: Sequence[tuple[str, str]]) -> Lists:
    return {
        qid: {mode: search(client, root, text, mode, LIST_DEPTH) for mode in ("keyword", "semantic")}
        for qid, text in queries
    }


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    search: dict[str, Any]
    chunks: int = 0
    rows: dict[tuple[str, str, str, str], Scores] | None = None  # (query file, mode label, kind, split)
    scifact: dict[tuple[str, str], tuple[float, float, int]] | None = None  # (label, split) -> nDCG, recall, n
    scifact_docs: int = 0
    elapsed_s: float = 0.0
    chunking: str = ""  # [ingest] chunk_max_tokens/chunk_overlap_tokens
    sets: list[str] = field(default_factory=list)  # the query files' names, in the order given


def run_lookup(
    client: BusClient,
    root: Path,
    queries: dict[str, list[Query]],
    modes: Sequence[tuple[str, str, str]],
    results: Results,
) -> Lists:
    """Every query of every file (by file name) in every mode; the side lists of all of them."""
    rows: dict[tuple[str, str, str, str], Scores] = {}
    for label, mode, fuse in modes:
        for name, qs in queries.items():
            for q in qs:
                hits = search(client, root, q.query, mode, TOP_K, fuse)
                for split in (q.split, "all"):
                    rows.setdefault((name, label, q.kind, split), Scores()).add(hits, q)
        say(f"  {label}: done")
    results.rows = rows
    return side_lists(client, root, [(q.id, q.query) for qs in queries.values() for q in qs])


def scifact_split(i: int) -> str:
    return "held_out" if i % 3 == 2 else "tune"


def run_scifact(client: BusClient, root: Path, modes: Sequence[tuple[str, str, str]], results: Results) -> Lists:
    queries = judged_queries()
    out: dict[tuple[str, str], list[float]] = {}
    for label, mode, fuse in modes:
        for i, q in enumerate(queries):
            docs = list(dict.fromkeys(Path(h.file).stem for h in search(client, root, q.text, mode, 200, fuse)))
            for split in (scifact_split(i), "all"):
                acc = out.setdefault((label, split), [0.0, 0.0, 0.0])
                acc[0] += ndcg(docs[:10], q.relevant)
                acc[1] += recall(docs[:100], q.relevant, 100)
                acc[2] += 1
        say(f"  scifact {label}: done")
    results.scifact = {k: (v[0] / v[2], v[1] / v[2], int(v[2])) for k, v in out.items()}
    return side_lists(client, root, [(q.id, q.text) for q in queries])


def write_scifact(dest: Path, distractors: int) -> tuple[int, list[SciFactQuery]]:
    """The first ``distractors`` abstracts and every judged one, as files (:func:`tests.bench.scifact.file_name`);
    returns how many and the judged queries."""
    queries = judged_queries()
    gold = {doc for q in queries for doc in q.relevant}
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(scifact_dir() / "corpus.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            doc = json.loads(line)
            if i < distractors or str(doc["_id"]) in gold:
                text = f"{doc.get('title', '').strip()}\n\n{doc.get('text', '').strip()}\n"
                path = dest / file_name(doc["_id"])
                if not path.exists() or path.read_text("utf-8") != text:
                    path.write_text(text, "utf-8")
                n += 1
    return n, queries


def scifact_lists(
    home: Path, distractors: int, modes: Sequence[tuple[str, str, str]], results: Results, config: Config
) -> Lists:
    kernel = Kernel("lookup-scifact", config, home)
    try:
        corpus = kernel.root / f"scifact-gold-{distractors}"
        files, _ = write_scifact(corpus, distractors)
        kernel.start()
        say(f"SciFact: {files} abstracts (every judged one and the first {distractors}) in {corpus}")
        index = index_corpus(kernel, corpus, files)
        results.scifact_docs = index.files
        with kernel.client("bench") as client:
            return run_scifact(client, corpus, modes, results)
    finally:
        kernel.stop()
        kernel.cleanup()


def dump(lists: Lists, path: Path) -> None:
    data = {qid: {side: [asdict(h) for h in hits] for side, hits in sides.items()} for qid, sides in lists.items()}
    path.write_text(json.dumps(data), encoding="utf-8")


def load_lists(path: Path) -> Lists:
    data = json.loads(path.read_text("utf-8"))
    return {qid: {side: [Hit(**h) for h in hits] for side, hits in sides.items()} for qid, sides in data.items()}


# --------------------------------------------------------------------------------------------
# the report


def render(r: Results) -> str:
    lines = [
        "# Lookups on real manuals: benchmark",
        "",
        f"Machine: {r.machine.get('CPU', '-')} ({r.machine.get('cores', '-')}), {r.machine.get('RAM', '-')};"
        f" measured {r.machine.get('date (UTC)', '-')} UTC, load average before the run"
        f" {r.machine.get('load average before the run', '-')} (a shared machine). Generated by"
        f" `python -m tests.bench.lookup`; {r.chunks} chunks indexed.",
        "",
        *para(
            f"Queries: {', '.join(f'`tests/bench/lookup_data/{name}`' for name in r.sets)} (each written before it"
            " was measured or tuned on; the folder's README says how and when), over the PDF and HTML manuals of six"
            " Debian documentation packages (`tests/bench/manuals.py`). Each query runs through `search.request` on"
            f" the bus, top_k {TOP_K}. top-1 file: the first result is from the gold file; page exact: and its pages"
            f" hold the gold page (HTML: the file); MRR@10 and hit@5 by file. Search settings: {r.search}. Chunks"
            f" (tokens/overlap): {r.chunking}."
        ),
        "",
    ]
    header = ["mode", "top-1 file", "page exact", "MRR@10", "hit@5"]
    got = r.rows or {}
    for name in r.sets:
        for kind in KINDS:
            if not any(key[0] == name and key[2] == kind for key in got):
                continue  # a file of one kind only
            for split in (*SPLITS, "all"):
                rows = [[label, *got.get((name, label, kind, split), Scores()).cells()] for label, _, _ in MODES]
                lines += [f"## {name}: {kind}, {split.replace('_', '-')}", "", *table(header, rows), ""]
    if r.scifact:
        lines += [
            "## SciFact",
            "",
            *para(
                f"The 150 judged SciFact queries over {r.scifact_docs} abstracts: every judged one and the first"
                " distractors of the corpus (`--scifact-docs`; all 5,183 are measured over MCP by `tests.bench.search`,"
                " docs/benchmarks/mcp.md)."
                " nDCG@10 and Recall@100 by abstract (top_k 200); every third query in file order held out."
            ),
            "",
        ]
        rows = []
        for label, _, _ in MODES:
            cells = [label]
            for split in (*SPLITS, "all"):
                nd, rc, _ = r.scifact.get((label, split), (float("nan"), float("nan"), 0))
                cells += [f"{nd:.4f}", f"{rc:.4f}"]
            rows.append(cells)
        hdr = ["mode"] + [f"{m} {s.replace('_', '-')}" for s in (*SPLITS, "all") for m in ("nDCG@10", "R@100")]
        lines += [*table(hdr, rows), ""]
    lines.append(f"Run time {r.elapsed_s:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lookup", description=__doc__.split("\n")[0])
    parser.add_argument("--home", default="", help="keep the kernel's home (and index) here and reuse it")
    parser.add_argument("--scifact-home", default="", help="also run SciFact, in this (kept) home")
    parser.add_argument("--scifact-docs", type=int, default=1000, help="SciFact distractors: the first N abstracts")
    parser.add_argument(
        "--queries",
        nargs="+",
        default=[str(QUERIES.with_name(name)) for name in SETS],
        help="the query files (default: the three of lookup_data)",
    )
    parser.add_argument("--lists", default="", help="write the side lists as JSON here")
    parser.add_argument(
        "--modes", default=";".join(label for label, _, _ in MODES), help="mode labels, separated by semicolons"
    )
    parser.add_argument(
        "--ingest",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [ingest] setting for both kernels, VALUE in TOML (e.g. chunk_overlap_tokens=0); repeatable",
    )
    parser.add_argument("--no-write", dest="write", action="store_false")
    args = parser.parse_args(argv)
    if bad := [kv for kv in args.ingest if "=" not in kv]:
        parser.error(f"--ingest takes KEY=VALUE: {bad}")
    ingest = settings(args.ingest)
    config = kernel_config(ingest=ingest)
    modes = [m for m in MODES if m[0] in {x.strip() for x in args.modes.split(";")}]
    t0 = time.monotonic()
    try:
        results = Results(machine.facts(REPO), {})
        queries = {Path(f).name: load_queries(Path(f)) for f in args.queries}
        results.sets = list(queries)
        home = Path(args.home).resolve() if args.home else None
        kernel = Kernel("lookup", kernel_config(ingest={**SLOW_PARSES, **ingest}), home)
        try:
            corpus = build(cache_dir())
            kernel.start()
            say(f"indexing {corpus} ({FILES} files) or checking the kept index")
            index = index_corpus(kernel, corpus, FILES)
            results.chunks = index.chunks
            chunking = kernel.policy
            results.chunking = f"{chunking.chunk_max_tokens}/{chunking.chunk_overlap_tokens}"
            policy = load(kernel.home.supervisor_override).search
            results.search = {name: getattr(policy, name) for name in SHOWN_SETTINGS}
            with kernel.client("bench") as client:
                lists = run_lookup(client, corpus, queries, modes, results)
        finally:
            kernel.stop()
            kernel.cleanup()
        if args.lists:
            dump(lists, Path(args.lists))
        if args.scifact_home:
            sf_lists = scifact_lists(Path(args.scifact_home).resolve(), args.scifact_docs, modes, results, config)
            if args.lists:
                out = Path(args.lists)
                dump(sf_lists, out.with_name(out.stem + ".scifact" + out.suffix))
    except (BenchFailure, BusError) as exc:
        say(f"bench failed: {exc}")
        return 1
    results.elapsed_s = time.monotonic() - t0
    report = render(results)
    print(report)
    if args.write:
        REPORT.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
