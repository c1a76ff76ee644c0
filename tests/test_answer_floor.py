"""The weak-evidence floor end to end (workers/indexer/evidence/floor.py): a real kernel indexing a real page,
the project's own architecture.md as it stood when a question about it was refused although it answers it
(tests/pages/), the real embedding model judging the evidence, and the mcp SDK client over HTTP (no model: the
answers are quotes).

"What does a power cut lose?" shares two words with the sentence that answers it ("An OS crash or power loss is
weaker: with synchronous=NORMAL, SQLite in WAL mode stays consistent but may lose its most recent transactions,
and ..."), and that long sentence's cosine with the question is low; its clause about power loss is close.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.messages import EvidenceReply, EvidenceRequest
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers.engine import SMALL_TALK_NOTE
from foldermind.workers.indexer.evidence import floor
from tests.config import merge
from tests.helpers import FAST_RESTART, NO_LLM, ONE_PARSER, RunningKernel, short_tmpdir
from tests.test_answers import chat, kernel_with_folder

PAGE = Path(__file__).with_name("pages") / "architecture.md"
POWER_CUT = "What does a power cut lose?"
ANSWER = "may lose its most recent transactions"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, str, str]]:
    root = short_tmpdir()
    config = merge(FAST_RESTART, ONE_PARSER, NO_LLM, {"mcp": {"port": 0, "rate_per_minute": 6000}})
    with kernel_with_folder(root, config, "", 180, page) as (k, _docs, url, token):
        yield k, url, token


def page(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    shutil.copyfile(PAGE, docs / "architecture.md")
    return docs


def evidence(k: RunningKernel, question: str) -> EvidenceReply:
    policy = LlmPolicy()
    ask = EvidenceRequest(question=question, max_files=5, per_file=policy.chunks_per_file, max_spans=5)
    return k.client().request("indexer", ask, EvidenceReply, timeout=120).body


def test_a_question_the_page_answers_in_other_words_is_answered_from_the_clause_that_is_close(served: Any) -> None:
    k, url, token = served
    reply = evidence(k, POWER_CUT)
    # The whole sentence is far from the question, its clause close: the clause's cosine carries the floor.
    assert reply.support["semantic"] < floor.SUPPORT_SEMANTIC <= reply.support["clause"], reply.support
    assert reply.supported, reply.support
    out = chat(url, token, {"query": POWER_CUT, "answer_mode": "extractive"})
    assert out["grounded"] is True, out
    assert any(ANSWER in c["quote"] for c in out["citations"]), out["answer"]


def test_hi_is_not_grounded(served: Any) -> None:
    _k, url, token = served
    out = chat(url, token, {"query": "hi", "answer_mode": "extractive"})
    assert out["grounded"] is False and out["citations"] == [], out
    assert out["answer"].startswith("The documents do not say"), out["answer"]
    # small talk is told so, not that the closest passage missed the question
    assert out["note"] == SMALL_TALK_NOTE and "closest passage" not in out["note"], out["note"]


def test_a_question_on_the_page_s_subject_about_a_name_it_never_holds_is_refused(served: Any) -> None:
    # The page is about the embedder, its vectors and their cache; it never names Redis.
    question = "Which Redis command does the embedder use to cache vectors?"
    k, url, token = served
    reply = evidence(k, question)
    assert reply.support["unheld_name"] >= floor.UNHELD_NAME and not reply.supported, reply.support
    out = chat(url, token, {"query": question, "answer_mode": "extractive"})
    assert out["grounded"] is False and out["citations"] == [], out
    assert out["answer"].startswith("The documents do not say"), out["answer"]


LAWYER = "Which lawyer approved the licence of the embedding model?"
PASSWORD = "What password is an encrypted PDF tried with?"


def test_a_question_on_the_page_s_subject_about_a_thing_it_never_states_is_refused_in_everyday_words(
    served: Any,
) -> None:
    # The page is about the embedding model, its files and its vectors; it never speaks of a licence or a lawyer,
    # and no word of the question is written as a name: the weak-evidence floor refuses it, not the name rule.
    k, url, token = served
    reply = evidence(k, LAWYER)
    assert reply.support["unheld_name"] < floor.UNHELD_NAME and not reply.supported, reply.support
    out = chat(url, token, {"query": LAWYER, "answer_mode": "extractive"})
    assert out["grounded"] is False and out["citations"] == [], out
    assert out["answer"].startswith("The documents do not say"), out["answer"]


def test_the_neighbouring_question_the_page_answers_is_still_answered(served: Any) -> None:
    k, url, token = served
    reply = evidence(k, PASSWORD)
    assert reply.supported, reply.support
    out = chat(url, token, {"query": PASSWORD, "answer_mode": "extractive"})
    assert out["grounded"] is True, out
    assert any("empty password" in c["quote"] for c in out["citations"]), out["answer"]
