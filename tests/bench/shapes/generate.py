"""Writes ``data/known.jsonl``, the known-item queries (shapes a-e), from the four corpora by the rules of
:mod:`.rules`; with ``--draw N``, prints the seeded passages the hand-written questions (shapes f-k) were written from.

``python -m tests.bench.shapes.generate HOME [--per 25] [--draw N] [--check]`` builds the corpora under ``HOME/corpora``
(:mod:`.corpora`) and reads every document as the project's parser extracts it (the text the index holds).

The draw, per corpus and shape (seeded by :func:`.rules.rng_for`): the documents in path order, shuffled; each
in turn gets the shape's rule (one query per document at most) until ``--per`` queries are written or the
documents run out. A query is ``{"id", "shape", "corpus", "split", "query", "file"}``: ``file`` the gold
document's path under its corpus folder, ``split`` by :func:`.rules.split_of` of the id, ``id``
``<shape letter>-<corpus>-<nn>`` in order of drawing. ``--check`` checks the hand-written questions against the
corpora (:func:`check_questions`). Nothing here runs a search.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from foldermind.workers.parser.formats import document_text
from tests.bench.factoids import PARSE_LIMIT, _extracted
from tests.bench.shapes import rules
from tests.bench.shapes.corpora import CORPORA, DJANGO, MANUALS, PYTEST, SCIFACT, build, lookup_abstracts

DATA = Path(__file__).with_name("data")
KNOWN = DATA / "known.jsonl"
KNOWN2 = DATA / "known2.jsonl"
KEYWORDS2_SEED = 50  # keyword lists, batch 2 (data/README.md): a seed no batch used
QUESTION_DRAWS = {PYTEST: 71, DJANGO: 72, SCIFACT: 61, MANUALS: 84}
"""How many passages of each corpus's draw the questions were read from (the first batch: 28, 16, 16, 14; batch 2:
40, 33, 29, 40; batch 3: 59, 49, 46, 64)."""
RUN = 6  # batches 2 and 3: a question repeats no run of this many consecutive words of its passage
HELD_OUT_BATCHES = (3, 4)  # every row of these batches is held out, whatever its id's hash (data/README.md)
LETTERS = dict(zip(rules.SHAPES, "abcde", strict=True))


def heading_kind(corpus: str, path: str) -> str:
    if corpus == SCIFACT:
        return "title"
    if path.endswith((".rst", ".txt")):
        return "rst"
    return "html" if path.endswith((".html", ".htm")) else ""


def documents(corpus: str, folder: Path) -> tuple[list[str], list[str], list[str]]:
    """(paths, extracted texts, raw texts) of a corpus folder, in path order (raw: the file's bytes as UTF-8
    for reST and HTML, the extracted text otherwise). SciFact's are the lookup bench's abstracts, not the
    factoid sets' gold ones added to the folder."""
    extracted = _extracted(folder)
    keep = lookup_abstracts() if corpus == SCIFACT else set(extracted)
    paths = sorted(p for p in extracted if p in keep)
    raws = []
    for p in paths:
        raw = extracted[p]
        if p.endswith((".rst", ".txt", ".html", ".htm")):
            raw = (folder / p).read_bytes().decode("utf-8", "replace")
        raws.append(raw)
    return paths, [extracted[p] for p in paths], raws


def draw_corpus(corpus: str, folder: Path, per: int) -> list[dict[str, str]]:
    paths, texts, raws = documents(corpus, folder)
    words = [rules.word_string(t) for t in texts]
    lowered = [t.lower() for t in texts]
    df, n_docs = rules.document_frequency(texts)
    heads = [rules.headings(r, t, heading_kind(corpus, p)) for p, t, r in zip(paths, texts, raws, strict=True)]
    head_count = Counter(h.lower() for hs in heads for h in set(hs))
    out: list[dict[str, str]] = []
    for shape in rules.SHAPES:
        if shape == "command" and corpus == SCIFACT:
            continue  # abstracts have no command lines; their "--" is a dash ("--that")
        rng = rules.rng_for(corpus, shape)
        order = list(range(len(paths)))
        rng.shuffle(order)
        n = 0
        for i in order:
            if n >= per:
                break
            query: str | None = None
            if shape == "fragment":
                query = rules.fragment(texts[i], rng)
                if query and not rules.unique_in(rules.word_string(query), words, i):
                    query = None
            elif shape == "scramble":
                query = rules.scramble(texts[i], rng)
            elif shape == "keywords":
                query = rules.keywords(texts[i], rng, df, n_docs)
            elif shape == "heading":
                own = [h for h in heads[i] if head_count[h.lower()] == 1]
                query = rng.choice(own) if own else None
            else:
                own = [c for c in rules.commands(texts[i]) if rules.unique_in(c.lower(), lowered, i)]
                query = rng.choice(own) if own else None
            if query:
                qid = f"{LETTERS[shape]}-{corpus}-{n:02d}"
                out.append(
                    {
                        "id": qid,
                        "shape": shape,
                        "corpus": corpus,
                        "split": rules.split_of(qid),
                        "query": query,
                        "file": paths[i],
                    }
                )
                n += 1
    return out


def draw_keywords2(corpus: str, folder: Path, per: int) -> list[dict[str, object]]:
    """Keyword lists, batch 2: the (c) rule with seed :data:`KEYWORDS2_SEED`, on documents no ``known.jsonl`` keyword
    list was drawn from; every row held out."""
    paths, texts, _raws = documents(corpus, folder)
    df, n_docs = rules.document_frequency(texts)
    known = [json.loads(line) for line in KNOWN.read_text("utf-8").splitlines() if line.strip()]
    used = {r["file"] for r in known if r["shape"] == "keywords" and r["corpus"] == corpus}
    rng = random.Random(f"{KEYWORDS2_SEED}:{corpus}:keywords")
    order = list(range(len(paths)))
    rng.shuffle(order)
    out: list[dict[str, object]] = []
    for i in order:
        if len(out) >= per:
            break
        query = None if paths[i] in used else rules.keywords(texts[i], rng, df, n_docs)
        if query:
            qid = f"c2-{corpus}-{len(out):02d}"
            out.append({"id": qid, "shape": "keywords", "corpus": corpus, "split": "held_out", "batch": 2})
            out[-1] |= {"query": query, "file": paths[i]}
    return out


def draw_passages(corpus: str, folder: Path, n: int) -> list[tuple[str, str]]:
    """``n`` seeded (document, passage) pairs to write questions from: documents drawn as for the shapes, a
    passage of ~120 words from a clean sentence on."""
    paths, texts, _ = documents(corpus, folder)
    rng = rules.rng_for(corpus, "questions")
    order = list(range(len(paths)))
    rng.shuffle(order)
    out = []
    for i in order:
        sentences = rules.clean_sentences(texts[i])
        if len(sentences) < 3:
            continue
        start = rng.randrange(len(sentences))
        passage = " ".join(" ".join(s) for s in sentences[start : start + 5])
        out.append((paths[i], passage))
        if len(out) >= n:
            break
    return out


def check_questions(root: Path, draws: dict[str, int]) -> list[str]:
    """What is wrong with ``data/questions.jsonl``: a gold file missing, an answer pattern no gold file holds,
    a paraphrase sharing more than 2 content words with its drawn passage (``draws``: passages per corpus), a
    split other than the rule's."""
    passages = {(c, p): t for c, n in draws.items() for p, t in draw_passages(c, build(c, root).folder, n)}
    problems = []
    for row in (json.loads(line) for line in (DATA / "questions.jsonl").read_text("utf-8").splitlines()):
        if row["corpus"] == "*":
            continue
        folder = build(row["corpus"], root).folder
        texts = [_text(folder / f) for f in row["files"] if (folder / f).is_file()]
        if len(texts) < len(row["files"]):
            problems.append(f"{row['id']}: a gold file is missing")
        if row["answer"] and not any(re.search(row["answer"], t, re.IGNORECASE) for t in texts):
            problems.append(f"{row['id']}: no gold file holds {row['answer']!r}")
        if row.get("batch") in (2, 3, 4):
            problems += _check_batch2(row, texts[0] if row["drawn"] == row["files"][0] and texts else "", passages)
        problems += _check_split(row)
        if row["shape"] == "paraphrase":
            page = set(rules.content_words(passages[(row["corpus"], row["drawn"])]))
            shared = [w for w in dict.fromkeys(rules.content_words(row["query"])) if w in page]
            if len(shared) > 2:
                problems.append(f"{row['id']}: shares {shared} with its passage")
    return problems


def _text(path: Path) -> str:
    """A gold file's text: a PDF as the project's parser extracts it (the index holds no other), else its bytes."""
    return document_text(path, PARSE_LIMIT) if path.suffix == ".pdf" else path.read_text("utf-8", "replace")


def _check_split(row: dict[str, Any]) -> list[str]:
    """A row of a held-out batch is held out; every other row keeps its id's hash split."""
    want = "held_out" if row.get("batch") in HELD_OUT_BATCHES else rules.split_of(row["id"])
    return [] if row["split"] == want else [f"{row['id']}: split {row['split']!r}, the rule gives {want!r}"]


def _check_batch2(row: dict[str, str], drawn_text: str, passages: dict[tuple[str, str], str]) -> list[str]:
    """Batch 2's own checks, batches 3 and 4's too (``data/README.md``): the drawn document is the first gold file and
    holds the answer; the question neither matches its answer pattern nor repeats RUN consecutive words of its
    passage."""
    out = []
    if not drawn_text or not re.search(row["answer"], drawn_text, re.IGNORECASE):
        out.append(f"{row['id']}: the drawn document is not the first gold file or does not hold {row['answer']!r}")
    if re.search(row["answer"], row["query"], re.IGNORECASE):
        out.append(f"{row['id']}: the question holds its own answer {row['answer']!r}")
    page = rules.word_string(passages[(row["corpus"], row["drawn"])])
    words = [w.lower() for w in rules.tokens(row["query"])]
    runs = [" ".join(words[i : i + RUN]) for i in range(len(words) - RUN + 1)]
    if copied := [r for r in runs if f" {r} " in page]:
        out.append(f"{row['id']}: repeats {copied[0]!r} of its passage")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.shapes.generate", description=__doc__.split("\n")[0])
    parser.add_argument("home", help="the bench home: corpora are built under HOME/corpora")
    parser.add_argument("--per", type=int, default=25, help="queries per corpus and shape")
    parser.add_argument("--corpus", nargs="+", default=list(CORPORA))
    parser.add_argument("--draw", type=int, default=0, help="print N passages per corpus to write questions from")
    parser.add_argument("--check", action="store_true", help="check questions.jsonl against the corpora")
    parser.add_argument("--keywords2", action="store_true", help="write data/known2.jsonl (keyword lists, batch 2)")
    args = parser.parse_args(argv)
    root = Path(args.home).resolve() / "corpora"
    if args.check:
        problems = check_questions(root, QUESTION_DRAWS)
        print("\n".join(problems) or "questions.jsonl: every check holds")
        return 1 if problems else 0
    if args.keywords2:
        rows2 = [row for name in args.corpus for row in draw_keywords2(name, build(name, root).folder, 10)]
        KNOWN2.write_text("".join(json.dumps(r) + "\n" for r in rows2), encoding="utf-8")
        print(Counter(str(r["corpus"]) for r in rows2))
        return 0
    if args.draw:
        for name in args.corpus:
            for path, passage in draw_passages(name, build(name, root).folder, args.draw):
                print(f"## {name} {path}\n{passage}\n")
        return 0
    rows = [row for name in args.corpus for row in draw_corpus(name, build(name, root).folder, args.per)]
    KNOWN.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(Counter((r["corpus"], r["shape"]) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
