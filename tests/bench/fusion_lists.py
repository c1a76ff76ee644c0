"""Each query's two raw rankings, dumped once per corpus, so that a fusion is evaluated offline in seconds.

``python -m tests.bench.fusion_lists --corpus manuals|scifact|django --home DIR --out FILE`` from the repository
root. A real kernel (default process map) indexes the corpus in ``DIR`` (kept: a second run reuses the index) and
waits until every chunk is embedded; then every query of every set over that corpus (:data:`SETS`) goes to
``search.request`` on the bus twice, ``keyword`` and ``semantic``, :data:`DEPTH` deep: the lists hybrid search
fuses (it cuts them to ``max(4 * top_k, depth_min)`` a side). The kernel is stopped, and the home's SQLite and
Tantivy index are opened read-only in this process for the evidence per candidate that the indexer has cheaply:
which of the query's terms each candidate's text or heading holds (a bit mask over the query's distinct terms),
and each term's IDF in the index (BM25's, from ``doc_freq``). From those, the share of the query's IDF mass a hit
matches is a sum over bits.

The sets and their tune / held-out split (each fixed before this harness first ran; :mod:`.fusion_eval` reads
them): the lookup bench's three files (``lookup_data``, their own splits), the answer bench's factoid questions
(``factoid_data``; ``questions.jsonl`` has its own split, the ``fresh*`` files none: every third question of a
corpus in file order is held out), the same questions' gold sentences as remembered words
(:func:`tests.bench.factoid_search.remembered`), SciFact's 150 judged claims (:func:`tests.bench.lookup.scifact_split`)
and the precision bench's 60 Django queries (every third held out). Each query searches only its own corpus's
home (the factoid bench searched one home of all three corpora). The shape bench's written rows
(``shapes/data``, their own split; a set per shape, ``shape-<shape>``, across corpora; the reused rows are the
sets above, the no-answer requests have no gold) join them, and ``--corpus pytest`` (pytest's docs) has only those.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.protocol.runtime.home import Home
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.keyword.languages import ENGLISH, stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import idf, query_tokens, stem, text_terms
from tests.bench import factoids, manuals
from tests.bench.factoid_search import remembered
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.lookup import QUERIES, SETS, SLOW_PARSES, load_queries, scifact_split
from tests.bench.mcpclient import kernel_config
from tests.bench.scifact import file_name, index_corpus, judged_queries, write_corpus
from tests.bench.shapes import corpora as shape_corpora
from tests.bench.shapes import sets as shape_sets
from tests.bench.shapes.kernel import indexed
from tests.bench.shapes.sets import KNOWN_SHAPES, written

DEPTH = 200
CORPORA = ("manuals", "scifact", "django", "pytest")
SHAPE_CORPUS = {
    "manuals": shape_corpora.MANUALS,
    "scifact": shape_corpora.SCIFACT,
    "django": shape_corpora.DJANGO,
    "pytest": shape_corpora.PYTEST,
}
FACTOIDS = Path(__file__).with_name("factoid_data")
PRECISION = Path(__file__).with_name("precision_data") / "django_queries.jsonl"
FACTOID_CORPUS = {"manuals": factoids.MANUALS, "scifact": factoids.SCIFACT, "django": factoids.DJANGO}


@dataclass(slots=True)
class Item:
    """One query of one set: its gold files (path under the corpus folder -> grade), its gold page (a known item
    in a PDF) and its score: ``top1`` (known items: the gold file first), ``mrr`` (questions: MRR@10 by file) or
    ``ndcg`` (SciFact: nDCG@10 by abstract)."""

    id: str
    set: str
    split: str
    metric: str
    text: str
    gold: dict[str, int]
    page: int | None = None


@dataclass(slots=True)
class Dumped:
    item: Item
    terms: list[float] = field(default_factory=list)  # each distinct query term's IDF
    keyword: list[list[object]] = field(default_factory=list)  # [chunk id, BM25, file, page, page_end, term mask]
    semantic: list[list[object]] = field(default_factory=list)  # [chunk id, cosine, file, page, page_end, mask]


def _third(i: int) -> str:
    return "held_out" if i % 3 == 2 else "tune"


def _factoid_items(corpus: str) -> Iterator[Item]:
    name = FACTOID_CORPUS[corpus]
    for path in sorted(FACTOIDS.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
        mine = [r for r in rows if r["corpus"] == name and "gold_file" in r]  # no-answer rows have no gold
        for i, r in enumerate(mine):
            split = r["split"] if r["split"] in ("tune", "held_out") else _third(i)
            gold = {r["gold_file"]: 1}
            yield Item(r["id"], f"factoid-{corpus}", split, "mrr", r["question"], gold)
            yield Item(r["id"] + "-r", f"remembered-{corpus}", split, "top1", remembered(r["sentence"]), gold)


def _shape_items(corpus: str) -> Iterator[Item]:
    for row in written():
        if row.corpus == SHAPE_CORPUS[corpus] and row.files:
            metric = "top1" if row.shape in KNOWN_SHAPES else "mrr"
            yield Item(row.id, f"shape-{row.shape}", row.split, metric, row.query, dict.fromkeys(row.files, 1))


def items(corpus: str, shapes_only: bool = False) -> list[Item]:
    """Every query over ``corpus``, by the rules in the module's docstring (``shapes_only``: the shape sets')."""
    out: list[Item] = []
    if corpus == "pytest" or shapes_only:
        return list(_shape_items(corpus))
    if corpus == "manuals":
        for name in SETS:
            for q in load_queries(QUERIES.with_name(name)):
                label = f"{Path(name).stem}-{'known' if q.kind == 'known-item' else 'natural'}"
                metric = "top1" if q.kind == "known-item" else "mrr"
                out.append(Item(q.id, label, q.split, metric, q.query, {q.file: 1}, q.page))
    elif corpus == "scifact":
        for i, claim in enumerate(judged_queries()):
            gold = {file_name(doc): grade for doc, grade in claim.relevant.items()}
            out.append(Item(claim.id, "scifact", scifact_split(i), "ndcg", claim.text, gold))
    else:
        rows = [json.loads(line) for line in PRECISION.read_text("utf-8").splitlines() if line.strip()]
        for i, r in enumerate(rows):
            out.append(Item(r["id"], "django-precision", _third(i), "mrr", r["query"], dict.fromkeys(r["relevant"], 1)))
    return out + list(_factoid_items(corpus)) + list(_shape_items(corpus))


def corpus_folder(corpus: str, home: Path) -> tuple[Path, int]:
    """The corpus's folder (built or found) and how many files it has."""
    if corpus == "manuals":
        return manuals.build(manuals.cache_dir()), manuals.FILES
    if corpus == "scifact":
        folder = home / "scifact-all"
        return folder, write_corpus(folder)
    if corpus == "pytest":
        docs = shape_corpora.pytest_corpus(home)
        return docs.folder, docs.files
    found = factoids.django_corpus(home)
    return found.folder, found.files


def _rankings(client: BusClient, root: Path, text: str) -> dict[str, list[list[object]]]:
    out: dict[str, list[list[object]]] = {}
    for mode in ("keyword", "semantic"):
        reply = client.request("indexer", SearchRequest(text, mode, DEPTH), SearchReply, timeout=120).body
        if reply.mode_used != mode:
            raise BenchFailure(f"{mode} answered as {reply.mode_used}: {reply.note}")
        hits: list[list[object]] = []
        for h in reply.results:
            page = h["location"].get("page")
            rel = Path(h["file_path"]).resolve().relative_to(root.resolve()).as_posix()
            hits.append([h["chunk_id"], h["score"], rel, page, h["location"].get("page_end", page)])
        out[mode] = hits
    return out


class Evidence:
    """A stopped home's chunk terms and IDF, read-only."""

    def __init__(self, home: Path) -> None:
        data = Home.resolve(home).data_dir
        self.db = sqlite3.connect(f"file:{data / 'index.sqlite'}?mode=ro", uri=True)
        self.doc_freq, self.total = KeywordIndex(data / "tantivy").term_stats(ENGLISH)

    def idf(self, token: str) -> float:
        return idf(self.doc_freq(token), self.total)

    def masks(self, terms: list[str], chunk_ids: list[int]) -> dict[int, int]:
        marks = ",".join("?" * len(chunk_ids))
        sql = (
            "SELECT c.id, c.text, c.heading, d.language FROM chunks c JOIN documents d ON d.id = c.doc_id"
            f" WHERE c.id IN ({marks})"
        )
        out: dict[int, int] = {}
        for cid, text, heading, language in self.db.execute(sql, chunk_ids):
            lang = stemmed_as(language)
            held = set(text_terms(f"{heading or ''}\n{text}", lang))
            out[int(cid)] = sum(1 << i for i, t in enumerate(terms) if stem(t, lang) in held)
        return out


def dump(corpus: str, home: Path, out: Path, shapes_only: bool = False) -> int:
    home.mkdir(parents=True, exist_ok=True)
    folder, files = corpus_folder(corpus, home)
    wanted = items(corpus, shapes_only)
    queries = [q for q in wanted if all((folder / f).is_file() for f in q.gold)]
    if missing := len(wanted) - len(queries):
        say(f"{corpus}: {missing} queries left out, a gold file not in {folder}")
    kernel = Kernel(f"fusion-lists-{corpus}", kernel_config(ingest=SLOW_PARSES), home)
    dumped: list[Dumped] = []
    try:
        kernel.start()
        say(f"{corpus}: indexing {folder} ({files} files) or checking the kept index")
        index = index_corpus(kernel, folder, files)
        say(f"  {index.files} files, {index.chunks} chunks; {len(queries)} queries")
        with kernel.client("bench-fusion-lists") as client:
            for q in queries:
                sides = _rankings(client, folder, q.text)
                dumped.append(Dumped(q, [], sides["keyword"], sides["semantic"]))
    finally:
        kernel.stop()
        kernel.cleanup()
    _add_evidence(dumped, Evidence(home))
    out.write_text(json.dumps([asdict(d) for d in dumped]), encoding="utf-8")
    say(f"wrote {len(dumped)} queries' lists to {out}")
    return len(dumped)


HELD_OUT_BATCHES = {"keywords": 3, "how": 4, "number": 4, "which": 4}
"""``--shape-home``: the fresh batches a decision reads (every older shape row has been read and is tune now)."""


def shape_home_items(corpus: str) -> list[Item]:
    """Every answerable shape-bench item of a shape-bench corpus (written, reused, claims): ``held_out`` only for
    :data:`HELD_OUT_BATCHES`, ``tune`` for every other row."""
    found, _ = shape_sets.load()
    out = []
    for row in found:
        if row.corpus == corpus and row.files:
            metric = "top1" if row.shape in KNOWN_SHAPES else "ndcg" if row.shape == "claim" else "mrr"
            split = "held_out" if HELD_OUT_BATCHES.get(row.shape) == row.batch else "tune"
            gold = row.relevant or dict.fromkeys(row.files, 1)
            out.append(Item(row.id, f"shape-{row.shape}", split, metric, row.query, gold))
    return out


def dump_shape_home(corpus: str, home: Path, out: Path, batch: int = 0) -> int:
    """As :func:`dump`, on the shape bench's kept home (``HOME/kernels/<corpus>``, ``tests.bench.shapes``); with
    ``batch``, only that batch's held-out rows."""
    queries = shape_home_items(corpus)
    if batch:
        queries = [q for q in queries if q.split == "held_out" and HELD_OUT_BATCHES.get(q.set[6:]) == batch]
    dumped: list[Dumped] = []
    with indexed(home, corpus) as (kernel, built, index):
        folder, root = built.folder, kernel.root
        say(f"  {index.files} files, {index.chunks} chunks; {len(queries)} queries")
        with kernel.client("bench-fusion-lists") as client:
            dumped = [Dumped(q, [], *_rankings(client, folder, q.text).values()) for q in queries]
    _add_evidence(dumped, Evidence(root))
    out.write_text(json.dumps([asdict(d) for d in dumped]), encoding="utf-8")
    say(f"wrote {len(dumped)} queries' lists to {out}")
    return len(dumped)


def _add_evidence(dumped: list[Dumped], evidence: Evidence) -> None:
    """Each query's terms' IDF and each hit's term mask (the module's docstring)."""
    for d in dumped:
        terms = list(dict.fromkeys(query_tokens(d.item.text)))
        d.terms = [round(evidence.idf(t), 4) for t in terms]
        ids = list({int(str(h[0])) for h in d.keyword + d.semantic})
        masks = evidence.masks(terms, ids) if terms else {}
        for h in d.keyword + d.semantic:
            h.append(masks.get(int(str(h[0])), 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_lists", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=CORPORA + shape_corpora.CORPORA, required=True)
    parser.add_argument("--home", required=True, help="the kernel's home (kept: its index is reused)")
    parser.add_argument("--shape-home", action="store_true", help="HOME is the shape bench's; the shape sets only")
    parser.add_argument("--batch", type=int, default=0, help="with --shape-home: only this fresh batch's rows")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--shapes-only", action="store_true", help="only the shape sets' queries")
    args = parser.parse_args(argv)
    try:
        if args.shape_home:
            dump_shape_home(args.corpus, Path(args.home).resolve(), Path(args.out), args.batch)
        else:
            dump(args.corpus, Path(args.home).resolve(), Path(args.out), args.shapes_only)
    except BenchFailure as exc:
        say(f"bench failed: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
