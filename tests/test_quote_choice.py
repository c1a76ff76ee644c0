"""Which sentences an extractive answer quotes (issue 38, answers that hold what is asked): the first ``max_quotes``
that score close to the best, then a sentence as close from a passage not quoted yet. The first passage's sentences,
lifted alike by its rank and its share of the question's words, restate one another; another passage's sentence that
scores as close is another section's statement, and often the answer. Constructed evidence replies for the rule; end
to end on two real pages of pytest 8.3.4's docs (tests/pytest_docs/README.md) through ``chat_with_documents`` on a
real kernel, embedding model and MCP, where the answer is in a later section of one page and three sentences of
another section score higher."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.messages import EvidenceReply
from foldermind.workers.answers import quotes as answers
from tests.test_answers import extractive, serving
from tests.test_evidence_units import QUOTING, _hit, _span

PAGES = Path(__file__).parent / "pytest_docs"


def _quoted(spans: list[tuple[int, float]], max_quotes: int = 3) -> list[str]:
    """The quotes of an extractive answer over spans given as (passage, score), best score first."""
    reply = EvidenceReply(
        passages=[_hit(f"/d/{p}.txt") for p in range(1 + max(p for p, _ in spans))],
        spans=[_span(p, f"s{k} of {p}.", score) for k, (p, score) in enumerate(spans)],
        supported=True,
        mode_used="hybrid",
    )
    quoting = answers.Quoting(max_quotes, QUOTING.yes_no_files, QUOTING.yes_no_ratio)
    return [c.quote for c in answers.extractive(answers.Evidence(reply), quoting).citations]


def test_past_max_quotes_a_sentence_as_close_joins_only_from_a_passage_not_quoted_yet() -> None:
    first_section = [(0, 1.0), (0, 0.95), (0, 0.9)]
    assert _quoted([*first_section, (0, 0.85), (4, 0.82)]) == ["s0 of 0.", "s1 of 0.", "s2 of 0.", "s4 of 4."]
    # one sentence of each further passage, in score order
    assert _quoted([(0, 1.0), (1, 0.95), (0, 0.9), (2, 0.85), (2, 0.84), (3, 0.83)]) == [
        "s0 of 0.",
        "s1 of 1.",
        "s2 of 0.",
        "s3 of 2.",
        "s5 of 3.",
    ]
    # under the quote ratio, or every passage quoted already: the first max_quotes, as before
    assert _quoted([*first_section, (4, 0.79)]) == ["s0 of 0.", "s1 of 0.", "s2 of 0."]
    assert _quoted([(0, 1.0), (1, 0.95), (0, 0.9), (1, 0.85)]) == ["s0 of 0.", "s1 of 1.", "s2 of 0."]


def test_the_best_scored_sentence_always_leads_the_answer_and_max_quotes_bounds_the_first_passages() -> None:
    assert _quoted([(0, 1.0), (0, 0.95)], max_quotes=1) == ["s0 of 0."]
    assert _quoted([(0, 1.0), (0, 0.95), (1, 0.9)], max_quotes=1) == ["s0 of 0.", "s2 of 1."]
    assert _quoted([(0, 1.0), (1, 0.5)]) == ["s0 of 0."]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving({page: PAGES / page for page in ("skipping.rst", "assert.rst")}) as url_token:
        yield url_token


def test_a_later_section_s_answer_is_quoted_though_three_sentences_of_another_section_score_higher(
    served: Any,
) -> None:
    question = "What happens when a test marked xfail with raises fails with a different exception?"
    out = extractive(served, question)
    assert "reported as a regular failure" in out["answer"], out["answer"]
    assert len({(c["file_name"], c["chunk_index"]) for c in out["citations"]}) >= 2, out["citations"]
