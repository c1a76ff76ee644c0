"""Generative answers to the shape bench's questions beside extractive ones (issue 38's target: generative answers
about the question at least as often as extractive ones).

``python -m tests.bench.shapes.generative HOME --batch N [--json PATH]``: for each corpus, the kept kernel of
:mod:`.kernel` answers every answerable question of that batch with the answers engine's ``Chat`` (what
``chat_with_documents`` runs), in extractive and then in generative mode. Each answer is judged as
:mod:`tests.bench.answer_about` judges (about the question), by its gold pattern (holds the gold), its citations
(cites a gold file) and ``grounded``. Every generative answer keeps its evidence, the model's own text and the claim
check, so ``--replay PATH`` judges a kept run again with this tree's claim checker on the same model text (a checker
change compared paired: the model's text varies between runs with its thread count and the load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from foldermind.protocol.messages import CheckReply, CheckRequest, EvidenceReply, Message
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import quotes as composer
from foldermind.workers.answers.engine import Chat
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.indexer.evidence.claims import Asked
from tests.bench.answer_about import judged
from tests.bench.markdown import table
from tests.bench.product_answers import MAX_FILES, WAIT_S, warm_up
from tests.bench.shapes.corpora import asked
from tests.bench.shapes.kernel import indexed

QUESTIONS = Path(__file__).parent / "data" / "questions.jsonl"
MODES = ("extractive", "generative")
CHAT_S = 600.0
"""How long a bench waits for the model's answer (the product's ``timeout_s`` is 60 s): a verdict must not depend
on the machine's load."""
KEPT = (EvidenceReply, CheckRequest, CheckReply)


class Recording(Bus):
    """The bench's bus: it keeps the evidence and the claim check of the answer being asked."""

    seen: dict[str, Any]

    async def call(
        self, to: str, msg: Message, reply_type: Any, timeout: float | None = None, on_partial: Any = None
    ) -> Any:
        body = await super().call(to, msg, reply_type, timeout, on_partial)
        for m in (msg, body):
            if isinstance(m, KEPT):
                self.seen[m.KIND] = m.to_body()
        if type(body).__name__ == "ChatReply":
            self.seen["model_text"] = body.answer
        return body


def measure(home: Path, batch: int, ids: set[str] | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("batch", 1) == batch and r["shape"] != "none" and (not ids or r["id"] in ids)]
    policy = LlmPolicy(likely_wait_s=WAIT_S, timeout_s=CHAT_S)
    out: list[dict[str, Any]] = []
    for name in asked(None, [r["corpus"] for r in rows]):
        mine = [r for r in rows if r["corpus"] == name]
        if not mine:
            continue
        with indexed(home, name) as (kernel, corpus, _index):
            bus = Recording(kernel.home.bus_endpoint, "bench-generative", deadline_s=CHAT_S)
            runner = asyncio.Runner()
            try:
                warm_up(bus, CHAT_S)
                chat = Chat(bus, policy)
                for r in mine:
                    gold = {str(Path(corpus.folder) / f) for f in r.get("files", [])}
                    for mode in MODES:
                        bus.seen = {}
                        got = runner.run(chat.answer(r["query"], None, MAX_FILES, None, None, mode))
                        out.append(_scored(r, mode, got.model_dump(), gold) | {"kept": bus.seen})
            finally:
                runner.close()
                bus.close()
    return out


def _scored(row: dict[str, Any], mode: str, answer: dict[str, Any], gold: set[str]) -> dict[str, Any]:
    about, _yes, _n = judged(row["query"], answer)
    pattern = row.get("answer")
    return {
        "id": row["id"],
        "query": row["query"],
        "shape": row["shape"],
        "corpus": row["corpus"],
        "mode": mode,
        "about": about,
        "holds_gold": bool(pattern) and re.search(pattern, answer["answer"], re.I) is not None,
        "cites_gold": any(c["file_path"] in gold for c in answer["citations"]),
        "grounded": answer["grounded"],
        "used": answer["answer_mode_used"],
        "answer": answer,
        "files": sorted(gold),
        "pattern": pattern,
    }


def replay(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each kept generative answer as this tree's claim checker would make it from the same model text: a supported
    claim is kept when :class:`Asked` calls it about the question (the backing sentence is the one kept)."""
    out: list[dict[str, Any]] = []
    for r in results:
        kept = r.get("kept", {})
        if r["mode"] != "generative" or CheckReply.KIND not in kept:
            out.append(r)
            continue
        request = CheckRequest.from_body(kept[CheckRequest.KIND])
        reply = CheckReply.from_body(kept[CheckReply.KIND])
        evidence = composer.Evidence(EvidenceReply.from_body(kept[EvidenceReply.KIND]))
        asked = Asked(request.question, request.sources)
        checks = [dict(c) for c in reply.checks]
        for claim, c in zip(request.claims, checks, strict=True):
            if c["supported"]:
                c["about"] = asked.about(str(claim["text"]), c["source"], c["quote"])
        generated, dropped = composer.checked(evidence, request.claims, checks, len(request.sources))  # type: ignore[arg-type]
        answer = dict(r["answer"])
        if generated.grounded:
            answer["answer"] = generated.answer
            answer["citations"] = [c.model_dump() for c in generated.citations]
            answer["answer_mode_used"] = "generative" if dropped == 0 else "generative+checked"
        else:
            policy = LlmPolicy()
            quoted = composer.extractive(evidence, composer.Quoting.of(policy))
            answer["answer"] = quoted.answer
            answer["citations"] = [c.model_dump() for c in quoted.citations]
            answer["answer_mode_used"] = "fallback"
        row = {"id": r["id"], "query": r["query"], "shape": r["shape"], "corpus": r["corpus"], "answer": r["pattern"]}
        out.append(_scored(row, "generative", answer, set(r["files"])) | {"kept": kept})
    return out


def render(results: list[dict[str, Any]]) -> str:
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for r in results:
        for shape in (r["shape"], "all"):
            c = counts[(shape, r["mode"])]
            c[0] += r["about"]
            c[1] += r["holds_gold"]
            c[2] += r["cites_gold"]
            c[3] += not r["grounded"]
            c[4] += r["used"] in ("generative", "generative+checked")
            c[5] += 1

    def frac(a: int, b: int) -> str:
        return f"{a}/{b}"

    body = [
        [shape, mode, frac(c[0], c[5]), frac(c[1], c[5]), frac(c[2], c[5]), frac(c[3], c[5]), frac(c[4], c[5])]
        for (shape, mode), c in sorted(counts.items())
    ]
    header = ["shape", "mode", "about", "holds the gold", "cites a gold file", "refused", "model text kept"]
    return "\n".join(table(header, body, "llrrrrr"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.shapes.generative", description=__doc__.split("\n")[0])
    parser.add_argument("home", nargs="?", help="the shape bench's home (kept kernels and corpora)")
    parser.add_argument("--batch", type=int, default=0, help="the batch of questions asked")
    parser.add_argument("--ids", default="", help="only these question ids (comma-separated)")
    parser.add_argument("--json", help="keep every answer here")
    parser.add_argument("--replay", help="judge a kept --json again with this tree's claim checker (no kernel)")
    args = parser.parse_args(argv)
    ids = {i for i in args.ids.split(",") if i}
    kept = json.loads(Path(args.replay).read_text("utf-8")) if args.replay else None
    results = replay(kept) if kept is not None else measure(Path(args.home).resolve(), args.batch, ids)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
