"""The answer bench's auto-mode figures by question shape: how often the model runs, how often its checked text
survives into the answer, and the times, per shape (:func:`foldermind.workers.frontdoor.answers.shape`) and split."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Protocol

from foldermind.workers.frontdoor.answers import SHAPES, shape
from tests.bench.markdown import table

GENERATED = ("generative", "generative+checked")


class _Answer(Protocol):
    mode: str
    mode_used: str | None
    completion_tokens: int
    first_text_s: float
    total_s: float
    error: str

    @property
    def question(self) -> Any: ...


def _median(values: list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    return f"{statistics.median(vals):.2f}" if vals else "-"


def _row(label: list[str], answers: Sequence[_Answer]) -> list[str]:
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


def render(answers: Sequence[_Answer], splits: tuple[str, ...]) -> list[str]:
    """Per shape and split (the splits asked, then all), the auto answers: asked, model ran, its text kept."""
    auto = [a for a in answers if a.mode == "auto"]
    if not auto:
        return ["No auto answers."]
    rows = []
    asked = [s for s in splits if any(a.question.split == s for a in auto)]
    for name in (*SHAPES, "all"):
        of_shape = [a for a in auto if name == "all" or shape(a.question.question) == name]
        if not of_shape:
            continue
        for split in (*asked, "all"):
            picked = [a for a in of_shape if split == "all" or a.question.split == split]
            if picked:
                rows.append(_row([name, split.replace("_", " ")], picked))
    header = ["shape", "split", "answers", "model ran", "its text kept", "first text s, median", "total s, median"]
    return table([*header, "total s where it ran, median"], rows, "llrrrrrr")
