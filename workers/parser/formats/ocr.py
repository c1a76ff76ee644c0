"""OCR: a page image -> its lines of text and their mean confidence (RapidOCR on ONNX Runtime).

RapidOCR's ``rapidocr-onnxruntime`` wheel ships its PP-OCRv4 ONNX models (text detection, recognition, and a
180-degree line classifier; 16 MB in all), so reading a scan downloads nothing and needs no system binary. The line
classifier is not used: it turned clean lines opening with "(" or a quote upside down, and they read as garbage
(docs/tuning.md#parsers). A page scanned upside down is therefore not read.

The engine loads once per parser process (~0.4 s) on one ONNX and one OpenCV thread: the parser pool gives the
parallelism, and each thread would reserve address space under the parser's memory cap.

Bounds, so that a hostile image costs at most this parser:

- **pixels** (:data:`MAX_PIXELS`): an image is refused from its header, before it is decoded, when it holds more
  pixels than a letter page scanned at 1200 dpi (Pillow's own bomb check is this one). A PDF page is rendered at
  :data:`RENDER_DPI` unless that would pass :data:`MAX_RENDER_PIXELS` (a page of 200 x 200 inches), then smaller.
- **time** (:func:`time_limit`): each page gets ``[ingest] ocr_timeout_s`` of CPU time. The limit is a SIGPROF timer
  (the process's CPU) on the parser's main thread, so it fires between two ONNX runs (the longest, detection on a
  full page, takes ~2 s here) and the page is left out with a reason. CPU, not the wall clock: on a busy machine a
  page is read as on an idle one, only later (slow is not hung).
- **memory**: RapidOCR shrinks every image to 2000 px on its longest side before detection, so a page costs about
  the same whatever its resolution (~600 MiB of address space at its peak, on top of the parser's ~550 with OCR
  loaded: :func:`foldermind.workers.parser.spare_address_space`).

A page's confidence is the length-weighted mean of RapidOCR's line scores (it drops lines under 0.5).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import ParseError

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger("foldermind.parser")

ENGINE_MODULE = "rapidocr_onnxruntime"
MAX_PIXELS = 10_200 * 13_200
"""A letter page at 1200 dpi (~135 Mpx): more than any scanner makes, far less than a bomb."""
RENDER_DPI = 300
"""PDF pages without a text layer are rendered at this resolution, images not smoothed, for OCR. RapidOCR
then shrinks the page to 2000 px on its longest side itself; rendering straight to 2000 px, or smoothing, read
worse (docs/tuning.md#parser-bounds)."""
MAX_RENDER_PIXELS = 40_000_000
"""A rendered page never holds more pixels than this (a poster-sized page is rendered at a lower dpi)."""
BUDGET_SHARE = 0.8
"""OCR stops once the parse has used this share of its deadline in CPU seconds: the pages read by then are indexed."""
OCR_OFF = "OCR is off ([ingest] ocr = false)"
OCR_MISSING = f"OCR is not installed ({ENGINE_MODULE} is missing)"


def image_too_large(width: int, height: int) -> str:
    """The reason an image of ``width`` x ``height`` pixels is refused with."""
    return f"image too large: {width} x {height} pixels (the limit is {MAX_PIXELS:,} pixels)"


def ocr_timed_out(page: int, seconds: float) -> str:
    """The reason a page that OCR could not read in time is left out with."""
    return f"OCR of page {page} took longer than {seconds:g} s ([ingest] ocr_timeout_s)"


@dataclass(frozen=True, slots=True)
class PageText:
    """What OCR read on one page: its lines, top to bottom, and their mean confidence (0..1)."""

    lines: list[str]
    confidence: float

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class Settings:
    """The [ingest] OCR settings, and when the parse that uses them must be done."""

    enabled: bool
    max_pages: int
    timeout_s: float
    deadline: float
    """``time.thread_time()`` of the parse's thread past which no page is started."""

    def left_s(self) -> float:
        return self.deadline - time.thread_time()


def settings(size: int) -> Settings:
    """The configured OCR settings for a parse of a file of ``size`` bytes that starts now."""
    from foldermind.protocol.runtime.config import ingest_from_env

    policy = ingest_from_env()
    budget = BUDGET_SHARE * policy.parse_deadline_s(size)
    return Settings(policy.ocr, policy.ocr_max_pages, policy.ocr_timeout_s, time.thread_time() + budget)


def available() -> bool:
    """Whether the OCR engine is installed (looked up, not imported: cheap)."""
    return importlib.util.find_spec(ENGINE_MODULE) is not None


def state() -> str:
    """This process's OCR: ``loaded``, ``not loaded yet`` (it loads on the first scan), ``off`` or ``not
    installed``."""
    from foldermind.protocol.runtime.config import ingest_from_env

    if _engine is not None:
        return "loaded"
    if not ingest_from_env().ocr:
        return "off"
    return "not loaded yet" if available() else "not installed"


_engine: Any = None


def engine() -> Any:
    """The process's RapidOCR engine, loaded on first use."""
    global _engine
    if _engine is None:
        if not available():
            raise ParseError(ErrorCode.PARSE_FAILED, OCR_MISSING)
        import cv2
        from rapidocr_onnxruntime import RapidOCR

        logging.getLogger("RapidOCR").setLevel(logging.WARNING)  # it logs every model it loads
        cv2.setNumThreads(1)
        # Its global thread settings, which RapidOCR copies over any per-model ones.
        _engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
    return _engine


class OcrTimeout(BaseException):
    """A page's OCR ran past its time limit. A BaseException, as KeyboardInterrupt is: it is raised wherever
    the engine happens to be, and RapidOCR wraps any Exception from its resize step in an error of its own."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`OcrTimeout` in the block once the process has used ``seconds`` of CPU in it. A timer signal,
    so only on the main thread (the parser worker's jobs run there); elsewhere the block runs unbounded."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise OcrTimeout

    previous = signal.signal(signal.SIGPROF, expired)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def read_page(image: Image, page: int, timeout_s: float) -> PageText:
    """OCR of one page image; raises :class:`ParseError` when it runs past ``timeout_s``."""
    import numpy as np

    rgb = np.asarray(image.convert("RGB"))[:, :, ::-1]  # RapidOCR takes OpenCV's BGR order
    read = engine()  # loaded outside the page's time: the first page would pay for it
    try:
        with time_limit(timeout_s):
            found, _ = read(rgb, use_cls=False)
    except OcrTimeout:
        raise ParseError(ErrorCode.PARSE_FAILED, ocr_timed_out(page, timeout_s)) from None
    return page_text(found or [])


def page_text(found: Sequence[Sequence[Any]]) -> PageText:
    """RapidOCR's ``[box, text, score]`` results (boxes in reading order, top to bottom) as lines: boxes
    whose middles sit on the same height are one line, left to right."""
    rows: list[list[tuple[float, str, float]]] = []
    last_mid, last_height = -1.0, 0.0
    for box, text, score in found:
        text = " ".join(str(text).split())
        if not text:
            continue
        ys = [float(p[1]) for p in box]
        mid, height = sum(ys) / len(ys), max(ys) - min(ys)
        left = min(float(p[0]) for p in box)
        if rows and abs(mid - last_mid) < max(height, last_height) / 2:
            rows[-1].append((left, text, float(score)))
        else:
            rows.append([(left, text, float(score))])
            last_height = height
        last_mid = mid
    lines: list[str] = []
    weighted = chars = 0.0
    for row in rows:
        row.sort()
        lines.append(" ".join(text for _, text, _ in row))
        for _, text, score in row:
            weighted += score * len(text)
            chars += len(text)
    return PageText(lines, round(weighted / chars, 4) if chars else 0.0)


def check_pixels(width: int, height: int) -> None:
    """Refuse an image of more than :data:`MAX_PIXELS` (from its header, before it is decoded)."""
    if width * height > MAX_PIXELS:
        raise ParseError(ErrorCode.PARSE_FAILED, image_too_large(width, height))


def render_scale(width_pt: float, height_pt: float) -> float:
    """The scale (pixels per PDF point) a page of this size is rendered at for OCR."""
    scale = RENDER_DPI / 72
    pixels = width_pt * height_pt * scale * scale
    if pixels > MAX_RENDER_PIXELS:
        scale *= (MAX_RENDER_PIXELS / pixels) ** 0.5
    return scale
