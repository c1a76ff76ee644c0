"""Who has the llm worker's one model context (workers/llm/lanes.py): a chat or a reading goes before a background
summary at the summary's next step, and the summary takes the context back after. Real threads, no model (the
real worker's summaries and readings are tested end to end in test_answer_likely.py)."""

from __future__ import annotations

import threading

import pytest

from foldermind.workers.llm.lanes import Cancelled, Lanes
from tests.helpers import wait_for


def test_a_foreground_job_gets_the_context_at_the_summary_s_next_step_and_the_summary_resumes_after() -> None:
    lanes, events = Lanes(), []

    def question() -> None:
        with lanes.foreground():
            events.append("question")

    with lanes.background(lambda: False):
        events.append("summary")
        assert lanes.step_aside(lambda: False) is False  # nobody waits: it goes on
        asker = threading.Thread(target=question)
        asker.start()
        wait_for(lambda: lanes.wanted, 30, 0.01, "the question waiting")
        assert events == ["summary"]  # not before the summary's next step
        assert lanes.step_aside(lambda: False) is True
        events.append("summary again")
        asker.join(30)
    assert events == ["summary", "question", "summary again"] and lanes.asides == 1


def test_a_summary_that_gives_up_while_chats_hold_the_context_raises_and_leaves_it_to_them() -> None:
    lanes, holding, release, given_up = Lanes(), threading.Event(), threading.Event(), threading.Event()

    def chat() -> None:
        with lanes.foreground():
            holding.set()
            release.wait(30)

    talker = threading.Thread(target=chat)
    talker.start()
    assert holding.wait(30)
    given_up.set()
    with pytest.raises(Cancelled), lanes.background(given_up.is_set):
        raise AssertionError("the summary got the context while a chat held it")
    release.set()
    talker.join(30)
    with lanes.foreground():  # nothing is left holding it
        pass
    with lanes.background(lambda: False):
        pass
