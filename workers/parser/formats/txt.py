"""Plain text (``.txt``, ``.text``, ``.rst``): its extracted text is the file itself, decoded (a BOM, UTF-8,
then charset-normalizer's guess) with line breaks normalised, so its line numbers are the file's; one segment
per paragraph or blank line. The other text formats decode with :func:`decode_text` too.

Section titles as reStructuredText writes them (and Markdown's setext style, and many plain-text files) make
the heading paths: a line followed by a line of one repeated punctuation character at least as long, with
an optional overline of the same character. As in reST, levels are the adornment styles in the order they
first appear, and the first title is the document's title. Headings matter for answers: in a reference
manual the term a question asks for is often only the heading ("``apnumber``" over "For numbers 1-9,
returns the number spelled out."), and a chunk's heading is indexed and shown with it."""

from __future__ import annotations

import codecs
import re

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import (
    NOT_TEXT,
    Builder,
    Headings,
    ParsedDocument,
    ParseError,
    normalize,
)

FORMAT = "txt"
SUFFIXES = (".txt", ".text", ".rst")


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


_BAD = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ufffd]")
"""U+FFFD and the control characters (Unicode category Cc: U+0000-001F, U+007F-009F) that text does not hold:
all but tab, line feed, carriage return, vertical tab, form feed and NEL. A character class, not a loop over
the characters in Python: ~0.1 ms of an abstract's parse."""


def looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:65536]
    return len(_BAD.findall(sample)) > len(sample) * MAX_CONTROL_RATIO


def parse_txt(data: bytes) -> ParsedDocument:
    """A text file: its extracted text is the file itself; one segment per paragraph or blank line, and one
    per section title (with its adornment lines)."""
    text = normalize(decode_text(data))
    builder = Builder()
    sections = _Sections()
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            builder.add("\n".join(paragraph), heading=sections.headings.path)
            paragraph.clear()

    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            flush()
            builder.add(line, heading=sections.headings.path)
            i += 1
            continue
        size = _title_at(lines, i) if not paragraph else 0
        if size:
            flush()
            path = sections.enter(lines[i : i + size])
            builder.add("\n".join(lines[i : i + size]), heading=path)
            i += size
            continue
        paragraph.append(line)
        i += 1
    flush()
    # Trailing blank lines stay: the extracted text is the file's text, line for line.
    segments = builder.segments(strip_blank_ends=False) if text.strip() else []
    return ParsedDocument("txt", segments, title=sections.title)


_ADORNMENT = re.compile(r"""([!-/:-@\[-`{-~])\1{2,}[ \t]*""")
"""A reST adornment line: one punctuation character, three times or more (a shorter one is too easily a
dash or an ellipsis)."""
_ROLE = re.compile(r"(?::[\w.+-]+:)?`+([^`]*)`+")
"""Inline literals and interpreted text (``:class:`~a.b.C```), shown as reST shows them."""
_TARGET = re.compile(r"^(.*?)\s*<[^<>]*>$")
_EMPHASIS = re.compile(r"(?<!\w)\*{1,2}(?=\S)|(?<=\S)\*{1,2}(?!\w)")
MIN_SHORT_ADORNMENT = 4
"""An adornment shorter than its title still makes one from this length on (docutils warns, and accepts it:
hand-written files are often a character or two short); a three-character one must be as long as its text."""


def _shown(text: str) -> str:
    """A title as reST renders it: ``:class:`~a.b.C``` is ``C``, ```Text <target>``` is ``Text``,
    ````literal```` and ``*emphasis*`` lose their marks."""

    def role(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        named = _TARGET.match(inner)
        if named and named.group(1):
            return named.group(1)
        if inner.startswith("~"):
            return inner[1:].rsplit(".", 1)[-1]
        return inner.lstrip("!")

    return " ".join(_EMPHASIS.sub("", _ROLE.sub(role, text)).split())


def _title_at(lines: list[str], i: int) -> int:
    """How many lines a section title starting at ``lines[i]`` takes (2 or 3, with an overline), else 0.
    The caller only asks at a paragraph's start, as reST requires."""
    over = _ADORNMENT.fullmatch(lines[i])
    if over and i + 2 < len(lines):
        title, under = lines[i + 1], _ADORNMENT.fullmatch(lines[i + 2])
        if under and under.group(1) == over.group(1) and _titled(title, len(lines[i + 2].rstrip())):
            return 3
        return 0
    if over or i + 1 >= len(lines):
        return 0
    under = _ADORNMENT.fullmatch(lines[i + 1])
    if under and not lines[i][:1].isspace() and _titled(lines[i], len(lines[i + 1].rstrip())):
        return 2
    return 0


def _titled(title: str, adornment: int) -> bool:
    body = title.strip()
    long_enough = len(body) <= adornment or adornment >= MIN_SHORT_ADORNMENT
    return bool(body) and any(c.isalnum() for c in body) and long_enough


class _Sections:
    """The open section titles; a style (adornment character, overlined or not) gets its level when it is
    first seen, as in reST."""

    def __init__(self) -> None:
        self.headings = Headings()
        self.styles: dict[tuple[str, bool], int] = {}
        self.title: str | None = None

    def enter(self, block: list[str]) -> str | None:
        overlined = len(block) == 3
        text = block[1] if overlined else block[0]
        style = (block[-1].strip()[0], overlined)
        level = self.styles.setdefault(style, len(self.styles) + 1)
        name = _shown(text)
        if self.title is None and name:
            self.title = name
        return self.headings.enter(level, name)
