"""The measurement loops, shared by every chain (bare echo, bare relay, the kernel)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from tests.bench.payloads import Payload

WINDOW = 64


class Transport(Protocol):
    def roundtrip(self, p: Payload) -> Any:
        """Send one request and return its reply."""

    def check(self, p: Payload, reply: Any) -> None:
        """Raise if ``reply`` is not the echo of ``p`` (called outside the timed section)."""

    def send(self, p: Payload) -> None:
        """Send one request without waiting."""

    def receive(self, p: Payload) -> None:
        """Receive one reply to an earlier ``send`` and check it."""


def sequential(t: Transport, p: Payload, seconds: float, max_n: int = 50_000) -> list[int]:
    """Round trips one after another for ``seconds``: the latency of each, in ns."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    stop = clock() + int(seconds * 1e9)
    while len(samples) < max_n:
        t0 = clock()
        reply = t.roundtrip(p)
        t1 = clock()
        samples.append(t1 - t0)
        t.check(p, reply)
        if t1 > stop:
            break
    return samples


def pipelined(t: Transport, p: Payload, seconds: float, window: int = WINDOW) -> tuple[int, int]:
    """Keep ``window`` requests outstanding for ``seconds``, then drain: (round trips, ns)."""
    clock = time.perf_counter_ns
    t0 = clock()
    deadline = t0 + int(seconds * 1e9)
    for _ in range(window):
        t.send(p)
    outstanding, done = window, 0
    while outstanding:
        t.receive(p)
        outstanding -= 1
        done += 1
        if clock() < deadline:
            t.send(p)
            outstanding += 1
    return done, clock() - t0


def warm_up(t: Transport, p: Payload, round_trips: int = 300, burst_s: float = 0.2) -> None:
    for _ in range(round_trips):
        t.check(p, t.roundtrip(p))
    pipelined(t, p, burst_s)
