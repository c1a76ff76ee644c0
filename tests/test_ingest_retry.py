"""What a failed parse does next (workers/indexer/ingest/retry.py), decided from the error and the attempt alone.

Every error code of the one error table is put through the decision on both attempts, sent to the pool and to
a named parser, retryable and not: each combination must land on exactly one outcome, a parse that died
with its parser is tried once on a fresh one and then quarantined, and nothing the pool may still take is
quarantined. The real ingest thread's handling of each outcome is tested with real parsers in
tests/test_ingest.py and tests/test_parse_progress.py.
"""

from __future__ import annotations

import itertools

import pytest

from foldermind.protocol.errors import ErrorCode, ErrorInfo, Fault
from foldermind.workers.indexer.ingest.retry import Next, decide


def error(code: ErrorCode, retryable: bool | None = None, message: str = "boom") -> ErrorInfo:
    return ErrorInfo(code, message, code.retryable if retryable is None else retryable)


def test_a_parse_that_lost_its_parser_is_tried_once_on_a_fresh_one_then_quarantined_with_the_reason() -> None:
    first = decide(error(ErrorCode.WORKER_LOST, message="parser exited"), attempt=1, named=False, deadline_s=30)
    second = decide(error(ErrorCode.WORKER_LOST, message="parser exited"), attempt=2, named=False, deadline_s=30)
    assert first.next is Next.FRESH and not first.final
    assert second.next is Next.QUARANTINE and second.final
    assert second.reason == "quarantined: the parser failed twice on this file (parser exited)"


def test_a_parse_that_stalled_twice_is_quarantined_naming_its_deadline() -> None:
    stalled = error(ErrorCode.DEADLINE_EXCEEDED, retryable=False)
    assert decide(stalled, attempt=1, named=False, deadline_s=42.0).next is Next.FRESH
    second = decide(stalled, attempt=2, named=False, deadline_s=42.0)
    assert second.next is Next.QUARANTINE
    assert "no progress" in second.reason and "42 s" in second.reason


def test_a_deadline_that_passed_in_the_queue_is_sent_again_without_counting_an_attempt() -> None:
    queued = error(ErrorCode.DEADLINE_EXCEEDED, retryable=True)
    for attempt in (1, 2):
        assert decide(queued, attempt, named=False, deadline_s=30).next is Next.AGAIN


def test_a_parser_that_wants_the_bytes_gets_them_and_a_named_parser_that_left_hands_back_to_the_pool() -> None:
    assert decide(error(ErrorCode.FILE_CONTENT_NEEDED), 1, named=False, deadline_s=30).next is Next.TO_SOURCE
    assert decide(error(ErrorCode.SERVICE_UNAVAILABLE), 1, named=True, deadline_s=30).next is Next.AGAIN
    # From the pool, no parser at all: the file waits instead of being sent in a loop.
    assert decide(error(ErrorCode.SERVICE_UNAVAILABLE), 1, named=False, deadline_s=30).next is Next.WAIT


def test_a_file_that_cannot_be_parsed_is_quarantined_with_the_parsers_own_message() -> None:
    failed = decide(error(ErrorCode.PARSE_FAILED, message="not a PDF: bad header"), 1, named=False, deadline_s=30)
    assert failed.next is Next.QUARANTINE and failed.reason == "not a PDF: bad header"


@pytest.mark.parametrize(
    ("code", "retryable", "attempt", "named"),
    list(itertools.product(list(ErrorCode), (False, True), (1, 2), (False, True))),
)
def test_every_error_code_lands_on_one_outcome_and_none_the_pool_may_still_take_is_quarantined(
    code: ErrorCode, retryable: bool, attempt: int, named: bool
) -> None:
    decision = decide(error(code, retryable), attempt, named, deadline_s=30)
    assert isinstance(decision.next, Next)
    assert (decision.next is Next.QUARANTINE) == bool(decision.reason)
    if decision.next is Next.QUARANTINE:
        # A retryable error or one no worker can take now never fails a file, except twice lost or stalled.
        assert code.fault in (Fault.LOST, Fault.TIMEOUT) or not (retryable or code.fault is Fault.UNAVAILABLE)
    if code.fault in (Fault.LOST, Fault.TIMEOUT) and attempt == 2 and decision.next is not Next.AGAIN:
        assert decision.next is Next.QUARANTINE
    if decision.next is Next.FRESH:
        assert attempt == 1
