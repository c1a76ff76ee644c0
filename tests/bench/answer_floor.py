"""The weak-evidence floor: how strong is the best evidence for questions the documents cannot answer, and for
those they can, and which floor tells them apart.

``python -m tests.bench.answer_floor [--home DIR] [--json PATH] [--replay PATH] [--report PATH]`` from the
repository root. A real kernel (the answers bench's setup, :mod:`tests.bench.answers`) indexes SciFact (the
answer bench's 1,595 abstracts), the Django docs, the Debian manuals and pytest's docs (the shape bench's fourth
corpus) as four Smart Folders, then asks, as ``chat_with_documents`` does in its extractive mode (the answers
engine's own first step, :mod:`tests.bench.product_answers`: the indexer's ``evidence.request`` over five files, the
quotes, the model's reading where the evidence floor is near refusing), every question of the no-answer sets
(``factoid_data/noanswer.jsonl``, ``noanswer2.jsonl`` .. ``noanswer9.jsonl``: greetings, questions on subjects no
document names, near misses and neighbours; its README) and every answerable factoid question of those corpora
(``--only noanswer9``: that set's rows alone, with ``--factoids who4`` that split's answerable ones beside them;
``--without noanswer9``: all but those). For each it keeps the reply's
``support`` (:mod:`foldermind.workers.indexer.evidence.floor`), ``supported`` as the running code judged it, the
answer's ``floor``, whether it was refused (by the evidence floor or the model), the floorless quotes' citations
(``cited``), and for an answerable one whether the extractive answer (the quotes a user gets) holds the gold answer.
Every answerable factoid set but ``who4`` has been read before (tune .. fresh7, who1 .. who3): tune; ``who4`` and the
shape bench's newest batch (``--shapes``) are held out. The no-answer rows' held-out part is the newest set,
``noanswer9``; every earlier no-answer row (and the shape bench's ``none`` rows) is tune.

Then, offline, every floor of the grid is scored on the ``tune`` halves: no-answer questions refused, answerable
ones whose gold answer is lost. A floor is (cosine, share, unheld name, rescue): supported when the best cosine
reaches the first or the best share the second, unless the question's heaviest name no leading passage holds
weighs the third (``support["unheld_name"]``) and the cosine is under the fourth. The grid varies the last two
(:data:`UNHELD_GRID` x :data:`RESCUE_GRID`) at the cosine and share of ``--main`` (the floor before them); the floor
chosen refuses the most tune no-answer questions without losing more tune answers that held the gold than
``--main`` does (ties: fewer lost, then the higher unheld name, then the lower rescue); it is then read once on the
``held_out`` halves, beside ``--main`` and the running code's floor. ``--shapes PATH`` adds the shape bench's
answers (:mod:`tests.bench.shapes.answers`: paraphrases, how, which, number and ``none``) to both sides.
The cosine is the sentences' or, when the floor refuses on them, their clauses' (``support["clause"]``, measured
only then: a grid floor stricter than the running one misses clause cosines). ``--soft`` / ``--focus`` sweep a
floor on the soft or the focus cover (``support["soft"]``, ``support["focus"]``, when the indexer reports them) on
tune; ``--soft-at S`` / ``--focus-at F`` read one on both halves, by kind and by answer shape.
``--replay PATH`` scores a kept ``--json`` again without a kernel; ``--report PATH`` writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from foldermind.workers.answers import quotes as composer
from foldermind.workers.indexer.evidence import floor, sentences
from tests.bench import machine
from tests.bench.answers import SLOW_PARSES, Results, index_corpora
from tests.bench.factoids import CHECKED_FILES, DATA, DJANGO, MANUALS, SCIFACT, Corpus, Question, build_corpora
from tests.bench.factoids import load_questions as load_factoids
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.mcpclient import kernel_config
from tests.bench.product_answers import Asker
from tests.bench.shapes.corpora import PYTEST, pytest_corpus
from tests.bench.transports import REPO
from tests.config import merge

NOANSWER = DATA / "noanswer.jsonl"
NOANSWER2 = DATA / "noanswer2.jsonl"
NOANSWER3 = DATA / "noanswer3.jsonl"
NOANSWER4 = DATA / "noanswer4.jsonl"
NOANSWER5 = DATA / "noanswer5.jsonl"
NOANSWER6 = DATA / "noanswer6.jsonl"
NOANSWER7 = DATA / "noanswer7.jsonl"
NOANSWER8 = DATA / "noanswer8.jsonl"
NOANSWER9 = DATA / "noanswer9.jsonl"
NOANSWER_HELD_OUT = "noanswer9"  # the newest no-answer set: held out; every earlier no-answer row is tune
REPORT = REPO / "docs" / "benchmarks" / "answer-relevance.md"
CORPORA = (SCIFACT, DJANGO, MANUALS, PYTEST)
HELD_OUT: tuple[str, ...] = ("who4",)  # the newest "who" questions; every other factoid set has been read: tune
SHAPE_HELD_OUT = (11,)  # the shape bench's batches never read before this session (its "batch" field)
UNHELD_GRID = [round(0.30 + 0.05 * i, 2) for i in range(15)] + [1.01]  # 0.30 .. 1.00, and off
RESCUE_GRID = [round(0.50 + 0.025 * i, 3) for i in range(21)]  # 0.50 .. 1.00 (1.00: no rescue)
Floor = tuple[float, float, float, float]
SOFT_GRID = [round(0.20 + 0.005 * i, 3) for i in range(141)]  # 0.20 .. 0.90
CURRENT: Floor = (floor.SUPPORT_SEMANTIC, floor.SUPPORT_LEXICAL, floor.UNHELD_NAME, floor.NAME_RESCUE)


@dataclass(slots=True)
class Asked:
    id: str
    kind: str  # "answerable", "greeting", "off-topic", "near-miss", "neighbour"
    corpus: str
    split: str  # "tune" or "held_out" (an answerable question's fresh sets count as held out)
    question: str
    semantic: float = 0.0
    lexical: float = 0.0
    rare: float = 0.0  # the best share of the question's rare terms a leading passage holds
    unheld_name: float = 0.0  # the weight of the heaviest name of the question no leading passage holds
    clause: float = 0.0  # the best cosine of a clause of a leading sentence (measured only when the floor refuses)
    support: dict[str, float] | None = None  # every measure the reply gave
    supported: bool = False
    holds_gold: bool = False  # the extractive answer, were the floor not there, holds the gold (answerable only)
    answer: str = ""  # the evidence floor's quotes (the model's reading may refuse them: ``refused``)
    refused: bool = False  # the answer a user gets is "the documents do not say" (the evidence floor's or the model's)
    floor: str = ""  # the answer's ``floor``: what judged that the documents answer ("" in a run kept before it)
    shape: str = ""  # a shape bench row's shape ("how", "paraphrase", ...); a factoid's is read from its question
    cited: list[dict[str, Any]] = field(default_factory=list)  # the floorless quotes' citations
    note: str = ""  # the answer's note (says which check refused it)


def load_questions(split: str = "all") -> list[Question]:
    """Every answerable factoid question, ``who1`` .. ``who4`` included (their abstracts are among the first 1,500)."""
    return load_factoids(split, paths=CHECKED_FILES)


def _noanswer_rows() -> list[dict[str, str]]:
    sets = (NOANSWER, NOANSWER2, NOANSWER3, NOANSWER4, NOANSWER5, NOANSWER6, NOANSWER7, NOANSWER8, NOANSWER9)
    return [json.loads(line) for p in sets for line in p.read_text("utf-8").splitlines() if line]


def _questions(only: str = "", without: str = "", factoids: str = "", answerable: bool = True) -> list[Asked]:
    """Every question asked: the no-answer rows (of the set ``only`` alone when given, never of ``without``) and the
    answerable ones (none with ``only`` or without ``answerable``, unless ``factoids`` names a factoid split to ask
    beside it)."""
    rows = [r for r in _noanswer_rows() if (not only or r["split"] == only) and r["split"] != without]
    out = [Asked(r["id"], r["kind"], r["corpus"], _noanswer_split(r["split"]), r["question"]) for r in rows]
    if (not only and answerable) or factoids:
        chosen = load_questions(factoids) if factoids else load_questions()
        out += [Asked(q.id, "answerable", q.corpus, _split(q.split), q.question) for q in chosen]
    return [a for a in out if a.corpus in (*CORPORA, "any")]


def _noanswer_split(row_split: str) -> str:
    return "held_out" if row_split == NOANSWER_HELD_OUT else "tune"


def splits() -> dict[str, str]:
    """Every question's part by the rules here, by id (a kept run's rows are read again by these)."""
    out = {r["id"]: _noanswer_split(r["split"]) for r in _noanswer_rows()}
    return out | {q.id: _split(q.split) for q in load_questions()}


def _split(factoid_split: str) -> str:
    """An answerable question's part here: every set read before (tune, held_out, fresh .. fresh7) is tune; the
    newest (who4) is held out."""
    return "held_out" if factoid_split in HELD_OUT else "tune"


def all_corpora(root: Path) -> dict[str, Corpus]:
    """The four corpora under ``root``: the answers bench's three and pytest's docs (the shape bench's builder)."""
    corpora = build_corpora(root, load_questions(), CORPORA)
    pytest = pytest_corpus(root)
    return corpora | {PYTEST: Corpus(pytest.name, pytest.folder, pytest.files)}


def measure(
    home: Path | None,
    only: str = "",
    without: str = "",
    factoids: str = "",
    answerable: bool = True,
    reverse: bool = False,
) -> tuple[list[Asked], dict[str, Any]]:
    """Ask the questions (``reverse``: last to first: an answer must not depend on the questions asked before it)."""
    asked = _questions(only, without, factoids, answerable)
    asked = asked[::-1] if reverse else asked
    gold = {q.id: q for q in load_questions()}
    kernel = Kernel("answer-floor", merge(kernel_config(), SLOW_PARSES), home)
    results = Results(machine=machine.facts(REPO), args={})
    try:
        corpora = all_corpora(kernel.root / "corpora")
        kernel.start()
        say("indexing SciFact, the Django docs, the manuals and pytest's docs, or checking the kept index")
        index_corpora(kernel, corpora, results)
        say(f"  indexed after {results.index_s:.0f} s")
        setup = {"machine": results.machine, "index_s": results.index_s, "started": time.strftime("%Y-%m-%d %H:%M")}
        setup["load_before"] = _load()
        with Asker(kernel.home.bus_endpoint) as asker:
            asker.warm_up()
            for a in asked:
                got = asker.ask(a.question)
                reply = got.evidence.reply
                support = getattr(reply, "support", {}) or {}
                a.semantic, a.lexical = float(support.get("semantic", 0.0)), float(support.get("lexical", 0.0))
                a.rare = float(support.get("rare", 0.0))
                a.unheld_name = float(support.get("unheld_name", 0.0))
                a.clause = float(support.get("clause", 0.0))
                a.support = dict(support)
                a.supported = reply.supported
                a.answer, a.refused, a.floor = got.quotes.answer, not got.answer.grounded, got.reading.floor
                a.note = got.note or ""
                # whether the quotes hold the gold is judged without the floor: what the floor takes away
                quoted = asker.floorless(got)
                a.cited = [c.model_dump() for c in quoted.citations]
                if a.kind == "answerable":
                    a.holds_gold = gold[a.id].answered_by(quoted.answer)
                say(
                    f"  {a.id}: sem {a.semantic:.3f} lex {a.lexical:.3f} rare {a.rare:.3f}"
                    f" supported {a.supported} gold {a.holds_gold} floor {a.floor} refused {a.refused}"
                )
        setup["load_after"] = _load()
        return asked, setup
    finally:
        kernel.stop()
        kernel.cleanup()


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _refused(a: Asked, at: Floor) -> bool:
    """Whether the floor (cosine, share, unheld name, rescue) refuses ``a``: a question without a content term
    always (as the indexer does), else evidence below both of the first two, or lacking a name that weighs the
    third with a cosine under the fourth."""
    sem, lex, unheld, rescue = at
    cosine = max(a.semantic, a.clause)
    close = cosine >= sem or a.lexical >= lex
    return not sentences.content_terms(a.question) or not close or (a.unheld_name >= unheld and cosine < rescue)


def score(asked: list[Asked], split: str, at: Floor) -> tuple[int, int, int, int]:
    """(no-answer refused, no-answer asked, gold answers lost, gold answers held) in ``split``."""
    none = [a for a in asked if a.kind != "answerable" and a.split == split]
    held = [a for a in asked if a.kind == "answerable" and a.split == split and a.holds_gold]
    return (
        sum(_refused(a, at) for a in none),
        len(none),
        sum(_refused(a, at) for a in held),
        len(held),
    )


def choose(asked: list[Asked], main: Floor) -> Floor:
    """The floor that refuses the most tune no-answer questions without losing more tune answers holding the gold
    than ``main`` does; ties to fewer lost, then the higher unheld name, then the lower rescue."""
    allowed = score(asked, "tune", main)[2]
    best: tuple[int, int, float, float] | None = None
    for unheld in UNHELD_GRID:
        for rescue in RESCUE_GRID:
            refused, _n, lost, _h = score(asked, "tune", (main[0], main[1], unheld, rescue))
            if lost <= allowed and (best is None or (-refused, lost, -unheld, rescue) < best):
                best = (-refused, lost, -unheld, rescue)
    if best is None:
        raise BenchFailure("no floor of the grid loses as few tune answers as the floor before")
    return (main[0], main[1], -best[2], best[3])


def cover_refused(a: Asked, key: str, at: float | None) -> bool:
    """Whether the running floor refuses ``a``, or its cover ``support[key]`` (measured only when the floor answers:
    ``soft``, the worst best cosine of a question word no leading passage holds with a word of those passages;
    ``focus``, the same for the thing the question asks for alone) is under ``at`` (None: the floor alone)."""
    cover = (a.support or {}).get(key)
    return _refused(a, CURRENT) or (at is not None and cover is not None and cover < at)


def cover_score(asked: list[Asked], split: str, key: str, at: float | None) -> tuple[int, int, int, int]:
    """:func:`score` of the running floor with ``support[key]`` under ``at`` refused too."""
    none = [a for a in asked if a.kind != "answerable" and a.split == split]
    held = [a for a in asked if a.kind == "answerable" and a.split == split and a.holds_gold]
    refused = sum(cover_refused(a, key, at) for a in none)
    return refused, len(none), sum(cover_refused(a, key, at) for a in held), len(held)


def cover_sweep(asked: list[Asked], key: str) -> list[str]:
    """A cover's floors on the ``tune`` halves (held out is read with ``--soft-at`` / ``--focus-at``), and the one
    the rule picks: the most refused at no more than one more loss than the running floor and at most 2% lost, the
    middle of its plateau; none when no floor refuses more than the running one."""
    base = cover_score(asked, "tune", key, None)
    limit = min(base[2] + 1, int(0.02 * base[3]))
    rows = [(s, *cover_score(asked, "tune", key, s)) for s in SOFT_GRID]
    lines = [
        f"| {key} cover under | tune refused | tune lost |",
        "|---|---|---|",
        f"| (running) | {base[0]}/{base[1]} | {base[2]}/{base[3]} |",
    ]
    lines += [f"| {s:.3f} | {r}/{n} | {lost}/{h} |" for s, r, n, lost, h in rows[::4]]
    ok = [x for x in rows if x[3] <= limit]
    best = max((x[1] for x in ok), default=base[0])
    plateau = [x[0] for x in ok if x[1] == best] if best > base[0] else []
    pick = f"{plateau[(len(plateau) - 1) // 2]:.3f}" if plateau else "none (no floor refuses more on tune)"
    return [*lines, "", f"Chosen on tune ({key}): {pick}."]


def cover_read(asked: list[Asked], key: str, at: float) -> list[str]:
    """The running floor and ``support[key]`` under ``at`` on both halves: no-answer refused by kind, gold answers
    lost by answer shape (a factoid's as the composer reads it, a shape bench row's own)."""
    lines = [f"| group | split | running | {key} under {at} |", "|---|---|---:|---:|"]
    for split in ("tune", "held_out"):
        refused, n, lost, h = cover_score(asked, split, key, None)
        r2, _n, l2, _h = cover_score(asked, split, key, at)
        lines.append(f"| no-answer refused | {split} | {refused}/{n} | {r2}/{n} |")
        lines.append(f"| gold answers lost | {split} | {lost}/{h} | {l2}/{h} |")
    kinds = sorted({a.kind for a in asked if a.kind != "answerable"})
    shapes = sorted({_shape(a) for a in asked if a.kind == "answerable"})
    for split in ("tune", "held_out"):
        for kind in kinds:
            group = [a for a in asked if a.kind == kind and a.split == split]
            before = sum(cover_refused(a, key, None) for a in group)
            lines.append(
                f"| {kind} refused | {split} | {before}/{len(group)} | "
                f"{sum(cover_refused(a, key, at) for a in group)}/{len(group)} |"
            )
        for shape in shapes:
            group = [a for a in asked if a.kind == "answerable" and a.holds_gold and a.split == split]
            group = [a for a in group if _shape(a) == shape]
            before = sum(cover_refused(a, key, None) for a in group)
            lines.append(
                f"| {shape} lost | {split} | {before}/{len(group)} | "
                f"{sum(cover_refused(a, key, at) for a in group)}/{len(group)} |"
            )
    return lines


def _shape(a: Asked) -> str:
    """An answerable question's shape: the shape bench's own, else the composer's (``factoid default``, ...)."""
    return a.shape or f"factoid {composer.shape(a.question)}"


def shape_rows(path: Path) -> list[Asked]:
    """The shape bench's answers (:mod:`tests.bench.shapes.answers` ``--json``) as rows here: a ``none`` question
    is a no-answer one, tune (the held-out no-answer set is the floor bench's own); an answerable one holds the gold
    when its answer would, were the floor not there, hold the gold answer (or, for a paraphrase, which has no answer
    pattern, cite a gold file). Held out: the answerable rows of a batch in SHAPE_HELD_OUT; every older row, read
    before, is tune whatever its hash split."""
    out = []
    for r in json.loads(path.read_text("utf-8")):
        s = r.get("support") or {}
        kind = "shape-none" if r["shape"] == "none" else "answerable"
        gold = r["holds_gold_floorless"] or (r["shape"] == "paraphrase" and r["cites_gold_floorless"])
        split = "held_out" if kind != "shape-none" and r.get("batch") in SHAPE_HELD_OUT else "tune"
        a = Asked(r["id"], kind, r["corpus"], split, r["query"], support=s, holds_gold=gold, shape=r["shape"])
        a.refused, a.floor = r.get("refused", False), r.get("floor", "")
        a.cited = r.get("cited", [])
        a.semantic, a.lexical, a.rare = s.get("semantic", 0.0), s.get("lexical", 0.0), s.get("rare", 0.0)
        a.unheld_name, a.clause = s.get("unheld_name", 0.0), s.get("clause", 0.0)
        out.append(a)
    return out


def _machine(setup: dict[str, Any]) -> str:
    m = setup.get("machine", {})
    return ", ".join(f"{k} {m[k]}" for k in ("CPU", "cores", "RAM", "foldermind") if k in m)


def render(asked: list[Asked], setup: dict[str, Any], main: Floor) -> str:
    chosen = choose(asked, main)
    lines = [
        "# The weak-evidence floor and the relevance check (issue 38, items 3 and 4)",
        "",
        f"Measured {setup.get('started', '?')} UTC, {_machine(setup)}; load average before "
        f"{setup.get('load_before')}, after {setup.get('load_after')}. By `python -m tests.bench.answer_floor`.",
        "",
        "| floor (cosine, share, unheld name, rescue) | split | no-answer refused | answerable gold answers lost |",
        "|---|---|---|---|",
    ]
    for label, at in (("before (with the no-term rule)", main), ("running", CURRENT), ("chosen on tune", chosen)):
        for split in ("tune", "held_out"):
            refused, n, lost, h = score(asked, split, at)
            lines.append(f"| {label} {at} | {split} | {refused}/{n} | {lost}/{h} |")
    if any(a.floor for a in asked):  # the rows asked as a user asks (a run kept before that has no floor)
        for split in ("tune", "held_out"):
            mine = [a for a in asked if a.split == split and a.floor]
            none = [a for a in mine if a.kind != "answerable"]
            held = [a for a in mine if a.kind == "answerable" and a.holds_gold]
            refused, lost = sum(a.refused for a in none), sum(a.refused for a in held)
            label = "the answer a user gets (with the model's reading)"
            lines.append(f"| {label} | {split} | {refused}/{len(none)} | {lost}/{len(held)} |")
    lines += ["", "By kind, with the chosen floor:", "", "| kind | split | refused |", "|---|---|---|"]
    for kind in ("greeting", "off-topic", "near-miss", "neighbour", "shape-none", "answerable"):
        for split in ("tune", "held_out"):
            group = [a for a in asked if a.kind == kind and a.split == split]
            lines.append(f"| {kind} | {split} | {sum(_refused(a, chosen) for a in group)}/{len(group)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.answer_floor", description=__doc__.split("\n")[0])
    parser.add_argument("--home", help="keep the home (index) here and reuse it")
    parser.add_argument("--json", help="keep every question's measures here")
    parser.add_argument("--replay", help="score a kept --json again (no kernel)")
    parser.add_argument("--report", help="write the report here (default: print only)")
    parser.add_argument("--shapes", help="also judge on the shape bench's answers (its --json)")
    parser.add_argument("--only", default="", help="ask only this no-answer set's rows (e.g. noanswer2)")
    parser.add_argument("--without", default="", help="leave this no-answer set's rows out (e.g. the held-out one)")
    parser.add_argument("--factoids", default="", help="with --only: also ask this factoid split's questions (who4)")
    parser.add_argument("--no-answerable", action="store_true", help="ask the no-answer rows only")
    parser.add_argument("--reverse", action="store_true", help="ask the questions last to first")
    parser.add_argument("--main", default="0.475,0.6,1.01,1", help="the floor before: cosine,share,unheld,rescue")
    parser.add_argument("--soft", action="store_true", help="also sweep the soft cover's floors on tune")
    parser.add_argument("--soft-at", type=float, help="read the soft cover's floor at this value on both halves")
    parser.add_argument("--focus", action="store_true", help="also sweep the focus cover's floors on tune")
    parser.add_argument("--focus-at", type=float, help="read the focus cover's floor at this value on both halves")
    args = parser.parse_args(argv)
    try:
        if args.replay:
            kept = json.loads(Path(args.replay).read_text("utf-8"))
            asked, setup = [Asked(**a) for a in kept["asked"]], kept["setup"]
            parts = splits()
            for a in asked:  # the rule above, whatever the kept run wrote
                a.split = parts.get(a.id, a.split)
                a.unheld_name = (a.support or {}).get("unheld_name", a.unheld_name)
                a.clause = (a.support or {}).get("clause", a.clause)
        else:
            home = Path(args.home) if args.home else None
            asked, setup = measure(home, args.only, args.without, args.factoids, not args.no_answerable, args.reverse)
            if args.json:
                Path(args.json).write_text(json.dumps({"setup": setup, "asked": [asdict(a) for a in asked]}, indent=1))
    except BenchFailure as exc:
        say(f"failed: {exc}")
        return 1
    if args.shapes:
        asked += shape_rows(Path(args.shapes))
    sem, lex, unheld, rescue = (float(v) for v in args.main.split(","))
    report = render(asked, setup, (sem, lex, unheld, rescue))
    for key, sweep, at in (("soft", args.soft, args.soft_at), ("focus", args.focus, args.focus_at)):
        if sweep:
            report += "\n" + "\n".join(cover_sweep(asked, key)) + "\n"
        if at is not None:
            report += "\n" + "\n".join(cover_read(asked, key, at)) + "\n"
    print(report)
    if args.report:
        Path(args.report).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
