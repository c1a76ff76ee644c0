"""The llm worker's model is in memory only while it is used: loaded by the first request that needs it,
freed after ``[llm] idle_unload_s`` without one, loaded again by the next; never freed under a request.

Real processes and the real bundled model (SmolLM2-135M on ctransformers): a kernel whose llm unloads
after a few seconds, asked over the bus, and the residency object itself around a real backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    ChatReply,
    ChatRequest,
    DescribeReply,
    DescribeRequest,
    LikelyReply,
    LikelyRequest,
)
from foldermind.workers.llm.backends import Backend, load_backend
from foldermind.workers.llm.model_file import bundled_model
from foldermind.workers.llm.residency import NotReady, Residency
from tests.bench.product_answers import Asker
from tests.config import merge
from tests.helpers import (
    MODEL_CACHE,
    RunningKernel,
    only_workers,
    remove_tree,
    require_bundled_model,
    short_tmpdir,
    wait_for,
)

require_bundled_model()

IDLE_S = 3.0
PASSAGE = {"file_name": "budget.txt", "text": "The budget for the obsidianwave project is forty thousand dollars."}


@pytest.fixture(scope="module")
def kernel() -> Iterator[RunningKernel]:
    root = short_tmpdir()
    # No summaries: nothing but this test's own requests may touch the model. The llm alone: nothing is
    # indexed or searched here, and the rest of the default map cost ~9 CPU-s to start (tests/README.md).
    k = RunningKernel(root / "home", merge(only_workers("llm"), {"llm": {"idle_unload_s": IDLE_S, "analysis": False}}))
    try:
        yield k.start()
    finally:
        k.stop()
        remove_tree(root)


def details(k: RunningKernel) -> dict[str, object]:
    return k.client().request("llm", DescribeRequest(), DescribeReply, timeout=10).body.details


def rss_mib(k: RunningKernel) -> float:
    return float(psutil.Process(k.worker("llm")["pid"]).memory_info().rss) / 2**20


def ask(k: RunningKernel) -> ChatReply:
    question = ChatRequest(question="What is the budget for the obsidianwave project?", passages=[PASSAGE])
    return k.client().request("llm", question, ChatReply, timeout=60).body


def test_the_model_loads_on_the_first_chat_is_freed_after_the_idle_time_and_loads_again(
    kernel: RunningKernel,
) -> None:
    before = details(kernel)
    assert (before["state"], before["loads"], before["load"]) == ("unloaded", 0, "on_use")
    # The note rides on the worker's heartbeats: right after a start (the llm is among the workers spawned
    # last) the first one may not have come yet.
    note = wait_for(lambda: (n := kernel.worker("llm")["note"]) and n, 10, 0.1, "the llm's first status note")
    assert "loads on first use" in note
    idle_rss = rss_mib(kernel)

    first = ask(kernel)
    assert first.completion_tokens > 0 and first.answer.strip(), first
    loaded = details(kernel)
    assert (loaded["state"], loaded["loads"]) == ("ready", 1)
    loaded_rss = rss_mib(kernel)
    assert loaded_rss > idle_rss + 100, (idle_rss, loaded_rss)  # the model really is in memory

    wait_for(lambda: details(kernel)["state"] == "unloaded", IDLE_S * 10, 0.2, "the idle unload")
    freed = details(kernel)
    assert freed["unloads"] == 1 and "freed after idle" in wait_for(
        lambda: "freed" in (n := kernel.worker("llm")["note"]) and n, 10, 0.1, "the status note"
    )
    freed_rss = rss_mib(kernel)
    assert freed_rss < loaded_rss - 100, (loaded_rss, freed_rss)  # and really given back

    again = ask(kernel)  # loads again, within the same request deadline
    assert again.completion_tokens > 0 and again.answer.strip(), again
    assert details(kernel)["loads"] == 2


def test_a_reading_of_an_unloaded_model_starts_its_load_behind_and_the_benches_warm_up_waits_for_it(
    kernel: RunningKernel,
) -> None:
    wait_for(lambda: details(kernel)["state"] == "unloaded", IDLE_S * 10, 0.2, "the model unloaded")
    reading = LikelyRequest("What is the budget?", PASSAGE["text"])
    with pytest.raises(JobError) as err:  # not waited for: told at once, the load goes on
        kernel.client().request("llm", reading, LikelyReply, timeout=60)
    assert err.value.code is ErrorCode.MODEL_NOT_READY and err.value.retryable, err.value
    with Asker(kernel.home.bus_endpoint) as asker:
        asker.warm_up(120)  # asks again until the model has read
    assert details(kernel)["state"] == "ready"


def real_load(path: Path) -> Backend:
    return load_backend("ctransformers", path, MODEL_CACHE, 1024, 1, 64, 0)


def test_a_model_held_by_a_request_is_never_freed_and_is_freed_once_idle_after_it() -> None:
    states: list[str] = []
    model = bundled_model()
    residency = Residency(lambda: real_load(model), idle_unload_s=0.2, on_change=lambda: states.append(residency.state))
    held, release = threading.Event(), threading.Event()

    def request() -> None:
        with residency.use():
            held.set()
            release.wait(30)

    worker = threading.Thread(target=request)
    worker.start()
    try:
        assert held.wait(60), "the request never got the model"
        time.sleep(0.5)  # well past idle_unload_s since the load: only the request keeps it
        assert not residency.unload_if_idle() and residency.state == "ready"
    finally:
        release.set()
        worker.join(30)
    assert not residency.unload_if_idle()  # just used: the idle time starts again at the request's end
    wait_for(residency.unload_if_idle, 5, 0.05, "the unload once idle")
    assert residency.backend is None and (residency.loads, residency.unloads) == (1, 1)
    assert states == ["loading", "ready", "unloaded"]


def test_a_model_that_cannot_load_stays_failed_with_its_reason_and_is_not_retried(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    attempts: list[int] = []

    def load() -> Backend:
        attempts.append(1)
        return real_load(broken)

    residency = Residency(load, idle_unload_s=0, on_change=lambda: None)
    for _ in range(2):
        with pytest.raises(NotReady) as err, residency.use():
            pass
        assert err.value.state == "failed" and "broken.gguf" in err.value.reason
    assert len(attempts) == 1


def test_an_illegal_state_change_is_a_bug_said_as_one() -> None:
    residency = Residency(lambda: real_load(bundled_model()), idle_unload_s=0, on_change=lambda: None)
    with pytest.raises(AssertionError, match="unloaded -> ready"):
        residency._move("ready")


def test_a_request_that_must_not_wait_starts_the_load_behind_and_is_told_not_ready_and_the_load_goes_on() -> None:
    """A reading (``llm.likely``) an answer can do without: it never pays a cold model's load."""
    states: list[str] = []
    model = bundled_model()
    residency = Residency(lambda: real_load(model), idle_unload_s=0, on_change=lambda: states.append(residency.state))
    with pytest.raises(NotReady) as err, residency.use(wait=False):
        pass
    assert err.value.state == "loading"
    wait_for(lambda: residency.state == "ready", 120, 0.05, "the load behind")
    with residency.use(wait=False) as backend:  # loaded: served as any request
        assert backend is residency.backend
    assert states == ["loading", "ready"] and residency.loads == 1


def test_a_request_that_must_not_wait_is_told_not_ready_while_another_request_loads_the_model() -> None:
    """A summary's (or a chat's) request loads the model in itself, holding the residency's lock for the whole load
    (13.8 s for the first conversion on a fresh install, the s53 walk): a reading then waited that long, and the
    first answer after adding a folder took 18.6 s. The load here waits for the test's word (a slow load on purpose)."""
    model = bundled_model()
    go = threading.Event()

    def slow_load() -> Backend:
        go.wait(120)
        return real_load(model)

    residency = Residency(slow_load, idle_unload_s=0, on_change=lambda: None)
    loader = threading.Thread(target=lambda: residency.use().__enter__(), daemon=True)
    loader.start()
    wait_for(lambda: residency.state == "loading", 30, 0.01, "the summary's load")
    told: list[str] = []

    def reading() -> None:
        try:
            with residency.use(wait=False):
                told.append("served")
        except NotReady as exc:
            told.append(exc.state)

    reader = threading.Thread(target=reading, daemon=True)
    reader.start()
    try:
        wait_for(lambda: bool(told), 30, 0.01, "the reading told, with the load still waiting for its word")
        assert told == ["loading"] and residency.state == "loading"
    finally:
        go.set()
        loader.join(120)
        reader.join(120)
    assert residency.state == "ready" and residency.loads == 1
