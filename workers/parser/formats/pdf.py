"""PDF (pypdf), page by page: one segment per page with text; pages count from 1. An encrypted PDF opens
only with an empty password.

A page without a usable text layer (fewer than :data:`MIN_TEXT_CHARS` letters or digits: a scan, or a
scan with a page number stamped on it) that holds an image is rendered with pypdfium2 and read with OCR
(:mod:`.ocr`, :mod:`.pdf_ocr`); its segment carries the OCR's confidence, and OCR's text replaces the
text layer's only when it holds more. A mixed PDF keeps its text pages as pypdf reads them and OCRs only
the others, at most ``[ingest] ocr_max_pages`` of them and only while the parse deadline allows; a page
that OCR cannot read in ``ocr_timeout_s`` is left out. A PDF in which neither finds text is refused
with "no extractable text".

Pages are said to be read for good (:func:`.progress.pages_read`) as they are extracted, up to the first that
OCR may read: the parser worker can index a long PDF's first pages while it reads the rest."""

from __future__ import annotations

import contextlib
import io
import logging
import re
from typing import Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats import ocr, pdf_ocr, progress
from foldermind.workers.parser.formats.document import (
    Builder,
    ParsedDocument,
    ParseError,
    normalize,
    reason,
)

log = logging.getLogger("foldermind.parser")

FORMAT = "pdf"
SUFFIXES = (".pdf",)

NO_TEXT_PDF = "no extractable text (scanned?)"
NO_TEXT_OCR = "no extractable text, none found by OCR either"
ENCRYPTED_PDF = "encrypted PDF"
NOT_PDF = "not a PDF: no %PDF- header in its first 1024 bytes (another format named .pdf?)"
HEADER_WITHIN = 1024
"""Readers accept a PDF whose header comes after some junk, within this many bytes (PDF 1.7, Annex H)."""
MIN_TEXT_CHARS = 16
"""A page's text layer with fewer letters and digits than this is not usable: the page is read with OCR.
Scanners stamp page numbers and dates on image pages; a real text page holds more than a line of words."""


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    return parse_pdf(data)


def parse_pdf(data: bytes) -> ParsedDocument:
    """PDF, page by page (pypdf): one segment per page with text; pages count from 1."""
    with _PypdfWarnings() as warnings:
        return _parse_pdf(data, warnings)


def _parse_pdf(data: bytes, warnings: _PypdfWarnings) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    if data and b"%PDF-" not in data[:HEADER_WITHIN]:
        # An HTML page or a Word file saved as .pdf: pypdf would call it a corrupt PDF ("Stream has ended").
        raise ParseError(ErrorCode.PARSE_FAILED, NOT_PDF)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            opened = 0
            with contextlib.suppress(DependencyError, NotImplementedError, FileNotDecryptedError, PdfReadError):
                opened = int(reader.decrypt(""))  # an empty user password opens it
            if not opened:
                raise ParseError(ErrorCode.PARSE_FAILED, ENCRYPTED_PDF)
        pages = reader.pages
        count = len(pages)
        if not count:
            raise ParseError(ErrorCode.PARSE_FAILED, "corrupt PDF: no pages")
    except ParseError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt PDF: {reason(exc)}") from exc

    texts: dict[int, str] = {}
    failures: list[str] = []
    # Pages are read for good as they are extracted until the first that OCR may read instead (it comes later).
    read_ahead: Builder | None = Builder()
    ocr_on = ocr.settings(len(data)).enabled
    title = _pdf_title(reader)
    for number in range(1, count + 1):
        progress.step()
        text = ""
        try:
            text = _pdf_page_text(pages[number - 1].extract_text())
        except MemoryError:
            raise
        except Exception as exc:
            log.warning("page %d: text extraction failed: %s", number, reason(exc))
            failures.append(reason(exc))
        if text:
            texts[number] = text
        if read_ahead is not None and ocr_on and _alnum(text) < MIN_TEXT_CHARS and _may_hold_image(pages[number - 1]):
            read_ahead = None
        elif read_ahead is not None:
            if text:
                read_ahead.add(text, page=number)
            progress.pages_read(read_ahead.segments, number, count, title)
    if failures and len(failures) == count:
        raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt PDF: {failures[0]}")
    if warnings.read_errors and not texts:
        # pypdf skipped what it could not read (a page's resources nested 100,000 deep, say) and
        # found no text in the rest: the file is broken, not scanned.
        raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt PDF: {warnings.read_errors[0]}")
    scanned = [n for n in range(1, count + 1) if _alnum(texts.get(n, "")) < MIN_TEXT_CHARS]
    options = ocr.settings(len(data))
    read = pdf_ocr.read_pages(data, scanned, options) if scanned and options.enabled else pdf_ocr.PagesRead()
    builder = Builder()
    for number in range(1, count + 1):
        found = read.pages.get(number)
        if found is not None and found.lines and _alnum(found.text) > _alnum(texts.get(number, "")):
            builder.add(found.text, page=number, ocr=found.confidence)
        elif number in texts:
            builder.add(texts[number], page=number)
    segments = builder.segments()
    if not segments:
        if read.failures:
            raise ParseError(ErrorCode.PARSE_FAILED, read.failures[0])
        raise ParseError(ErrorCode.PARSE_FAILED, NO_TEXT_OCR if read.pages else NO_TEXT_PDF)
    return ParsedDocument("pdf", segments, title=title, pages=count)


_INLINE_IMAGE = re.compile(rb"(?:^|\s)BI\s")


def _may_hold_image(page: Any) -> bool:
    """Whether the page may hold an image (and OCR then read it): it names an XObject (an image, or a form that may
    hold one) or its content has an inline image; True when that cannot be told."""
    try:
        resources = page.get("/Resources")
        xobjects = resources.get_object().get("/XObject") if resources is not None else None
        if xobjects is not None and len(xobjects.get_object()):
            return True
        contents = page.get_contents()
        return contents is not None and _INLINE_IMAGE.search(contents.get_data()) is not None
    except MemoryError:
        raise
    except Exception:
        return True


def _alnum(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


class _PypdfWarnings(logging.Handler):
    """Collects what pypdf warns about while it reads one file, instead of logging it (malformed files
    make it chatty). Not strict, pypdf reads past the parts it cannot read and only warns: those
    warnings explain a PDF that then has no text."""

    _READ_ERROR = re.compile(r"^(?:\w*Error)?\(?'?(.*?(?:[Ee]rror|[Rr]ecursion|[Dd]epth).*?)'?\)?$")
    MAX_KEPT = 20

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.read_errors: list[str] = []
        self._saved = (logging.NOTSET, True)

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.read_errors) < self.MAX_KEPT:
            found = self._READ_ERROR.match(" ".join(record.getMessage().split()))
            if found:
                self.read_errors.append(found.group(1)[:200])

    def __enter__(self) -> _PypdfWarnings:
        logger = logging.getLogger("pypdf")
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("pypdf")
        logger.removeHandler(self)
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]


def _pdf_page_text(raw: str) -> str:
    """A page's text with lines right-stripped, runs of blank lines collapsed, no blank ends."""
    lines = [line.rstrip() for line in normalize(raw).split("\n")]
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1]):
            out.append(line if line.strip() else "")
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _pdf_title(reader: Any) -> str | None:
    try:
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except MemoryError:
        raise
    except Exception:
        return None
    title = " ".join(str(title).split()) if title else ""
    return title or None
