"""The pure parts of answering from evidence: sentences with their lines, the facts a claim states, a
generated answer cut into claims with their sources, and the quoted answer's shape; and a passage read on
into the next chunk (the real parser, chunker and index database, no processes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foldermind.protocol.messages import ChunkInfo, EvidenceReply, EvidenceSpan, SearchHit
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import quotes as answers
from foldermind.workers.indexer.evidence import evidence, floor, passages, reach, sentences
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.llm.citations import MARKER
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import parse_txt


def test_sentences_keep_their_lines_and_skip_abbreviations_and_wrapping() -> None:
    text = (
        "# Budget\n\n"
        "The budget is forty thousand dollars. It was approved by Dr. Quill, e.g. after review.\n"
        "A long line of running text that goes on past the short-line limit and then wraps\n"
        "onto the next line before it ends.\n"
        "- first item\n"
        "- second item\n"
    )
    got = sentences.split(text, first_line=10)
    assert [(s.text, s.line_start, s.line_end) for s in got] == [
        ("Budget", 10, 10),
        ("The budget is forty thousand dollars.", 12, 12),
        ("It was approved by Dr. Quill, e.g. after review.", 12, 12),
        (
            "A long line of running text that goes on past the short-line limit and then wraps onto the next "
            "line before it ends.",
            13,
            14,
        ),
        ("first item", 15, 15),
        ("second item", 16, 16),
    ]
    for s in got:  # the span is the chunk's own characters
        assert sentences.quote(text[s.start : s.end]) == s.text


@given(st.text(alphabet=st.sampled_from("ab .!?\n-#1,"), max_size=300))
def test_every_sentence_is_a_verbatim_span_of_its_text(text: str) -> None:
    for s in sentences.split(text):
        assert 0 <= s.start < s.end <= len(text)
        assert s.text == sentences.quote(text[s.start : s.end]) and s.text
        assert s.line_start == 1 + text.count("\n", 0, s.start) and s.line_end >= s.line_start
        assert len(text[s.start : s.end]) <= sentences.MAX_CHARS


def test_a_claims_facts_are_its_figures_and_names() -> None:
    facts = sentences.facts("The budget rose to $40,000 in May, said Anna Smith, forty days later.")
    assert facts == {"40000", "may", "anna", "smith", "forty"}
    assert sentences.number_key("3.50") == sentences.number_key("3.5") == "3.5"
    assert "40000" in sentences.fact_forms("It is 40000 dollars.")


def test_a_generated_answer_is_cut_into_claims_with_the_sources_they_cite() -> None:
    # The llm worker's answer: markers 1-based into cited, which names prompt sources (0-based).
    found = answers.claims("Paris is the capital [1]. It lies on the Seine. [2] Nothing else [1, 2]", [2, 0])
    assert [(c["text"], c["sources"]) for c in found] == [
        ("Paris is the capital.", [2]),
        ("It lies on the Seine.", [0]),
        ("Nothing else", [2, 0]),
    ]
    assert answers.claims("[1]", [0]) == []


def _hit(path: str) -> SearchHit:
    return SearchHit(
        chunk_id=1,
        chunk_index=0,
        file_path=path,
        file_name=path.rsplit("/", 1)[-1],
        score=1.0,
        snippet="snippet",
        smart_folder="docs",
        folder_id="f1",
        modified_at=0.0,
        location={"line_start": 1, "line_end": 9, "page": 2},
    )


def _span(passage: int, text: str, score: float) -> EvidenceSpan:
    return EvidenceSpan(
        passage=passage,
        text=text,
        line_start=3,
        line_end=3,
        score=score,
        semantic=score,
        lexical=0.5,
        window=text,
        window_line_start=2,
        window_line_end=4,
    )


def test_the_quoted_answer_quotes_the_best_sentences_verbatim_with_markers_in_first_use_order() -> None:
    reply = EvidenceReply(
        passages=[_hit("/d/a.txt"), _hit("/d/b.txt")],
        spans=[_span(1, "Best sentence.", 0.9), _span(0, "Close second.", 0.8), _span(0, "Far third.", 0.3)],
        supported=True,
        mode_used="hybrid",
    )
    out = answers.extractive(answers.Evidence(reply), QUOTING)
    assert out.answer == "\u201cBest sentence.\u201d [1] \u201cClose second.\u201d [2]"
    assert [(c.id, c.file_name, c.quote, c.location.page, c.location.line_start) for c in out.citations] == [
        (1, "b.txt", "Best sentence.", 2, 3),
        (2, "a.txt", "Close second.", 2, 3),
    ]
    reply.supported = False
    unsupported = answers.extractive(answers.Evidence(reply), QUOTING)
    assert not unsupported.grounded and unsupported.answer == answers.NOT_FOUND


def test_a_quote_is_labelled_with_its_section_when_it_does_not_name_it() -> None:
    named, plain = _hit("/d/humanize.txt"), _hit("/d/notes.txt")
    named["location"]["heading"] = "django.contrib.humanize > apnumber"
    reply = EvidenceReply(
        passages=[named, plain, _hit("/d/other.txt")],
        spans=[_span(0, "For numbers 1-9, returns the number spelled out.", 0.9), _span(1, "Plain.", 0.85)],
        supported=True,
        mode_used="hybrid",
    )
    reply.passages[2]["location"]["heading"] = "apnumber"
    reply.spans.append(_span(2, "The apnumber filter spells numbers out.", 0.8))
    ev = answers.Evidence(reply)
    out = answers.extractive(ev, QUOTING)
    assert out.answer == (
        "apnumber: \u201cFor numbers 1-9, returns the number spelled out.\u201d [1] \u201cPlain.\u201d [2]"
        " \u201cThe apnumber filter spells numbers out.\u201d [3]"  # it names its section already
    )
    assert out.citations[0].quote == "For numbers 1-9, returns the number spelled out."  # the label is not quoted
    assert ev.window(reply.spans[0]) == "apnumber:\nFor numbers 1-9, returns the number spelled out."
    assert ev.window(reply.spans[1]) == "Plain."


def test_a_figure_question_names_what_it_counts() -> None:
    assert sentences.counted("How many patients were pooled in the meta-analysis?") == sentences.content_terms(
        "patients"
    )
    assert sentences.counted("What dose of zopiclone did they take?") == sentences.content_terms("zopiclone")
    assert sentences.counted("Which filter turns numbers into words?") == set()
    # a phrase, up to its first stop word: the thing counted is its last word here, not its first
    assert sentences.counted(
        "How many of the wild-type EGFR lung adenocarcinoma patients with pleural effusions carried it?"
    ) == sentences.content_terms("wild-type EGFR lung adenocarcinoma patients")


def test_a_version_question_asks_for_a_figure_and_a_bare_dotted_version_is_one() -> None:
    for question in (
        "Which version of glpk has been tested with 4ti2?",
        "Since which Aspell version can more than one word list be used?",
        "What is the oldest gcc that can build 4ti2?",
        "From which date does julianday() count its days?",
    ):
        assert sentences.asks_for_figure(question), question
    # "which" reaches over one word only: here "numbers" is what the filter acts on, not what is asked
    assert not sentences.asks_for_figure("Which filter turns numbers into words?")
    assert not sentences.asks_for_figure("Which humanize template filter spells out numbers?")
    assert sentences.has_figure("However as of Aspell .32 you can now also:")
    for text in ("the .txt files", "v.32 of it", "file.txt"):
        assert not sentences.has_figure(text), text


def test_a_sentence_counts_what_a_question_counts_only_when_its_figure_stands_before_it() -> None:
    patients = sentences.counted("How many patients were pooled in the meta-analysis?")
    for text in (
        "A total of 9020 patients were included.",
        "741 eligible patients",
        "42 of the patients",
        "Sixty-one (42 males) patients",
    ):
        assert sentences.counts(text, patients), text
    for text in (
        "The incidence in HER2-positive patients receiving trastuzumab was 2.56%.",  # a figure of something else
        "trials of trastuzumab administered for 1 year to patients",
        "A total of 9020 mice were included.",
    ):
        assert not sentences.counts(text, patients), text
    assert not sentences.counts("A total of 9020 patients", set())


def test_a_passage_that_holds_more_of_the_question_lifts_its_sentences() -> None:
    def hit(text: str) -> SearchHit:
        h = _hit("/d/abstract.txt")
        h["text"] = text
        return h

    hits = [
        hit("We pooled trials of adjuvant trastuzumab in a meta-analysis. A total of 9020 patients were included."),
        hit("A randomized trial of radiosurgery. It enrolled 132 patients."),
    ]
    cands = evidence.EvidenceService._candidates(hits)
    question = "How many patients were pooled in the trastuzumab meta-analysis?"
    about = evidence.EvidenceService._about(question, "", cands)
    # the first holds, across its two sentences, every term of the question but "many"; the second only "patients"
    assert 0 < about[1] < about[0] < 1
    assert evidence.EvidenceService._about("", "", cands) == {0: 0.0, 1: 0.0}
    # a follow-up's subject is its previous question's: it counts, for less than the follow-up's own words
    follow = evidence.EvidenceService._about("and how many patients?", "What did the radiosurgery trial find?", cands)
    alone = evidence.EvidenceService._about("and how many patients?", "", cands)
    assert alone[0] == alone[1] and follow[1] > follow[0] > 0


def test_of_two_sentences_as_close_to_the_question_the_one_saying_more_than_it_ranks_first() -> None:
    hit = _hit("/d/index.rst")
    hit["text"] = (
        "Companies can give money to the project.\n\n"
        "Companies give money to the project through Open Collective and Tidelift."
    )
    question = "How can companies give money to the project?"
    restated, answer = cands = evidence.EvidenceService._candidates([hit])
    evidence.EvidenceService._cover(question, "", cands)
    assert restated.coverage == answer.coverage > 0  # both hold every term of the question
    for c in cands:
        c.semantic = 0.7  # and are as close to it
    figure = sentences.asks_for_figure(question)
    assert evidence.EvidenceService._score(question, cands, {0: 1.0}, figure) is False  # no figure, default or name
    assert answer.score > restated.score  # main scored them alike: the restatement came first
    assert answer.score - restated.score == pytest.approx(evidence.NOVELTY * 3 / 7)  # 3 of its 7 terms are new
    assert evidence.novelty(restated.terms, sentences.content_terms(question)) == 0.0
    assert evidence.novelty(set(), {"money"}) == 0.0


def test_the_best_sentence_brings_the_one_after_it_that_answers_and_that_one_is_not_quoted_twice() -> None:
    hit = _hit("/d/settings.txt")
    hit["text"] = (
        "The check is done when accessing the request body and counts the whole request size. "
        "You can set this to None to disable the check.\n\n"
        "Uploads larger than this are streamed to a temporary file."
    )
    about, answer, apart = cands = evidence.EvidenceService._candidates([hit])
    about.score, answer.score, apart.score = 1.0, 0.7, 0.65  # the sentence that says what it is about scores best

    def quoted(most: int = 5) -> list[str]:
        ranked = sorted(cands, key=lambda c: c.score, reverse=True)
        return [s["text"] for s in evidence.EvidenceService._spans([hit], ranked, False, False, most)]

    both = f"{about.sentence.text} {answer.sentence.text}"
    assert quoted() == [both, apart.sentence.text]  # main quoted the first alone, then its answer on its own
    assert quoted(1) == [both]
    answer.score = 0.5  # under NEXT_SHARE of the best: a sentence about something else, not taken in
    assert quoted() == [about.sentence.text, apart.sentence.text, answer.sentence.text]
    about.score, apart.score, answer.score = 0.7, 1.0, 0.9  # the last sentence best: the next paragraph is not its
    assert quoted()[0] == apart.sentence.text
    assert not reach.goes_on(about.siblings, 1, frozenset()) and reach.goes_on(about.siblings, 0, frozenset())
    assert not reach.goes_on(about.siblings, 0, frozenset({answer.sentence.text.lower()}))  # a heading is not


def test_a_figure_is_a_number_standing_as_one_not_the_digits_of_a_name() -> None:
    for text in ("A total of 9,020 patients", "2.56% (95% CI)", "with 1 \u03bcg of rhAng-1", "a 32-character key"):
        assert sentences.has_figure(text), text
    for text in ("the effects of Ang-1 and Ang-2", "HER2-positive cancer", "in 23S RNA", "COVID-19 wards"):
        assert not sentences.has_figure(text), text
    assert sentences.has_figure("It began in February.") and sentences.has_figure("forty thousand dollars")


def test_may_one_and_first_state_no_figure_but_other_number_words_do() -> None:
    for text in ("You may use the admin.", "each word must be in at least one of them", "First, create it."):
        assert not sentences.has_figure(text), text
    for text in ("It began in May 2020.", "two weeks", "the third release", "It happened in June."):
        assert sentences.has_figure(text), text


def test_a_short_line_ends_its_sentence_unless_the_next_line_goes_on_in_lower_case_or_a_figure() -> None:
    # A chunk that starts mid-line makes its first line short; the sentence goes on.
    assert [s.text for s in sentences.split("PostgreSQL's defaults are 35 and\n15.\n\nNext one.\n")] == [
        "PostgreSQL's defaults are 35 and 15.",
        "Next one.",
    ]
    assert [s.text for s in sentences.split("the number of\nseconds it waits.\n")] == [
        "the number of seconds it waits."
    ]
    # A short line followed by a capital is a heading or an entry of its own.
    assert [s.text for s in sentences.split("Default: ``1209600``\nThe age of session cookies.\n")] == [
        "Default: ``1209600``",
        "The age of session cookies.",
    ]


def test_a_title_underline_is_never_part_of_a_sentence() -> None:
    text = "Default ``EmailField.max_length`` increased to 254\n" + "-" * 50 + "\n\nIn order to store more.\n"
    assert [s.text for s in sentences.split(text, 10)] == [
        "Default ``EmailField.max_length`` increased to 254",
        "In order to store more.",
    ]
    assert sentences.asks_for_figure("Under what response body size is it left alone?")


def test_a_sentence_counts_the_question_terms_of_its_heading_at_a_discount() -> None:
    def hit(heading: str, text: str) -> SearchHit:
        h = _hit("/d/settings.txt")
        h["location"]["heading"] = heading
        h["text"] = text
        return h

    hits = [
        hit("Settings > SESSION_COOKIE_AGE", "Default: ``1209600`` (2 weeks, in seconds)"),
        hit("Settings > CSRF_COOKIE_AGE", "Default: ``31449600`` (about 1 year, in seconds)"),
        hit("Sessions", "The session cookie age is set by a setting."),
    ]
    cands = evidence.EvidenceService._candidates(hits)
    evidence.EvidenceService._cover("How long does a session cookie last by default?", "", cands)
    by_text = {c.sentence.text: c.coverage for c in cands}
    session = by_text["Default: ``1209600`` (2 weeks, in seconds)"]
    csrf = by_text["Default: ``31449600`` (about 1 year, in seconds)"]
    own = by_text["The session cookie age is set by a setting."]
    assert csrf < session < own  # its heading names the session cookie; its own words only "default"
    assert session > 0 and cands[0].section == sentences.content_terms("Settings SESSION_COOKIE_AGE")


QUOTING = answers.Quoting(max_quotes=3, yes_no_files=5, yes_no_ratio=0.6)


def _span_of(text: str, at: int, figure: bool) -> EvidenceSpan:
    found = sentences.split(text, 1)
    hit = SearchHit(text=text, file_path="/d/settings.txt")  # type: ignore[typeddict-item]
    cand = evidence._Candidate(0, found, at, sentences.content_terms(found[at].text), set())
    return evidence.EvidenceService._span([hit], cand, figure)


def test_a_figure_question_quotes_the_neighbour_that_states_the_figure_after_or_else_before() -> None:
    text = (
        "Set max_items to control how many items appear.\nBy default, this is set to 200.\n\n"
        "Default: ``259200`` (3 days, in seconds)\n\nThe number of seconds a reset link is valid for.\n"
    )
    parts = [s.text for s in sentences.split(text, 1)]
    assert parts[1] == "By default, this is set to 200."
    after = _span_of(text, 0, figure=True)
    assert after["text"].endswith("By default, this is set to 200.") and after["line_start"] == 1
    before = _span_of(text, parts.index("The number of seconds a reset link is valid for."), figure=True)
    assert before["text"].startswith("Default: ``259200``") and before["line_start"] == 4
    assert before["line_end"] == 6
    two_on = "Set max_all to control the page.\nThe admin shows a link then.\nBy default, this is set to 200.\n"
    assert _span_of(two_on, 0, figure=True)["text"] == (
        "Set max_all to control the page. The admin shows a link then. By default, this is set to 200."
    )
    plain = _span_of(text, parts.index("The number of seconds a reset link is valid for."), figure=False)
    assert plain["text"] == "The number of seconds a reset link is valid for."


def chunked_store(tmp_path: Path, text: str, max_tokens: int) -> tuple[Store, str, list[ChunkInfo]]:
    """``text`` as a txt file's chunks (the real parser and chunker) in a real index database."""
    parsed = parse_txt(text.encode())
    chunks = chunk(parsed.segments, load_tokenizer(), max_tokens=max_tokens, overlap_tokens=16)
    store = Store(tmp_path / "index.sqlite")
    folder = store.folders.add(str(tmp_path), "F", "")
    path = str(tmp_path / "style.txt")
    with store.tx() as db:
        store.documents.mark_pending(db, folder.id, path, 1, 1)
    doc = store.documents.get(path)
    assert doc is not None
    with store.tx() as db:
        store.documents.write(db, doc.id, 1, 1, "sha", "txt", None, None, [dict(c) for c in chunks])
    return store, path, chunks


def hit_of(path: str, c: ChunkInfo) -> SearchHit:
    return cast(SearchHit, {"file_path": path, "chunk_index": c["ordinal"], "text": c["text"]})


def test_a_passage_reads_on_into_the_next_chunk_to_the_end_of_the_paragraph_its_boundary_cuts(tmp_path: Path) -> None:
    rules = " ".join(f"Rule {n} of the house style says the lines are wrapped with care." for n in range(1, 13))
    text = f"{rules} We allow up to 88 characters.\n\nA new paragraph starts here. It is not read on.\n"
    store, path, chunks = chunked_store(tmp_path, text, max_tokens=64)
    assert len(chunks) >= 3 and chunks[1]["char_start"] < chunks[0]["char_end"]  # a boundary inside the paragraph
    first = chunks[0]
    more = passages.continuation(store, hit_of(path, first))
    assert more and text[first["char_start"] : first["char_end"] + len(more)] == first["text"] + more  # verbatim
    assert "\n\n" not in more and "new paragraph" not in more
    assert len(more) <= passages.CONTINUE_CHARS
    # The paragraph's last chunk reads nothing on; nor a hit whose chunk changed since the search.
    last = next(c for c in chunks if "A new paragraph" in c["text"])
    assert passages.continuation(store, hit_of(path, last)) == ""
    stale = cast(SearchHit, {**hit_of(path, first), "text": "something else"})
    assert passages.continuation(store, stale) == ""


def test_a_default_question_is_asked_with_the_word_or_by_saying_nothing_is_set() -> None:
    for question in (
        "How long does a session cookie last by default?",
        "What is the default of the keepAspect option?",
        "Which kind of transaction does BEGIN start when none is named?",
        "When does a trigger fire if neither BEFORE nor AFTER is given?",
        "Which feed class is used when no feed type is set?",
        "What does the parser assume when it is omitted?",
    ):
        assert sentences.asks_for_default(question), question
    for question in ("How many patients were enrolled?", "When was Django 1.5 released?", "If none, why not?"):
        assert not sentences.asks_for_default(question), question
    assert sentences.states_default("The default transaction behavior is DEFERRED.")
    assert sentences.states_default("keepAspect Maintain aspect ratio [default true]")
    assert sentences.states_default("Defaults to the current time.")
    assert not sentences.states_default("A write transaction is started at once.")


def test_a_name_question_asks_for_a_name_written_as_code_the_question_does_not_hold() -> None:
    for question in (
        "Which configure flag builds the USB driver?",
        "What file extension does the keyboard definition file have?",
        "Which template tag computes a bar-chart width?",
        "Which environment variable names the dictionary folder?",
        "What is the name of the archive the tutorial downloads?",
    ):
        assert sentences.asks_for_name(question), question
    for question in ("How many patients were enrolled?", "When was Django 1.5 released?", "Where is the key put?"):
        assert not sentences.asks_for_name(question), question
    asked = "Which configure flag builds the USB driver?"
    for text in (
        "--enable-usb Turns on generation of the USB driver code.",
        "It has an extension of .kbd and the rest is UTF-8.",
        "Set ``USB_DRIVER_PATH`` first.",
        "Call make_driver() or usbDriver() then.",
    ):
        assert sentences.names_code(text, asked), text
    assert not sentences.names_code("The USB driver is built on every platform.", asked)
    # a name the question already holds is not the answer
    assert not sentences.names_code("--enable-usb turns it on.", "What does --enable-usb do?")


def test_a_which_question_asks_for_a_name_and_a_sentence_naming_one_the_question_lacks_offers_it() -> None:
    named = (
        "With which part of the cell is the NEMO-related protein NRP associated?",
        "Which transcription factor has Gfi1 as a direct target?",
        "In which city were the adults surveyed?",
    )
    # a figure question is not one: its answer is a number, not a name
    others = ("In which year did the share peak?", "How many patients were enrolled?", "Explain the method.")
    assert [q for q in named + others if sentences.asks_for_entity(q)] == list(named)
    asked = "With which part of the cell is the NEMO-related protein NRP associated?"
    assert sentences.names_new("In addition, we observed that endogenous NRP is associated with the Golgi.", asked)
    assert sentences.names_new("Gfi1 is a direct target of RUNX1.", "Which factor targets Gfi1?")
    # the question's own names, the capital of a sentence's first word, and bare numbers are not new names
    assert not sentences.names_new("Analogous to NEMO, NRP is associated in a complex with two kinases.", asked)
    assert not sentences.names_new("Some aspects were well known among the 172 adults.", "Which city?")


def test_a_short_unfinished_line_before_a_description_is_its_term_and_is_quoted_with_it() -> None:
    text = (
        "--enable-usb\nThis option enables the USB driver.\n"
        "--enable-gapcmon\nThis option enables building the GTK GUI front-end.\n"
    )
    parts = [s.text for s in sentences.split(text, 1)]
    assert parts == [
        "--enable-usb",
        "This option enables the USB driver.",
        "--enable-gapcmon",
        "This option enables building the GTK GUI front-end.",
    ]
    assert sentences.is_term("--enable-gapcmon") and sentences.is_term("normal")
    assert not sentences.is_term("This option enables the USB driver.")
    assert not sentences.is_term("A heading of more than three words")
    quoted = _span_of(text, 3, figure=False)
    assert quoted["text"] == "--enable-gapcmon: This option enables building the GTK GUI front-end."
    assert (quoted["line_start"], quoted["line_end"]) == (3, 4)
    # the term brings its description too; a sentence after a finished one is quoted alone
    assert (
        _span_of(text, 2, figure=False)["text"]
        == "--enable-gapcmon: This option enables building the GTK GUI front-end."
    )
    plain = "It is built.\nThe option enables the USB driver.\n"  # ("This option ..." would refer back to it)
    assert _span_of(plain, 1, figure=False)["text"] == "The option enables the USB driver."


def test_whether_the_documents_answer_is_judged_on_the_passages_of_the_best_few_sentences() -> None:
    def cand(passage: int, text: str, score: float, semantic: float, coverage: float) -> evidence._Candidate:
        found = sentences.split(text)
        c = evidence._Candidate(passage, found, 0, sentences.content_terms(text), set())
        c.score, c.semantic, c.coverage = score, semantic, coverage
        return c

    # The best sentence's passage names little of the question; the runner-up's passage answers it.
    table = cand(0, "keepAspect Maintain aspect ratio [default true]", 0.8, 0.3, 0.45)
    intro = cand(1, "This package integrates Asymptote graphics in LaTeX documents.", 0.75, 0.3, 0.2)
    about = cand(1, "The asymptote LaTeX package has options.", 0.5, 0.6, 0.6)
    ranked = [table, intro, about]
    rare = {"asymptote": 1.0, "latex": 1.0, "option": 1.0}
    assert floor.answers_at_all(evidence.EvidenceService._support(ranked, rare, with_vectors=True))
    assert floor.answers_at_all(evidence.EvidenceService._support(ranked, rare, with_vectors=False))  # coverage alone
    # Nothing among the leading passages is close to the question: the documents do not say.
    far = cand(2, "The lighthouse keeper retires in the autumn.", 0.4, 0.1, 0.1)
    close_but_not_leading = cand(3, "The package has options.", 0.1, 0.9, 0.9)
    weak = evidence.EvidenceService._support([table, far, far, close_but_not_leading], rare, with_vectors=True)
    assert not floor.answers_at_all(weak)


def test_the_rare_share_weighs_the_word_naming_what_is_asked_most_and_the_topic_s_common_words_little() -> None:
    # Index statistics of a web framework's docs (10,000 chunks): "django" is on half of them, "project" and
    # "deploy" on fewer, "quickly" on many, "Heroku" on none. Looked up by word, as the index stems it.
    df = {"django": 5000, "project": 800, "deploy": 100, "quickly": 3000, "otherwise": 400}
    stats = (lambda w: df.get(w, 0), 10_000)
    deploying = sentences.content_terms("Deploying a Django project: the deployment checklist for the project.")
    heroku = deploying | sentences.content_terms("Heroku runs it with gunicorn.")
    asked = floor.rare_weights("How do I deploy a Django project to Heroku?", "", 0.3, *stats)
    assert max(asked, key=asked.__getitem__) == "heroku"
    assert floor.rare_share(asked, [deploying]) < 0.35 < 0.99 < floor.rare_share(asked, [deploying, heroku])
    # A common word of the question no passage holds weighs little; a word whose stem stems again ("otherwis") is
    # looked up by its word, not taken for a name no page writes.
    paraphrase = floor.rare_weights("How do I quickly deploy a Django project otherwise?", "", 0.3, *stats)
    assert floor.rare_share(paraphrase, [deploying]) > 0.6
    # A follow-up's subject counts, less than its own words: "and to Heroku?" after the deploy question.
    follow = floor.rare_weights("and to Heroku?", "How do I deploy a Django project?", 0.3, *stats)
    assert floor.rare_share(follow, [heroku]) == 1.0 and floor.rare_share(follow, [deploying]) < 0.35
    assert floor.rare_share({}, [heroku]) == 0.0 and floor.rare_share(asked, []) == 0.0


def test_a_close_page_that_lacks_a_rare_name_of_the_question_does_not_answer_unless_it_comes_very_close() -> None:
    # The question's names are its capitalised and code-written words past the first, not its everyday words.
    assert sentences.name_terms("Which middleware compresses responses with Brotli?") == {"brot"}
    assert sentences.name_terms("What does chage -E do?") == {"-E"}
    assert sentences.name_terms("why is the clawed frog convenient for getting lots of embryos?") == set()
    df = {"django": 5000, "middleware": 300, "compress": 40, "respons": 900, "gzip": 20}
    stats = (lambda w: df.get(w, 0), 10_000)
    asked = floor.rare_weights("Which Django middleware compresses responses with Brotli?", "", 0.3, *stats)
    names = {t: w for t, w in asked.items() if t in sentences.name_terms("Which Django middleware ... Brotli?")}
    gzip_page = sentences.content_terms("The GZip middleware compresses responses for Django.")
    most = floor.rare_most(10_000)
    assert floor.unheld(names, [gzip_page], most) == 1.0  # "Brotli": in no chunk, in no leading passage
    assert floor.unheld(names, [gzip_page | {"brot"}], most) == 0.0
    assert 0 < floor.unheld({"django": asked["django"]}, [set()], most) < 0.2  # a name on half the pages weighs little
    close = {"semantic": 0.69, "lexical": 0.47, "rare": 0.44}
    assert floor.answers_at_all(close | {"unheld_name": 0.0})
    assert not floor.answers_at_all(close | {"unheld_name": 1.0})
    assert floor.answers_at_all(close | {"semantic": floor.NAME_RESCUE, "unheld_name": 1.0})  # very close: answered


def test_a_long_sentence_s_clauses_are_compared_when_the_sentences_alone_would_not_answer() -> None:
    long = (
        "An OS crash or power loss is weaker: with synchronous=NORMAL, SQLite in WAL mode stays consistent but may "
        "lose its most recent transactions; the file is not fsynced before its rename."
    )
    assert floor.clauses(long) == [
        "An OS crash or power loss is weaker",
        "with synchronous=NORMAL, SQLite in WAL mode stays consistent but may lose its most recent transactions",
        "the file is not fsynced before its rename.",
    ]
    assert floor.clauses("Default: 200") == []  # a label and its value: one clause, the sentence itself
    assert floor.clauses("A plain sentence without a cut.") == []
    weak = {"semantic": 0.28, "lexical": 0.55, "rare": 0.78, "unheld_name": 0.0}
    assert floor.needs_clauses(weak) and not floor.answers_at_all(weak)
    assert floor.answers_at_all(weak | {"clause": floor.SUPPORT_SEMANTIC})  # its clause about power loss is close
    assert not floor.answers_at_all(weak | {"clause": floor.SUPPORT_SEMANTIC - 0.01})
    # A close clause does not rescue a question about a rare name no leading passage holds.
    assert not floor.answers_at_all(weak | {"clause": 0.6, "unheld_name": 1.0})
    assert not floor.needs_clauses({"semantic": 0.8, "lexical": 0.5, "rare": 0.9, "unheld_name": 0.0})


def test_bracketed_numbers_inside_a_quote_are_escaped_so_only_the_answer_s_markers_resolve() -> None:
    reply = EvidenceReply(
        passages=[_hit("/d/trial.txt")],
        spans=[_span(0, "Doses were given on days [0; 3] of each cycle, as before [12].", 0.9)],
        supported=True,
        mode_used="hybrid",
    )
    out = answers.extractive(answers.Evidence(reply), QUOTING)
    markers = [int(n) for m in MARKER.finditer(out.answer) for n in re.split(r"\s*[,;]\s*", m.group(1))]
    assert markers == [1] and len(out.citations) == 1, out.answer
    assert "days \\[0; 3\\] of each cycle, as before \\[12\\]." in out.answer
    assert out.citations[0].quote == "Doses were given on days [0; 3] of each cycle, as before [12]."  # exact
    # the escaped form is text to the claim splitter too: a generated sentence that copies it cites source 1 only
    found = answers.claims("Doses were given on days \\[0; 3\\] [1].", [0])
    assert [c["sources"] for c in found] == [[0]]


def test_a_short_heading_before_a_sentence_is_not_quoted_as_its_term() -> None:
    # A parsed DOCX or Markdown heading is a line of its chunk, and the chunk's heading path names it.
    text = "Obsidianwave\nBudget\nThe budget for the obsidianwave project is forty thousand dollars.\n"
    hit = SearchHit(text=text, file_path="/d/budget.docx", location={"line_start": 1})  # type: ignore[typeddict-item]
    hit["location"]["heading"] = "Obsidianwave > Budget plan today"  # a 3-word heading
    hit["text"] = text.replace("\nBudget\n", "\nBudget plan today\n")
    found = evidence.EvidenceService._candidates([hit])
    assert [c.sentence.text for c in found][1] == "Budget plan today"
    quoted = evidence.EvidenceService._span([hit], found[2], figure=False)
    assert quoted["text"] == "The budget for the obsidianwave project is forty thousand dollars."
    assert quoted["line_start"] == 3
    # a short line no heading path names, a paragraph of its own, is a title too (a plain text file's)
    hit["location"].pop("heading")
    hit["text"] = "Dosing schedule\n\nThe doses are given on days 0 and 3 of each cycle.\n"
    apart = evidence.EvidenceService._candidates([hit])
    assert evidence.EvidenceService._span([hit], apart[1], figure=False)["text"].startswith("The doses are")
    # on the line just before its description and named by no heading, it is a definition list's term
    hit["text"] = text.replace("\nBudget\n", "\nBudget plan today\n")
    plain = evidence.EvidenceService._candidates([hit])
    assert evidence.EvidenceService._span([hit], plain[2], figure=False)["text"].startswith("Budget plan today: The")


def test_a_yes_no_question_quotes_the_best_sentence_of_each_of_the_best_files() -> None:
    for q in ("Does exposure to cold increase BAT?", "Is statin use linked to fractures?", "Can X bind Y?"):
        assert sentences.asks_whether(q), q
    for q in ("Which option builds the GUI?", "How many patients were enrolled?", "Where does Pk sit?"):
        assert not sentences.asks_whether(q), q
    hits = [_hit("/d/a.txt"), _hit("/d/a.txt"), _hit("/d/b.txt"), _hit("/d/c.txt")]
    hits[0]["chunk_index"], hits[1]["chunk_index"] = 0, 1

    def cand(passage: int, text: str, score: float) -> evidence._Candidate:
        c = evidence._Candidate(passage, sentences.split(text), 0, sentences.content_terms(text), set())
        c.score = score
        return c

    ranked = [cand(0, "A1.", 0.9), cand(1, "A2.", 0.85), cand(0, "A3.", 0.8), cand(2, "B1.", 0.5), cand(3, "C1.", 0.3)]
    spread = evidence._each_file_first(hits, ranked)
    assert [c.sentence.text for c in spread] == ["A1.", "B1.", "C1.", "A2.", "A3."]
    # the answer quotes each file's lead (here all three score within yes_no_ratio of the best)
    reply = EvidenceReply(
        passages=hits,
        spans=[_span(0, "A1.", 0.9), _span(2, "B1.", 0.8), _span(3, "C1.", 0.7)],
        supported=True,
        mode_used="hybrid",
        spread=True,
    )
    out = answers.extractive(answers.Evidence(reply), QUOTING)
    assert [c.file_name for c in out.citations] == ["a.txt", "b.txt", "c.txt"]
    # ... and each file once, though fewer files than quotes were found
    reply.spans = [_span(0, "A1.", 0.9), _span(2, "B1.", 0.8), _span(1, "A2.", 0.85)]
    assert [c.quote for c in answers.extractive(answers.Evidence(reply), QUOTING).citations] == ["A1.", "B1."]
    reply.spread = False  # any other question: the quotes within QUOTE_RATIO of the best
    reply.spans = [_span(0, "A1.", 0.9), _span(2, "B1.", 0.5), _span(1, "A2.", 0.85)]
    assert [c.quote for c in answers.extractive(answers.Evidence(reply), QUOTING).citations] == ["A1.", "A2."]


def _leads(scores: list[float]) -> EvidenceReply:
    """The evidence of a yes-no question over one file per score: each file's best sentence, best first."""
    hits = [_hit(f"/d/{chr(ord('a') + i)}.txt") for i in range(len(scores))]
    spans = [_span(i, f"{chr(ord('A') + i)}1.", score) for i, score in enumerate(scores)]
    return EvidenceReply(passages=hits, spans=spans, supported=True, mode_used="hybrid", spread=True)


def test_a_yes_no_answer_quotes_a_further_file_only_while_its_best_sentence_scores_near_the_best() -> None:
    def quoted(reply: EvidenceReply, quoting: answers.Quoting = QUOTING) -> list[str]:
        return [c.file_name for c in answers.extractive(answers.Evidence(reply), quoting).citations]

    # one clear source: the answer stays one quote long
    assert quoted(_leads([1.0, 0.5, 0.45])) == ["a.txt"]
    # several comparable sources: each is shown, up to yes_no_files, beyond the three quotes of max_quotes
    assert quoted(_leads([1.0, 0.9, 0.7, 0.65, 0.62])) == ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]
    assert quoted(_leads([1.0, 0.9, 0.7, 0.65, 0.62]), answers.Quoting(3, 4, 0.6)) == [
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
    ]
    # the threshold is relative to the best file's sentence: the same shape at another scale quotes the same
    assert quoted(_leads([0.5, 0.45, 0.29])) == ["a.txt", "b.txt"]
    assert quoted(_leads([1.0, 0.9, 0.7]), answers.Quoting(3, 5, 0.8)) == ["a.txt", "b.txt"]


def test_the_quote_rule_s_settings_come_from_the_llm_table() -> None:
    policy = LlmPolicy(max_quotes=2, yes_no_files=4, yes_no_ratio=0.75)
    assert answers.Quoting.of(policy) == answers.Quoting(2, 4, 0.75)


def test_a_one_letter_option_is_a_term_of_its_own_with_its_case() -> None:
    assert sentences.content_terms("What does chage -E do?") == {"chage", "-E"}
    assert "-E" in sentences.content_terms("-E, --expiredate EXPIRE_DATE")
    assert "-e" not in sentences.content_terms("-E, --expiredate EXPIRE_DATE")  # -e is another option
    # a hyphenated word, a negative number and a dash are no options
    assert not any(t.startswith("-") for t in sentences.content_terms("a co-op at -1 degrees - a list"))


CHAGE_E = (
    "-E, --expiredate EXPIRE_DATE\n"
    "    Set the date on which the user's account will\n"
    "    no longer be accessible.\n\n"
    "    For example the following can be used to set an account to expire in 180 days:\n\n"
    "                 chage -E $(date -d +180days +%Y-%m-%d)\n\n"
    "    Passing the number -1 as the EXPIRE_DATE will remove an account expiration date.\n\n"
    "EXIT VALUES\n\n"
    "The chage command exits with the following values:\n\n"
    "0\n    success\n\n1\n    permission denied\n\n"
    "A closing sentence of prose.\n"
)


def test_a_sentence_ending_with_a_colon_is_quoted_with_the_lines_it_introduces() -> None:
    found = [s.text for s in sentences.split(CHAGE_E, 1)]
    intro = found.index("For example the following can be used to set an account to expire in 180 days:")
    quoted = _span_of(CHAGE_E, intro, figure=False)
    assert quoted["text"] == (
        "For example the following can be used to set an account to expire in 180 days: "
        "chage -E $(date -d +180days +%Y-%m-%d)"
    )  # the first line it introduces whatever it is; the prose after it is not one of them
    assert (quoted["line_start"], quoted["line_end"]) == (5, 7)
    values = _span_of(CHAGE_E, found.index("The chage command exits with the following values:"), figure=False)
    assert values["text"] == (
        "The chage command exits with the following values: 0 success 1 permission denied"
    )  # every short item, and no further than the first finished sentence
    term = _span_of(CHAGE_E, 0, figure=False)  # the option's line brings its description
    assert (
        term["text"]
        == "-E, --expiredate EXPIRE_DATE: Set the date on which the user's account will no longer be accessible."
    )


def test_a_quote_s_label_is_the_heading_that_names_it_never_a_generic_one() -> None:
    assert sentences.plain_heading("DESCRIPTION") and sentences.plain_heading("Return value")
    assert not sentences.plain_heading("chage(1)") and not sentences.plain_heading("apnumber")
    assert not sentences.plain_heading("SESSION_COOKIE_AGE") and not sentences.plain_heading("SQLite")
    page, alone = _hit("/d/chage.txt"), _hit("/d/notes.txt")
    page["location"]["heading"] = "chage(1) > DESCRIPTION"
    alone["location"]["heading"] = "Description"
    reply = EvidenceReply(
        passages=[page, alone],
        spans=[_span(0, "This information is used by the system.", 0.9), _span(1, "It is used.", 0.85)],
        supported=True,
        mode_used="hybrid",
    )
    out = answers.extractive(answers.Evidence(reply), QUOTING)
    # under a generic heading the page's name is the label; with no name above it, the heading stays
    assert out.answer.startswith("chage(1): \u201cThis information is used by the system.\u201d [1]"), out.answer
    assert "Description: \u201cIt is used.\u201d [2]" in out.answer


def test_a_name_question_prefers_a_section_whose_heading_is_a_name_it_lacks() -> None:
    question = "Which filter spells out numbers?"
    assert sentences.heading_name("Built-in filters > apnumber", question) == "apnumber"
    assert sentences.heading_name("chage(1) > DESCRIPTION", question) == "chage(1)"
    assert sentences.heading_name("Built-in filters > apnumber", "What does apnumber do?") == ""
    assert sentences.heading_name("Django 1.5 release notes > Overview", question) == ""  # a title, not a name
    assert sentences.heading_name("Description", question) == ""


def _no_vectors(texts: list[str]) -> tuple[None, str, int]:
    return None, "no model in this test: the vector test is skipped, as without a local model", 0


def test_a_generated_sentence_backed_by_a_passage_but_not_about_the_question_s_subject_is_not_about_it() -> None:
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "What does chage -E do?"
    sources = [
        "DESCRIPTION:\nThe chage command changes the number of days between password changes and the date of the "
        "last password change.",
        "-E, --expiredate EXPIRE_DATE\nSet the date on which the user's account will no longer be accessible.",
        "-l, --list\nShow account aging information.\n-m, --mindays MIN_DAYS\nThe chage command sets a minimum.",
    ]
    claims = [
        {"text": "The chage command changes the number of days between password changes.", "sources": [0]},
        {"text": "It sets the date on which the user's account will no longer be accessible.", "sources": [1]},
        {"text": "The -E option sets the date on which the account will no longer be accessible.", "sources": []},
    ]
    reply = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources))  # type: ignore[arg-type]
    general, described, named = reply.checks
    assert general["supported"] and not general["about"]  # backed, about chage, not about -E
    assert described["supported"] and described["about"]  # its backing sentence's term line names -E
    assert named["supported"] and named["about"] and named["source"] == 1
    nothing = ClaimChecker(_no_vectors).check(CheckRequest("hi", claims[:1], sources))  # type: ignore[arg-type]
    assert nothing.checks[0]["about"]  # no term of the question in any source: the support check alone decides
    # A sentence that only restates the question is backed and about it, and answers nothing: not kept.
    restated = [
        {"text": 'This is the answer to the question "What does chage -E do?"', "sources": []},
        {"text": "chage -E does what the question asks.", "sources": [1]},
    ]
    echo = ClaimChecker(_no_vectors).check(CheckRequest(question, restated, sources))  # type: ignore[arg-type]
    assert not any(c["supported"] for c in echo.checks), echo.checks


def test_a_generated_sentence_naming_an_option_its_source_lacks_is_not_backed() -> None:
    # A name written as code is a name: "-mono-font" is lower case, so no capitalised fact, and most of the
    # sentence's words are its source's; the option is the model's invention. One the source prints with an en
    # dash for "--" is held.
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "Which option gives the x11 terminal its font for multibyte strings?"
    sources = [
        "Set the font for multibyte strings in the x11 terminal, if gnuplot is built with \u2013enable-x11-mbfonts."
    ]
    claims = [
        {
            "text": "Set -mono-font for the font of multibyte strings if gnuplot is built for the x11 terminal.",
            "sources": [0],
        },
        {"text": "Set the font for multibyte strings if gnuplot is built with --enable-x11-mbfonts.", "sources": [0]},
    ]
    invented, held = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert not invented["supported"] and invented["missing"] == ["mono-font"], invented
    assert held["supported"] and held["missing"] == [], held
    assert sentences.code_names("Use os.path.join( or `quoted` and my_var") == {"os.path.join", "my_var"}


def test_a_generated_sentence_stating_the_question_s_figure_with_a_passage_of_another_release_is_not_backed() -> None:
    # "State no figure its source lacks": the question's version number is no exemption. A date taken from the notes
    # of 2.0.10 and pinned on the 2.2.10 the question names is backed by nothing; the same date stated of 2.0.10 is.
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "When was the Django 2.2.10 security release published?"
    sources = [
        "Django 2.0.10 release notes:\n*January 4, 2019*\n\nDjango 2.0.10 fixes a security issue and several bugs in "
        "2.0.9."
    ]
    claims = [
        {"text": "The Django 2.2.10 security release is released on January 4, 2019.", "sources": [0]},
        {"text": "The Django 2.0.10 security release is released on January 4, 2019.", "sources": [0]},
    ]
    other, own = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert not other["supported"] and other["missing"] == [sentences.number_key("2.2.10")], other
    assert own["supported"] and own["about"], own


def test_a_generated_sentence_is_never_backed_by_the_label_line_its_window_starts_with() -> None:
    # The answer engine shows a window after its section's name on a line of its own; that label names the window
    # and states nothing, so the sentence a claim is cited to is one of the window's own.
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "When was the Django 2.0.10 security release published?"
    sources = [
        "Django 2.0.10 release notes:\n*January 4, 2019*\n\nDjango 2.0.10 fixes a security issue and several bugs in "
        "2.0.9."
    ]
    claims = [{"text": "The Django 2.0.10 security release is released on January 4, 2019.", "sources": [0]}]
    (check,) = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert check["supported"] and check["about"] and check["quote"] != "Django 2.0.10 release notes:", check


def test_a_generated_sentence_is_about_the_question_by_its_own_words_its_source_holds_not_its_backing_s() -> None:
    # The backing sentence names -E; the claim says what it says of chage in general: backed, not about -E. A claim
    # that echoes the question's relation ("must live alongside my doctest sources for their fixtures to be found")
    # of a name its source says something else of is backed by that source and about nothing it says.
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "What does chage -E do?"
    sources = [
        "DESCRIPTION:\nThe chage command changes the number of days between password changes and the date of the "
        "last password change.",
        "Of its options, -E sets the date on which the account expires, and chage also changes the number of days "
        "between password changes.",
        "-l, --list\nShow account aging information.\n-m, --mindays MIN_DAYS\nThe chage command sets a minimum.",
    ]
    claims = [
        {"text": "The chage command changes the number of days between password changes.", "sources": [1]},
        {"text": "The -E option sets the date on which the account expires.", "sources": [1]},
    ]
    general, named = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert general["supported"] and not general["about"], general  # its backing names -E; the claim does not
    assert named["supported"] and named["about"], named
    question = "Which file must live alongside my doctest sources for their fixtures to be found?"
    sources = [
        "The ``usefixtures`` mark is supported when executing text doctest files.",
        "Fixtures defined in a ``conftest.py`` file alongside the doctest sources are found.",
    ]
    claims = [
        {
            "text": "The ``usefixtures`` mark must live alongside my doctest sources for their fixtures to be found.",
            "sources": [0],
        },
        {"text": "A ``conftest.py`` file alongside the doctest sources holds fixtures that are found.", "sources": [1]},
    ]
    echo, answer = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert echo["supported"] and not echo["about"], echo  # the relation is the question's, not its source's
    assert answer["supported"] and answer["about"], answer


def test_the_thing_a_generated_sentence_names_for_a_which_or_number_question_must_be_its_backing_s() -> None:
    # A fragment of the model's numbered list ("1." and a code name cut short) is backed by the label line before an
    # enumeration (Django's generic relations page, as the model was shown it): its "1" is no count that line or the
    # lines naming it state, so it is not about "How many ...?"; the sentence with "three" is. A paper's title written
    # back for "Which protein ...?" holds capitalised words the sentence backing it lacks: not the name asked (Rb).
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "How many parts are there to setting up a GenericForeignKey?"
    page = (
        "Generic relations:\n:class:`~django.db.models.ForeignKey` it would have to\nchoose one and only one model"
        " to store tags for. The contenttypes\napplication provides a special field type (``GenericForeignKey``)"
        " which\nworks around this and allows the relationship to be with any\nmodel:\n.. class:: GenericForeignKey"
        "\nThere are three parts to setting up a\n:class:`~django.contrib.contenttypes.fields.GenericForeignKey`:\n1."
    )
    claims = [
        {"text": "1.:class:`~django.contrib.contenttypes.fields.", "sources": [0]},
        {"text": "There are three parts to setting up a GenericForeignKey.", "sources": [0]},
    ]
    fragment, count = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, [page])).checks  # type: ignore[arg-type]
    assert fragment["supported"] and fragment["quote"].endswith("GenericForeignKey`:"), fragment  # the label line
    assert not fragment["about"], fragment
    assert count["supported"] and count["about"], count
    question = "Which protein do E2f1-3 team up with to act as repressors in differentiating cells?"
    abstract = (
        "In differentiating cells E2f1-3 function in a complex with Rb as repressors to silence E2f targets. In"
        " progenitor cells they switch to activators."
    )
    claims = [
        {
            "text": "E2F1-3 Switch from Activators in Progenitor Cells to Repressors in Differentiating Cells",
            "sources": [],
        },
        {"text": "In differentiating cells E2f1-3 act as repressors in a complex with Rb.", "sources": []},
    ]
    title, named = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, [abstract])).checks  # type: ignore[arg-type]
    assert title["supported"] and "Rb" in title["quote"] and not title["about"], title
    assert named["supported"] and named["about"], named


def test_a_generated_sentence_answering_one_part_of_a_two_part_question_is_about_it() -> None:
    # The budget sentence holds every term of the part it answers, but the question's other part weighs more: its
    # terms are rarer among the sentences shown. Judged against the whole question alone it would not be about it,
    # and whether it is would turn on which other sentences happen to be shown.
    from foldermind.protocol.messages import CheckRequest
    from foldermind.workers import questions
    from foldermind.workers.indexer.evidence.claims import ClaimChecker

    question = "What is the budget for the obsidianwave project, and how much did the harbour cargo volumes grow?"
    assert questions.parts(question) == [
        "What is the budget for the obsidianwave project",
        "how much did the harbour cargo volumes grow?",
    ]
    sources = [
        "The obsidianwave project budget is forty thousand dollars. The obsidianwave project budget was approved in "
        "March. The obsidianwave project budget covers two years.",
        "Harbour cargo volumes grew by twelve percent over the year.",
    ]
    claims = [
        {"text": "The budget for the obsidianwave project is forty thousand dollars.", "sources": [0]},
        {"text": "Cargo volumes in the harbour grew by twelve percent over the year.", "sources": [1]},
        {"text": "The budget was approved in March.", "sources": [0]},
    ]
    budget, cargo, approved = ClaimChecker(_no_vectors).check(CheckRequest(question, claims, sources)).checks  # type: ignore[arg-type]
    assert budget["supported"] and budget["about"], budget  # about the first part
    assert cargo["supported"] and cargo["about"], cargo  # about the second, and states its figure
    assert approved["supported"] and not approved["about"], approved  # a third of the first part, none of the other
    # Not parts: a statement before the question, a clause inside it, a part with no term of its own.
    for whole in (
        "The native Win32 port of Aspell is no longer maintained; what is now the best way to get it on Windows?",
        "Which glutamate receptor, when blocked, made N-acetylcysteine better at reducing cocaine seeking?",
        "After how many years was the cumulative incidence of late severe infections reported, and what was it?",
    ):
        assert questions.parts(whole) == [whole]


MODULES = (
    "- celery.utils\n\n"
    "    Utility functions used by the Celery code base.\n"
    "    Much of it is there to be compatible across Python versions.\n\n"
    "- celery.contrib\n\n"
    "    Additional public code that doesn't fit into any other name-space.\n\n"
    "* Portability fixes\n"
    "* New abstract C and C++ API\n"
)


def test_a_bullet_that_is_only_a_term_is_quoted_with_the_paragraph_indented_under_it() -> None:
    found = [s.text for s in sentences.split(MODULES, 1)]
    described = _span_of(
        MODULES, found.index("Additional public code that doesn't fit into any other name-space."), False
    )
    assert described["text"] == "celery.contrib: Additional public code that doesn't fit into any other name-space."
    assert (described["line_start"], described["line_end"]) == (6, 8)
    term = _span_of(MODULES, found.index("celery.utils"), figure=False)  # the term brings its description
    assert term["text"] == "celery.utils: Utility functions used by the Celery code base."
    second = _span_of(MODULES, found.index("Much of it is there to be compatible across Python versions."), False)
    assert second["text"] == "Much of it is there to be compatible across Python versions."  # no term before it
    item = _span_of(MODULES, found.index("New abstract C and C++ API"), figure=False)
    assert item["text"] == "New abstract C and C++ API"  # items of one list at one indent are no term and description


STEPS = (
    "To use the admin monitor you need to do the following:\n\n"
    "    1. Create the new database tables:\n\n"
    "        .. code-block:: console\n\n"
    "            $ python manage.py syncdb\n\n"
    "    2. Start the snapshot camera:\n\n"
    "            $ python manage.py celerycam\n\n"
    "    3. Open up the admin to monitor your cluster.\n\n"
    "The admin interface shows tasks and worker nodes.\n"
)


def test_a_colon_s_list_goes_on_over_numbered_items_whose_text_follows_the_number_on_its_line() -> None:
    found = [s.text for s in sentences.split(STEPS, 1)]
    assert found[1:3] == ["1.", "Create the new database tables:"]  # the number is a sentence of its own
    quoted = _span_of(STEPS, 0, figure=False)
    assert quoted["text"] == (
        "To use the admin monitor you need to do the following: 1. Create the new database tables:\n"
        "$ python manage.py syncdb\n"  # a code directive's lines are lines (test_answer_extent.py)
        "2. Start the snapshot camera: $ python manage.py celerycam 3. Open up the admin to monitor your cluster."
    )  # every step with the commands under it, and not the prose after the list
    assert (quoted["line_start"], quoted["line_end"]) == (1, 13)
