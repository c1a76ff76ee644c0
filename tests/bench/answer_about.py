"""Whether answers are about what the question asks, per answer mode (issue 38's target: generative answers about
the question at least as often as extractive ones).

``python -m tests.bench.answer_about RUN.json [RUN.json ...]`` reads the answers of :mod:`tests.bench.answers`
(its ``--json``) and judges each answer's kept text as the claim checker's relevance test does
(:mod:`foldermind.workers.indexer.evidence.claims`: the idf-weighted share of the question's terms, idf over the
sentences of the quotes the answer cites, at least ``ABOUT_SHARE``): a sentence is about the question when it holds that
share; an answer is when its whole text does (markers and quote marks dropped). The same test for every mode: an
extractive answer's text is its quotes, a generative one's the model's kept sentences or, when it fell back, the
quotes. Prints a table per mode and split; no kernel.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from foldermind.workers.indexer.evidence import claims, sentences
from foldermind.workers.llm.citations import MARKER
from tests.bench.factoids import load_questions
from tests.bench.markdown import table


def judged(question: str, answer: dict[str, Any]) -> tuple[bool, int, int]:
    """(the answer is about the question, its sentences that are, its sentences)."""
    quotes = [str(c.get("quote", "")) for c in answer.get("citations", [])]
    flat = [s.text for q in quotes for s in sentences.split(q)] or quotes
    weights = claims._weights(sentences.content_terms(question), flat)
    text = MARKER.sub(" ", str(answer.get("answer", ""))).replace("\u201c", " ").replace("\u201d", " ")
    found = [s.text for s in sentences.split(text)]
    about = [claims._share(weights, sentences.content_terms(s)) >= claims.ABOUT_SHARE for s in found]
    whole = claims._share(weights, sentences.content_terms(text)) >= claims.ABOUT_SHARE
    return whole and bool(found), sum(about), len(found)


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    asked = {q.id: q for q in load_questions()}
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path in paths:
        for a in json.loads(Path(path).read_text("utf-8")):
            if a.get("error") or a["question"] not in asked:
                continue
            q = asked[a["question"]]
            kept = "model text" if a.get("mode_used") in ("generative", "generative+checked") else "quotes"
            whole, yes, n = judged(q.question, a)
            for key in ((a["mode"], q.split, "all"), (a["mode"], q.split, kept)):
                c = counts[key]
                c[0], c[1], c[2], c[3] = c[0] + whole, c[1] + 1, c[2] + yes, c[3] + n
    rows = [
        [mode, split, kept, f"{c[0]}/{c[1]} ({100 * c[0] / c[1]:.0f}%)", f"{c[2]}/{c[3]}"]
        for (mode, split, kept), c in sorted(counts.items())
        if c[1]
    ]
    header = ["mode", "split", "answers", "about the question", "sentences about it"]
    print("\n".join(table(header, rows, "lllrr")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
