"""The wire: the only module that builds or parses ZeroMQ frames.

A message is a multipart ZeroMQ message::

    [route...] HEADER  BODY  [BUFFER ...]

- ``route``: zero or more routing frames. A ROUTER socket prepends the peer identity on receipt and
  strips it on send; the PUB socket sends the event kind as a topic frame.
- ``HEADER``: the two bytes ``FM`` (so stray or garbage frames are recognised at once), then a
  msgpack map, the :class:`~foldermind.protocol.messages.Envelope`.
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


_MORE = int(zmq.SNDMORE)  # an int, not the enum: the flag is combined on every frame sent


def _send_parts(sock: zmq.Socket[Any], parts: Sequence[Any]) -> None:
    # One send per frame beats send_multipart, which re-checks and re-combines flags per part.
    last = len(parts) - 1
    for i, part in enumerate(parts):
        # Small bytes are cheaper to copy than to hand over; frames and views go zero-copy.
        sock.send(part, _MORE if i < last else 0, copy=isinstance(part, bytes) and len(part) < 65536)


@dataclass(slots=True)
class Packet:
    """One received message, header decoded, body still raw (the broker never needs it)."""

    route: list[Any]
    env: Envelope
    header_frame: Any
    body_frame: Any
    buffers: list[Any]

    def body(self) -> Message:
        """Decode the body as the typed class of ``env.kind``."""
        return decode_body(self.env, _unpackb(_bytes_of(self.body_frame)))

    def payload(self) -> list[Any]:
        """The frames after the route, to forward the message unchanged."""
        return [self.header_frame, self.body_frame, *self.buffers]


def encode(env: Envelope, body: Message | dict[str, Any], buffers: Sequence[Buffer] = ()) -> list[Buffer]:
    raw_body = body.to_body() if isinstance(body, Message) else body
    return [MAGIC + _packb(env.to_wire()), _packb(raw_body), *buffers]


def send(
    sock: zmq.Socket[Any],
    env: Envelope,
    body: Message | dict[str, Any],
    buffers: Sequence[Buffer] = (),
    route: Sequence[bytes] = (),
) -> None:
    """Send one message; ``route`` is the peer identity when ``sock`` is a ROUTER."""
    _send_parts(sock, [*route, *encode(env, body, buffers)])


def forward(sock: zmq.Socket[Any], route: Sequence[bytes], packet: Packet) -> None:
    """Send a received message on, unchanged, to ``route``."""
    _send_parts(sock, [*route, packet.header_frame, packet.body_frame, *packet.buffers])


def parse(frames: Sequence[Any], route_frames: int, max_bytes: int = DEFAULT_MAX_BYTES) -> Packet:
    """Parse received frames; raises ProtocolError for anything that is not a valid message.

    ``route_frames`` is how many leading routing frames to expect (1 on a ROUTER, 0 on a DEALER).
    """
    if len(frames) < route_frames + 2:
        raise ProtocolError(f"truncated message: {len(frames)} frame(s)")
    header = frames[route_frames]
    raw = header.bytes if isinstance(header, zmq.Frame) else bytes(header)  # small: a copy is cheap
    if raw[:2] != MAGIC:
        raise ProtocolError("bad magic (not a foldermind message)")
    env = Envelope.from_wire(_unpackb(memoryview(raw)[2:]))
    total = 0
    for frame in frames:
        total += len(frame)
    if total > max_bytes:
        raise OversizedMessage(f"oversized message: {total} bytes > {max_bytes}", env)
    return Packet(
        route=list(frames[:route_frames]),
        env=env,
        header_frame=raw,
        body_frame=frames[route_frames + 1],
        buffers=list(frames[route_frames + 2 :]),
    )


def recv(sock: zmq.Socket[Any], route_frames: int = 0, max_bytes: int = DEFAULT_MAX_BYTES) -> Packet:
    """Receive and parse one message (blocking unless the socket has a timeout)."""
    return parse(recv_frames(sock), route_frames, max_bytes)


_POLLIN = int(zmq.POLLIN)


def readable(sock: zmq.Socket[Any]) -> bool:
    """A whole message is waiting (cheaper than a non-blocking recv that raises zmq.Again)."""
    return bool(int(sock.getsockopt(zmq.EVENTS)) & _POLLIN)


def recv_frames(sock: zmq.Socket[Any], flags: int = 0) -> list[Any]:
    """Receive one multipart message as frames, without parsing it (pair with :func:`parse`)."""
    frame = sock.recv(flags, copy=False)
    parts = [frame]
    while frame.more:
        frame = sock.recv(0, copy=False)
        parts.append(frame)
    return parts


def identity_of(frame: Any) -> bytes:
    """A routing frame as bytes (for logging and for keys)."""
    return bytes(_bytes_of(frame))


def user_id(frame: Any) -> str | None:
    """The ZAP handler's name for the connection a received frame came over (a CURVE peer's User-Id), or None
    (an ipc peer, or a frame received as bytes)."""
    if not isinstance(frame, zmq.Frame):
        return None
    try:
        value = frame.get("User-Id")
    except zmq.ZMQError:
        return None
    return value if isinstance(value, str) else None


def buffer_bytes(buf: Any) -> memoryview:
    """A received buffer frame as a zero-copy memoryview (e.g. for ``numpy.frombuffer``)."""
    view = _bytes_of(buf)
    return view if isinstance(view, memoryview) else memoryview(view)


def send_raw_for_tests(sock: zmq.Socket[Any], frames: Sequence[bytes]) -> None:
    """Send arbitrary frames (fault injection: garbage, truncated, wrong version)."""
    sock.send_multipart(list(frames))


def raw_header(**fields: Any) -> bytes:
    """A header frame with arbitrary fields (fault injection: e.g. an unknown protocol version)."""
    return MAGIC + _packb(fields)
