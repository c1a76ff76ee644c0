"""The answer bench's time targets (issue 37, item 2) per corpus and mode: the first streamed text and the final
answer, median and p95, against their limits, doubled for a run beside CPU hogs; beside them the CPU the kernel and
its workers spent on an answer (the raw cost, which a busy machine stretches into the wall times), how often the
model ran and how often its checked text was kept in the answer, where it ran."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from tests.bench.answer_shapes import GENERATED, AnswerLike
from tests.bench.markdown import table, verdict
from tests.bench.stats import pct

FIRST_TEXT_S = 0.5  # extractive and auto: median time to the first streamed text (on a quiet machine)
FINAL_S = 3.0  # extractive and auto: median time to the whole answer (on a quiet machine)
BESIDE_HOGS = 2.0  # the limits' factor for a run beside CPU hogs
JUDGED_MODES = ("auto", "extractive")  # generative is measured for reference: it runs the model every time


def limits(hogs: int) -> tuple[float, float]:
    """(first text, final answer) limits in seconds for a run beside ``hogs`` CPU hogs."""
    factor = BESIDE_HOGS if hogs else 1.0
    return FIRST_TEXT_S * factor, FINAL_S * factor


def _median(values: list[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return statistics.median(vals) if vals else math.nan


def _times(values: list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    return f"{statistics.median(vals):.2f} / {pct(vals, 0.95):.2f}" if vals else "-"


def _judge(value: float, limit: float, judged: bool) -> str:
    return verdict(None if not judged or math.isnan(value) else value <= limit)


def render(answers: Sequence[AnswerLike], modes: Sequence[str], corpora: Sequence[str], hogs: int) -> list[str]:
    """One row per mode and corpus (then all corpora): the times against :func:`limits`, the model's share."""
    first_limit, final_limit = limits(hogs)
    rows = []
    for mode in modes:
        judged = mode in JUDGED_MODES
        for corpus in (*corpora, "all"):
            picked = [a for a in answers if a.mode == mode and (corpus == "all" or a.question.corpus == corpus)]
            ok = [a for a in picked if not a.error]
            if not picked:
                continue
            first = [a.first_text_s for a in ok]
            final = [a.total_s for a in ok]
            cpu = _median([a.cpu_s for a in ok])
            ran = [a for a in ok if a.completion_tokens > 0]
            kept = sum(1 for a in ran if a.mode_used in GENERATED)
            rows.append(
                [
                    mode,
                    corpus,
                    f"{len(ok)}/{len(picked)}",
                    _times(first),
                    _judge(_median(first), first_limit, judged),
                    _times(final),
                    _judge(_median(final), final_limit, judged),
                    "-" if math.isnan(cpu) else f"{cpu:.2f}",
                    str(len(ran)),
                    f"{kept}/{len(ran)} ({100 * kept / len(ran):.0f}%)" if ran else "-",
                ]
            )
    header = ["mode", "corpus", "answered", "first text s, median / p95", f"<= {first_limit:g} s"]
    header += ["final answer s, median / p95", f"<= {final_limit:g} s", "kernel CPU s per answer, median"]
    return table([*header, "model ran", "its text kept, where it ran"], rows, "llrrcrcrrr")
