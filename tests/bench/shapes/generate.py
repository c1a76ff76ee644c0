"""Writes ``data/known.jsonl``, the known-item queries (shapes a-e), from the four corpora by the rules of
:mod:`.rules`; with ``--draw N``, prints the seeded passages the hand-written questions (shapes f-k) were written from.

``python -m tests.bench.shapes.generate HOME [--per 25] [--draw N] [--check]`` builds the corpora under ``HOME/corpora``
(:mod:`.corpora`) and reads every document as the project's parser extracts it (the text the index holds).

The draw, per corpus and shape (seeded by :func:`.rules.rng_for`): the documents in path order, shuffled; each
in turn gets the shape's rule (one query per document at most) until ``--per`` queries are written or the
documents run out. A query is ``{"id", "shape", "corpus", "split", "query", "file"}``: ``file`` the gold
document's path under its corpus folder, ``split`` by :func:`.rules.split_of` of the id, ``id``
``<shape letter>-<corpus>-<nn>`` in order of drawing. ``--check`` checks the hand-written questions against the
corpora (:func:`check_questions`). ``--known4`` draws the fifth corpus's known items by the same program with its own
seed (:data:`KNOWN4`), ``--check-known4`` checks them (:func:`check_known`); ``--known5`` and ``--check-known5`` the
sixth's (:data:`KNOWN5`). Nothing here runs a search.
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
from tests.bench.shapes.corpora import (
    CELERY,
    CORPORA,
    DJANGO,
    FLASK,
    MANUALS,
    PYTEST,
    SCIFACT,
    build,
    lookup_abstracts,
)

DATA = Path(__file__).with_name("data")
KNOWN = DATA / "known.jsonl"
KNOWN2 = DATA / "known2.jsonl"
KNOWN3 = DATA / "known3.jsonl"
KNOWN4_FILE = DATA / "known4.jsonl"
KEYWORD_BATCHES = {2: (KNOWN2, 50), 3: (KNOWN3, 51)}
"""Keyword-list batches (data/README.md): their file and seed, a seed no earlier batch used."""
KEYWORDS_PER = 10  # keyword-list batches: queries per corpus
CORPUS5_BATCH = 8  # the fifth corpus's held-out rows: known4.jsonl's known items and questions batch 8
KNOWN4 = (CELERY, 53)  # its corpus and seed
"""known4.jsonl (data/README.md): shapes a-e over the fifth corpus, by :func:`draw_corpus` with a seed no earlier set
used; every row held out, of batch :data:`CORPUS5_BATCH`."""
KNOWN5_FILE = DATA / "known5.jsonl"
KNOWN5 = (FLASK, 56)  # known5.jsonl: the sixth corpus's known items, the same program with a new seed
FLASK_KNOWN_BATCH = 13  # its rows: every one held out, of this batch (data/README.md)
QUESTION_DRAWS = {PYTEST: 71, DJANGO: 354, SCIFACT: 419, MANUALS: 89, CELERY: 58, FLASK: 68}
"""How many passages of each corpus's draw the questions were read from (the first batch: 28, 16, 16, 14; batch 2:
40, 33, 29, 40; batch 3: 59, 49, 46, 64; batch 4: 71, 72, 61, 84; batch 5: the manuals' and pytest's draws
ended, Django's read to 117 and SciFact's to 93 for their questions; batch 6: Django's to 131, SciFact's to 111;
batch 7: Django's to 172, SciFact's to 150; batch 8: celery-docs' own draw to 31 of its 58; batch 9: Django's to 212,
SciFact's to 190, celery-docs' to its end, 58; batch 10: Django's to 300, SciFact's to 240; batch 11: Django's to
its end, 354, SciFact's to 309; batch 12: flask-docs' own draw to its end, 68, SciFact's to 419 (used to 366):
data/README.md)."""
RUN = 6  # batches 2 and 3: a question repeats no run of this many consecutive words of its passage
HELD_OUT_BATCHES = (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)  # every row held out, whatever its id's hash (data/README.md)
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


def draw_corpus(corpus: str, folder: Path, per: int, seed: int = rules.SEED, batch: int = 0) -> list[dict[str, Any]]:
    """The known items of ``corpus``, ``per`` a shape at most; ``batch``: every row held out and of that batch."""
    paths, texts, raws = documents(corpus, folder)
    words = [rules.word_string(t) for t in texts]
    lowered = [t.lower() for t in texts]
    df, n_docs = rules.document_frequency(texts)
    heads = [rules.headings(r, t, heading_kind(corpus, p)) for p, t, r in zip(paths, texts, raws, strict=True)]
    head_count = Counter(h.lower() for hs in heads for h in set(hs))
    out: list[dict[str, Any]] = []
    for shape in rules.SHAPES:
        if shape == "command" and corpus == SCIFACT:
            continue  # abstracts have no command lines; their "--" is a dash ("--that")
        rng = random.Random(f"{seed}:{corpus}:{shape}")
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
                row: dict[str, Any] = {"id": qid, "shape": shape, "corpus": corpus, "split": rules.split_of(qid)}
                if batch:
                    row |= {"split": "held_out", "batch": batch}
                out.append(row | {"query": query, "file": paths[i]})
                n += 1
    return out


def keyword_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()] if path.is_file() else []


def used_for_keywords(corpus: str, batch: int) -> set[str]:
    """The documents of ``corpus`` an earlier keyword list was drawn from (``known.jsonl``, earlier batches)."""
    earlier = [path for b, (path, _) in KEYWORD_BATCHES.items() if b < batch]
    rows = [r for path in (KNOWN, *earlier) for r in keyword_rows(path)]
    return {r["file"] for r in rows if r["shape"] == "keywords" and r["corpus"] == corpus}


def draw_keywords(corpus: str, folder: Path, per: int, batch: int) -> list[dict[str, object]]:
    """A keyword-list batch: the (c) rule with the batch's seed (:data:`KEYWORD_BATCHES`), on documents no earlier
    keyword list was drawn from; every row held out."""
    paths, texts, _raws = documents(corpus, folder)
    df, n_docs = rules.document_frequency(texts)
    used = used_for_keywords(corpus, batch)
    rng = random.Random(f"{KEYWORD_BATCHES[batch][1]}:{corpus}:keywords")
    order = list(range(len(paths)))
    rng.shuffle(order)
    out: list[dict[str, object]] = []
    for i in order:
        if len(out) >= per:
            break
        query = None if paths[i] in used else rules.keywords(texts[i], rng, df, n_docs)
        if query:
            qid = f"c{batch}-{corpus}-{len(out):02d}"
            out.append({"id": qid, "shape": "keywords", "corpus": corpus, "split": "held_out", "batch": batch})
            out[-1] |= {"query": query, "file": paths[i]}
    return out


def check_keywords(root: Path, batch: int) -> list[str]:
    """What is wrong with a keyword-list batch's file: a row other than a fresh draw gives (the same program and
    seed, so every row, its order, its document and its words), a split other than held out, a document an
    earlier keyword list used, a query word not among its document's words."""
    path = KEYWORD_BATCHES[batch][0]
    rows, problems = keyword_rows(path), []
    want = [r for name in CORPORA for r in draw_keywords(name, build(name, root).folder, KEYWORDS_PER, batch)]
    if rows != want:
        problems.append(f"{path.name}: {len(rows)} rows, not the {len(want)} a fresh draw writes")
    for row in rows:
        folder = build(row["corpus"], root).folder
        if row["split"] != "held_out" or row.get("batch") != batch:
            problems.append(f"{row['id']}: split {row['split']!r}, batch {row.get('batch')!r}")
        if row["file"] in used_for_keywords(row["corpus"], batch):
            problems.append(f"{row['id']}: {row['file']} was an earlier keyword list's document")
        page = set(rules.content_words(document_text(folder / row["file"], PARSE_LIMIT)))
        if missing := [w for w in row["query"].split() if w not in page]:
            problems.append(f"{row['id']}: {missing} not words of {row['file']}")
    return problems


def known_set(n: int) -> tuple[Path, str, int, int]:
    """``known<n>.jsonl``'s file, corpus, seed and batch (4: the fifth corpus's, 5: the sixth's)."""
    return (KNOWN4_FILE, *KNOWN4, CORPUS5_BATCH) if n == 4 else (KNOWN5_FILE, *KNOWN5, FLASK_KNOWN_BATCH)


def check_known(root: Path, per: int = 25, n: int = 4) -> list[str]:
    """What is wrong with ``known<n>.jsonl`` (:func:`known_set`): a row other than a fresh draw writes (the same program
    and seed, so every row, its order, its document and its words), a split other than held out or a batch other than
    its own, more than ``per`` rows of a shape, a query word (a command's text) not in its document."""
    path, corpus, seed, batch = known_set(n)
    folder = build(corpus, root).folder
    rows, problems = keyword_rows(path), []
    if rows != draw_corpus(corpus, folder, per, seed, batch):
        problems.append(f"{path.name}: {len(rows)} rows, not the rows a fresh draw writes")
    for shape, count in Counter(r["shape"] for r in rows).items():
        if count > per:
            problems.append(f"{path.name}: {count} {shape} rows, more than {per}")
    for row in rows:
        if (row["split"], row.get("batch"), row["corpus"]) != ("held_out", batch, corpus):
            problems.append(f"{row['id']}: split {row['split']!r}, batch {row.get('batch')!r}, {row['corpus']}")
        text = document_text(folder / row["file"], PARSE_LIMIT)
        if row["shape"] == "command":
            found = row["query"].lower() in text.lower()
        else:
            found = set(rules.word_string(row["query"]).lower().split()) <= set(rules.word_string(text).lower().split())
        if not found:
            problems.append(f"{row['id']}: {row['query']!r} is not in {row['file']}")
    return problems


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
        if row.get("batch", 1) >= 2:
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
    parser.add_argument("--keywords3", action="store_true", help="write data/known3.jsonl (keyword lists, batch 3)")
    parser.add_argument("--check-keywords", type=int, default=0, help="check keyword-list batch N's file")
    parser.add_argument("--known4", action="store_true", help="write data/known4.jsonl (corpus 5's known items)")
    parser.add_argument("--check-known4", action="store_true", help="check data/known4.jsonl")
    parser.add_argument("--known5", action="store_true", help="write data/known5.jsonl (corpus 6's known items)")
    parser.add_argument("--check-known5", action="store_true", help="check data/known5.jsonl")
    args = parser.parse_args(argv)
    root = Path(args.home).resolve() / "corpora"
    if args.check:
        problems = check_questions(root, QUESTION_DRAWS)
        print("\n".join(problems) or "questions.jsonl: every check holds")
        return 1 if problems else 0
    if args.check_keywords:
        problems = check_keywords(root, args.check_keywords)
        print("\n".join(problems) or f"keyword-list batch {args.check_keywords}: every check holds")
        return 1 if problems else 0
    if args.check_known4 or args.check_known5:
        path = known_set(5 if args.check_known5 else 4)[0]
        problems = check_known(root, n=5 if args.check_known5 else 4)
        print("\n".join(problems) or f"{path.name}: every check holds")
        return 1 if problems else 0
    if args.known4 or args.known5:
        path, corpus, seed, batch = known_set(5 if args.known5 else 4)
        rows = draw_corpus(corpus, build(corpus, root).folder, args.per, seed, batch)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(Counter(str(r["shape"]) for r in rows))
        return 0
    if args.keywords2 or args.keywords3:
        batch = 3 if args.keywords3 else 2
        drawn = [r for name in args.corpus for r in draw_keywords(name, build(name, root).folder, KEYWORDS_PER, batch)]
        KEYWORD_BATCHES[batch][0].write_text("".join(json.dumps(r) + "\n" for r in drawn), encoding="utf-8")
        print(Counter(str(r["corpus"]) for r in drawn))
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
