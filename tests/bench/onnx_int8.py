"""int8 against fp32 (and chunk settings against each other): dense retrieval quality on two real corpora
with the checked ONNX export of MiniLM and the int8 copy the workers make of it
(:func:`foldermind.workers.embedding.onnx_int8.open_precision`), the same tokenizer and texts.

    python -m tests.bench.onnx_int8 --corpus scifact|django [--chunks 256/32 ...] [--threads 2]

- ``scifact``: the 5,183 SciFact abstracts (title and text), the 150 judged queries.
- ``django``: Django 4.2.16's 587 doc files (the answers bench's download), two query sets judged by file:
  ``precision_data/django_queries.jsonl`` (60, written before this bench first ran) and the answers bench's
  36 Django questions (their gold file).

Each document is parsed and cut by the parsers' own chunker (``--chunks MAX/OVERLAP``, as the pipeline
stores it; ``whole`` = the abstract cut at the model's 256 tokens, the first comparison's way); every chunk
is encoded at each precision; a query ranks the documents by their best chunk's exact cosine. nDCG@10 and
recall@100 per precision and setting, the encode rate of each in this run, and the least and median cosine
between a chunk's fp32 and int8 vectors. Nothing is tuned here: one fixed comparison, so all queries count.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
from numpy.typing import NDArray

from foldermind.workers.embedding import model_files, onnx_int8
from foldermind.workers.parser.formats.document import Segment
from tests.bench.machine import facts
from tests.bench.scifact import scifact_dir
from tests.helpers import MODEL_CACHE

DATA = Path(__file__).resolve().parent / "precision_data"
FACTOIDS = Path(__file__).resolve().parent / "factoid_data" / "questions.jsonl"


@dataclass
class Corpus:
    name: str
    docs: dict[str, list[Segment]]
    """doc id -> its segments as the parser gives them, in order."""
    query_sets: dict[str, tuple[dict[str, str], dict[str, set[str]]]]
    """set name -> (query id -> text, query id -> relevant doc ids)."""


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ndcg(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal


def scifact() -> Corpus:
    sf = scifact_dir()
    docs: dict[str, list[Segment]] = {}
    for line in (sf / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        docs[d["_id"]] = [Segment(text=s) for s in (d.get("title") or "", d.get("text") or "") if s]
    lines = (sf / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    qrels: dict[str, set[str]] = {}
    with open(sf / "qrels.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    kept = {q: queries[q] for q in qrels if q in queries}
    return Corpus("scifact", docs, {"scifact": (kept, {q: qrels[q] for q in kept})})


def django(sdist: Path, max_chunks: int = 0) -> Corpus:
    from foldermind.workers.parser.formats import txt

    docs: dict[str, list[Segment]] = {}
    for rel, data in _doc_members(sdist):
        docs[rel] = [s for s in txt.parse(data, len(data) + 1).segments if s.text]
    own = [json.loads(line) for line in (DATA / "django_queries.jsonl").read_text(encoding="utf-8").splitlines()]
    factoids = [json.loads(line) for line in FACTOIDS.read_text(encoding="utf-8").splitlines()]
    factoids = [f for f in factoids if f["corpus"] == "django-docs"]
    sets = {
        "django queries (60)": ({q["id"]: q["query"] for q in own}, {q["id"]: set(q["relevant"]) for q in own}),
        "django factoids (36)": (
            {f["id"]: f["question"] for f in factoids},
            {f["id"]: {f["gold_file"]} for f in factoids},
        ),
    }
    judged = {d for _, (_, rel) in sets.items() for r in rel.values() for d in r}
    if judged - set(docs):
        raise SystemExit(f"judged files not in the corpus: {sorted(judged - set(docs))}")
    if max_chunks:
        docs = _subset(docs, judged, max_chunks)
    return Corpus("django", docs, sets)


def _subset(docs: dict[str, list[Segment]], judged: set[str], max_chunks: int) -> dict[str, list[Segment]]:
    """Every judged file, then the others in a fixed pseudo-random order while the chunks (approximated as
    tokens / 224) stay under ``max_chunks``: a smaller corpus for a busy machine, still mostly distractors."""
    import random

    from foldermind.workers.parser.chunker import load_tokenizer

    tokenizer = load_tokenizer()

    def cost(doc: str) -> int:
        return 1 + sum(len(tokenizer.encode(s.text, add_special_tokens=False).ids) for s in docs[doc]) // 224

    kept = sorted(judged)
    total = sum(cost(d) for d in kept)
    others = sorted(set(docs) - judged)
    random.Random(15).shuffle(others)
    for doc in others:
        c = cost(doc)
        if total + c <= max_chunks:
            kept.append(doc)
            total += c
    return {d: docs[d] for d in sorted(kept)}


def _doc_members(sdist: Path) -> Iterable[tuple[str, bytes]]:
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or len(parts) < 3 or parts[1] != "docs" or not parts[-1].endswith(".txt"):
                continue
            rel = PurePosixPath(*parts[2:])
            if any(p.startswith(("_", ".")) for p in rel.parts):
                continue
            fh = tar.extractfile(member)
            if fh is not None:
                yield rel.as_posix(), fh.read()


def chunks(corpus: Corpus, setting: str) -> tuple[list[str], list[str]]:
    """(doc id per chunk, chunk text) as the parsers' chunker cuts them (``MAX/OVERLAP``), or ``whole``."""
    from foldermind.workers.parser.chunker import chunk, load_tokenizer

    owners, texts = [], []
    if setting == "whole":
        for doc, segments in corpus.docs.items():
            owners.append(doc)
            texts.append(" ".join(s.text for s in segments))
        return owners, texts
    size, overlap = (int(x) for x in setting.split("/"))
    tokenizer = load_tokenizer()
    for doc, segments in corpus.docs.items():
        for c in chunk(segments, tokenizer, size, overlap):
            owners.append(doc)
            texts.append(c["text"])
    return owners, texts


def rank(
    owners: list[str], matrix: NDArray[np.float32], qvecs: NDArray[np.float32], depth: int = 100
) -> list[list[str]]:
    """Per query, the documents by their best chunk's cosine, best first (``depth`` of them)."""
    doc_ids = sorted(set(owners))
    index = {d: i for i, d in enumerate(doc_ids)}
    col = np.asarray([index[o] for o in owners])
    out = []
    for q in qvecs:
        scores = matrix @ q
        best = np.full(len(doc_ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, col, scores)
        out.append([doc_ids[i] for i in np.argsort(-best)[:depth]])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", choices=("scifact", "django"), required=True)
    parser.add_argument("--django-sdist", type=Path, help="Django-4.2.16.tar.gz (default: the answers bench's cache)")
    parser.add_argument("--chunks", nargs="+", default=["256/32"], help="MAX/OVERLAP settings, or whole")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"], choices=("fp32", "int8"))
    parser.add_argument("--max-chunks", type=int, default=0, help="django: judged files plus a sample, ~N chunks")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    machine = facts(Path(__file__).resolve().parents[2])
    if args.corpus == "scifact":
        corpus = scifact()
    else:
        from tests.bench.factoids import django_sdist

        corpus = django(args.django_sdist or django_sdist(), args.max_chunks)
    model_dir = model_files.model_dir()
    name = model_files.model_name(model_dir)
    encoders = {p: onnx_int8.open_precision(model_dir, name, MODEL_CACHE, args.threads, p) for p in args.precisions}
    print(
        f"Machine: {machine['CPU']}, {machine['cores']}; {machine['date (UTC)']} UTC; load before the run"
        f" {machine['load average before the run']}; corpus {corpus.name} ({len(corpus.docs)} documents),"
        f" {args.threads} threads, batch {args.batch}; files: "
        + ", ".join(f"{p} {e.path.name} ({e.path.stat().st_size / 2**20:.0f} MiB)" for p, e in encoders.items())
    )
    print("\n| chunks | precision | query set | queries | nDCG@10 | recall@100 | chunks | chunks/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for setting in args.chunks:
        owners, texts = chunks(corpus, setting)
        say(f"{setting}: {len(texts)} chunks")
        vectors: dict[str, NDArray[np.float32]] = {}
        for precision, loaded in encoders.items():
            started = time.perf_counter()
            matrix = loaded.encoder.encode_longest_first(texts, args.batch)
            rate = len(texts) / (time.perf_counter() - started)
            vectors[precision] = matrix
            for set_name, (queries, relevant) in corpus.query_sets.items():
                qids = list(queries)
                qvecs = np.concatenate([loaded.encoder.encode([queries[q]]) for q in qids])  # one at a time
                ranked = rank(owners, matrix, qvecs)
                nd = [ndcg(r, relevant[q]) for q, r in zip(qids, ranked, strict=True)]
                rc = [len(set(r) & relevant[q]) / len(relevant[q]) for q, r in zip(qids, ranked, strict=True)]
                print(
                    f"| {setting} | {precision} | {set_name} | {len(qids)} | {np.mean(nd):.4f} | {np.mean(rc):.4f}"
                    f" | {len(texts)} | {rate:.1f} |",
                    flush=True,
                )
        if "fp32" in vectors and "int8" in vectors:
            cos = np.sum(vectors["fp32"] * vectors["int8"], axis=1)
            print(
                f"\n{setting}: int8 against fp32, a chunk's two vectors: least cosine {cos.min():.4f},"
                f" median {np.median(cos):.4f}\n"
            )


if __name__ == "__main__":
    main()
