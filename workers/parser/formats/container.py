"""Zip containers (DOCX, PPTX, XLSX, EPUB, OpenDocument): checked before their library opens them.

Every one of these formats is a zip of XML parts, and their libraries inflate parts whole (python-docx,
python-pptx, ebooklib) or stream them (openpyxl), so two checks run first, on the zip's directory and
the parts' prologs only:

- **zip bombs** (:func:`check_zip`): an entry of 1 MiB or more that inflates over 200 times, or entries
  that together inflate past 20 times ``max_bytes``, is refused as ``suspicious KIND (zip bomb?)``.
  Measured on the writers' own output (python-pptx 30 slides, openpyxl 20,000 rows, ebooklib 20
  chapters, odfpy 2,000 paragraphs and 5,000 sheet rows): the largest part of each deflates 7-27 times,
  and 2,000 identical DOCX paragraphs reach 104; a part of zeros deflates about 1,000 times. 200 sits
  between them.
- **XML entity declarations** (:func:`check_xml_parts`): a DTD that declares entities is how
  billion-laughs and external-entity (XXE) attacks start, and no part these writers make declares
  one, so such a part is refused as ``suspicious KIND (XML entity declarations)`` whatever its
  library would make of it. defusedxml reads each part only up to its root element (the DTD comes
  before it), so the check costs a few KiB per part, not a parse.
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
"""The parts :func:`check_xml_parts` reads (every XML part of the formats here has one of these names)."""
_READ = 16 * 1024
T = TypeVar("T")


def zip_bomb(kind: str) -> str:
    """The reason a zip bomb of format ``kind`` (``"DOCX"``) is refused with."""
    return f"suspicious {kind} (zip bomb?)"


def entity_declarations(kind: str) -> str:
    """The reason a container whose XML declares entities is refused with."""
    return f"suspicious {kind} (XML entity declarations)"


def corrupt(kind: str, exc: BaseException) -> ParseError:
    """The error for a file of format ``kind`` its library could not read."""
    return ParseError(ErrorCode.PARSE_FAILED, f"corrupt {kind}: {reason(exc)}")


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


def check_container(data: bytes, max_bytes: int, kind: str) -> None:
    """:func:`check_zip`, then :func:`check_xml_parts`: what every zip format but DOCX runs first (DOCX
    keeps python-docx's own entity handling, which tests/test_hostile_files.py pins)."""
    check_zip(data, max_bytes, kind)
    check_xml_parts(data, kind)


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
        raise corrupt(kind, exc) from exc


def check_xml_parts(data: bytes, kind: str) -> None:
    """Refuse the container when one of its XML parts declares an entity (read up to its root element)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.filename.lower().endswith(XML_SUFFIXES):
                    with zf.open(info) as part:
                        _check_prolog(part.read, kind)
    except ParseError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, NotImplementedError) as exc:
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
    except DefusedXmlException as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, entity_declarations(kind)) from exc
    except Exception:  # not well-formed: the format's own library says what is wrong with it
        return
