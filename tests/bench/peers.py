"""Pure-pyzmq peers for the floor measurements, each run as its own process.

``python -m tests.bench.peers echo ENDPOINT``: a ROUTER that sends every message straight back.
``python -m tests.bench.peers relay ENDPOINT``: a ROUTER that forwards client messages to the one
worker that said READY and the worker's answers back to the client, reading no frame but the
identity (the least a broker can do).
``python -m tests.bench.peers worker ENDPOINT``: the relay's echo worker, a DEALER.

Each prints ``ready`` on stdout when it can be used.
"""

from __future__ import annotations

import sys
from typing import Any

import zmq


def _ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def echo(endpoint: str) -> None:
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(endpoint)
    _ready()
    while True:
        sock.send_multipart(sock.recv_multipart(copy=False), copy=False)


def relay(endpoint: str) -> None:
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(endpoint)
    ident, hello = sock.recv_multipart()
    if hello != b"READY":
        raise SystemExit(f"relay: expected READY, got {hello!r}")
    _ready()
    while True:
        msg = sock.recv_multipart(copy=False)
        if msg[0].bytes == ident:
            sock.send_multipart(msg[1:], copy=False)  # [client, payload...]
        else:
            sock.send_multipart([ident, *msg], copy=False)


def worker(endpoint: str) -> None:
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(endpoint)
    sock.send(b"READY")
    _ready()
    while True:
        sock.send_multipart(sock.recv_multipart(copy=False), copy=False)


def main() -> None:
    role, endpoint = sys.argv[1], sys.argv[2]
    {"echo": echo, "relay": relay, "worker": worker}[role](endpoint)


if __name__ == "__main__":
    main()
