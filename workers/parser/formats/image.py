"""Image files (.png .jpg .jpeg .tif .tiff .webp .bmp), read with OCR (:mod:`.ocr`); Pillow opens them.

An image is a page (a multi-page TIFF has one per frame, up to ``[ingest] ocr_max_pages``): its lines of
text are one segment with ``page`` 1 (or the frame's number) and the OCR's mean confidence, so a hit cites
"page 1, lines 3-5, ocr". The image's size is checked from its header before any pixel is decoded
(:func:`.ocr.check_pixels`), so a 30,000 x 30,000 decompression bomb is refused as ``image too large``
without inflating a byte of it. An image in which OCR finds no text is indexed with no chunks, like an
empty text file: it is not broken. A frame OCR cannot read within ``ocr_timeout_s`` is left out; an
image none of whose frames could be read fails with that reason.
"""

from __future__ import annotations

import io
import logging

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats import ocr
from foldermind.workers.parser.formats.document import Builder, ParsedDocument, ParseError, reason

log = logging.getLogger("foldermind.parser")

FORMAT = "image"
SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp")


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    options = ocr.settings(len(data))
    if not options.enabled:
        raise ParseError(ErrorCode.PARSE_FAILED, ocr.OCR_OFF)
    from PIL import Image, UnidentifiedImageError

    # Pillow's own bomb check is this module's, with the limit and the reason of .ocr (one check, one reason).
    Image.MAX_IMAGE_PIXELS = None
    try:
        image = Image.open(io.BytesIO(data))
        ocr.check_pixels(*image.size)
        frames = int(getattr(image, "n_frames", 1))
    except ParseError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt image: {reason(exc)}") from exc
    builder = Builder()
    failures: list[str] = []
    pages = min(frames, options.max_pages)
    if frames > pages:
        log.warning("an image of %d frames: OCR reads the first %d ([ingest] ocr_max_pages)", frames, pages)
    for number in range(1, pages + 1):
        if number > 1 and options.left_s() <= 0:
            log.warning("OCR stopped at frame %d of %d: the parse deadline is near", number, pages)
            break
        try:
            image.seek(number - 1)
            ocr.check_pixels(*image.size)
            image.load()
        except ParseError:
            raise
        except (OSError, ValueError, SyntaxError, EOFError) as exc:
            raise ParseError(ErrorCode.PARSE_FAILED, f"corrupt image: {reason(exc)}") from exc
        try:
            found = ocr.read_page(image, number, options.timeout_s)
        except ParseError as exc:  # a frame OCR could not read in time is left out, as a PDF's page is
            log.warning("frame %d left out: %s", number, exc.message)
            failures.append(exc.message)
            continue
        if found.lines:
            builder.blank()
            builder.add(found.text, page=number, ocr=found.confidence)
    segments = builder.segments()
    if not segments and failures:
        raise ParseError(ErrorCode.PARSE_FAILED, failures[0])
    return ParsedDocument(FORMAT, segments, pages=frames)
