"""What foldermind's Python does per message, timed in this process (no sockets between peers).

These are the pieces of a brokered round trip that the bare echo does not have: building and
msgpack-encoding envelopes, parsing them again at every hop, and multipart messages (route, header,
body, buffers) instead of one frame. Everything goes through foldermind's own ``frames`` functions,
so the table follows the code as it changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from foldermind.protocol import frames
from foldermind.protocol.messages import EchoReply, EchoRequest, Envelope
from tests.bench.payloads import Payload


@dataclass(frozen=True, slots=True)
class Cost:
    what: str
    us: float
    per_round_trip: int
    """How many times a brokered round trip does this (across client, broker and worker); 0 for a
    reference that foldermind does not do."""


def _time_us(fn: Callable[[], Any], n: int = 20_000, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best / 1000


def measure(p: Payload) -> list[Cost]:
    ident = zmq.Frame(b"bench.12345.0123abcd")

    def client_encode() -> list[frames.Buffer]:
        env = Envelope(kind=EchoRequest.KIND, src="bench", to="testworker", deadline=time.time() + 30)
        return frames.encode(env, EchoRequest(data=p.data), [p.raw] if p.raw else [])

    request = [zmq.Frame(bytes(f)) for f in client_encode()]
    routed = [ident, *request]

    def broker_parse() -> frames.Packet:
        return frames.parse(routed, 1)

    def worker_job() -> list[frames.Buffer]:
        packet = frames.parse(request, 0)
        body = packet.body()
        assert isinstance(body, EchoRequest)
        env = packet.env.reply("testworker")
        env.kind = EchoReply.KIND
        return frames.encode(env, EchoReply(data=body.data), packet.buffers)

    reply = [zmq.Frame(bytes(f)) for f in worker_job()]

    def client_decode() -> Any:
        return frames.parse(reply, 0).body()

    ctx = zmq.Context.instance()
    a: zmq.Socket[Any] = ctx.socket(zmq.PAIR)
    b: zmq.Socket[Any] = ctx.socket(zmq.PAIR)
    a.bind("inproc://bench-costs")
    b.connect("inproc://bench-costs")
    wire = [bytes(f) for f in routed]
    single = wire[-1]  # the payload: the body, or the raw buffer frame when there is one

    def zmq_multi() -> Any:
        a.send_multipart(wire, copy=False)
        return b.recv_multipart(copy=False)

    packet = frames.parse(request, 0)
    route = [bytes(ident)]

    def fm_hop() -> Any:
        frames.forward(a, route, packet)  # what the broker does with every message
        return frames.recv_frames(b)

    def zmq_single() -> Any:
        a.send(single, copy=False)
        return b.recv(copy=False)

    try:
        n_frames = len(wire)
        return [
            Cost("client: build Envelope + msgpack-encode the request", _time_us(client_encode), 1),
            Cost("broker: parse a routed message (msgpack header -> Envelope)", _time_us(broker_parse), 2),
            Cost("worker: parse + decode body + build and encode the reply", _time_us(worker_job), 1),
            Cost("client: parse the reply + decode its body", _time_us(client_decode), 1),
            Cost(
                f"socket I/O of one hop as foldermind does it: frames.forward + frames.recv_frames "
                f"({n_frames} frames, inproc)",
                _time_us(fm_hop),
                4,
            ),
            Cost(f"the same {n_frames} frames with pyzmq send_multipart/recv_multipart", _time_us(zmq_multi), 0),
            Cost("one payload frame, send + recv (inproc), as the bare echo does", _time_us(zmq_single), 0),
        ]
    finally:
        a.close(0)
        b.close(0)
