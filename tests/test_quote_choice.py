"""Which sentences an extractive answer quotes (issue 38, answers that hold what is asked): of the sentences that score
close to the best, the one closest to the question in meaning is among them, so three sentences of the first section
(lifted alike by its rank and its share of the question's words) do not keep out another section's sentence that
answers. Constructed evidence replies for the rule; the same end to end on two real
pages of pytest 8.3.4's docs (tests/pytest_docs/README.md) through ``chat_with_documents`` on a real kernel, embedding
model and MCP, where the answer is in a later section of one page and another page's section matches the question's
words first."""

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


def _quoted(spans: list[tuple[int, float, float]], max_quotes: int = 3) -> list[str]:
    """The quotes of an extractive answer over spans given as (passage, score, cosine), best score first."""
    reply = EvidenceReply(
        passages=[_hit(f"/d/{p}.txt") for p in range(1 + max(p for p, _, _ in spans))],
        spans=[_span(p, f"s{k} of {p}.", score) | {"semantic": cos} for k, (p, score, cos) in enumerate(spans)],
        supported=True,
        mode_used="hybrid",
    )
    quoting = answers.Quoting(max_quotes, QUOTING.yes_no_files, QUOTING.yes_no_ratio)
    return [c.quote for c in answers.extractive(answers.Evidence(reply), quoting).citations]


def test_the_sentence_closest_in_meaning_takes_the_last_quote_s_place_when_it_scores_near_the_best() -> None:
    first_section = [(0, 1.0, 0.72), (0, 0.95, 0.60), (0, 0.9, 0.48), (2, 0.82, 0.55)]
    assert _quoted([*first_section, (4, 0.81, 0.75)]) == ["s0 of 0.", "s1 of 0.", "s4 of 4."]
    # already quoted, or under the quote ratio: the quotes are the best scores, as before
    assert _quoted([(0, 1.0, 0.5), (1, 0.95, 0.8), (0, 0.9, 0.6), (2, 0.85, 0.7)]) == [
        "s0 of 0.",
        "s1 of 1.",
        "s2 of 0.",
    ]
    assert _quoted([*first_section, (4, 0.79, 0.75)]) == ["s0 of 0.", "s1 of 0.", "s2 of 0."]


def test_the_best_scored_sentence_always_leads_the_answer() -> None:
    assert _quoted([(0, 1.0, 0.5), (1, 0.95, 0.8)], max_quotes=1) == ["s0 of 0."]
    assert _quoted([(0, 1.0, 0.5), (1, 0.95, 0.8)]) == ["s0 of 0.", "s1 of 1."]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving({page: PAGES / page for page in ("skipping.rst", "assert.rst")}) as url_token:
        yield url_token


def test_a_later_section_s_answer_is_quoted_though_three_sentences_of_the_first_section_score_higher(
    served: Any,
) -> None:
    question = "What happens when a test marked xfail with raises fails with a different exception?"
    out = extractive(served, question)
    assert "reported as a regular failure" in out["answer"], out["answer"]
    assert len({(c["file_name"], c["chunk_index"]) for c in out["citations"]}) >= 2, out["citations"]
