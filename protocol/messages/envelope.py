"""The envelope machinery: the header of every message, the body base class and its shape checks, and
the registry of kinds.

A message on the wire is an :class:`Envelope` (routing and bookkeeping) plus a body (the fields of
one :class:`Message` subclass) plus zero or more raw buffer frames for bulk numeric data. Decoding
ignores fields it does not know (a newer peer may add some) but a missing required field, or a field of
the wrong type, is a ``bad_request``. Requests end in ``.request`` and their answer has the same stem
with ``.reply``; ``event.*`` kinds are published, never answered.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, TypeVar, cast

from foldermind.protocol.errors import ErrorInfo, ProtocolError

PROTOCOL_VERSION = 1
"""Bumped on any change an older peer would misread; a peer rejects other versions."""

Status = Literal["ok", "error", "partial"]
_STATUSES = frozenset(("ok", "error", "partial"))

_ID_PREFIX = os.urandom(6).hex()
_ID_COUNTER = itertools.count(1)


def new_id() -> str:
    """A message id unique across processes: a random per-process prefix plus a counter."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):x}"


def reply_kind(kind: str) -> str:
    """The kind that answers ``kind`` (``ping.request`` -> ``ping.reply``)."""
    stem = kind.removesuffix(".request")
    return f"{stem}.reply"


@dataclass(slots=True)
class Envelope:
    """Routing and bookkeeping of one message, the header frame on the wire.

    - ``v``: protocol version; any other value is rejected.
    - ``kind``: the message kind (see the classes below).
    - ``id``: unique id of this message.
    - ``cid``: correlation id: on a reply, the ``id`` of the request it answers.
    - ``src``: the sending worker's name (``parser#2``), or the client's name (``cli``).
    - ``to``: a request's target, a service (``parser``) or one worker (``parser#2``) or ``kernel``.
    - ``ts``: send time, seconds since the epoch.
    - ``deadline``: absolute time (epoch seconds) after which the caller no longer waits; 0 = none.
    - ``attempt``: 1 for a first try, 2 for the first retry, and so on.
    - ``status``: ``ok``, ``error`` (then ``error`` is set) or ``partial`` (more replies follow).
    - ``error``: ``{code, message, retryable}`` on an error reply.
    """

    kind: str
    id: str = field(default_factory=new_id)
    cid: str = ""
    src: str = ""
    to: str = ""
    ts: float = field(default_factory=time.time)
    deadline: float = 0.0
    attempt: int = 1
    status: Status = "ok"
    error: ErrorInfo | None = None
    v: int = PROTOCOL_VERSION

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "v": self.v,
            "kind": self.kind,
            "id": self.id,
            "cid": self.cid,
            "src": self.src,
            "to": self.to,
            "ts": self.ts,
            "deadline": self.deadline,
            "attempt": self.attempt,
            "status": self.status,
        }
        if self.error is not None:
            wire["error"] = self.error.to_wire()
        return wire

    @classmethod
    def from_wire(cls, raw: Any) -> Envelope:
        # On the broker's hot path (twice per round trip): plain type checks, positional arguments.
        if type(raw) is not dict:
            raise ProtocolError("header is not a map")
        version = raw.get("v")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(f"unsupported protocol version {version!r} (this peer speaks {PROTOCOL_VERSION})")
        get = raw.get
        kind, mid = get("kind"), get("id")
        if type(kind) is not str or not kind or type(mid) is not str or not mid:
            raise ProtocolError("header lacks kind or id")
        status = get("status", "ok")
        if status not in _STATUSES:
            raise ProtocolError(f"unknown status {status!r}")
        cid, src, to = get("cid") or "", get("src") or "", get("to") or ""
        ts, deadline, attempt = get("ts") or 0.0, get("deadline") or 0.0, get("attempt") or 1
        if not (
            type(cid) is str
            and type(src) is str
            and type(to) is str
            and isinstance(ts, int | float)
            and isinstance(deadline, int | float)
            and type(attempt) is int
        ):
            raise ProtocolError("malformed header field")
        error = get("error")
        return cls(
            kind,
            mid,
            cid,
            src,
            to,
            float(ts),
            float(deadline),
            attempt,
            status,
            ErrorInfo.from_wire(error) if error is not None else None,
        )

    def reply(self, src: str, status: Status = "ok", error: ErrorInfo | None = None) -> Envelope:
        """The envelope of a reply to this request."""
        return Envelope(kind=reply_kind(self.kind), cid=self.id, src=src, status=status, error=error)


class Message:
    """Base of every message body. Subclasses are dataclasses registered with :func:`message`."""

    KIND: ClassVar[str] = ""
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _REQUIRED: ClassVar[frozenset[str]] = frozenset()
    _SHAPES: ClassVar[dict[str, tuple[type, ...]] | None] = None

    def to_body(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._FIELDS}

    @classmethod
    def from_body(cls, body: Any) -> Self:
        if not isinstance(body, dict):
            raise ProtocolError(f"{cls.KIND}: body is not a map")
        missing = cls._REQUIRED - body.keys()
        if missing:
            raise ProtocolError(f"{cls.KIND}: missing field(s) {', '.join(sorted(missing))}")
        shapes = cls._SHAPES if cls._SHAPES is not None else cls._resolve_shapes()
        values = {name: body[name] for name in cls._FIELDS if name in body}
        for name, value in values.items():
            allowed = shapes.get(name)
            # bool is an int to isinstance, never a count or a size on this bus.
            if allowed is not None and (
                not isinstance(value, allowed) or ((value is True or value is False) and bool not in allowed)
            ):
                raise ProtocolError(f"{cls.KIND}: field {name} is {type(value).__name__}, not {_names(allowed)}")
        return cls(**values)

    @classmethod
    def _resolve_shapes(cls) -> dict[str, tuple[type, ...]]:
        """The runtime types each field accepts (one level deep: a list is checked to be a list, not its
        items), from the class's type hints; resolved on first use, once every class of the module exists."""
        hints = typing.get_type_hints(cls)
        cls._SHAPES = {name: shape for name in cls._FIELDS if (shape := _shape(hints.get(name, Any))) is not None}
        return cls._SHAPES


def _shape(hint: Any) -> tuple[type, ...] | None:
    """Runtime types for a type hint as msgpack decodes values; None = not checked."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_shape(arg) for arg in typing.get_args(hint)]
        if any(part is None for part in parts):
            return None
        return tuple(t for part in parts if part is not None for t in part)
    if origin is Literal:
        return tuple({type(arg) for arg in typing.get_args(hint)})
    if hint is type(None):
        return (type(None),)
    if hint is float:
        return (float, int)
    if hint is bytes:
        return (bytes, bytearray, memoryview)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        return (list, tuple)
    if origin is dict or hint is dict or typing.is_typeddict(hint):
        return (dict,)
    if hint in (str, int, bool):
        return (hint,)
    return None


def _names(allowed: tuple[type, ...]) -> str:
    return " or ".join(sorted({"null" if t is type(None) else t.__name__ for t in allowed}))


REGISTRY: dict[str, type[Message]] = {}
"""Every declared kind, by name."""

M = TypeVar("M", bound=type[Message])


def message(kind: str) -> Callable[[M], M]:
    """Declare ``cls`` as the body of ``kind`` (one class per kind, one kind per class)."""

    def register(cls: M) -> M:
        if kind in REGISTRY:
            raise ValueError(f"message kind {kind!r} declared twice")
        cls.KIND = kind
        flds = dataclasses.fields(cast(Any, cls))
        cls._FIELDS = tuple(f.name for f in flds)
        cls._REQUIRED = frozenset(
            f.name for f in flds if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        REGISTRY[kind] = cls
        return cls

    return register


def decode_body(env: Envelope, body: Any) -> Message:
    """The typed body of ``env.kind``; raises ProtocolError for unknown kinds or bad bodies."""
    cls = REGISTRY.get(env.kind)
    if cls is None:
        raise ProtocolError(f"unknown message kind {env.kind!r}")
    try:
        return cls.from_body(body)
    except TypeError as exc:
        raise ProtocolError(f"{env.kind}: {exc}") from exc
