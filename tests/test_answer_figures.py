"""A question asking for a date is answered by a date (issue 38, answers that hold what is asked): a date the question
does not hold earns a figure question's bonus for the thing asked, as a count of the thing counted does. A release
note's date line ("*November 1, 2023*") names nothing of "What date did Django 4.1.13 come out?", and the line after
it repeats the version. Pure functions on the question kinds and the dates a sentence states; end to end through
``chat_with_documents`` on a real kernel, embedding model and MCP over three of Django 4.2.16's release notes
(BSD-3-Clause, as the docs' sdist ships them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from foldermind.workers.indexer.evidence import sentences
from tests.helpers import require_bundled_model
from tests.test_answers import chat, check_markers, serving

require_bundled_model()

NOTES = {  # Django 4.2.16, docs/releases/, as the sdist holds them
    "4.1.13.txt": (
        "===========================\nDjango 4.1.13 release notes\n===========================\n\n"
        "*November 1, 2023*\n\n"
        'Django 4.1.13 fixes a security issue with severity "moderate" in 4.1.12.\n\n'
        "CVE-2023-46695: Potential denial of service vulnerability in ``UsernameField`` on Windows\n"
        "=========================================================================================\n\n"
        "The :func:`NFKC normalization <python:unicodedata.normalize>` is slow on\n"
        "Windows. As a consequence, ``django.contrib.auth.forms.UsernameField`` was\n"
        "subject to a potential denial of service attack via certain inputs with a very\n"
        "large number of Unicode characters.\n\n"
        "In order to avoid the vulnerability, invalid values longer than\n"
        "``UsernameField.max_length`` are no longer normalized, since they cannot pass\n"
        "validation anyway.\n"
    ),
    "3.2.18.txt": (
        "===========================\nDjango 3.2.18 release notes\n===========================\n\n"
        "*February 14, 2023*\n\n"
        'Django 3.2.18 fixes a security issue with severity "moderate" in 3.2.17.\n\n'
        "CVE-2023-24580: Potential denial-of-service vulnerability in file uploads\n"
        "=========================================================================\n\n"
        "Passing certain inputs to multipart forms could result in too many open files\n"
        "or memory exhaustion, and provided a potential vector for a denial-of-service\n"
        "attack.\n\n"
        "The number of files parts parsed is now limited via the new\n"
        ":setting:`DATA_UPLOAD_MAX_NUMBER_FILES` setting.\n"
    ),
    "4.2.13.txt": (
        "===========================\nDjango 4.2.13 release notes\n===========================\n\n"
        "*May 7, 2024*\n\n"
        "Django 4.2.13 fixes a packaging error in 4.2.12.\n"
    ),
}


def test_a_question_asks_for_a_date_when_it_asks_when_something_was_or_which_date_or_year() -> None:
    for question in (
        "When was Django 3.2.18 released?",
        "What date did Django 4.1.13 come out?",
        "In which year did the share of MRSA infections peak?",
        "From which date does SQLite's julianday() count its days?",
    ):
        assert sentences.asks_for_date(question), question
        assert sentences.asks_for_figure(question), question
    for question in (
        "When does an SQLite trigger fire if neither BEFORE nor AFTER is given?",  # a condition
        "What font size does Asymptote use when none is set?",
        "How many patients were pooled?",
    ):
        assert not sentences.asks_for_date(question), question


def test_a_sentence_states_a_date_by_a_month_or_a_year_the_question_does_not_hold() -> None:
    assert sentences.dates("*November 1, 2023*") == {"november", "2023"}
    assert sentences.dates("peaked at 62% in 2006 before decreasing to 52% in 2010") == {"2006", "2010"}
    assert sentences.dates("For SQLite versions before 3.16.0 (2017-01-02), the") == {"2017"}
    assert sentences.dates("May 6, 2017") == {"may", "2017"}
    # versions, counts and the verb "may" are no dates
    assert not sentences.dates('Django 4.1.13 fixes a security issue with severity "moderate" in 4.1.12.')
    assert not sentences.dates("You may use 1,995 of them, or 2006.5 mg.")
    question = "What happened in 2006 to MRSA?"
    assert not sentences.states_date("The share peaked in 2006.", question)
    assert sentences.states_date("The share fell from 2006 to 2010.", question)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving(NOTES, "releases") as served:
        yield served


def test_a_release_date_question_is_answered_with_the_release_note_s_date_line(served: Any) -> None:
    url, token = served
    out = chat(url, token, {"query": "What date did Django 4.1.13 come out?", "answer_mode": "extractive"})
    check_markers(out)
    assert out["grounded"], out
    quotes = [c["quote"] for c in out["citations"] if c["file_name"] == "4.1.13.txt"]
    # without the date's bonus only the line repeating the version was quoted from the release's notes
    assert "*November 1, 2023*" in quotes, out["answer"]
