"""RTF (striprtf): the document's text with its control words removed; hits cite its lines.

RTF has no reliable heading structure (a heading is only a bigger, bolder run), so the text is one run
of lines, cited by line range. striprtf drops the ``\\info`` group, so the title and author are read from
it first (``{\\title ...}``, ``{\\author ...}``, their escapes decoded by striprtf too) and open the text.
A file that does not start with ``{\\rtf`` is not RTF, whatever its name.
"""

from __future__ import annotations

import re

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import (
    NOT_TEXT,
    Builder,
    ParsedDocument,
    ParseError,
    add_fields,
    normalize,
    one_line,
    reason,
)

FORMAT = "rtf"
SUFFIXES = (".rtf",)
_INFO_FIELD = {name: re.compile(r"\{\\" + name + r"\s([^{}]*)\}") for name in ("title", "author")}


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    if not data[:64].lstrip().startswith(b"{\\rtf"):
        raise ParseError(ErrorCode.PARSE_FAILED, NOT_TEXT)
    # RTF is 7-bit: other characters are escapes (\'e9, \u233) that striprtf decodes; latin-1 keeps any stray byte.
    source = data.decode("latin-1")
    try:
        text = normalize(_to_text(source))
        info = {name: _field(source, name) for name in _INFO_FIELD}
    except (MemoryError, RecursionError):
        raise
    except Exception as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt RTF: {reason(exc)}") from exc
    builder = Builder()
    add_fields(builder, [("Title", info["title"]), ("Author", info["author"])])
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    if any(lines):
        builder.add("\n".join(lines))
    return ParsedDocument(FORMAT, builder.segments(), title=info["title"] or None)


def _field(source: str, name: str) -> str:
    match = _INFO_FIELD[name].search(source, 0, 64 * 1024)  # the info group sits in the header
    if match is None:
        return ""
    return one_line(_to_text("{\\rtf1 " + match.group(1) + "}"))


def _to_text(source: str) -> str:
    from striprtf.striprtf import rtf_to_text

    return str(rtf_to_text(source, errors="replace"))  # type: ignore[no-untyped-call]  # striprtf is unannotated
