"""Edit one member of a JSON or JSONC file in place, leaving every other byte as it was.

A client's config holds the user's other servers, their comments and their layout; loading it into a dict
and dumping it back would lose all three. So the file is parsed only to find text spans (json-five's
parser, which keeps each node's line and column and reads comments and trailing commas), and an edit
replaces, inserts or deletes the text of our member alone, indented like its neighbours.

Strict JSON files (a client that does not read comments) are checked with the standard parser first, so a
file the client itself would reject is refused with its line and column rather than edited.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import json5
from json5.model import DoubleQuotedString, Identifier, JSONArray, JSONObject, Node, SingleQuotedString
from json5.parser import parse_source
from json5.utils import JSON5DecodeError


class JsonError(ValueError):
    """The file cannot be read as its client's format; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line, self.column, self.message = line, column, message


@dataclass(frozen=True)
class Slot:
    """One member of an object (``name`` set) or one item of an array, by its text span."""

    name: str | None
    start: int  # the key's first character (the value's, for an array item)
    end: int  # just after the value
    value_start: int

    def value(self, text: str) -> Any:
        return json5.loads(text[self.value_start : self.end])


@dataclass(frozen=True)
class Container:
    """An object or an array: its braces' offsets and its slots."""

    open: int
    close: int  # the offset of the closing brace
    slots: list[Slot]


class Document:
    """A parsed file: offsets of nodes, found by key path."""

    def __init__(self, text: str, jsonc: bool) -> None:
        self.text = text
        if not jsonc:
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise JsonError(exc.msg, exc.lineno, exc.colno) from None
        try:
            model = parse_source(text)
        except JSON5DecodeError as exc:
            raise _position(exc, text) from None
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        if not isinstance(model.value, JSONObject):
            raise JsonError("the top level is not an object", 1, 1)
        self.root = model.value

    def offset(self, line: int | None, column: int | None) -> int:
        assert line is not None and column is not None
        return self._line_starts[line - 1] + column

    def container(self, node: JSONObject | JSONArray) -> Container:
        open_ = self.offset(node.lineno, node.col_offset)
        close = self.offset(node.end_lineno, node.end_col_offset) - 1
        if isinstance(node, JSONArray):
            slots = [self._slot(None, value, value) for value in node.values]
        else:
            slots = [self._slot(_key_name(k), k, v) for k, v in node.key_value_pairs]
        return Container(open_, close, slots)

    def _slot(self, name: str | None, first: Node, value: Node) -> Slot:
        start = self.offset(first.lineno, first.col_offset)
        value_start = self.offset(value.lineno, value.col_offset)
        return Slot(name, start, self.offset(value.end_lineno, value.end_col_offset), value_start)

    def member(self, obj: JSONObject, name: str) -> JSONObject | JSONArray | Node | None:
        found = [v for k, v in obj.key_value_pairs if _key_name(k) == name]
        if len(found) > 1:
            line = self.offset(obj.lineno, obj.col_offset)
            raise JsonError(f'"{name}" appears {len(found)} times; keep one by hand', *self.line_col(line))
        return found[0] if found else None

    def line_col(self, offset: int) -> tuple[int, int]:
        line = max(i for i, start in enumerate(self._line_starts) if start <= offset)
        return line + 1, offset - self._line_starts[line] + 1


def _key_name(key: Node) -> str:
    if isinstance(key, DoubleQuotedString | SingleQuotedString):
        return key.characters
    assert isinstance(key, Identifier)
    return key.name


def _position(exc: JSON5DecodeError, text: str) -> JsonError:
    """json-five's error, with a column even when it reports several errors (it keeps the first token)."""
    message = str(exc).split("\n", 2)
    first = message[2].strip() if len(message) > 2 and message[0].startswith("There were") else message[0]
    token = exc.token
    if token is not None:
        return JsonError(first.split(" at:")[0], token.lineno, token.colno + 1)
    return JsonError(first, text.count("\n") + 1, len(text) - text.rfind("\n"))


# -- the edits: each returns the new text; the caller re-parses between edits ----------------------------


def skip_blank(text: str, pos: int) -> int:
    """The offset of the next character that is neither white space nor inside a comment."""
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
        elif text.startswith("//", pos):
            stop = text.find("\n", pos)
            pos = len(text) if stop < 0 else stop
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            pos = len(text) if end < 0 else end + 2
        else:
            break
    return pos


def eol(text: str, pos: int) -> tuple[int, int]:
    """The end of ``pos``'s line (before its "\n" or "\r\n") and the start of the next line."""
    end = text.find("\n", pos)
    if end < 0:
        return len(text), len(text)
    return (end - 1 if end > pos and text[end - 1] == "\r" else end), end + 1


def newline(text: str) -> str:
    """The file's line ending, which inserted text uses too."""
    return "\r\n" if "\r\n" in text else "\n"


def line_tail_end(text: str, pos: int) -> int:
    """Where the line that ``pos`` is on ends, if all that follows ``pos`` on it is blank or a comment (so
    text added there stays on its own line and keeps the comment beside what it was written for)."""
    end = eol(text, pos)[0]
    tail = text[pos:end].strip()
    if not tail or tail.startswith("//") or (tail.startswith("/*") and tail.endswith("*/") and tail.count("*/") == 1):
        return end
    return pos


def line_start_if_first(text: str, pos: int) -> int:
    """The start of ``pos``'s line when only white space precedes it there, else ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    return start if not text[start:pos].strip() else pos


def indent_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    lead = text[start:pos]
    return lead if not lead.strip() else lead[: len(lead) - len(lead.lstrip())]


def unit_indent(doc: Document) -> str:
    """The file's indentation step, from its first member (two spaces when it has none on its own line)."""
    box = doc.container(doc.root)
    if box.slots:
        inner = indent_of(doc.text, box.slots[0].start)
        outer = indent_of(doc.text, box.open)
        if len(inner) > len(outer) and inner.startswith(outer):
            return inner[len(outer) :]
    return "  "


def render(value: Any, indent: str, unit: str) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def apply(text: str, edits: Sequence[tuple[int, int, str]]) -> str:
    """Replace each ``[start, end)`` with its text, from the back so earlier offsets stay right; texts
    inserted at one offset end up in the order given, with the file's own line ending."""
    nl = newline(text)
    for start, end, new in reversed(sorted(edits, key=lambda edit: edit[0])):
        text = text[:start] + new.replace("\n", nl) + text[end:]
    return text


def insert(doc: Document, box: Container, slot_text: str, unit: str) -> str:
    """Add ``slot_text`` (a member ``"key": value`` or an array item) as the container's last slot."""
    text = doc.text
    outer = indent_of(text, box.open)
    if box.slots:
        last = box.slots[-1]
        indent = indent_of(text, last.start) if line_start_if_first(text, last.start) != last.start else outer + unit
        body = render_slot(slot_text, indent)
        after = skip_blank(text, last.end)
        if text[after] == ",":  # a trailing comma (JSONC): keep that style
            return apply(text, [(line_tail_end(text, after + 1), line_tail_end(text, after + 1), f"\n{indent}{body},")])
        at = line_tail_end(text, last.end)
        return apply(text, [(last.end, last.end, ","), (at, at, f"\n{indent}{body}")])
    indent = outer + unit
    body = render_slot(slot_text, indent)
    inside = text[box.open + 1 : box.close]
    if "\n" not in inside:
        if not inside.strip():
            return apply(text, [(box.open + 1, box.close, f"\n{indent}{body}\n{outer}")])
        return apply(text, [(box.close, box.close, f"\n{indent}{body}\n{outer}")])
    at = line_tail_end(text, box.open + 1)
    return apply(text, [(at, at, f"\n{indent}{body}")])


def render_slot(slot_text: str, indent: str) -> str:
    return slot_text.replace("\n", "\n" + indent)


def member_text(name: str, value: Any, unit: str) -> str:
    return f"{json.dumps(name)}: {render(value, '', unit)}"


def remove(doc: Document, box: Container, index: int) -> str:
    """Delete one slot with its comma, and its lines when it had them to itself."""
    text = doc.text
    slot = box.slots[index]
    start = line_start_if_first(text, slot.start)
    end = slot.end
    edits: list[tuple[int, int, str]] = []
    after = skip_blank(text, end)
    if after < len(text) and text[after] == ",":
        end = after + 1
    elif index > 0:  # the last slot without a trailing comma: the one before it loses its comma
        prev_comma = skip_blank(text, box.slots[index - 1].end)
        edits.append((prev_comma, prev_comma + 1, ""))
    if start != slot.start and not text[end : eol(text, end)[0]].strip():
        end = eol(text, end)[1]  # the slot had its lines to itself: they go, line endings included
    edits.append((start, end, ""))
    return apply(text, edits)


def replace(doc: Document, slot: Slot, value: Any, unit: str) -> str:
    indent = indent_of(doc.text, slot.start)
    return apply(doc.text, [(slot.value_start, slot.end, render(value, indent, unit))])
