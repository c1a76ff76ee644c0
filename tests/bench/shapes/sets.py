"""Every query of the shape bench as one kind of record: the written sets of ``data/`` and the reused ones.

Reused, by the rules of ``data/README.md`` (no query picked by hand): the natural questions of
``lookup_data`` and the Django queries of ``precision_data`` that start with how / what / why (shape ``how``),
the factoid questions of ``factoid_data`` (``number`` when the answer pattern holds a digit, else ``which`` when
the question starts with "Which" or "What is the name"), and SciFact's judged claims (``claim``). A reused SciFact
factoid whose abstract is not in the indexed folder (:mod:`.corpora`) is left out, and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench import factoids
from tests.bench.lookup import load_queries
from tests.bench.scifact import file_name, judged_queries
from tests.bench.shapes.corpora import DJANGO, MANUALS, SCIFACT
from tests.bench.shapes.rules import split_of

DATA = Path(__file__).with_name("data")
BENCH = Path(__file__).resolve().parents[1]
KNOWN_SHAPES = ("fragment", "scramble", "keywords", "heading", "command")
QUESTION_SHAPES = ("how", "paraphrase", "claim", "which", "number", "none")
SHAPES = KNOWN_SHAPES + QUESTION_SHAPES
LETTER = dict(zip(SHAPES, "abcdefghijk", strict=True))
ANY = "*"  # a ``none`` question is asked of every corpus
KNOWN_FILES = ("known.jsonl", "known2.jsonl", "known3.jsonl", "known4.jsonl", "known5.jsonl")  # set by set


@dataclass(frozen=True, slots=True)
class Item:
    id: str
    shape: str
    corpus: str  # a corpus name, or ANY
    split: str
    query: str
    files: tuple[str, ...]  # gold documents, paths under the corpus folder; empty for ``none``
    source: str = "new"  # "new", or where a reused row comes from
    answer: str = ""  # a case-insensitive pattern for the gold answer, where one applies
    relevant: dict[str, int] = field(default_factory=dict)  # SciFact claims: abstract id -> grade
    batch: int = 0  # the written rows' batch (1, 2, 3: data/README.md); 0 for the reused rows


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def written() -> list[Item]:
    """The rows of ``data/known*.jsonl`` (:data:`KNOWN_FILES`, one gold ``file``) and ``data/questions.jsonl``
    (``files``, ``answer``)."""
    out = []
    known = [row for name in KNOWN_FILES if (DATA / name).is_file() for row in _jsonl(DATA / name)]
    for row in known + _jsonl(DATA / "questions.jsonl"):
        files: list[object] = row["files"] if isinstance(row.get("files"), list) else [row["file"]]  # type: ignore[assignment]
        qid, shape, corpus, split, query = (str(row[k]) for k in ("id", "shape", "corpus", "split", "query"))
        gold = tuple(str(f) for f in files)
        batch = int(row.get("batch", 1))  # type: ignore[call-overload]
        out.append(Item(qid, shape, corpus, split, query, gold, answer=str(row.get("answer", "")), batch=batch))
    return out


HOW = re.compile(r"^\s*(how|what|why)\b", re.IGNORECASE)
WHICH = re.compile(r"^\s*(which\b|what is the name)", re.IGNORECASE)


def _reused(
    shape: str, corpus: str, source: str, qid: str, query: str, files: tuple[str, ...], answer: str = ""
) -> Item:
    rid = f"{LETTER[shape]}-{qid}"
    return Item(rid, shape, corpus, split_of(rid), query, files, source, answer)


def reused(scifact_files: set[str] | None = None) -> tuple[list[Item], int]:
    """The reused rows, and how many SciFact factoids were left out (their abstract is not indexed)."""
    out: list[Item] = []
    for name in ("queries.jsonl", "natural2.jsonl"):
        for q in load_queries(BENCH / "lookup_data" / name):
            if q.kind == "natural" and HOW.match(q.query):
                out.append(_reused("how", MANUALS, f"lookup_data/{name}", q.id, q.query, (q.file,)))
    for row in _jsonl(BENCH / "precision_data" / "django_queries.jsonl"):
        if HOW.match(str(row["query"])):
            files = tuple(str(f) for f in row["relevant"])  # type: ignore[attr-defined]
            out.append(_reused("how", DJANGO, "precision_data", str(row["id"]), str(row["query"]), files))
    dropped = 0
    for f in factoids.load_questions():
        if any(c.isdigit() for c in f.answer):
            shape = "number"
        elif WHICH.match(f.question):
            shape = "which"
        else:
            continue
        if f.corpus == SCIFACT and scifact_files is not None and f.gold_file not in scifact_files:
            dropped += 1
            continue
        out.append(_reused(shape, f.corpus, f"factoid_data/{f.split}", f.id, f.question, (f.gold_file,), f.answer))
    return out, dropped


def claims() -> list[Item]:
    """SciFact's judged claims (the public half), read where :mod:`tests.bench.scifact` finds them."""
    out = []
    for q in judged_queries():
        rid = f"h-scifact-{q.id}"
        files = tuple(file_name(d) for d in q.relevant)
        out.append(
            Item(rid, "claim", SCIFACT, split_of(rid), q.text, files, "scifact/queries.jsonl", relevant=q.relevant)
        )
    return out


def load(scifact_files: set[str] | None = None) -> tuple[list[Item], int]:
    """Every item, and how many reused SciFact factoids were left out."""
    again, dropped = reused(scifact_files)
    return written() + again + claims(), dropped
