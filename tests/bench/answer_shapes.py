"""The answer bench's auto and generative figures by question shape: how often the model runs, how often its
checked text survives into the answer, and the times, per shape (:func:`foldermind.workers.answers.quotes.shape`)
and split."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Protocol

from foldermind.workers.answers.quotes import SHAPES, shape
from tests.bench.markdown import table

GENERATED = ("generative", "generative+checked")
MODEL_MODES = ("auto", "generative")


class AnswerLike(Protocol):
    """What these tables read of an answer (:class:`tests.bench.answers.Answer`)."""

    mode: str
    mode_used: str | None
    completion_tokens: int
    first_text_s: float
    total_s: float
    cpu_s: float
    error: str

    @property
    def question(self) -> Any: ...


def _median(values: list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    return f"{statistics.median(vals):.2f}" if vals else "-"


def _row(label: list[str], answers: Sequence[AnswerLike]) -> list[str]:
    ok = [a for a in answers if not a.error]
    ran = [a for a in ok if a.completion_tokens > 0]
    kept = [a for a in ran if a.mode_used in GENERATED]
    share = f"{len(kept)}/{len(ran)} ({100 * len(kept) / len(ran):.0f}%)" if ran else "-"
    return [
        *label,
        str(len(ok)),
        str(len(ran)),
        share,
        _median([a.first_text_s for a in ok]),
        _median([a.total_s for a in ok]),
        _median([a.total_s for a in ran]),
    ]


def render(answers: Sequence[AnswerLike], splits: tuple[str, ...]) -> list[str]:
    """Per mode (auto, then generative, which runs the model every time), shape and split (the splits asked, then
    all): the answers, how often the model ran, how often its checked text was kept."""
    rows = []
    for mode in MODEL_MODES:
        of_mode = [a for a in answers if a.mode == mode]
        asked = [s for s in splits if any(a.question.split == s for a in of_mode)]
        for name in (*SHAPES, "all"):
            of_shape = [a for a in of_mode if name == "all" or shape(a.question.question) == name]
            for split in (*asked, "all") if of_shape else ():
                picked = [a for a in of_shape if split == "all" or a.question.split == split]
                if picked:
                    rows.append(_row([mode, name, split.replace("_", " ")], picked))
    if not rows:
        return ["No auto or generative answers."]
    header = ["mode", "shape", "split", "answers", "model ran", "its text kept", "first text s, median"]
    return table([*header, "total s, median", "total s where it ran, median"], rows, "lllrrrrrr")
