"""The same question gets the same answer whatever was asked before it: a real kernel indexing a real page (the
project's architecture.md as it stood, tests/pages/), the real int8 embedding model the product runs by default, the
mcp SDK client over HTTP (no model: the answers are quotes).

The evidence step keeps the vectors of the sentences it encoded (its vector cache), so which sentences a question
encodes, and beside which others, depends on the questions asked before it. The int8 copy quantises a call's
activations as a whole: sentences encoded together got vectors that depended on each other, and a question's quotes,
their order and the floor's figures moved with the order of earlier questions (docs/benchmarks/answer-relevance.md
"Repeatable answers"). Here the questions are asked in one order, the indexer is restarted (its cache emptied), and
they are asked again in the reverse order.
"""

from __future__ import annotations

from typing import Any

import pytest

from foldermind.protocol.messages import DescribeReply, DescribeRequest
from tests.helpers import RunningKernel, cli, wait_for
from tests.test_answer_floor import evidence, served  # noqa: F401  (its kernel: the page indexed, no model)
from tests.test_answers import chat

QUESTIONS = [  # about the page, of the shapes people ask; several share sentences, so the cache carries them over
    "What does a power cut lose?",
    "How does the kernel restart a worker that crashed?",
    "Which process owns the SQLite database?",
    "What happens to a file that crashes the parser?",
    "How are queries encoded for semantic search?",
    "What does the watcher do when a file changes?",
    "How long does the kernel wait before it kills a worker that does not stop?",
    "Where are the logs kept?",
    "What does the embedder do when it has no requests for a while?",
    "How does the front door check a client's key?",
    "What keeps two kernels from running in the same home?",
    "How are search results from keyword and semantic search combined?",
    "Which worker parses PDF files?",
    "What does the indexer store for each chunk?",
    "How does the llm worker answer a question about the documents?",
    "What is a stale lock?",
]


def query_model(k: RunningKernel) -> dict[str, Any] | None:
    """The indexer's query encoder's details once it is ready, else None."""
    details = k.client().request("indexer", DescribeRequest(), DescribeReply, timeout=10).body.details
    encoder = dict(details["query_encoder"])
    return encoder if encoder["state"] == "ready" else None


def asked(k: RunningKernel, url: str, token: str, questions: list[str]) -> dict[str, tuple[Any, ...]]:
    """Each question's answer as a user reads it (text, grounded, citations with their quotes) and the figures of
    the evidence it was made from (the evidence request right after the answer reads the vectors it encoded)."""
    out: dict[str, tuple[Any, ...]] = {}
    for question in questions:
        got = chat(url, token, {"query": question, "answer_mode": "extractive"})
        cited = [(c["file_path"], c["quote"]) for c in got["citations"]]
        reply = evidence(k, question)
        spans = [(s["text"], s["score"]) for s in reply.spans]
        out[question] = (got["answer"], got["grounded"], cited, dict(reply.support), spans)
    return out


def test_a_question_gets_the_same_answer_after_other_questions_asked_in_another_order(
    request: pytest.FixtureRequest,
) -> None:
    k, url, token = request.getfixturevalue("served")
    model = wait_for(lambda: query_model(k), 240, 0.2, "the indexer's query model")
    assert model["backend"] == "onnx" and str(model["precision"]).startswith("int8"), model
    first = asked(k, url, token, QUESTIONS)
    old = k.worker("indexer")["pid"]
    cli(k.root, "restart", "indexer")  # a new indexer: its vector cache starts empty
    wait_for(
        lambda: k.worker("indexer")["pid"] not in (None, old) and k.worker("indexer")["state"] == "RUNNING",
        60,
        0.2,
        "a new indexer running",
    )
    wait_for(lambda: query_model(k), 240, 0.2, "the new indexer's query model")
    again = asked(k, url, token, QUESTIONS[::-1])
    # What the user reads first (the answer, whether it is grounded, what it cites), then the figures behind it.
    reworded = {q: (first[q][0], again[q][0]) for q in QUESTIONS if first[q][:3] != again[q][:3]}
    assert not reworded, reworded
    moved = {q: (first[q][3:], again[q][3:]) for q in QUESTIONS if first[q] != again[q]}
    assert not moved, moved
    assert sum(bool(first[q][1]) for q in QUESTIONS) >= len(QUESTIONS) // 2  # answers, not refusals alike
