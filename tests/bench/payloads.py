"""The three payloads every transport is measured with."""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass

ROWS, DIM = 64, 384


@dataclass(frozen=True, slots=True)
class Payload:
    """``data`` travels in the message body (msgpack bin); ``raw`` as a buffer frame of its own."""

    label: str
    data: bytes = b""
    raw: bytes = b""

    @property
    def size(self) -> int:
        return len(self.data) + len(self.raw)


def float_matrix() -> bytes:
    """A 64x384 float32 matrix in C order (numpy is not a dependency: the stdlib ``array``)."""
    values = array("f", (((i * 7919) % 1000) / 1000.0 for i in range(ROWS * DIM)))
    assert values.itemsize == 4
    return values.tobytes()


def all_payloads() -> list[Payload]:
    return [
        Payload("1 KB", data=os.urandom(1024)),
        Payload("100 KB", data=os.urandom(100 * 1024)),
        Payload(f"{ROWS}x{DIM} float32 (raw frame)", raw=float_matrix()),
    ]
