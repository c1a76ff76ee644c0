"""One mapping of a bus fault to a person's words (workers/framework/unanswered.py), shared by the two notes that
say why a worker gave a step of a person's call no answer: a search's when the embedder gave its query no vector
(workers/indexer/search/encoder.py) and an answer's when the model did not read it (workers/answers/likely.py).
Pure functions over every code of the catalogue; the real paths are tested end to end in tests/test_search.py (the
embedder frozen) and tests/test_answer_likely.py (the llm worker frozen, slow, cold)."""

from __future__ import annotations

import pytest

from foldermind.protocol.errors import BusError, ErrorCode, Fault, JobError, KernelUnavailable, ProtocolError
from foldermind.workers.answers import likely
from foldermind.workers.framework import unanswered


def embedder(exc: BusError) -> str:
    return unanswered.why(exc, "the embedder", "encoding it", "3 s")


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_every_bus_failure_is_said_without_the_bus_s_codes_by_both_workers(code: ErrorCode) -> None:
    exc = JobError(code, "the step failed")
    for note in (embedder(exc), likely.skipped(exc, 20)):
        assert "retry" not in note and not any(c.value in note or c.mcp in note for c in ErrorCode), (code, note)


def test_the_embedder_and_the_model_say_the_same_fault_in_the_same_words() -> None:
    cases = {
        Fault.TIMEOUT: JobError(ErrorCode.DEADLINE_EXCEEDED, "embed.request missed its deadline"),
        Fault.UNAVAILABLE: JobError(ErrorCode.SERVICE_UNAVAILABLE, "the worker is unavailable; retry shortly"),
        Fault.LOST: JobError(ErrorCode.WORKER_LOST, "the worker died"),
    }
    for fault, exc in cases.items():
        words = unanswered.WORDS[fault]
        assert embedder(exc) == words.format(who="the embedder", doing="encoding it", within="3 s")
        said = words.format(who="the llm worker", doing="reading it", within="[llm] likely_wait_s, 20 s")
        assert (
            likely.skipped(exc, 20) == f"the model did not read the question ({said}); the evidence floor decided alone"
        )
    assert embedder(cases[Fault.TIMEOUT]) == "the embedder, busy or starting, did not answer within 3 s"


def test_a_bus_that_failed_outside_a_job_is_a_worker_not_running_and_a_model_loading_says_so() -> None:
    for exc in (KernelUnavailable("no kernel"), ProtocolError("garbled")):
        assert embedder(exc) == "the embedder is not running"
    loading = JobError(ErrorCode.MODEL_NOT_READY, "the local model is still loading; retry shortly", retryable=True)
    assert unanswered.why(loading, "the llm worker", "reading it", "20 s") == "its model is still loading"
    broken = JobError(ErrorCode.MODEL_NOT_READY, "the local model could not be loaded: not a GGUF file")
    assert "not a GGUF file" in likely.skipped(broken, 20)
    # any other failure: the worker's own message (a person's words already), not its code
    assert embedder(JobError(ErrorCode.UNREADABLE, "the model file is damaged")) == (
        "the embedder failed: the model file is damaged"
    )
