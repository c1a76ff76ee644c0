"""Client sides: a plain pyzmq DEALER, and foldermind's BusClient through the kernel."""

from __future__ import annotations

import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

import zmq

from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import EchoReply, EchoRequest
from tests.bench.payloads import Payload

REPO = Path(__file__).resolve().parents[2]


class BenchError(RuntimeError):
    """A wrong echo, a lost reply, or a peer that would not start."""


def _frame_of(p: Payload) -> bytes:
    return p.raw or p.data


class ZmqClient:
    """A DEALER talking to a pure-pyzmq echo peer: one frame out, the same frame back."""

    def __init__(self, endpoint: str) -> None:
        self.sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, 10_000)
        self.sock.connect(endpoint)

    def close(self) -> None:
        self.sock.close(0)

    def roundtrip(self, p: Payload) -> Any:
        self.sock.send(_frame_of(p), copy=False)
        return self.sock.recv(copy=False)

    def check(self, p: Payload, reply: Any) -> None:
        if reply.buffer != _frame_of(p):
            raise BenchError(f"bare echo of {p.label} came back different")

    def send(self, p: Payload) -> None:
        self.sock.send(_frame_of(p), copy=False)

    def receive(self, p: Payload) -> None:
        reply = self.sock.recv(copy=False)
        if len(reply) != p.size:
            raise BenchError(f"bare echo of {p.label}: {len(reply)} bytes back, sent {p.size}")


class KernelClient:
    """foldermind's BusClient: client -> broker -> testworker -> broker -> client."""

    def __init__(self, endpoint: str, target: str = "testworker") -> None:
        self.client = BusClient(endpoint, name="bench")
        self.target = target
        self.pending: set[str] = set()

    def close(self) -> None:
        self.client.close()

    def _buffers(self, p: Payload) -> list[bytes]:
        return [p.raw] if p.raw else []

    def roundtrip(self, p: Payload) -> Any:
        return self.client.request(
            self.target, EchoRequest(data=p.data), EchoReply, buffers=self._buffers(p), timeout=10
        )

    def check(self, p: Payload, reply: Any) -> None:
        if reply.body.data != p.data:
            raise BenchError(f"brokered echo of {p.label}: data came back different")
        got = [frames.buffer_bytes(b) for b in reply.buffers]
        if len(got) != (1 if p.raw else 0) or (p.raw and got[0] != p.raw):
            raise BenchError(f"brokered echo of {p.label}: buffer frames came back different")

    def send(self, p: Payload) -> None:
        env = self.client.send(self.target, EchoRequest(data=p.data), self._buffers(p), timeout=30)
        self.pending.add(env.id)

    def receive(self, p: Payload) -> None:
        packet = self.client.receive(10)
        if packet.env.status != "ok":
            raise BenchError(f"brokered echo of {p.label} failed: {packet.env.error}")
        try:
            self.pending.remove(packet.env.cid)
        except KeyError:
            raise BenchError(f"reply {packet.env.cid!r} matches no request in flight") from None
        body = packet.body()
        if not isinstance(body, EchoReply) or len(body.data) != len(p.data):
            raise BenchError(f"brokered echo of {p.label}: wrong reply {packet.env.kind}")
        if sum(len(frames.buffer_bytes(b)) for b in packet.buffers) != len(p.raw):
            raise BenchError(f"brokered echo of {p.label}: buffer frames lost")


class Peer:
    """A ``tests.bench.peers`` process, stopped when the benchmark is done with it."""

    def __init__(self, role: str, endpoint: str) -> None:
        self.role = role
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.peers", role, endpoint],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )

    def wait_ready(self, timeout: float = 20.0) -> None:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout) or self.proc.stdout.readline().strip() != b"ready":
                raise BenchError(f"bench peer {self.role} did not start (status {self.proc.poll()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
