"""``python -m tests.bench.shapes [--home DIR] [--corpus ...] [--shapes ...] [--split tune|held-out|all] [--batch N]
[--json] [--write] [--lists OUT]``: the shape bench (issue 38). Indexes the corpora of :mod:`.corpora` in kept kernel
homes under DIR (default ``~/.cache/foldermind-bench/shapes``; a rerun reuses them), runs the sets of
:mod:`.sets` through search in every mode (:mod:`.run`) and prints the report (:mod:`.report`); ``--write``
also writes ``docs/benchmarks/shapes.md``; ``--lists OUT`` writes each item's keyword and semantic hits (200
deep, as :func:`tests.bench.lookup.dump` does), so a fusion can be tried offline on the lists the indexer
fuses. The sets and their rules: ``tests/bench/shapes/data/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from foldermind.protocol.errors import BusError
from tests.bench import machine
from tests.bench.kernels import BenchFailure, say
from tests.bench.lookup import dump
from tests.bench.manuals import cache_dir
from tests.bench.shapes import report, sets
from tests.bench.shapes.corpora import ALL_CORPORA, SCIFACT, asked, build
from tests.bench.shapes.kernel import corpus_root
from tests.bench.shapes.run import MODES, Run, run_corpus
from tests.bench.shapes.sets import ANY
from tests.bench.transports import REPO

DOC = REPO / "docs" / "benchmarks" / "shapes.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.shapes", description=__doc__.split("\n")[0])
    parser.add_argument("--home", default=str(cache_dir() / "shapes"), help="kept kernel homes and corpora")
    named = f"default: {' '.join(ALL_CORPORA)}"
    parser.add_argument("--corpus", nargs="+", choices=ALL_CORPORA, help=named)
    parser.add_argument("--shapes", nargs="+", choices=sets.SHAPES, default=list(sets.SHAPES))
    parser.add_argument("--split", choices=("tune", "held-out", "all"), default="tune")
    parser.add_argument("--batch", type=int, default=0, help="only the written rows of this batch (default: all rows)")
    parser.add_argument("--scifact-all", action="store_true", help="SciFact: all 5,183 abstracts (default: 1,212)")
    parser.add_argument("--json", action="store_true", help="print JSON (scores and every outcome), not Markdown")
    parser.add_argument("--write", action="store_true", help=f"also write {DOC.relative_to(REPO)}")
    parser.add_argument("--lists", default="", help="also write each item's keyword and semantic hits (JSON) here")
    args = parser.parse_args(argv)
    home = Path(args.home).resolve()
    facts = machine.facts(REPO)
    t0 = time.monotonic()
    split = args.split.replace("-", "_")
    try:
        scifact_files = (
            {p.name for p in build(SCIFACT, corpus_root(home), args.scifact_all).folder.glob("*.txt")}
            if SCIFACT in (args.corpus or ALL_CORPORA)
            else None
        )
        items, dropped = sets.load(scifact_files)
        items = [i for i in items if i.shape in args.shapes and split in (i.split, "all")]
        items = [i for i in items if args.batch in (0, i.batch)]
        out = Run(lists={} if args.lists else None)
        for corpus in asked(args.corpus, [i.corpus for i in items] if args.batch else None):
            if any(i.corpus in (corpus, ANY) for i in items):
                run_corpus(home, corpus, items, MODES, out, args.scifact_all)
    except (BenchFailure, BusError) as exc:
        say(f"bench failed: {exc}")
        return 1
    if out.lists is not None:
        dump(out.lists, Path(args.lists))
    modes = [m[0] for m in MODES]
    if args.json:
        print(json.dumps(report.as_json(out, modes, facts)))
        return 0
    batch = f", batch {args.batch}" if args.batch else ""
    note = (
        f"Split asked: {args.split}{batch}. Run time {time.monotonic() - t0:.0f} s. Reused SciFact factoids left out"
        f" (abstract not indexed): {dropped}."
    )
    text = report.render(out, modes, facts, note)
    print(text)
    if args.write:
        DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
