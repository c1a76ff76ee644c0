"""Natural questions by search mode: where each mode puts the one file that answers the question.

``python -m tests.bench.factoid_search --home DIR [--top-k N] [--known]`` from the repository root. The questions
are the answer bench's (:mod:`tests.bench.factoids`: 216 written by hand, each with the one file that holds its answer,
over three corpora nobody on the project wrote: SciFact abstracts among 1,500 distractors, Django 4.2's docs,
six Debian manuals). They were written for the answer engine and never used to choose a fusion constant, so
they read the search modes as held-out data. A real kernel indexes the three corpora in one home (``--home``
keeps it for the next run; the answer bench's ``index_corpora`` waits for it), then every question goes to
``search.request`` over the bus once per mode (``keyword``, ``semantic``, ``hybrid`` with the configured
fusion), ``--top-k`` chunks across the whole index, as a client asking without a Smart Folder would. A result
list counts each file once, at its best chunk.

Per corpus and per question set, and over all: top-1 (the gold file first), MRR@10 and hit@5 by file. The
report is printed as Markdown; nothing is written.

``--known`` reads the same files as known-item lookups as well: for each question, the words a user might
remember of its gold sentence (:func:`remembered`: the sentence's first :data:`REMEMBERED` words that are not
stop words (:data:`~foldermind.workers.indexer.storage.keyword.languages.STOP_WORDS`), a rule fixed before any run),
searched as typed.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.workers.indexer.storage.keyword.languages import STOP_WORDS
from tests.bench import machine
from tests.bench.answers import Results, index_corpora
from tests.bench.factoids import CORPORA, Question, build_corpora, load_questions
from tests.bench.kernels import Kernel, say
from tests.bench.transports import REPO
from tests.config import Config

MODES = ("keyword", "semantic", "hybrid")
FILES = 10  # files ranked per question (MRR@10)
NO_LLM: Config = {"workers": {"llm": {"enabled": False}}}
REMEMBERED = 6
"""Words of the gold sentence in a known-item query."""


def remembered(sentence: str) -> str:
    """A known-item query from a sentence: its first :data:`REMEMBERED` distinct words of three or more
    characters that are not stop words, in the sentence's order, lower-cased."""
    words: list[str] = []
    for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", sentence):
        w = word.lower().strip("'-")
        if len(w) >= 3 and w not in STOP_WORDS and w not in words:
            words.append(w)
    return " ".join(words[:REMEMBERED])


@dataclass(slots=True)
class Tally:
    """Gold-file ranks of one mode over some questions (0 = not in the first :data:`FILES` files)."""

    ranks: list[int] = field(default_factory=list)

    def top1(self) -> int:
        return sum(r == 1 for r in self.ranks)

    def mrr(self) -> float:
        return sum(1 / r for r in self.ranks if r) / len(self.ranks) if self.ranks else math.nan

    def hit5(self) -> int:
        return sum(0 < r <= 5 for r in self.ranks)


def gold_rank(q: Question, paths: Sequence[str]) -> int:
    """1-based rank of the gold file among the first :data:`FILES` distinct files of ``paths``, else 0."""
    files = list(dict.fromkeys(paths))[:FILES]
    return next((i for i, p in enumerate(files, 1) if q.is_gold(p)), 0)


def search(client: BusClient, query: str, mode: str, top_k: int) -> list[str]:
    reply = client.request("indexer", SearchRequest(query, mode, top_k), SearchReply, timeout=60).body
    return [str(hit["file_path"]) for hit in reply.results]


def measure(
    client: BusClient, questions: list[Question], top_k: int, known: bool = False
) -> tuple[dict[tuple[str, str], Tally], list[str]]:
    """(group, mode) -> tally, the groups being each corpus, each question set and ``all``; and a line for
    every question whose gold file hybrid ranks other than keyword search does. ``known``: the queries are
    :func:`remembered` of the gold sentences instead of the questions."""
    out: dict[tuple[str, str], Tally] = {}
    differ: list[str] = []
    for q in questions:
        query = remembered(q.sentence) if known else q.question
        ranks = {mode: gold_rank(q, search(client, query, mode, top_k)) for mode in MODES}
        for mode, rank in ranks.items():
            for group in (q.corpus, f"set {q.split}", "all"):
                out.setdefault((group, mode), Tally()).ranks.append(rank)
        if ranks["hybrid"] != ranks["keyword"]:
            differ.append(f"- {q.id} ({q.corpus}): " + ", ".join(f"{m} {r or '-'}" for m, r in ranks.items()))
    return out, differ


def render(tallies: dict[tuple[str, str], Tally], header: str) -> str:
    groups = list(dict.fromkeys(g for g, _ in tallies))
    order = [g for g in (*CORPORA, "all") if g in groups] + sorted(g for g in groups if g.startswith("set "))
    lines = [
        header,
        "",
        "| questions | n | " + " | ".join(f"{m}: top-1 / MRR@10 / hit@5" for m in MODES) + " |",
        "|---|---:|" + "---|" * len(MODES),
    ]
    for g in order:
        n = len(tallies[(g, MODES[0])].ranks)
        cells = [f"{t.top1()} / {t.mrr():.3f} / {t.hit5()}" for t in (tallies[(g, m)] for m in MODES)]
        lines.append(f"| {g} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="kept: the next run reuses its index")
    ap.add_argument("--top-k", type=int, default=20, help="chunks asked per search (default 20)")
    ap.add_argument("--known", action="store_true", help="also known-item queries made of the gold sentences")
    args = ap.parse_args(argv)
    questions = load_questions()
    corpora = build_corpora(args.home / "corpora", questions)
    kernel = Kernel("factoid-search", NO_LLM, root=args.home)
    kernel.start()
    try:
        say(f"indexing {', '.join(f'{c.name} ({c.files} files)' for c in corpora.values())} in {args.home}")
        index_corpora(kernel, corpora, Results(machine.facts(REPO), vars(args)))
        with kernel.client("bench-factoid-search-q") as client:
            tallies, differ = measure(client, questions, args.top_k)
            known = measure(client, questions, args.top_k, known=True) if args.known else None
    finally:
        kernel.stop()
    facts = machine.facts(REPO)
    header = (
        f"{len(questions)} questions, top_k {args.top_k} chunks, files counted once at their best chunk; "
        f"{facts['date (UTC)']} UTC, {facts['foldermind']}, {facts['CPU']} ({facts['cores']})"
    )
    print(render(tallies, header))
    print("\nWhere hybrid ranks the gold file other than keyword search (rank among files, - = not in the first 10):")
    print("\n".join(differ) or "- none")
    if known is not None:
        print("\n" + render(known[0], f"Known-item queries ({REMEMBERED} words remembered of each gold sentence)"))
        print("\nWhere hybrid ranks the gold file other than keyword search:")
        print("\n".join(known[1]) or "- none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
