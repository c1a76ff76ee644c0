"""A GGUF file's header (metadata and tensor list) read straight from the bytes, without the weights.

The ``gguf`` package's ``GGUFReader`` makes a numpy view for every part of every field: on SmolLM2-135M's
49,152 tokens and 48,900 merges that is ~1 million views and most of a model load (docs/tuning.md#llm-load),
paid at every load of the llm worker. The header is a flat sequence of
length-prefixed values, so this reads it in one pass over a memory map (~0.1 s) and leaves the
weights untouched. Version 1 files (32-bit lengths, from 2023) go to ``GGUFReader``; the type names
come from the ``gguf`` package, the one source of them.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"

# GGUF value types -> struct format of one value (8 STRING and 9 ARRAY are read by hand).
_SCALARS: dict[int, str] = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class HeaderError(ValueError):
    """The bytes are not a GGUF header this reader understands; the message says where."""


@dataclass(frozen=True, slots=True)
class Header:
    version: int
    fields: dict[str, Any]
    """Key -> value: numbers, ``str`` (undecodable UTF-8 replaced), lists for arrays (strings as ``bytes``)."""
    tensors: tuple[tuple[str, str], ...]
    """(name, ggml type name) of each tensor, in file order."""


class _Cursor:
    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos = buf, 0

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.buf):
            raise HeaderError(f"truncated at byte {self.pos}")
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return value

    def raw_string(self) -> bytes:
        n = self.unpack("Q")
        end = self.pos + n
        if end > len(self.buf):
            raise HeaderError(f"a string of {n} bytes runs past the end at byte {self.pos}")
        data = bytes(self.buf[self.pos : end])
        self.pos = end
        return data

    def string(self) -> str:
        return self.raw_string().decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            return self.array()
        fmt = _SCALARS.get(vtype)
        if fmt is None:
            raise HeaderError(f"unknown value type {vtype} at byte {self.pos}")
        return self.unpack(fmt)

    def array(self) -> list[Any]:
        etype, count = self.unpack("I"), self.unpack("Q")
        if etype == _STRING:
            return [self.raw_string() for _ in range(count)]
        if etype == _ARRAY:
            return [self.array() for _ in range(count)]
        fmt = _SCALARS.get(etype)
        if fmt is None:
            raise HeaderError(f"unknown array element type {etype} at byte {self.pos}")
        size = struct.calcsize("<" + fmt) * count
        if self.pos + size > len(self.buf):
            raise HeaderError(f"an array of {count} values runs past the end at byte {self.pos}")
        values = list(struct.unpack_from(f"<{count}{fmt}", self.buf, self.pos))
        self.pos += size
        return values


def read_header(path: Path) -> Header:
    """The header of the GGUF file at ``path``; :class:`HeaderError` when it is not one."""
    with path.open("rb") as fh:
        if fh.read(4) != MAGIC:
            raise HeaderError("no GGUF magic at the start")
        version = int.from_bytes(fh.read(4), "little")
        if version == 1:
            return _read_v1(path)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
            try:
                return _parse(view, version)
            finally:
                view.release()


def _parse(view: memoryview, version: int) -> Header:
    cur = _Cursor(view)
    cur.pos = 8
    tensor_count, kv_count = cur.unpack("Q"), cur.unpack("Q")
    fields: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cur.string()
        fields[key] = cur.value(cur.unpack("I"))
    from gguf import GGMLQuantizationType

    tensors: list[tuple[str, str]] = []
    for _ in range(tensor_count):
        name = cur.string()
        n_dims = cur.unpack("I")
        cur.pos += 8 * n_dims
        kind = cur.unpack("I")
        cur.unpack("Q")  # the data offset: not needed to describe the file
        try:
            type_name = GGMLQuantizationType(kind).name
        except ValueError:
            type_name = f"type {kind}"
        tensors.append((name, type_name))
    return Header(version, fields, tuple(tensors))


def _read_v1(path: Path) -> Header:
    import gguf

    reader = gguf.GGUFReader(str(path))
    fields: dict[str, Any] = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, list) and field.types[-1] == gguf.GGUFValueType.STRING:
            value = [str(v).encode("utf-8") for v in value]
        fields[name] = value
    return Header(1, fields, tuple((t.name, t.tensor_type.name) for t in reader.tensors))
