"""A quote that stands on its own, a name quoted as Texinfo renders code, and a claim that negates what its source
states (issue 38, items 3 and 4). Pure functions on real manual text (chage(1), tests/manpages/; the Aspell
manual's wording); the same rules end to end with a real kernel: tests/test_answer_relevance.py."""

from __future__ import annotations

from pathlib import Path

from foldermind.protocol.messages import CheckRequest, SearchHit
from foldermind.workers.indexer.evidence import claims, evidence, reach, sentences

CHAGE = (Path(__file__).with_name("manpages") / "chage.txt").read_text("utf-8")


def _quoted(text: str, said: str) -> str:
    """The quote of the sentence of ``text`` that starts with ``said``, as the evidence service makes it."""
    found = sentences.split(text, 1)
    at = next(i for i, s in enumerate(found) if s.text.startswith(said))
    hit = SearchHit(text=text, file_path="/d/chage.txt")  # type: ignore[typeddict-item]
    cand = evidence._Candidate(0, found, at, sentences.content_terms(found[at].text), set())
    return evidence.EvidenceService._span([hit], cand, False)["text"]


def test_a_sentence_that_refers_back_is_quoted_with_the_sentence_it_refers_to() -> None:
    quote = _quoted(CHAGE, "This occurrence can be planned")
    assert quote.startswith("When MAX_DAYS plus LAST_DAY is less than the current day"), quote
    assert quote.endswith("which provides the user with advance warning."), quote
    implies = _quoted(CHAGE, "This implies that configuration")
    assert implies.startswith("The chage program will report only the information from the shadow password file.")


def test_a_sentence_followed_by_one_that_refers_back_to_it_brings_that_one() -> None:
    text = (
        "If no arguments are given, Asymptote runs in interactive mode. In this case, the default output file is "
        "out.eps.\n\nThese lines are another paragraph.\n"
    )
    assert _quoted(text, "If no arguments") == (
        "If no arguments are given, Asymptote runs in interactive mode. "
        "In this case, the default output file is out.eps."
    )
    # across a blank line the next paragraph refers to its own subject: not brought
    assert _quoted(text, "In this case").startswith("If no arguments")
    assert _quoted(text, "These lines") == "These lines are another paragraph."


def test_a_back_reference_never_reaches_into_a_heading_or_an_unfinished_line() -> None:
    text = "OPTIONS\nThese options apply to every command.\n"
    found = sentences.split(text, 1)
    assert [s.text for s in found] == ["OPTIONS", "These options apply to every command."]
    assert reach.quoted(found, 1, frozenset({"options"}), False) == (1, 1)  # a heading of its section
    title = sentences.Sentence(0, 50, "The options of chage and of the other shadow tools", 1, 1)
    these = sentences.Sentence(51, 88, "These options apply to every command.", 2, 2)
    assert reach.quoted([title, these], 1, frozenset(), False) == (1, 1)  # a title's line: unfinished
    far = sentences.Sentence(52, 89, "These options apply to every command.", 3, 3)
    done = sentences.Sentence(0, 50, "Options are read from the command line.", 1, 1)
    assert reach.quoted([done, far], 1, frozenset(), False) == (1, 1)  # a blank line between: another paragraph
    assert reach.quoted([done, these], 1, frozenset(), False) == (0, 1)


def test_a_name_in_typographic_quotes_is_code_as_texinfo_writes_it() -> None:
    question = "Which command lists all of Aspell's filter modes?"
    assert sentences.names_code("For a complete list use \u2018aspell dump modes\u2019.", question)
    assert not sentences.names_code("Use \u2018filter modes\u2019 for that.", question)  # the question's own words
    assert not sentences.names_code("For a complete list see the manual.", question)


def _no_vectors(texts: list[str]) -> tuple[None, str, int]:
    return None, "no model in this test: the vector test is skipped, as without a local model", 0


def test_a_claim_that_negates_what_its_source_states_or_states_what_it_negates_is_not_backed() -> None:
    assert claims.negations("It will not report; it can't; it cannot.") == {"not"}
    assert claims.negations("when neither ASC nor DESC is given") == {"neither", "nor"}
    source = next(p for p in CHAGE.split("\n\n") if "will also not report" in p)
    question = "Does chage report inconsistencies between the shadow and passwd files?"
    said = [
        {
            "text": "The chage program will not report any inconsistency between the shadow and passwd files.",
            "sources": [],
        },
        {"text": "The chage program will report any inconsistency between the shadow and passwd files.", "sources": []},
    ]
    reply = claims.ClaimChecker(_no_vectors).check(CheckRequest(question, said, [source]))  # type: ignore[arg-type]
    negated, affirmed = reply.checks
    assert negated["supported"], negated
    assert not affirmed["supported"], affirmed  # every word backed, the sense reversed


ABSTRACT = (  # SciFact's abstract 17914395 as the corpus file holds it: its title, a blank line, the abstract
    "Knowledge of young African American adults about heart disease: a cross-sectional survey\n\n"
    "BACKGROUND African Americans have higher rates of cardiovascular disease (CVD) mortality than other ethnic "
    "groups. Young adults are prime targets for intervention strategies to prevent and reduce disease risk. The "
    "study purpose was to determine the level of knowledge of lifestyle risk factors for CVD among young African "
    "American adults in Phoenix.\n"
)


def test_a_document_s_title_line_is_known_from_its_first_sentences() -> None:
    hit = {"text": ABSTRACT, "chunk_index": 0, "location": {"line_start": 1, "heading": None}, "file_path": "/d/a.txt"}
    found = evidence.EvidenceService._candidates([hit])  # type: ignore[list-item]
    titles = [c.sentence.text for c in found if evidence._is_title(hit, c)]  # type: ignore[arg-type]
    assert titles == ["Knowledge of young African American adults about heart disease: a cross-sectional survey"]
    later = {**hit, "chunk_index": 1}  # the same lines further into a document: no title
    assert not any(evidence._is_title(later, c) for c in found)  # type: ignore[arg-type]
    glued = {
        **hit,
        "text": ABSTRACT.replace("survey\n\n", "survey\n"),
    }  # no blank line after it: a sentence of the text
    found = evidence.EvidenceService._candidates([glued])  # type: ignore[list-item]
    assert not any(evidence._is_title(glued, c) for c in found)  # type: ignore[arg-type]


def test_a_generated_sentence_naming_no_thing_of_the_kind_asked_is_not_about_the_question() -> None:
    # apcupsd's manual (the answers bench's Debian manuals): the option's entry, and a sentence about the front-end
    sources = [
        "--enable-gapcmon\nThis option enables building the GTK GUI front-end for apcupsd.",
        "The apcagent menubar application is built on top of the GTK GUI front-end for Mac OS X platforms.",
    ]
    said = [
        {"text": "The apcagent menubar application is built on top of the GTK GUI front-end.", "sources": [1]},
        {"text": "The --enable-gapcmon option enables building the GTK GUI front-end.", "sources": [0]},
        {"text": "It enables building the GTK GUI front-end for apcupsd.", "sources": [0]},
    ]
    question = "Which configure option builds apcupsd's GTK GUI front-end?"
    reply = claims.ClaimChecker(_no_vectors).check(CheckRequest(question, said, sources))  # type: ignore[arg-type]
    topic, named, described = reply.checks
    assert topic["supported"] and not topic["about"], topic  # backed, on the topic, names no option
    assert named["supported"] and named["about"], named
    assert described["supported"] and described["about"], described  # its backing's term line names the option
    figure = [{"text": "The GTK GUI front-end is built by an option.", "sources": [0]}]
    asked = "How many options build the GTK GUI front-end?"
    check = claims.ClaimChecker(_no_vectors).check(CheckRequest(asked, figure, sources)).checks[0]  # type: ignore[arg-type]
    assert not check["about"], check  # a figure question answered with no figure
