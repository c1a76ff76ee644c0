"""What a streaming client is sent of an answer (pure: the chat's :class:`Shown` and :func:`answers.after_quotes`
without a kernel; tests/test_answers.py checks the same end to end with the real model and the CLI)."""

from __future__ import annotations

import pytest

from foldermind.kernel.cli.clients.commands import AnswerScreen
from foldermind.protocol.messages import ChatPartial
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import quotes as answers
from foldermind.workers.answers import schemas
from foldermind.workers.answers.engine import Shown
from foldermind.workers.answers.quotes import Composed


def citation(number: int, path: str, quote: str) -> schemas.Citation:
    where = schemas.Location(page=None, heading=None, line_start=1, line_end=1)
    name = path.rsplit("/", 1)[-1]
    return schemas.Citation(
        id=number, file_path=path, file_name=name, quote=quote, snippet=quote, chunk_index=0, chunk_id=1, location=where
    )


def test_a_streaming_client_is_sent_the_quotes_then_progress_without_text_then_the_rest_of_the_answer() -> None:
    sent: list[ChatPartial] = []
    shown = Shown(sent.append, max_tokens=10)
    shown.quotes("\u201cThe budget is 40.\u201d [1]")
    for token in (1, 2, 30):  # past the budget, its progress still stays below the end
        shown.working(token)
    answer = "\u201cThe budget is 40.\u201d [1]\n\nIt is forty [1]."
    shown.rest(answer)
    assert "".join(p.delta for p in sent) == answer
    assert [p.delta for p in sent[1:4]] == ["", "", ""]
    values = [p.completion_tokens for p in sent]
    assert values == sorted(values) and len(set(values)) == len(values) and values[-1] == sent[-1].max_tokens == 12


def test_an_answer_that_does_not_start_with_what_was_shown_sends_nothing_more() -> None:
    sent: list[ChatPartial] = []
    shown = Shown(sent.append, max_tokens=10)
    shown.quotes("Q [1]")
    shown.rest("Q [1]")  # the model's text was dropped: nothing to add
    shown.rest("Something else [1]")
    assert [p.delta for p in sent] == ["Q [1]"]
    Shown(None, 10).rest("nobody streams: no error")


def test_the_models_checked_sentences_follow_the_quotes_which_keep_their_numbers() -> None:
    quoted = Composed(
        "\u201cThe budget is forty thousand dollars.\u201d [1] \u201cMarta approved it.\u201d [2]",
        [
            citation(1, "/d/budget.txt", "The budget is forty thousand dollars."),
            citation(2, "/d/plan.txt", "Marta approved it."),
        ],
    )
    generated = Composed(
        "Cargo grew by twelve percent [1]. The budget is forty thousand dollars [2].",
        [
            citation(1, "/d/report.txt", "Cargo grew by twelve percent."),
            citation(2, "/d/budget.txt", "budget is forty thousand"),
        ],
        carries=True,
    )
    out = answers.after_quotes(quoted, generated)
    assert (
        out.answer == quoted.answer + "\n\nCargo grew by twelve percent [3]. The budget is forty thousand dollars [1]."
    )
    assert [(c.id, c.file_name) for c in out.citations] == [(1, "budget.txt"), (2, "plan.txt"), (3, "report.txt")]
    assert out.carries


def test_auto_mode_asks_the_model_only_for_the_question_shapes_it_is_set_to() -> None:
    shapes = {
        "Does aspirin lower the risk of stroke?": "yes-no",
        "What is the default port of the server?": "default",
        "How many patients were pooled in the meta-analysis?": "figure",
        "Which flag turns on verbose output?": "name",
        "Which transcription factor binds the promoter?": "entity",
        "Summarise the contract.": "other",
    }
    assert {q: answers.shape(q) for q in shapes} == shapes
    assert set(shapes.values()) == set(answers.SHAPES)
    assert not any(answers.model_adds(q, LlmPolicy().auto_model_shapes) for q in shapes)  # the default: none
    assert [q for q in shapes if answers.model_adds(q, ["figure", "yes-no"])] == [
        "Does aspirin lower the risk of stroke?",
        "How many patients were pooled in the meta-analysis?",
    ]


def test_the_terminal_shows_each_piece_as_it_comes_a_status_on_stderr_and_only_the_rest_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    screen = AnswerScreen()
    screen.progress("\u201cThe budget is 40.\u201d [1]")
    assert capsys.readouterr().out == "\u201cThe budget is 40.\u201d [1]"  # at once
    screen.progress(None)
    screen.progress(None)
    screen.finish("\u201cThe budget is 40.\u201d [1]\n\nIt is forty [1].")
    out, err = capsys.readouterr()
    assert out == "\n\nIt is forty [1].\n" and err.count(AnswerScreen.STATUS) == 1
    quiet = AnswerScreen()  # nothing streamed (a pipe): the whole answer at the end, no status
    quiet.finish("Q [1]")
    assert capsys.readouterr() == ("Q [1]\n", "")
