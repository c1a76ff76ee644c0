"""The indexer's ingest thread yields the CPU (``[ingest] ingest_nice``): a thread's own nice value on Linux,
set through the real ``setpriority`` call, while the rest of the process keeps its priority."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from foldermind.workers.indexer.ingest.priority import lower_thread_priority

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice is Linux's")


def _in_a_thread(nice: int, before: int | None = None) -> tuple[str, int]:
    """``lower_thread_priority(nice)`` in a new thread (first set to ``before``): what it said, and the
    thread's nice afterwards as the kernel reports it."""
    out: list[tuple[str, int]] = []

    def run() -> None:
        tid = threading.get_native_id()
        if before is not None:
            os.setpriority(os.PRIO_PROCESS, tid, before)
        said = lower_thread_priority(nice)
        out.append((said, os.getpriority(os.PRIO_PROCESS, tid)))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out[0]


def test_a_lowered_thread_runs_at_that_nice_while_the_main_thread_keeps_its_own() -> None:
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    said, nice = _in_a_thread(max(10, main))
    assert (said, nice) == (str(max(10, main)), max(10, main))
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main


def test_a_thread_already_nicer_than_asked_is_not_raised() -> None:
    assert _in_a_thread(10, before=15) == ("15", 15)


def test_zero_leaves_the_thread_at_the_process_priority() -> None:
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert _in_a_thread(0) == ("off", main)
