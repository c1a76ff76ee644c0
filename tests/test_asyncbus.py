"""The async bus (workers/framework/asyncbus.py) from an asyncio loop: a call waits on the loop itself, on a real
ZeroMQ socket, with no worker thread; a cancelled call cancels its job on the bus; a silent bus is
SERVICE_UNAVAILABLE. A ROUTER socket in this process stands in for the broker (a kernel would add a minute of
start-up and nothing this file checks)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
import zmq

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import JobCancel, PingReply, PingRequest
from foldermind.workers.framework.asyncbus import Bus


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[str, zmq.Socket[Any]]]:
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/bus.sock"
    router.bind(endpoint)
    yield endpoint, router
    router.close(0)


def answer(router: zmq.Socket[Any], count: int, hold: threading.Event | None = None) -> list[str]:
    """Answer ``count`` requests with a partial and then a final reply (after ``hold`` is set, if given); return
    the kinds of every message received, cancels included, until 2 s of silence."""
    seen: list[str] = []
    answered = 0
    while router.poll(2000):
        packet = frames.recv(router, 1)
        seen.append(packet.env.kind)
        if packet.env.kind == JobCancel.KIND or answered >= count:
            continue
        if hold is not None:
            hold.wait(10)
        frames.send(
            router, packet.env.reply("worker", status="partial"), PingReply("worker", 1, 0.0), route=packet.route
        )
        frames.send(router, packet.env.reply("worker"), PingReply("worker", 1, 0.0), route=packet.route)
        answered += 1
    return seen


def test_a_call_from_the_loop_is_answered_without_a_worker_thread(broker: Any, monkeypatch: Any) -> None:
    endpoint, router = broker

    async def no_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the call went to a worker thread")

    monkeypatch.setattr(anyio.to_thread, "run_sync", no_thread)
    got: list[str] = []
    server = threading.Thread(target=lambda: got.extend(answer(router, 3)))
    server.start()
    bus = Bus(endpoint, "test.loop", 5.0)
    try:

        async def three() -> list[Any]:
            replies: list[Any] = []
            async with anyio.create_task_group() as tg:  # three in flight at once: three sockets

                async def one() -> None:
                    replies.append(await bus.call("worker", PingRequest(), PingReply))

                for _ in range(3):
                    tg.start_soon(one)
            return replies

        replies = anyio.run(three)
        assert [type(r) for r in replies] == [PingReply] * 3
        assert len(bus._sockets) == 3
    finally:
        server.join()
        bus.close()
    assert got == [PingRequest.KIND] * 3


def test_a_cancelled_call_cancels_its_job_on_the_bus(broker: Any) -> None:
    endpoint, router = broker
    hold = threading.Event()
    got: list[str] = []
    server = threading.Thread(target=lambda: got.extend(answer(router, 1, hold)))
    server.start()
    bus = Bus(endpoint, "test.cancel", 5.0)
    try:

        async def cancelled() -> None:
            with anyio.move_on_after(0.3):
                await bus.call("worker", PingRequest(), PingReply)
            hold.set()

        anyio.run(cancelled)
        assert bus._sockets == []
    finally:
        hold.set()
        server.join()
        bus.close()
    assert got == [PingRequest.KIND, JobCancel.KIND]


def test_a_silent_bus_is_service_unavailable_naming_the_worker(broker: Any) -> None:
    endpoint, _ = broker  # bound, never answers
    bus = Bus(endpoint, "test.silent", 0.2)
    try:
        with pytest.raises(JobError) as raised:
            anyio.run(bus.call, "indexer", PingRequest(), PingReply)
    finally:
        bus.close()
    assert raised.value.code == ErrorCode.SERVICE_UNAVAILABLE
    assert raised.value.message == "the indexer worker is unavailable (KernelUnavailable)"
