"""A line that is not a sentence is read with its heading (issue 38, answers that hold what is asked): a release
note's date line ("*November 1, 2023*") names nothing of "What date did Django 4.1.13 come out?", and alone its vector
is far from the question; under "Django 4.1.13 release notes" it is the answer. The evidence's cosine of such a line is
that of its heading path joined to it, as the index's units carry a document's title; the floor keeps each line's own
cosine. Pure functions on the text read and the floor's evidence; end to end through ``chat_with_documents`` on a real
kernel, embedding model and MCP over three of Django 4.2.16's release notes (BSD-3-Clause, as the docs' sdist ships
them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from foldermind.workers.indexer.evidence import sentences
from foldermind.workers.indexer.evidence.evidence import EvidenceService, _Candidate
from tests.helpers import require_bundled_model
from tests.test_answers import extractive, serving

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


def test_a_line_that_is_not_a_sentence_is_read_after_the_headings_of_its_path() -> None:
    path = "Django 4.1.13 release notes"
    assert sentences.with_heading("*November 1, 2023*", path) == "Django 4.1.13 release notes. *November 1, 2023*"
    assert (
        sentences.with_heading(
            "Default: ``1209600`` (2 weeks, in seconds)", "Settings > Sessions. > SESSION_COOKIE_AGE"
        )
        == "Settings. Sessions. SESSION_COOKIE_AGE. Default: ``1209600`` (2 weeks, in seconds)"
    )
    assert sentences.with_heading("--with-upstype= type", " > Configure Options > ") == (
        "Configure Options. --with-upstype= type"
    )
    # a finished sentence reads alone, and a line without a heading as it is
    finished = 'Django 4.1.13 fixes a security issue with severity "moderate" in 4.1.12.'
    assert sentences.with_heading(finished, path) == finished
    assert sentences.with_heading("If this is the case you have two options:", path).startswith("If this")
    assert sentences.with_heading("*November 1, 2023*", "") == "*November 1, 2023*"


def test_the_floor_judges_a_line_by_its_own_cosine_not_the_one_read_with_its_heading() -> None:
    date = sentences.split("*November 1, 2023*", 1)
    line = _Candidate(0, date, 0, {"2023"}, set(), semantic=0.8, alone=0.1)
    support = EvidenceService._support([line], {"2023": 1.0}, with_vectors=True)
    assert support["semantic"] == 0.1
    line.alone = 0.6
    assert EvidenceService._support([line], {"2023": 1.0}, with_vectors=True)["semantic"] == 0.6


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving(NOTES) as served:
        yield served


@pytest.mark.parametrize(
    ("question", "name", "date"),
    [
        ("What date did Django 4.1.13 come out?", "4.1.13.txt", "*November 1, 2023*"),
        ("When was Django 3.2.18 released?", "3.2.18.txt", "*February 14, 2023*"),
    ],
)
def test_a_release_date_question_is_answered_with_the_release_note_s_date_line(
    served: Any, question: str, name: str, date: str
) -> None:
    out = extractive(served, question)
    quotes = [c["quote"] for c in out["citations"] if c["file_name"] == name]
    assert date in quotes, out["answer"]
