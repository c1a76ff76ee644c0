"""Zip containers (DOCX, PPTX, XLSX, EPUB, OpenDocument): checked before their library opens them.

Every one of these formats is a zip of XML parts, and their libraries inflate parts whole (python-docx,
python-pptx, ebooklib) or stream them (openpyxl), so three checks run first:

- **zip bombs** (:func:`check_zip`): an entry of 1 MiB or more that inflates over 200 times, or entries
  that together inflate past 20 times ``max_bytes``, is refused as ``suspicious KIND (zip bomb?)``.
  200 sits between what the writers make and a bomb (measured: docs/tuning.md#parser-bounds).
- **XML entity declarations** (:func:`check_members`): a DTD that declares entities is how
  billion-laughs and external-entity (XXE) attacks start, and no part these writers make declares
  one, so such a part is refused as ``suspicious KIND (XML entity declarations)`` whatever its
  library would make of it. defusedxml reads each part only up to its root element (the DTD comes
  before it), so the check costs a few KiB per part, not a parse.
- **what the parts really inflate to** (:func:`check_members`): every part is inflated, streamed and thrown
  away, through a counter that stops the file at :func:`inflate_limit_mb` (a sixteenth of the parser's
  memory cap) with ``KIND inflates past N MB``. The sizes a zip declares pass the first check honestly
  for 700 MB of XML that python-docx would hold as a tree of several GB. A library that runs out of memory
  anyway (lxml says ``unknown error`` then) raises :class:`MemoryError`, not ``corrupt KIND``.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from typing import Any, TypeVar

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import ParseError, reason

MAX_EXPANSION = 20
"""A container whose entries add up to more than this many times ``max_bytes`` is refused."""
MAX_RATIO = 200
"""A container entry that inflates more than this many times is refused..."""
RATIO_MIN_BYTES = 1024 * 1024
"""...when it inflates to at least this size (a tiny, very repetitive XML part is no threat)."""
XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".htm", ".html", ".svg")
"""The parts whose prolog :func:`check_members` reads (every XML part of the formats here has one of these names)."""
MEMORY_SHARE = 16
"""A container may inflate to at most this share (1/16) of the parser's memory cap: python-docx and python-pptx
hold a part as a tree of up to ~10 times its bytes, and the text and its chunks need room too (docs/reliability.md)."""
DEFAULT_INFLATE_MB = 256
"""The limit when the parser runs without a memory cap (or outside a parser)."""
_READ = 16 * 1024
_DRAIN = 1024 * 1024
_MB = 1024 * 1024
_inflate_mb = DEFAULT_INFLATE_MB
T = TypeVar("T")


def limit_inflation(memory_mb: int) -> int:
    """Set the inflation limit from the parser's memory cap (MiB; 0 = none, then the default); returns it."""
    global _inflate_mb
    _inflate_mb = max(1, memory_mb // MEMORY_SHARE) if memory_mb > 0 else DEFAULT_INFLATE_MB
    return _inflate_mb


def inflate_limit_mb() -> int:
    """How many MB the parts of one container may inflate to, together."""
    return _inflate_mb


def inflates_past(kind: str, mb: int) -> str:
    """The reason a container whose parts inflate past ``mb`` MB is refused with."""
    return f"{kind} inflates past {mb} MB"


def zip_bomb(kind: str) -> str:
    """The reason a zip bomb of format ``kind`` (``"DOCX"``) is refused with."""
    return f"suspicious {kind} (zip bomb?)"


def entity_declarations(kind: str) -> str:
    """The reason a container whose XML declares entities is refused with."""
    return f"suspicious {kind} (XML entity declarations)"


def corrupt(kind: str, exc: BaseException) -> ParseError:
    """The error for a file of format ``kind`` its library could not read."""
    return ParseError(ErrorCode.PARSE_FAILED, f"corrupt {kind}: {reason(exc)}")


def library_error(kind: str, exc: Exception) -> Exception:
    """What a library's exception on a file of format ``kind`` means: :class:`MemoryError` when it is lxml failing
    to allocate under the parser's memory cap (it then reports ``unknown error``, or says so), else ``corrupt``."""
    message = str(getattr(exc, "msg", None) or exc)  # a syntax error's own message, without its position
    if type(exc).__module__.startswith("lxml") and (
        message == "unknown error" or "memory allocation failed" in message.lower()
    ):
        return MemoryError(f"{kind}: {message}")
    return corrupt(kind, exc)


def check_zip(data: bytes, max_bytes: int, kind: str) -> list[zipfile.ZipInfo]:
    """The entries of the zip ``data``; refuses one that is not a zip, or whose entries would inflate
    suspiciously."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise corrupt(kind, exc) from exc
    total = 0
    for info in infos:
        total += info.file_size
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size >= RATIO_MIN_BYTES and ratio > MAX_RATIO:
            raise ParseError(ErrorCode.PARSE_FAILED, zip_bomb(kind))
    if total > MAX_EXPANSION * max_bytes:
        raise ParseError(ErrorCode.PARSE_FAILED, zip_bomb(kind))
    return infos


def check_container(data: bytes, max_bytes: int, kind: str, entities: bool = True) -> None:
    """:func:`check_zip`, then :func:`check_members`: what every zip format runs first (DOCX with ``entities``
    off: it keeps python-docx's own entity handling, which tests/test_hostile_files.py pins)."""
    check_zip(data, max_bytes, kind)
    check_members(data, kind, entities)


def read_container(data: bytes, max_bytes: int, kind: str, read: Callable[[io.BytesIO], T]) -> T:
    """:func:`check_container`, then ``read`` (the format's library at work) on the file's bytes; whatever
    the library raises on a broken file (KeyError, ValueError, lxml's errors, its own) is ``corrupt KIND``,
    while a refusal of ours, running out of memory or nesting too deep stays what it is."""
    check_container(data, max_bytes, kind)
    try:
        return read(io.BytesIO(data))
    except (ParseError, MemoryError, RecursionError):
        raise
    except Exception as exc:
        raise library_error(kind, exc) from exc


class _Counted:
    """Reads of a zip's parts, counted together; past ``limit`` bytes the container is refused."""

    def __init__(self, kind: str, limit_mb: int) -> None:
        self.kind = kind
        self.limit_mb = limit_mb
        self.left = limit_mb * _MB
        self.part: Callable[[int], bytes] = lambda n: b""

    def read(self, n: int) -> bytes:
        data = self.part(n)
        self.left -= len(data)
        if self.left < 0:
            raise ParseError(ErrorCode.FILE_TOO_LARGE, inflates_past(self.kind, self.limit_mb))
        return data


def check_members(data: bytes, kind: str, entities: bool = True, limit_mb: int | None = None) -> None:
    """Inflate every part (streamed, nothing kept) and refuse the container once they pass ``limit_mb``
    together (default :func:`inflate_limit_mb`); with ``entities``, also when an XML part declares an entity
    (read up to its root element)."""
    counted = _Counted(kind, inflate_limit_mb() if limit_mb is None else limit_mb)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                with zf.open(info) as part:
                    counted.part = part.read
                    if entities and info.filename.lower().endswith(XML_SUFFIXES):
                        _check_prolog(counted.read, kind)
                    while counted.read(_DRAIN):
                        pass
    except ParseError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, RuntimeError) as exc:
        # RuntimeError: an encrypted part; NotImplementedError (one of them): a compression zipfile lacks
        raise corrupt(kind, exc) from exc


class _RootReached(Exception):
    """The root element started: the prolog, where entities are declared, is over."""


class _StopAtRoot:
    """An ElementTree parser target that stops the parse at the first start tag."""

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        raise _RootReached

    def end(self, tag: str) -> None:
        pass

    def data(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _check_prolog(read: Callable[[int], bytes], kind: str) -> None:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    target: Any = _StopAtRoot()
    parser = DefusedXMLParser(target=target, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    try:
        while piece := read(_READ):
            parser.feed(piece)
    except _RootReached:
        return
    except ParseError:  # the parts inflate past the limit before the root element starts
        raise
    except DefusedXmlException as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, entity_declarations(kind)) from exc
    except Exception:  # not well-formed: the format's own library says what is wrong with it
        return
