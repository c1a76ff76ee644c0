"""How ``lookup_data/known2.jsonl`` was drawn: passages of the manuals no query of ``queries.jsonl`` used.

``python -m tests.bench.lookup_draw HOME`` reads the chunks of a lookup bench home (``python -m tests.bench.lookup
--home HOME`` indexes the manuals there) and prints the drawn passages, ~650 characters from the middle of each,
for a person to write one query from. Seed 1818; a fixed number per manual (:data:`PLAN`); a chunk of at least
500 characters on one PDF page, not an index or contents page, its page neither used by ``queries.jsonl`` nor
next to one so used; for Aspell and SQLite, files no earlier query used (one passage a file); for apcupsd's one
big HTML file, sections no earlier query named. The pool is read in chunk-id order, which is the order the
home's parsers finished in: another home may draw other passages; ``known2.jsonl`` is the record.
``--split`` prints the held-aside third instead: a third of the ids drawn by the same seed.

``--set natural2`` draws the passages of ``natural2.jsonl`` the same way: seed 1819, :data:`PLANS` ``natural2``
(60 passages), and no page, file or section that ``queries.jsonl`` or ``known2.jsonl`` used.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
from pathlib import Path
from typing import NamedTuple

from tests.bench.lookup import QUERIES, load_queries

SEED = 1818
PLAN = (
    ("gnuplot-doc/gnuplot.pdf", 13),
    ("asymptote-doc/asymptote.pdf", 10),
    ("4ti2-doc/4ti2_manual.pdf", 3),
    ("asymptote-doc/CAD.pdf", 1),
    ("asymptote-doc/asy-latex.pdf", 1),
    ("apcupsd-doc/manual.html", 4),
    ("aspell-doc/", 6),
    ("sqlite3-doc/lang_", 7),
)
ONE_PER_FILE = ("aspell-doc/", "sqlite3-doc/lang_")


class Draw(NamedTuple):
    """One drawn set: its seed, how many passages of each manual, the earlier query files whose places it avoids,
    and the letter its ids begin with."""

    seed: int
    plan: tuple[tuple[str, int], ...]
    avoid: tuple[str, ...]
    prefix: str


PLANS = {
    "known2": Draw(SEED, PLAN, ("queries.jsonl",), "x"),
    "natural2": Draw(
        1819,
        (
            ("gnuplot-doc/gnuplot.pdf", 16),
            ("asymptote-doc/asymptote.pdf", 14),
            ("4ti2-doc/4ti2_manual.pdf", 4),
            ("asymptote-doc/CAD.pdf", 1),
            ("asymptote-doc/asy-latex.pdf", 1),
            ("apcupsd-doc/manual.html", 6),
            ("aspell-doc/", 8),
            ("sqlite3-doc/lang_", 10),
        ),
        ("queries.jsonl", "known2.jsonl"),
        "q",
    ),
}
"""How each set's passages were drawn."""
Row = tuple[int, str, int | None, str | None, str]  # chunk id, file, page, heading, text


def _listing(text: str) -> bool:
    # a table of contents (dot leaders) or a back-of-book index (", 153" again and again)
    return len(re.findall(r"\.{4,}|\. \. \.", text)) > 3 or len(re.findall(r", \d+", text)) > 25


def draw(home: Path, how: Draw = PLANS["known2"]) -> list[Row]:
    old = [q for name in how.avoid for q in load_queries(QUERIES.with_name(name))]
    used_pages = {(q.file, q.page) for q in old if q.page}
    used_files = {q.file for q in old}
    used_sections = {q.section for q in old if q.section}
    db = sqlite3.connect(f"file:{home}/data/index.sqlite?mode=ro", uri=True)
    rows = db.execute(
        "SELECT c.id, d.path, c.page_start, c.page_end, c.heading, c.text FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id ORDER BY c.id"
    ).fetchall()
    rng = random.Random(how.seed)
    out: list[Row] = []
    for prefix, n in how.plan:
        pool: list[Row] = []
        for cid, path, start, end, head, text in rows:
            file = path.split("/manuals/", 1)[1]
            if not file.startswith(prefix) or len(text) < 500 or _listing(text):
                continue
            if file.endswith(".pdf"):
                if start != end or any((file, start + d) in used_pages for d in (-1, 0, 1)):
                    continue
            elif prefix in ONE_PER_FILE:
                if file in used_files:
                    continue
            elif head in used_sections or (head or "").split(" > ")[0] in used_sections:
                continue
            pool.append((cid, file, start, head, text))
        if prefix in ONE_PER_FILE:
            files = sorted({p[1] for p in pool})
            out += [rng.choice([p for p in pool if p[1] == f]) for f in rng.sample(files, n)]
            continue
        picks: list[Row] = []
        for p in rng.sample(pool, len(pool)):
            if p[2] is not None:  # a page not next to one already drawn
                fresh = all(p[1] != q[1] or abs(p[2] - (q[2] or 0)) > 1 for q in picks)
            else:
                fresh = p[3] not in {q[3] for q in picks}
            if fresh:
                picks.append(p)
            if len(picks) == n:
                break
        out += picks
    return out


def held_aside(ids: list[str], seed: int = SEED) -> list[str]:
    return sorted(random.Random(seed).sample(sorted(ids), len(ids) // 3))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lookup_draw", description=__doc__.split("\n")[0])
    parser.add_argument("home")
    parser.add_argument("--split", action="store_true", help="print the held-aside ids of the drawn passages")
    parser.add_argument("--set", choices=sorted(PLANS), default="known2", help="which set's passages to draw")
    parser.add_argument("--full", action="store_true", help="print each passage whole, not ~650 characters of it")
    args = parser.parse_args(argv)
    how = PLANS[args.set]
    drawn = draw(Path(args.home), how)
    ids = [f"{how.prefix}{i:02d}" for i in range(len(drawn))]
    if args.split:
        print(" ".join(held_aside(ids, how.seed)))
        return 0
    for qid, (cid, file, page, head, text) in zip(ids, drawn, strict=True):
        mid = len(text) // 2
        print(json.dumps({"id": qid, "file": file, "page": page, "section": head, "chunk": cid}))
        shown = text if args.full else text[max(0, mid - 325) : mid + 325]
        print("   ", shown.replace("\n", " "), "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
