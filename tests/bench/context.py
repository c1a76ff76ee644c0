"""Contextual chunks, measured offline: a chunk embedded (and/or keyword-indexed) with its document's title or
heading path in front, against the chunk alone.

    python -m tests.bench.context --corpus scifact|django [--held-out] [--threads 2]

A SciFact file is "title, blank line, text" and makes 1.91 chunks (256 tokens, 32 overlap): its 2nd chunk holds
neither the title nor the opening. A chunk deep in a manual's section lacks its heading the same way. Each
document here goes through the pipeline's own path: the txt parser (:func:`foldermind.workers.parser.formats.txt.
parse_txt`: its title and heading paths), the parsers' chunker (256/32), the embedder's int8 ONNX encoder (its
256-token truncation: the prefix counts against it), exact cosine over every chunk, a real Tantivy index
(:class:`~foldermind.workers.indexer.storage.keyword.bm25.KeywordIndex`, default boosts) built in a temp dir, and the
indexer's ``blend`` (:func:`tests.bench.fields.fuse`, the default rules) over the two chunk rankings 200 deep.
A document ranks at its best chunk. nDCG@10 and recall@100 per mode.

Context variants (the text the encoder and/or Tantivy sees; the chunk's own text is unchanged):

- ``none``: the chunk alone (what the pipeline does today);
- ``title``: the document's title (the parser's, else its first line when that is short) before every chunk
  that does not already start with it;
- ``path``: the chunk's heading path (``Title > Section > Sub``) instead, where the parser gives one, less the
  last heading when the chunk already starts with it (the section's first chunk).

Keyword variants: ``none``; ``field``: the title (as above) in Tantivy's ``title`` field (boost 0.25), which a
SciFact file, having no parser title, leaves empty today; ``text``: the prefix in the ``text`` field itself.

int8 vectors depend on their batch: onnxruntime's dynamic quantisation sets an activation's scale over the whole
batch, so a chunk's vector moves with the texts it is encoded beside (the same token ids read SciFact tune dense
nDCG@10 0.6981 and 0.7051 in two batchings). ``--batch 1`` encodes each text alone, so a variant's figures differ
from another's only by the texts that changed. Vectors are kept by text in ``--cache`` between runs.

SciFact's queries are split as the lookup and search benches split them (:func:`tests.bench.lookup.
scifact_split`): only ``tune`` is printed unless ``--held-out``, which is read once, after choosing. Django
(the onnx_int8 bench's 587 doc files, its 60 queries and the 36 factoids) is a check that nothing is lost on
another corpus, all queries counted.

Measured 2026-12-03 (docs/benchmarks/mcp.md, "Contextual chunks"): no gain on the tune half; not built.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.embedding import model_files, onnx_int8
from foldermind.workers.indexer.search.fusion import DEFAULT_RULES
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import txt
from tests.bench.fields import fuse
from tests.bench.lookup import Hit, scifact_split
from tests.bench.machine import facts
from tests.bench.onnx_int8 import DATA, FACTOIDS, _doc_members
from tests.bench.retrieval import ndcg, recall
from tests.bench.scifact import judged_queries, scifact_dir
from tests.helpers import MODEL_CACHE

DEPTH = 200


MAX_CONTEXT_CHARS = 200
"""A longer context is cut at a word: it counts against the model's 256 tokens (~50 tokens at most)."""
MAX_OPENING_CHARS = 200
"""A first line longer than this is a sentence of the text, not a title."""
SEPARATOR = " > "
"""Between a heading path's headings (the parsers' own)."""


def opening(text: str) -> str:
    """The document's first paragraph when it is one short line (a title the parser did not mark), else ''."""
    first = text.lstrip().split("\n\n", 1)[0].strip()
    return first if first and "\n" not in first and len(first) <= MAX_OPENING_CHARS else ""


def document_title(title: str | None, opening_line: str) -> str:
    """The parser's title, else the document's opening line."""
    return (title or "").strip() or opening_line


def _cut(context: str) -> str:
    if len(context) <= MAX_CONTEXT_CHARS:
        return context
    cut = context[:MAX_CONTEXT_CHARS]
    return cut[: cut.rfind(" ")] if " " in cut else cut


def embedded_text(text: str, context: str) -> str:
    """``text`` with ``context`` (a title, or a heading path ``A > B > C``) before it, less what the chunk
    already starts with: a chunk that starts with its last heading gets only the headings above it."""
    headings = [h.strip() for h in context.split(SEPARATOR) if h.strip()]
    if headings and text.lstrip().startswith(headings[-1]):
        headings.pop()
    if not headings:
        return text
    return f"{_cut(SEPARATOR.join(headings))}\n{text}"


@dataclass
class Chunk:
    doc: str
    text: str
    heading: str | None
    title: str | None  # the parser's


@dataclass
class Corpus:
    name: str
    chunks: list[Chunk]
    openings: dict[str, str]  # doc -> its first non-blank line
    query_sets: dict[str, list[tuple[str, dict[str, int]]]]  # set -> (query, relevant doc -> grade)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _chunks(docs: dict[str, bytes]) -> tuple[list[Chunk], dict[str, str]]:
    tokenizer = load_tokenizer()
    out: list[Chunk] = []
    openings: dict[str, str] = {}
    for doc, data in docs.items():
        parsed = txt.parse_txt(data)
        # The extracted text, blank lines kept: its opening paragraph reads as the pipeline's first chunk does.
        openings[doc] = opening("\n".join(s.text for s in parsed.segments))
        for c in chunk(parsed.segments, tokenizer, 256, 32):
            out.append(Chunk(doc, c["text"], c.get("heading"), parsed.title))
    return out, openings


def scifact(split: str) -> Corpus:
    docs: dict[str, bytes] = {}
    for line in (scifact_dir() / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        docs[d["_id"]] = f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n".encode()
    chunks, openings = _chunks(docs)
    queries = [(q.text, q.relevant) for i, q in enumerate(judged_queries()) if scifact_split(i) == split]
    return Corpus("scifact", chunks, openings, {f"scifact {split}": queries})


def django() -> Corpus:
    from tests.bench.factoids import django_sdist

    docs = dict(_doc_members(django_sdist()))
    chunks, openings = _chunks(docs)
    own = [json.loads(line) for line in (DATA / "django_queries.jsonl").read_text(encoding="utf-8").splitlines()]
    factoids = [json.loads(line) for line in FACTOIDS.read_text(encoding="utf-8").splitlines()]
    return Corpus(
        "django",
        chunks,
        openings,
        {
            "django queries": [(q["query"], dict.fromkeys(q["relevant"], 1)) for q in own],
            "django factoids": [(f["question"], {f["gold_file"]: 1}) for f in factoids if f["corpus"] == "django-docs"],
        },
    )


Variant = Callable[[Chunk, Corpus], str]
"""The context of a chunk ('' for none)."""


def title_of(c: Chunk, corpus: Corpus) -> str:
    return document_title(c.title, corpus.openings[c.doc])


VARIANTS: dict[str, Variant] = {
    "none": lambda c, corpus: "",
    "title": lambda c, corpus: title_of(c, corpus),
    "path": lambda c, corpus: c.heading or title_of(c, corpus),
}


class Encoder:
    """The int8 encoder with a cache by text (a chunk the context leaves alone is encoded once)."""

    def __init__(self, threads: int, cache: Path, batch: int) -> None:
        self.batch = batch
        model_dir = model_files.model_dir()
        self.loaded = onnx_int8.open_precision(
            model_dir, model_files.model_name(model_dir), MODEL_CACHE, threads, "int8"
        )
        self.cache_path = cache
        self.cache: dict[str, NDArray[np.float32]] = {}
        if cache.is_file():
            with np.load(cache) as z:
                self.cache = {k: z[k] for k in z.files}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def encode(self, texts: list[str]) -> NDArray[np.float32]:
        todo = list(dict.fromkeys(t for t in texts if self.key(t) not in self.cache))
        if todo:
            started = time.perf_counter()
            matrix = self.loaded.encoder.encode_longest_first(todo, self.batch)
            if len(todo) > 1:
                say(f"encoded {len(todo)} texts, {len(todo) / (time.perf_counter() - started):.1f}/s")
            for t, v in zip(todo, matrix, strict=True):
                self.cache[self.key(t)] = v
            if len(todo) > 1:
                np.savez(self.cache_path, **self.cache)  # type: ignore[arg-type]  # numpy 2 stubs: allow_pickle
        return np.stack([self.cache[self.key(t)] for t in texts])


def keyword_index(corpus: Corpus, where: Path, kind: str) -> KeywordIndex:
    index = KeywordIndex(where)
    doc_ids = {d: i for i, d in enumerate(dict.fromkeys(c.doc for c in corpus.chunks))}
    rows = []
    for i, c in enumerate(corpus.chunks):
        title = title_of(c, corpus) if kind == "field" else c.title
        text = embedded_text(c.text, title_of(c, corpus)) if kind == "text" else c.text
        rows.append(
            {
                "id": i,
                "doc_id": doc_ids[c.doc],
                "text": text,
                "heading": c.heading,
                "folder_id": "f",
                "path": c.doc,
                "title": title,
            }
        )
    index.replace([], rows)
    index.commit()
    return index


def hits(ids: list[int], scores: list[float], corpus: Corpus) -> list[Hit]:
    return [Hit(i, s, corpus.chunks[i].doc, None, None) for i, s in zip(ids, scores, strict=True)]


def evaluate(
    corpus: Corpus, matrix: NDArray[np.float32], index: KeywordIndex, qvecs: dict[str, NDArray[np.float32]]
) -> dict[tuple[str, str], tuple[float, float, int]]:
    out: dict[tuple[str, str], tuple[float, float, int]] = {}
    for set_name, queries in corpus.query_sets.items():
        acc: dict[str, list[float]] = {m: [0.0, 0.0] for m in ("semantic", "keyword", "blend")}
        for query, relevant in queries:
            scores = matrix @ qvecs[query]
            top = np.argsort(-scores)[:DEPTH]
            sem = hits([int(i) for i in top], [float(scores[i]) for i in top], corpus)
            found, _ = index.search(query, DEPTH)
            kw = hits([h.chunk_id for h in found], [h.score for h in found], corpus)
            for mode, ranked in (("semantic", sem), ("keyword", kw), ("blend", fuse(kw, sem, query, DEFAULT_RULES))):
                docs = list(dict.fromkeys(h.file for h in ranked))
                acc[mode][0] += ndcg(docs[:10], relevant)
                acc[mode][1] += recall(docs[:100], relevant, 100)
        for mode, (nd, rc) in acc.items():
            out[(set_name, mode)] = (nd / len(queries), rc / len(queries), len(queries))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.context", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=("scifact", "django"), required=True)
    parser.add_argument("--held-out", action="store_true", help="SciFact: the held-out half (read once)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--batch", type=int, default=16, help="1: each text alone (int8's activation scale is per batch, see below)"
    )
    parser.add_argument("--cache", type=Path, help="an .npz of encoded texts kept between runs")
    parser.add_argument("--dense", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--keyword", nargs="+", default=["none", "field", "text"], choices=("none", "field", "text"))
    args = parser.parse_args(argv)
    machine = facts(Path(__file__).resolve().parents[2])
    corpus = scifact("held_out" if args.held_out else "tune") if args.corpus == "scifact" else django()
    second = sum(1 for i, c in enumerate(corpus.chunks) if i and corpus.chunks[i - 1].doc == c.doc)
    print(
        f"{machine['date (UTC)']} UTC, load before the run {machine['load average before the run']};"
        f" {corpus.name}: {len(corpus.openings)} documents, {len(corpus.chunks)} chunks ({second} not a file's first)"
    )
    encoder = Encoder(
        args.threads, args.cache or Path(tempfile.gettempdir()) / f"context-{corpus.name}-{args.batch}.npz", args.batch
    )
    queries = [q for qs in corpus.query_sets.values() for q, _ in qs]
    qvecs = {q: encoder.encode([q])[0] for q in queries}
    print("\n| dense context | keyword context | query set | n | semantic nDCG@10 / R@100 | keyword | blend |")
    print("|---|---|---|---:|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        indexes = {k: keyword_index(corpus, Path(tmp) / k, k) for k in args.keyword}
        for dense in args.dense:
            texts = [embedded_text(c.text, VARIANTS[dense](c, corpus)) for c in corpus.chunks]
            changed = sum(t != c.text for t, c in zip(texts, corpus.chunks, strict=True))
            say(f"{dense}: {changed} chunks carry a context")
            matrix = encoder.encode(texts)
            for kind, index in indexes.items():
                result = evaluate(corpus, matrix, index, qvecs)
                for set_name in corpus.query_sets:
                    cells = [
                        f"{result[(set_name, m)][0]:.4f} / {result[(set_name, m)][1]:.4f}"
                        for m in ("semantic", "keyword", "blend")
                    ]
                    n = result[(set_name, "blend")][2]
                    print(
                        f"| {dense} ({changed}) | {kind} | {set_name} | {n} | " + " | ".join(cells) + " |", flush=True
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
