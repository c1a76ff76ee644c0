"""The wire: the only module that builds or parses ZeroMQ frames.

A message is a multipart ZeroMQ message::

    [route...] MAGIC  HEADER  BODY  [BUFFER ...]

- ``route``: zero or more routing frames. A ROUTER socket prepends the peer identity on receipt and
  strips it on send; the PUB socket sends the event kind as a topic frame.
- ``MAGIC``: the two bytes ``FM``, so stray or garbage frames are recognised at once.
- ``HEADER``: msgpack map, the :class:`~foldermind.protocol.messages.Envelope`.
- ``BODY``: msgpack map, the fields of the kind's message class.
- ``BUFFER``: raw bytes, e.g. a float32 matrix in C order; the body describes its shape and dtype.
  Vectors travel this way instead of as msgpack lists (no per-number encoding, zero copies).

The broker reads only the header and forwards the other frames untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import zmq

from foldermind.protocol.errors import OversizedMessage, ProtocolError
from foldermind.protocol.messages import Envelope, Message, decode_body

MAGIC = b"FM"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

Buffer = bytes | memoryview | zmq.Frame


def _packb(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _unpackb(data: Any) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"undecodable msgpack frame: {exc.__class__.__name__}") from exc


def _bytes_of(frame: Any) -> Any:
    return frame.buffer if isinstance(frame, zmq.Frame) else frame


@dataclass(slots=True)
class Packet:
    """One received message, header decoded, body still raw (the broker never needs it)."""

    route: list[Any]
    env: Envelope
    body_frame: Any
    buffers: list[Any]

    def body(self) -> Message:
        """Decode the body as the typed class of ``env.kind``."""
        return decode_body(self.env, _unpackb(_bytes_of(self.body_frame)))

    def payload(self) -> list[Any]:
        """The frames after the route, to forward the message unchanged."""
        return [MAGIC, self.header_frame, self.body_frame, *self.buffers]

    header_frame: Any = None


def encode(env: Envelope, body: Message | dict[str, Any], buffers: Sequence[Buffer] = ()) -> list[Buffer]:
    raw_body = body.to_body() if isinstance(body, Message) else body
    return [MAGIC, _packb(env.to_wire()), _packb(raw_body), *buffers]


def send(
    sock: zmq.Socket[Any],
    env: Envelope,
    body: Message | dict[str, Any],
    buffers: Sequence[Buffer] = (),
    route: Sequence[bytes] = (),
) -> None:
    """Send one message; ``route`` is the peer identity when ``sock`` is a ROUTER."""
    sock.send_multipart([*route, *encode(env, body, buffers)], copy=len(buffers) == 0)


def forward(sock: zmq.Socket[Any], route: Sequence[bytes], packet: Packet) -> None:
    """Send a received message on, unchanged, to ``route``."""
    sock.send_multipart([*route, *packet.payload()], copy=False)


def parse(frames: Sequence[Any], route_frames: int, max_bytes: int = DEFAULT_MAX_BYTES) -> Packet:
    """Parse received frames; raises ProtocolError for anything that is not a valid message.

    ``route_frames`` is how many leading routing frames to expect (1 on a ROUTER, 0 on a DEALER).
    """
    if len(frames) < route_frames + 3:
        raise ProtocolError(f"truncated message: {len(frames)} frame(s)")
    route = list(frames[:route_frames])
    magic, header, body, *buffers = frames[route_frames:]
    if bytes(_bytes_of(magic)) != MAGIC:
        raise ProtocolError("bad magic frame (not a foldermind message)")
    env = Envelope.from_wire(_unpackb(_bytes_of(header)))
    total = sum(len(_bytes_of(f)) for f in frames)
    if total > max_bytes:
        raise OversizedMessage(f"oversized message: {total} bytes > {max_bytes}", env)
    return Packet(route=route, env=env, body_frame=body, buffers=list(buffers), header_frame=header)


def recv(sock: zmq.Socket[Any], route_frames: int = 0, max_bytes: int = DEFAULT_MAX_BYTES) -> Packet:
    """Receive and parse one message (blocking unless the socket has a timeout)."""
    frames = sock.recv_multipart(copy=False)
    return parse(frames, route_frames, max_bytes)


def recv_frames(sock: zmq.Socket[Any], flags: int = 0) -> list[Any]:
    """Receive one multipart message as frames, without parsing it (pair with :func:`parse`)."""
    return list(sock.recv_multipart(flags=flags, copy=False))


def identity_of(frame: Any) -> bytes:
    """A routing frame as bytes (for logging and for keys)."""
    return bytes(_bytes_of(frame))


def buffer_bytes(buf: Any) -> memoryview:
    """A received buffer frame as a zero-copy memoryview (e.g. for ``numpy.frombuffer``)."""
    view = _bytes_of(buf)
    return view if isinstance(view, memoryview) else memoryview(view)


def send_raw_for_tests(sock: zmq.Socket[Any], frames: Sequence[bytes]) -> None:
    """Send arbitrary frames (fault injection: garbage, truncated, wrong version)."""
    sock.send_multipart(list(frames))


def raw_header(**fields: Any) -> bytes:
    """A header frame with arbitrary fields (fault injection: e.g. an unknown protocol version)."""
    return _packb(fields)
