"""Quotes a person reads on a page of short entries (an HTML definition list, as Debian's users-and-groups page):
a quote never repeats one already given in the same answer (two of its sentences reaching the same lines); a
sentence that ends in a stop inside closing quotes ends there, so the next entry's term is not glued to its end;
a greeting in the middle of a conversation asks the documents nothing; and a follow-up of a follow-up keeps the first
question's subject. A real kernel, embedding model and MCP
(`chat_with_documents`, extractive)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from foldermind.protocol.messages import ChatTurn
from foldermind.workers.answers.engine import subject
from foldermind.workers.indexer.evidence import reach, sentences
from foldermind.workers.questions import small_talk, words_of_its_own
from tests.test_answers import chat, check_markers, serving
from tests.test_evidence_units import _hit, _span

ENTRIES = [
    ("root", "Root is (typically) the superuser."),
    (
        "daemon",
        "Some unprivileged daemons that need to write files on disk run as daemon.daemon (portmap, atd and others). "
        "Daemons that own no files sometimes run as nobody.nogroup instead.",
        "LSB 1.3 lists daemon as legacy, and says: \"The 'daemon' UID/GID was used as an unprivileged UID/GID for "
        'daemons to execute under in order to limit their access to the system."',
    ),
    ("bin", "No files on most systems are owned by user or group bin. Historically they owned the binaries."),
    ("sys", "Historically, the sys user and group owned the kernel sources, but this was obsoleted long ago."),
    (
        "sync",
        "The shell of user sync is /bin/sync. Thus, if its password is set to something easy to guess, anyone can "
        "sync the system at the console even if they have no account on the system.",
    ),
    (
        "games",
        "Many games are sgid to games so they can write their high score files. This is explained in Debian Policy.",
    ),
    ("man", "The man program (sometimes) runs as user man, so it can write cat pages to /var/cache/man."),
    ("mail", "Mailboxes in /var/mail are owned by group mail. The user and group is used by various MTAs and MUAs."),
]


def page() -> str:
    items = "".join(
        f"<dt>{term}</dt><dd>{''.join(f'<p>{p}</p>' for p in paragraphs)}</dd>\n" for term, *paragraphs in ENTRIES
    )
    return (
        "<html><head><title>Users and Groups in the Debian System</title></head><body>\n"
        "<h1>Chapter 2. Users and Groups</h1>\n<p>Many users have a corresponding group, and these pairs are treated "
        f"together.</p>\n<dl>\n{items}</dl></body></html>\n"
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving({"users-and-groups.html": page()}) as url_token:
        yield url_token


def ask(served: tuple[str, str], question: str, session: str | None = None) -> dict[str, Any]:
    url, token = served
    args: dict[str, Any] = {"query": question, "answer_mode": "extractive"}
    if session:
        args["session_id"] = session
    out = dict(chat(url, token, args))
    check_markers(out)
    return out


def test_no_answer_cites_the_same_lines_twice(served: Any) -> None:
    """ "Many games are sgid to games ..." and "This is explained in Debian Policy." each take in the other (a
    back-reference) and the term "games" over them: both reached the same quote, cited as [2] and [3]."""
    session = None
    for question in ("What does the sync user's shell do?", "and which group do games use?", "why is that?"):
        out = ask(served, question, session)
        session = out["session_id"]
        quotes = [c["quote"] for c in out["citations"]]
        for k, quote in enumerate(quotes):
            assert not any(quote in other or other in quote for other in quotes[:k]), (question, quotes)
        assert len(out["answer"].split("\u201d")) == len(quotes) + 1, out["answer"]  # each quote in the text once


def test_a_quote_repeats_one_of_the_same_file_that_holds_it_or_that_it_holds() -> None:
    hits = [_hit("/d/a.html"), _hit("/d/a.html"), _hit("/d/b.html")]  # two passages of a.html (chunks overlap)
    taken = [_span(0, "games Many games are sgid to games. This is explained in Debian Policy.", 1.0)]
    assert reach.repeats(hits, taken, _span(1, "Many games are sgid to games.", 0.9)) == 0  # held
    assert reach.repeats(hits, taken, _span(0, taken[0]["text"], 0.9)) == 0  # the same
    longer = _span(0, "games Many games are sgid to games. This is explained in Debian Policy. See man(1).", 0.8)
    assert reach.repeats(hits, taken, longer) == 0  # holds it: skipped too (the better-scored quote stands)
    assert reach.repeats(hits, taken, _span(2, "Many games are sgid to games.", 0.9)) is None  # another file
    assert reach.repeats(hits, taken, _span(0, "The man program runs as user man.", 0.9)) is None


def test_a_sentence_ending_inside_closing_quotes_ends_there() -> None:
    text = 'LSB 1.3 says: "The UID was used for daemons."\nbin\nNo files are owned by bin.'
    assert [s.text for s in sentences.split(text)] == [
        'LSB 1.3 says: "The UID was used for daemons."',
        "bin",
        "No files are owned by bin.",
    ]


def test_the_next_entry_s_term_is_not_quoted_with_a_sentence_that_ends_in_quotes(served: Any) -> None:
    out = ask(served, "What does LSB 1.3 say about the daemon UID/GID?")
    lsb = [c["quote"] for c in out["citations"] if "LSB 1.3" in c["quote"]]
    assert lsb and all(q.endswith('the system."') for q in lsb), out["citations"]


@pytest.mark.parametrize("question", ["hi", "Hi!", "thank you so much!", "ok", "ok, great"])
def test_small_talk_asks_nothing(question: str) -> None:
    assert small_talk(question)


@pytest.mark.parametrize("question", ["why?", "and the other one?", "ok, and why?", "hi, tell me about games"])
def test_a_turn_with_any_other_word_is_a_question(question: str) -> None:
    assert not small_talk(question)


def test_a_greeting_in_a_conversation_asks_nothing_and_the_next_follow_up_keeps_its_subject(served: Any) -> None:
    first = ask(served, "Which group are games sgid to?")
    assert first["grounded"] and "high score" in first["answer"], first
    session = first["session_id"]
    hi = ask(served, "hi", session)
    assert hi["grounded"] is False and hi["citations"] == [], hi  # was the games quote, twice, grounded
    why = ask(served, "and why?", session)  # leans on the games question, not on "hi"
    assert why["grounded"] and "high score" in why["answer"], why


def test_a_follow_up_leans_on_the_previous_question_as_it_was_resolved() -> None:
    history: list[ChatTurn] = [
        {"question": "What does the sync user's shell do?", "answer": "a"},
        {"question": "Which group are games sgid to?", "answer": "b"},
        {"question": "and why?", "answer": "c"},
        {"question": "thanks", "answer": "d"},
    ]
    assert subject(history) == "Which group are games sgid to? and why?"  # "and why?" asked about games
    assert subject(history[:2]) == "Which group are games sgid to?"  # a question naming something is its own subject
    assert subject([{"question": "why? " * 200, "answer": ""}]) == ("why? " * 100).strip()  # the latest


@pytest.mark.parametrize("question", ["why?", "and is that so?", "How?", "and what about that?"])
def test_a_turn_that_names_nothing_has_no_words_of_its_own(question: str) -> None:
    assert not words_of_its_own(question)


@pytest.mark.parametrize("question", ["and which group do games use?", "what about -E?", "and in 2019?"])
def test_a_turn_that_names_something_has_words_of_its_own(question: str) -> None:
    assert words_of_its_own(question)


def test_a_follow_up_of_a_follow_up_keeps_the_first_question_s_subject(served: Any) -> None:
    session = None
    for question in ("Which group are games sgid to?", "and why?", "is that so?"):
        out = ask(served, question, session)
        session = out["session_id"]
    assert out["grounded"] and "high score" in out["answer"], out  # was refused: it leaned on "and why?" alone


def test_a_term_or_title_taken_in_over_its_description_is_set_off_by_a_colon() -> None:
    text = (
        "Chapter 2.\nUsers and Groups\nMany users have a corresponding group.\n"
        "games\nMany games are sgid to games. This is explained in Debian Policy.\nman\n"
    )
    found = sentences.split(text)
    at = [s.text for s in found].index("Many games are sgid to games.")
    first, last = reach.quoted(found, at, frozenset(), False, text)
    assert (first, last) == (at - 1, at + 1)  # the chosen sentence and what it takes in: unchanged
    quote = "games: Many games are sgid to games. This is explained in Debian Policy."
    assert reach.joined(found, first, last, frozenset(), text) == quote  # was "games Many games ..."
    first, last = reach.quoted(found, 2, frozenset(), False, text)
    assert (
        reach.joined(found, first, last, frozenset(), text)
        == "Users and Groups: Many users have a corresponding group."
    )
    assert (
        reach.joined(found, at, at + 1, frozenset(), text)
        == "Many games are sgid to games. This is explained in Debian Policy."
    )


def test_a_quoted_entry_reads_its_term_apart_from_its_description(served: Any) -> None:
    out = ask(served, "Why are games sgid to games?")
    games = [c["quote"] for c in out["citations"] if "high score" in c["quote"]]
    assert games and all(not q.startswith("games Many") for q in games), out["citations"]
