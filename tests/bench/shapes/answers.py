"""Extractive answers to the shape bench's new questions (issue 38's answer targets, per shape and split).

``python -m tests.bench.shapes.answers HOME [--batch N] [--json PATH]``: for each corpus, the kept kernel of
:mod:`.kernel` answers every new question of ``data/questions.jsonl`` of that corpus (how, paraphrase, which,
number) and every ``none`` question (asked of each corpus) as ``chat_with_documents`` does in its extractive mode,
by the answers engine's own first step (:mod:`tests.bench.product_answers`: evidence, quotes, the model's reading
where the evidence floor is near refusing). Scored: the answer holds the gold answer (rows with an ``answer``
pattern), it cites a gold file (answerable rows), and a ``none`` question is refused ("the documents do not say").
The reused rows (factoid and lookup sets) are measured by :mod:`tests.bench.answer_floor` and
:mod:`tests.bench.answers`. Prints a table per shape and split.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from foldermind.workers.answers import quotes as composer
from tests.bench.markdown import table
from tests.bench.product_answers import Asker
from tests.bench.shapes.corpora import asked
from tests.bench.shapes.kernel import indexed

QUESTIONS = Path(__file__).parent / "data" / "questions.jsonl"


def measure(home: Path, batch: int = 0, reverse: bool = False) -> list[dict[str, Any]]:
    """Every answer; ``batch``: only the rows of that batch (``none`` ones are batch 1), 0 for all; ``reverse``: each
    corpus's questions asked last to first (an answer must not depend on the questions asked before it)."""
    rows = [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if batch in (0, r.get("batch", 1))]
    out: list[dict[str, Any]] = []
    for name in asked(None, [r["corpus"] for r in rows] if batch else None):
        mine = [r for r in rows if r["corpus"] in (name, "*")]
        mine = mine[::-1] if reverse else mine
        if not mine:
            continue
        with indexed(home, name) as (kernel, corpus, _index), Asker(kernel.home.bus_endpoint) as asker:
            asker.warm_up()
            for r in mine:
                got = asker.ask(r["query"])
                reply, quoted, floorless = got.evidence.reply, got.answer, asker.floorless(got)
                gold = {str(Path(corpus.folder) / f) for f in r.get("files", [])}
                out.append(
                    {
                        "id": r["id"],
                        "query": r["query"],
                        "corpus": name,
                        "shape": r["shape"],
                        "split": r["split"],
                        "batch": r.get("batch", 1),
                        "supported": reply.supported,  # the evidence floor's verdict
                        "refused": not quoted.grounded,  # the answer's: the evidence floor's or the model's
                        "floor": got.reading.floor,
                        "note": got.note or "",  # says which check refused it
                        "quotes_hold_gold": _holds(r, got.quotes),  # the evidence floor's quotes, before any refusal
                        "support": reply.support,
                        "holds_gold": _holds(r, quoted),
                        "cites_gold": any(c.file_path in gold for c in quoted.citations),
                        "holds_gold_floorless": _holds(r, floorless),
                        "cites_gold_floorless": any(c.file_path in gold for c in floorless.citations),
                        "answer": quoted.answer,
                        "cited": [c.model_dump() for c in floorless.citations],
                    }
                )
    return out


def _holds(row: dict[str, Any], answer: composer.Composed) -> bool:
    return bool(row.get("answer")) and re.search(row["answer"], answer.answer, re.I) is not None


def render(results: list[dict[str, Any]]) -> str:
    rows: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    patterns = {r["id"]: bool(r.get("answer")) for r in map(json.loads, QUESTIONS.read_text("utf-8").splitlines())}
    for r in results:
        for split in (r["split"], "all"):
            c = rows[(r["shape"], split)]
            if r["shape"] == "none":
                c[4] += r.get("refused", not r["supported"])  # a run kept before the model's reading: the floor's
                c[5] += 1
                continue
            if patterns.get(r["id"]):
                c[0] += r["holds_gold"]
                c[1] += 1
            c[2] += r["cites_gold"]
            c[3] += 1

    def frac(a: int, b: int) -> str:
        return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"

    body = [
        [shape, split, frac(c[0], c[1]), frac(c[2], c[3]), frac(c[4], c[5])]
        for (shape, split), c in sorted(rows.items())
    ]
    header = ["shape", "split", "answer holds the gold", "cites a gold file", "none: refused"]
    return "\n".join(table(header, body, "llrrr"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.shapes.answers", description=__doc__.split("\n")[0])
    parser.add_argument("home", help="the shape bench's home (kept kernels and corpora)")
    parser.add_argument("--json", help="keep every answer here")
    parser.add_argument("--replay", help="score a kept --json again (no kernel)")
    parser.add_argument("--batch", type=int, default=0, help="only the rows of this batch (default: all)")
    parser.add_argument("--reverse", action="store_true", help="ask each corpus's questions last to first")
    args = parser.parse_args(argv)
    if args.replay:
        results = json.loads(Path(args.replay).read_text("utf-8"))
    else:
        results = measure(Path(args.home).resolve(), args.batch, args.reverse)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
