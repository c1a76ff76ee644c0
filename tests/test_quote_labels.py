"""What an extractive quote is labelled with when a figure question's figure is only its page's title (issue 38,
answers that name what is asked): a release page states its version in its title alone, and a quote from a section
under it was labelled with the section ("CVE-2023-23969: ...") without the release asked for. Constructed evidence
replies; the shape bench's replay over real Django, pytest, Celery and manual pages is in
docs/benchmarks/answer-relevance.md."""

from __future__ import annotations

from foldermind.protocol.messages import EvidenceReply
from foldermind.workers import questions
from foldermind.workers.answers import quotes as answers
from tests.test_evidence_units import QUOTING, _hit, _span

RELEASE = "Django 4.1.6 release notes > CVE-2023-23969: Potential denial-of-service via Accept-Language headers"
CAPPED = "In order to avoid this vulnerability, the Accept-Language header is now parsed up to a maximum length."


def _answer(question: str, heading: str, text: str = CAPPED) -> str:
    hit = _hit("/d/releases/4.1.6.txt")
    hit["location"]["heading"] = heading
    reply = EvidenceReply(passages=[hit], spans=[_span(0, text, 0.9)], supported=True, mode_used="hybrid")
    return answers.extractive(answers.Evidence(reply, question), QUOTING).answer


def test_a_release_question_s_quote_names_the_release_page_its_section_sits_in() -> None:
    got = _answer("Which Django 4.1 release limited how much of the Accept-Language header gets parsed?", RELEASE)
    assert got == f"{RELEASE}: \u201c{CAPPED}\u201d [1]"
    got = _answer("In which Django security release was the Accept-Language header capped?", RELEASE)
    assert got.startswith("Django 4.1.6 release notes > CVE-2023-23969"), got


def test_the_page_title_is_left_out_when_it_tells_nothing_the_question_or_the_quote_does_not() -> None:
    section = "CVE-2023-23969: Potential denial-of-service via Accept-Language headers"
    plain = f"{section}: \u201c{CAPPED}\u201d [1]"
    assert _answer("How was the Accept-Language denial of service avoided?", RELEASE) == plain  # no figure asked
    assert _answer("Which Django 4.1.6 release note covers Accept-Language?", RELEASE) == plain  # asked already
    said = "Django 4.1.6 parses the Accept-Language header up to a maximum length."
    assert _answer("Which release capped Accept-Language?", RELEASE, said) == f"{section}: \u201c{said}\u201d [1]"
    assert _answer("Which release capped Accept-Language?", "Django 4.1.6 release notes") == (
        f"Django 4.1.6 release notes: \u201c{CAPPED}\u201d [1]"  # the title is the section: said once
    )
    reply = EvidenceReply(passages=[_hit("/d/a.txt")], spans=[_span(0, CAPPED, 0.9)], supported=True, mode_used="x")
    reply.passages[0]["location"]["heading"] = RELEASE
    assert answers.extractive(answers.Evidence(reply), QUOTING).answer == plain  # the question unknown


def test_which_release_asks_for_a_figure_over_up_to_two_words_and_which_filter_still_asks_for_a_name() -> None:
    for asked in (
        "Which Django 2.2 release made inline forms read-only?",
        "In which Django security release was the header capped?",
        "Since which Aspell version is this supported?",
    ):
        assert questions.asks_for_figure(asked), asked
    assert not questions.asks_for_figure("Which filter turns numbers into words?")
    assert questions.numbers("Django 4.1.6 and 2023-23969") == {"4.1.6", "2023", "23969"}


def test_quotes_under_one_section_say_its_label_once_and_follow_each_other() -> None:
    """walk2: one answer repeated its section's title before each of three quotes."""
    first, other = _hit("/d/humanize.txt"), _hit("/d/other.txt")
    first["location"]["heading"] = "Humanize > apnumber"
    other["location"]["heading"] = "Humanize > intcomma"
    said = ["For numbers 1-9, returns the number spelled out.", "Otherwise, returns the number.", "It is a filter."]
    spans = [_span(0, said[0], 0.9), _span(1, "Adds commas to an integer.", 0.85), _span(0, said[1], 0.84)]
    spans.append(_span(0, said[2], 0.8))
    reply = EvidenceReply(passages=[first, other], spans=spans, supported=True, mode_used="hybrid")
    four = answers.Quoting(max_quotes=4, yes_no_files=5, yes_no_ratio=0.6)
    got = answers.extractive(answers.Evidence(reply, "Which filter spells out numbers?"), four)
    assert got.answer == (
        f"apnumber: \u201c{said[0]}\u201d [1] \u201c{said[1]}\u201d [2] \u201c{said[2]}\u201d [3] "
        "intcomma: \u201cAdds commas to an integer.\u201d [4]"
    ), got.answer
    assert [c.quote for c in got.citations] == [*said, "Adds commas to an integer."]
    assert [c.id for c in got.citations] == [1, 2, 3, 4]
    # Quotes without a label keep their places.
    alone = [_span(0, said[0], 0.9), _span(1, "Adds commas to an integer.", 0.85), _span(0, said[1], 0.84)]
    plain = EvidenceReply(passages=[_hit("/d/a.txt"), _hit("/d/b.txt")], spans=alone, supported=True, mode_used="x")
    quoted = answers.extractive(answers.Evidence(plain, "Which filter?"), four)
    assert [c.quote for c in quoted.citations] == [said[0], "Adds commas to an integer.", said[1]], quoted.answer
