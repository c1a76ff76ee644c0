"""The model's reading beside the evidence floor, end to end (workers/answers/likely.py): a real kernel indexing two
real manual pages (chage(1), passwd(1)) and pytest 2.0.0's release notes, the real embedding model judging the
evidence, the real llm worker with the bundled SmolLM2-135M computing the query likelihood (``llm.likely``), and
the mcp SDK client over HTTP, in extractive mode (where no model writes).

"Which award did pytest 2.0 win?" is a near miss: the release notes are about pytest 2.0 and the evidence floor
answers it with their welcome line, but nothing there makes the question likely. "Which command changes a user's
password?" is answered by passwd(1) in other words; its evidence is as weak (both under the band), and the quotes
make it likely. With the llm worker frozen (SIGSTOP), or slower than ``likely_wait_s``, the evidence floor answers
alone and the note says why in a person's words. A question in the band asked while the llm worker summarises a
document in the background is read at once: the summary steps aside and comes back to the same text.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import AnalyzeReply, AnalyzeRequest, DescribeReply, DescribeRequest, EvidenceReply
from foldermind.protocol.runtime.config import LlmPolicy
from foldermind.workers.answers import likely
from foldermind.workers.answers.quotes import Composed
from foldermind.workers.answers.schemas import Citation, Location
from foldermind.workers.framework.asyncbus import Bus
from tests.bench.product_answers import Asker
from tests.config import merge
from tests.helpers import (
    FAST_RESTART,
    ONE_PARSER,
    RunningKernel,
    cli,
    require_bundled_model,
    short_tmpdir,
    wait_for,
)
from tests.test_answer_floor import evidence
from tests.test_answers import chat, kernel_with_folder

require_bundled_model()

TESTS = Path(__file__).parent
FILES = ("manpages/chage.txt", "manpages/passwd.txt", "pytest_docs/release-2.0.0.rst")
MODEL = "SmolLM2-135M-Instruct.Q4_1"
"""The bundled model's name, as an answer's ``model`` gives it."""
NEAR_MISS = "Which award did pytest 2.0 win?"
ANSWERED = "Which command changes a user's password?"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, str, str]]:
    root = short_tmpdir()
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        {"mcp": {"port": 0, "rate_per_minute": 6000}},
        # A reading that is slow on a busy machine is waited for: the tests judge what it says, not its speed.
        {"llm": {"analysis": False, "load": "at_start", "likely_wait_s": 600}},
        # The summaries sent by hand below read a long lead: seconds of prompt for a question to come in during.
        {"llm": {"analysis_input_tokens": 1200}},
    )
    with kernel_with_folder(root, config, "ready", 180, folder) as (k, _docs, url, token):
        yield k, url, token


def folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for name in FILES:
        shutil.copyfile(TESTS / name, docs / Path(name).name)
    return docs


def near_refusing(reply: EvidenceReply) -> bool:
    """The evidence floor answers, with evidence under the band: the model is asked."""
    return reply.supported and likely.in_band(reply.support)


def test_a_near_miss_the_evidence_floor_answers_is_refused_by_the_model_s_reading(served: Any) -> None:
    k, url, token = served
    assert near_refusing(reply := evidence(k, NEAR_MISS)), reply.support
    out = chat(url, token, {"query": NEAR_MISS, "answer_mode": "extractive"})
    assert out["grounded"] is False and out["citations"] == [], out
    assert out["answer"].startswith("The documents do not say"), out["answer"]
    assert out["floor"] == "evidence+model", out
    assert "query likelihood" in out["note"], out
    assert out["model"] == MODEL, out  # the model that refused it is named


def test_a_question_answered_in_other_words_under_the_band_is_kept(served: Any) -> None:
    k, url, token = served
    assert near_refusing(reply := evidence(k, ANSWERED)), reply.support
    out = chat(url, token, {"query": ANSWERED, "answer_mode": "extractive"})
    assert out["grounded"] is True and out["floor"] == "evidence+model", out
    assert any(c["file_name"] == "passwd.txt" for c in out["citations"]), out["answer"]
    assert out["model"] == MODEL and out["tokens_used"] == {"prompt": 0, "completion": 0}, out  # it read, wrote none


def test_foldermind_ask_shows_whether_the_model_read_the_answer(served: Any) -> None:
    k, _url, _token = served
    proc = cli(k.root, "ask", ANSWERED, "--mode", "extractive", timeout=600)
    assert "passwd.txt" in proc.stdout, proc.stdout
    assert f"(extractive; floor: evidence+model); {MODEL}; session" in proc.stderr, proc.stderr  # read, no tokens


def test_the_answer_benches_get_the_answer_a_user_gets(served: Any) -> None:
    """The benches ask through the answers engine's own first step, so a near miss the model's reading refuses is
    refused in a bench too (they composed the quotes alone, and emulated the reading apart)."""
    k, url, token = served
    with Asker(k.home.bus_endpoint) as asker:
        asker.warm_up()
        got = asker.ask(NEAR_MISS)
        floorless = asker.floorless(got)
    out = chat(url, token, {"query": NEAR_MISS, "answer_mode": "extractive"})
    assert got.answer.answer == out["answer"] and not got.answer.grounded, got.answer
    assert got.reading.floor == out["floor"] == "evidence+model"
    assert got.quotes.grounded and floorless.answer == got.quotes.answer  # what the bench scores the floor on


def test_a_question_with_strong_evidence_never_asks_the_model(served: Any) -> None:
    k, url, token = served
    question = "Which option of chage lists the account aging information?"
    reply = evidence(k, question)
    assert reply.supported and not likely.in_band(reply.support), reply.support
    out = chat(url, token, {"query": question, "answer_mode": "extractive"})
    assert out["grounded"] is True and out["floor"] == "evidence", out
    assert out["model"] == "", out  # the quotes and the evidence alone


def test_a_question_in_the_band_is_read_while_a_background_summary_steps_aside_and_the_summary_is_unchanged(
    served: Any,
) -> None:
    k, url, token = served
    text = (TESTS / "manpages" / "chage.txt").read_text(encoding="utf-8")[:4000]  # as the indexer sends it
    client = k.client("summaries")
    alone = client.request("llm", AnalyzeRequest("chage.txt", text), AnalyzeReply, timeout=600).body
    sent = client.send("llm", AnalyzeRequest("chage.txt", text, 1, 1), timeout=600)
    wait_for(lambda: "summarising" in str(k.worker("llm").get("note") or ""), 120, 0.05, "the summary in hand")
    out = chat(url, token, {"query": ANSWERED, "answer_mode": "extractive"})
    assert out["grounded"] is True and out["floor"] == "evidence+model", out
    # The model read the question while the summary was in hand: the summary is not answered yet.
    assert not client.sock.poll(0), "the summary was answered first: the question's reading waited behind it"
    reply = client.receive(600)
    assert reply.env.cid == sent.id and reply.env.status == "ok", reply.env
    summary = reply.body()
    assert isinstance(summary, AnalyzeReply) and summary.summary, summary
    # Nothing lost: it went on from the same state, so greedy decoding wrote the same summary.
    assert (summary.summary, summary.entities) == (alone.summary, alone.entities)
    details = client.request("llm", DescribeRequest(), DescribeReply, timeout=60).body.details
    assert details["asides"] >= 1, details


def test_with_the_llm_worker_frozen_the_evidence_floor_answers_alone_and_says_so(served: Any) -> None:
    k, url, token = served
    old = k.worker("llm")["pid"]
    os.kill(old, signal.SIGSTOP)
    try:
        # The frozen worker misses its heartbeats: the kernel replaces it and the reading fails (worker lost, or
        # the new one still loading); the answer does not fail with it.
        out = chat(url, token, {"query": NEAR_MISS, "answer_mode": "extractive"})
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed by the kernel by now, most likely
            os.kill(old, signal.SIGCONT)
    assert out["grounded"] is True and out["citations"], out
    assert out["floor"] == "evidence, model skipped", out
    assert "evidence floor decided alone" in out["note"], out
    read_by_a_person(out["note"])
    k.wait_state("llm", "RUNNING", timeout=120, other_pid_than=old)


def test_a_reading_slower_than_likely_wait_s_is_skipped_and_the_note_names_the_setting(served: Any) -> None:
    k, _url, _token = served
    reply = evidence(k, NEAR_MISS)
    assert near_refusing(reply), reply.support
    quoted = Composed("“Welcome to pytest 2.0.” [1]", [citation()])
    # A model still loading (a replaced worker) is skipped for that reason instead; this case wants one that reads.
    wait_for(lambda: str(k.worker("llm").get("note") or "").endswith("): ready"), 180, what="the model loaded")
    bus = Bus(k.home.bus_endpoint, "likely-test", deadline_s=60)
    try:
        # A reading costs the model over a second; this wait is far shorter, so the real llm worker is past it.
        got = anyio.run(likely.read, bus, LlmPolicy(likely_wait_s=0.2), NEAR_MISS, "", reply, quoted)
    finally:
        bus.close()
    assert got.floor == "evidence, model skipped" and not got.refused, got
    assert "did not answer within [llm] likely_wait_s, 0.2 s" in got.note, got
    read_by_a_person(got.note)


def test_the_first_reading_of_a_cold_model_does_not_wait_for_its_load_which_goes_on_for_the_next_question() -> None:
    """On a fresh install the llm worker is not running and its model is not loaded (``load = "on_use"``); loading it
    cost 7-18 s there (the first conversion, cores shared with the embedding), past ``likely_wait_s`` with the reading
    (docs/benchmarks/first-answer.md). The answer goes on without the reading and says why; the load goes on behind."""
    root = short_tmpdir()
    config = merge(
        FAST_RESTART,
        ONE_PARSER,
        {"mcp": {"port": 0, "rate_per_minute": 6000}},
        {"llm": {"analysis": False, "load": "on_use", "likely_wait_s": 600}},  # a wait for the load is not cut short
    )
    with kernel_with_folder(root, config, "", 180, folder) as (k, _docs, url, token):
        assert k.worker("llm")["state"] == "IDLE", k.worker("llm")  # on demand: not started yet
        first = chat(url, token, {"query": ANSWERED, "answer_mode": "extractive"})
        assert first["grounded"] is True and first["floor"] == "evidence, model skipped", first
        assert "(its model is still loading)" in first["note"] and first["model"] == "", first
        read_by_a_person(first["note"][first["note"].index("the model did not read") :])
        # No other request: the load the reading started goes on behind, and the next question is read.
        wait_for(lambda: str(k.worker("llm").get("note") or "").endswith("): ready"), 300, what="the model loaded")
        second = chat(url, token, {"query": ANSWERED, "answer_mode": "extractive"})
        assert second["floor"] == "evidence+model" and second["model"] == MODEL, second


def test_with_the_llm_worker_not_running_the_note_says_so_without_the_bus_s_words() -> None:
    # A kernel without the llm worker ([workers.llm] enabled = false) answers the bus call with this error, worded as
    # the front door's bus raises it (workers/framework/asyncbus.py); a stand-in raises it here, as starting a second
    # kernel for one sentence would cost a minute.
    class NoLlm:
        async def call(self, *args: Any, **kwargs: Any) -> Any:
            raise JobError(
                ErrorCode.SERVICE_UNAVAILABLE, "the llm worker is unavailable (service_unavailable); retry shortly"
            )

    weak = EvidenceReply([], [], True, "hybrid", support={"semantic": 0.5, "lexical": 0.3})
    quoted = Composed("“The passwd command changes passwords for user accounts.” [1]", [citation()])
    got = anyio.run(likely.read, NoLlm(), LlmPolicy(), ANSWERED, "", weak, quoted)  # type: ignore[arg-type]
    assert got.floor == "evidence, model skipped" and not got.refused, got
    assert (
        got.note
        == "the model did not read the question (the llm worker is not running); the evidence floor decided alone"
    )


def read_by_a_person(note: str) -> None:
    """A note says what happened, not the bus's codes, and asks nothing of its reader (the answer is given)."""
    assert note.startswith("the model did not read the question ("), note
    assert "retry" not in note and not any(code.value in note or code.mcp in note for code in ErrorCode), note


def test_with_likely_floor_off_or_strong_evidence_the_bus_is_never_asked() -> None:
    # No kernel: a bus that fails the test if asked stands in for one (the real path is tested above).
    class NoBus:
        async def call(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the model was asked")

    quoted = Composed("“The passwd command changes passwords for user accounts.” [1]", [citation()])
    weak = EvidenceReply([], [], True, "hybrid", support={"semantic": 0.5, "lexical": 0.3})
    strong = EvidenceReply([], [], True, "hybrid", support={"semantic": 0.7, "lexical": 0.3})
    off, on = LlmPolicy(likely_floor=False), LlmPolicy()
    for policy, reply in ((off, weak), (on, strong)):
        got = anyio.run(likely.read, NoBus(), policy, ANSWERED, "", reply, quoted)  # type: ignore[arg-type]
        assert got == likely.EVIDENCE_ONLY


def citation() -> Citation:
    where = Location(line_start=1, line_end=1)
    return Citation(
        id=1,
        file_path="/d/passwd.txt",
        file_name="passwd.txt",
        quote="q",
        snippet="q",
        chunk_index=0,
        chunk_id=1,
        location=where,
    )
