"""The wire format, over real ZeroMQ sockets."""

from __future__ import annotations

import dataclasses
import re
import uuid
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from foldermind.protocol import frames, reference
from foldermind.protocol.errors import ProtocolError
from foldermind.protocol.messages import (
    PROTOCOL_VERSION,
    REGISTRY,
    EchoRequest,
    Envelope,
    PingRequest,
    WorkerReady,
    reply_kind,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[Any], zmq.Socket[Any]]]:
    ctx = zmq.Context.instance()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    address = f"inproc://proto-test-{uuid.uuid4().hex}"  # a closed inproc address is not free at once
    router.bind(address)
    dealer.connect(address)
    yield router, dealer
    router.close(0)
    dealer.close(0)


def test_every_declared_kind_is_documented() -> None:
    import tests.faultworker  # noqa: F401  (its test-only kinds are documented too)

    documented = set(re.findall(r"^### `([a-z_.]+)`", DOCS.read_text(encoding="utf-8"), flags=re.M))
    missing = sorted(set(REGISTRY) - documented)
    assert not missing, f"kinds missing from docs/protocol.md: {missing}"
    assert not documented - set(REGISTRY), f"documented kinds that do not exist: {documented - set(REGISTRY)}"


def test_the_generated_parts_of_the_protocol_doc_are_current() -> None:
    import tests.faultworker  # noqa: F401  (its test-only kinds are documented too)

    text = DOCS.read_text(encoding="utf-8")
    assert reference.render(text) == text, "stale: run make docs"
    parts = set(reference.generated(text))
    assert {"errors", "services"} <= parts
    with_fields = {kind for kind, cls in REGISTRY.items() if dataclasses.fields(cls)}
    assert not with_fields - {p.removeprefix("fields ") for p in parts}, "a kind's field table is not generated"


def test_every_field_of_every_kind_says_what_it_means() -> None:
    import tests.faultworker  # noqa: F401

    undocumented = [
        f"{kind}.{spec.name}"
        for kind, cls in REGISTRY.items()
        for spec in dataclasses.fields(cls)
        if not reference.field_docs(cls).get(spec.name)
    ]
    assert not undocumented, f"fields without a docstring under them: {undocumented}"


def test_a_stale_generated_part_is_found_and_rewritten(tmp_path: Path) -> None:
    stale = tmp_path / "protocol.md"
    stale.write_text(
        "# P\n\n<!-- generated: errors -->\n| an old table |\n<!-- end generated -->\nhand-written\n"
        "<!-- generated: fields ping.reply -->\n<!-- end generated -->\n"
    )
    assert reference.main([str(stale), "--check"]) == 1
    assert reference.main([str(stale)]) == 0 and reference.main([str(stale), "--check"]) == 0
    fresh = stale.read_text()
    assert "| an old table |" not in fresh and "| `worker_lost` | broker, llm " in fresh
    assert "| `uptime_s` | float | required | Seconds since the process started. |" in fresh
    assert "<!-- end generated -->\nhand-written\n<!-- generated: fields ping.reply -->" in fresh


def test_every_request_kind_has_a_reply_kind() -> None:
    for kind in REGISTRY:
        if kind.endswith(".request"):
            assert reply_kind(kind) in REGISTRY, kind
        assert REGISTRY[kind].__doc__, f"{kind} has no docstring (its spec)"


def test_envelope_and_buffers_round_trip(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    router, dealer = pair
    matrix = array("f", [float(i) / 7 for i in range(64 * 384)])
    env = Envelope(kind=EchoRequest.KIND, src="t", to="svc", deadline=123.5, attempt=2)
    frames.send(dealer, env, EchoRequest(data=b"\x00\xff"), [memoryview(matrix).cast("B")])
    packet = frames.recv(router, route_frames=1)
    assert packet.env == env
    body = packet.body()
    assert isinstance(body, EchoRequest) and body.data == b"\x00\xff"
    assert len(packet.buffers) == 1
    echoed = array("f")
    echoed.frombytes(bytes(frames.buffer_bytes(packet.buffers[0])))
    assert echoed == matrix


def test_unknown_fields_are_ignored(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    router, dealer = pair
    header = frames.raw_header(v=PROTOCOL_VERSION, kind="worker.ready", id="a1", future_field=[1, 2])
    body = msgpack.packb({"name": "x", "service": "y", "pid": 3, "shiny_new_field": True})
    dealer.send_multipart([header, body])
    packet = frames.recv(router, route_frames=1)
    ready = packet.body()
    assert isinstance(ready, WorkerReady) and (ready.name, ready.pid, ready.capacity) == ("x", 3, 1)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([b"junk"], "truncated"),
        ([frames.raw_header(v=1, kind="ping.request", id="1")], "truncated"),
        ([b"XX" + frames.raw_header(v=1, kind="ping.request", id="1")[2:], b"\x80"], "bad magic"),
        ([frames.MAGIC + b"\xc1", b"\x80"], "undecodable"),
        ([frames.raw_header(v=99, kind="ping.request", id="1"), b"\x80"], "version 99"),
        ([frames.raw_header(v=1, kind="ping.request"), b"\x80"], "lacks kind or id"),
        ([frames.MAGIC + msgpack.packb([1, 2]), b"\x80"], "not a map"),
        ([frames.raw_header(v=1, kind="k", id="1", status="weird"), b"\x80"], "unknown status"),
    ],
)
def test_bad_frames_are_rejected_with_a_reason(raw: list[bytes], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        frames.parse(raw, route_frames=0)


def test_oversized_messages_are_rejected() -> None:
    ok = frames.encode(Envelope(kind=PingRequest.KIND), PingRequest())
    frames.parse(ok, 0, max_bytes=1000)
    with pytest.raises(ProtocolError, match="oversized"):
        frames.parse([*ok, b"\x00" * 2000], 0, max_bytes=1000)


def test_bodies_are_checked_against_their_kind() -> None:
    raw = frames.encode(Envelope(kind=WorkerReady.KIND), {"name": "only-a-name"})
    with pytest.raises(ProtocolError, match="missing field"):
        frames.parse(raw, 0).body()
    raw = frames.encode(Envelope(kind="no.such.kind"), {})
    with pytest.raises(ProtocolError, match="unknown message kind"):
        frames.parse(raw, 0).body()


def test_only_the_frames_module_touches_zeromq_frames() -> None:
    root = Path(__file__).resolve().parent.parent
    offenders = []
    for folder in ("kernel", "workers", "protocol"):
        for path in (root / folder).rglob("*.py"):
            if path.name == "frames.py":
                continue
            text = path.read_text(encoding="utf-8")
            if re.search(r"send_multipart|recv_multipart|msgpack\.(packb|unpackb)", text):
                offenders.append(path.name)
    assert not offenders, f"frame building outside protocol/frames.py: {offenders}"


def test_bodies_with_wrongly_typed_fields_are_bad_requests_not_handler_crashes() -> None:
    """A well-framed body whose field has the wrong type is refused at decoding (the receiver answers
    bad_request), so a handler never sees a map where it expects a path, or True where it expects a pid."""
    from foldermind.protocol.messages import SearchRequest

    ok = SearchRequest.from_body({"query": "x", "top_k": 5, "folder_id": None, "with_text": True})
    assert (ok.top_k, ok.folder_id, ok.with_text) == (5, None, True)
    for body, field_name in (
        ({"query": {"a": 1}}, "query"),
        ({"query": "x", "top_k": "5"}, "top_k"),
        ({"query": "x", "top_k": True}, "top_k"),
        ({"query": "x", "folder_id": 3}, "folder_id"),
        ({"query": "x", "with_text": 1}, "with_text"),
    ):
        with pytest.raises(ProtocolError, match=f"field {field_name} is"):
            SearchRequest.from_body(body)
    with pytest.raises(ProtocolError, match="field name is dict, not str"):
        WorkerReady.from_body({"name": {"a": 1}, "service": "s", "pid": 1})
    # Every declared kind's hints resolve to checks (a hint the decoder cannot read would fail here).
    for cls in REGISTRY.values():
        assert isinstance(cls._resolve_shapes(), dict)
