"""Plain text (``.txt``, ``.text``): its extracted text is the file itself, decoded (a BOM, UTF-8, then
charset-normalizer's guess) with line breaks normalised, so its line numbers are the file's; one segment
per paragraph or blank line. The other text formats decode with :func:`decode_text` too."""

from __future__ import annotations

import codecs
import unicodedata

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import (
    NOT_TEXT,
    Builder,
    ParsedDocument,
    ParseError,
    normalize,
)

FORMAT = "txt"
SUFFIXES = (".txt", ".text")


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return parse_txt(data)


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Among equally plausible single-byte guesses, the commonest encodings win.
_PREFERRED = ("utf_8", "ascii", "cp1252", "latin_1", "iso8859_15")
_ALLOWED_CONTROLS = frozenset("\t\n\r\x0b\x0c")
MAX_CONTROL_RATIO = 0.01
"""Decoded text with more control characters (or U+FFFD) than this share is not text."""


def decode_text(data: bytes) -> str:
    """Bytes of a text file -> text, the encoding detected (BOM, UTF-8, then charset-normalizer)."""
    if not data:
        return ""
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                raise ParseError(ErrorCode.PARSE_FAILED, NOT_TEXT) from None
            break
    if text is None:
        text = _utf8(data)
    if text is None:
        text = _detect(data)
    if looks_binary(text):
        raise ParseError(ErrorCode.PARSE_FAILED, NOT_TEXT)
    return text


def _utf8(data: bytes) -> str | None:
    """``data`` as UTF-8, or None when it is not. A few NUL bytes and a few invalid bytes (each read as
    U+FFFD) are allowed, within the share of control characters any text may hold, when the rest is
    plainly UTF-8 (a log with a stray NUL or a cut character is still text); NUL bytes are dropped by
    :func:`normalize`. More NULs than that are left to detection: UTF-16 and UTF-32 are full of them."""
    nuls = data.count(0)
    if not nuls:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    if nuls + bad > len(text) * MAX_CONTROL_RATIO:
        return None
    # An invalid byte in otherwise ASCII text says nothing about UTF-8 (a Latin-1 "é" is one): only
    # characters that decoded as real multi-byte UTF-8 show it is UTF-8 with a few broken bytes.
    if bad and not any("\x7f" < c != "\ufffd" for c in text):
        return None
    return text


def _detect(data: bytes) -> str:
    import charset_normalizer

    results = charset_normalizer.from_bytes(data)
    best = results.best()
    if best is None:
        raise ParseError(ErrorCode.PARSE_FAILED, NOT_TEXT)
    tied = {r.encoding: r for r in results if r.chaos == best.chaos and r.coherence == best.coherence}
    chosen = next((tied[name] for name in _PREFERRED if name in tied), best)
    return str(chosen)


def looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:65536]
    bad = sum(
        1
        for c in sample
        if c == "\ufffd" or (c not in _ALLOWED_CONTROLS and unicodedata.category(c) == "Cc" and c != "\x85")
    )
    return bad > len(sample) * MAX_CONTROL_RATIO


def parse_txt(data: bytes) -> ParsedDocument:
    """A text file: its extracted text is the file itself; one segment per paragraph or blank line."""
    text = normalize(decode_text(data))
    builder = Builder()
    paragraph: list[str] = []
    for line in text.split("\n"):
        if line.strip():
            paragraph.append(line)
            continue
        if paragraph:
            builder.add("\n".join(paragraph))
            paragraph = []
        builder.add(line)
    if paragraph:
        builder.add("\n".join(paragraph))
    # Trailing blank lines stay: the extracted text is the file's text, line for line.
    return ParsedDocument("txt", builder.segments(strip_blank_ends=False) if text.strip() else [])
