"""The OCR of a PDF's scanned pages: each rendered with pypdfium2 (PDFium, in its wheel), then read by :mod:`.ocr`.

pypdf reads the text layer (:mod:`.pdf`) but draws nothing; PDFium renders a page as a viewer shows it.
Only a page that holds an image is a scan: a page without one and without text is blank (or draws its
letters as vector paths, which is rare), and OCR of a blank letter page costs ~1.5 s here to find nothing.
Pages are rendered one at a time at :data:`.ocr.RENDER_DPI` in grey (a letter page: 2550 x 3300 px,
8 MiB), and dropped before the next, so a long scan costs one page's pixels at a time. OCR reads at most
``ocr_max_pages`` pages and starts none past the parse's OCR deadline; a page it cannot read in
``ocr_timeout_s`` is left out and its reason kept, for a file in which nothing else was found.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats import ocr, progress
from foldermind.workers.parser.formats.document import ParseError, reason

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger("foldermind.parser")


@dataclass(slots=True)
class PagesRead:
    """OCR's text per page number, and the reasons of the pages it could not read."""

    pages: dict[int, ocr.PageText] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def read_pages(data: bytes, numbers: list[int], options: ocr.Settings) -> PagesRead:
    """OCR of the pages ``numbers`` (1-based) of the PDF ``data``, within ``options``' bounds."""
    import pypdfium2 as pdfium

    out = PagesRead()
    todo = numbers[: options.max_pages]
    if len(numbers) > len(todo):
        log.warning("%d pages need OCR: reading the first %d ([ingest] ocr_max_pages)", len(numbers), len(todo))
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        out.failures.append(f"corrupt PDF: {reason(exc)}")
        return out
    try:
        for number in todo:
            if out.pages and options.left_s() <= 0:
                log.warning("OCR stopped before page %d: the parse deadline is near", number)
                break
            progress.step()
            try:
                image = _render(document, number)
                if image is not None:
                    out.pages[number] = ocr.read_page(image, number, options.timeout_s)
            except ParseError as exc:
                log.warning("page %d left out: %s", number, exc.message)
                out.failures.append(exc.message)
    finally:
        document.close()
    return out


MAX_FORM_DEPTH = 4
"""How deep into nested form XObjects an image is looked for (scanners put it on the page itself)."""


def _render(document: Any, number: int) -> Image | None:
    """The page rendered for OCR, or None when it holds no image (nothing scanned on it)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        page = document[number - 1]
        try:
            images = page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=MAX_FORM_DEPTH)
            if next(iter(images), None) is None:
                return None
            width, height = page.get_size()
            bitmap = page.render(scale=ocr.render_scale(width, height), grayscale=True, no_smoothimage=True)
            image: Image = bitmap.to_pil()
            return image
        finally:
            page.close()
    except pdfium.PdfiumError as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"page {number} cannot be rendered: {reason(exc)}") from exc
