"""A question asking a figure in a unit is answered only by quotes stating a figure in that unit's dimension
(workers/answers/measure.py), end to end: a real kernel indexing a small real folder and the mcp SDK client over HTTP.
The page on the ferry says where it sails and what it carries, never how long the crossing takes; the page on the
bakery's oven says how long it bakes the loaves. Then the check's rules on constructed text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.workers.answers import measure
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, require_bundled_model, short_tmpdir
from tests.test_answers import chat, kernel_with_folder

FERRY = (
    "The island ferry\n\nThe island ferry crosses the bay from the harbour to the island pier.\n"
    "The island ferry carries cars, bicycles and foot passengers across the bay.\n"
)
OVEN = "The bakery oven\n\nThe bakery oven bakes the rye loaves for forty minutes at a time.\n"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, str, str]]:
    require_bundled_model()
    root = short_tmpdir()
    mcp = {"mcp": {"port": 0, "rate_per_minute": 6000}}
    config = merge(FAST_RESTART, ONE_PARSER, mcp, {"llm": {"analysis": False}})
    with kernel_with_folder(root, config, "", 120, pages) as (k, _docs, url, token):
        yield k, url, token


def pages(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "ferry.txt").write_text(FERRY, encoding="utf-8")
    (docs / "oven.txt").write_text(OVEN, encoding="utf-8")
    return docs


def test_how_many_hours_the_ferry_takes_over_a_page_that_gives_no_time_is_not_answered(served: Any) -> None:
    _k, url, token = served
    question = "How many hours does the island ferry take to cross the bay?"
    out = chat(url, token, {"query": question, "answer_mode": "extractive"})
    assert out["grounded"] is False and out["citations"] == [], out
    assert out["answer"].startswith("The documents do not say"), out["answer"]
    assert measure.NOTE in (out["note"] or ""), out["note"]


def test_how_many_seconds_the_loaves_bake_is_answered_by_the_page_that_says_forty_minutes(served: Any) -> None:
    _k, url, token = served
    question = "How many seconds does the bakery oven bake the rye loaves?"
    out = chat(url, token, {"query": question, "answer_mode": "extractive"})
    assert out["grounded"] is True, out
    assert any("forty minutes" in c["quote"] for c in out["citations"]), out["citations"]


def test_a_question_naming_no_unit_is_never_refused_by_the_measure_check(served: Any) -> None:
    _k, url, token = served
    out = chat(url, token, {"query": "What does the island ferry carry across the bay?", "answer_mode": "extractive"})
    assert out["grounded"] is True and "bicycles" in out["answer"], out


@pytest.mark.parametrize(
    ("question", "dimensions"),
    [
        ("How many seconds does Aspell need to load a dictionary?", {"time"}),
        ("How many rows per second can an UPSERT process?", {"time"}),
        ("How many macrophages per square millimetre do lesions hold?", {"length"}),
        ("What file size does the source tarball have, in kilobytes?", {"data size"}),
        ("How many commits went into the release?", set()),
        ("How long does the ferry take?", set()),
        ("Does the check take more than five seconds?", set()),
        ("When was the session framework added?", set()),
    ],
)
def test_the_dimensions_a_question_asks_a_figure_in(question: str, dimensions: set[str]) -> None:
    assert measure.asked(question) == dimensions


@pytest.mark.parametrize(
    ("text", "dimensions"),
    [
        ("the view will be cached for 15 minutes.", {"time"}),
        ("measured at 2 and 4 hours after the dose", {"time"}),
        ("it took 5ms on average", {"time"}),
        ("a 3 kB header", {"data size"}),
        ("twelve plaques per square millimetre", {"length"}),
        ("followed for a 4-year period", {"time"}),
        ("the ten-minute window", {"time"}),
        ("the human 26S proteasome", set()),
        ("It should contain about as many words as possible", set()),
        ("differences larger than a month", set()),
    ],
)
def test_the_dimensions_a_text_states_a_figure_in(text: str, dimensions: set[str]) -> None:
    assert measure.stated(text) == dimensions


def test_only_the_quotes_text_is_read_not_their_labels() -> None:
    answer = "From the 5 seconds guide: \u201cThe ferry crosses the bay.\u201d [1]"
    assert measure.answers("How many seconds does the ferry take?", answer) is False
    assert measure.answers("How many seconds does the ferry take?", "\u201cIt takes 90 seconds.\u201d [1]") is True
