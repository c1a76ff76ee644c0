"""One PDF page as a PNG for the console's preview, the passage's text marked on it (``parse.render.request``).

pdfium renders the page (at 2x its size in points, or smaller to stay within ``max_pixels``) and finds each
highlight text in the page's text layer (any case); its character boxes are drawn over in translucent yellow with
Pillow, so the page needs no overlay markup (the console's CSP allows no inline style). It runs in a parser, under
the parser's memory cap, as every read of a user's file does.
"""

from __future__ import annotations

import io
import math

import pypdfium2 as pdfium
from PIL import Image, ImageDraw

MAX_SCALE = 2.0
MARK = (255, 214, 10, 110)
"""The highlight's colour: translucent yellow."""


class RenderError(Exception):
    """The file is not a PDF pdfium can open, or the page is not in it."""


def render(path: str, page_no: int, max_pixels: int, highlight: list[str]) -> tuple[bytes, int, int, int, int]:
    """(PNG, width, height, page count, highlights found) of page ``page_no`` (1-based) of the PDF at ``path``."""
    try:
        pdf = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        raise RenderError(f"not a PDF that can be opened: {exc}") from None
    try:
        pages = len(pdf)
        if not 1 <= page_no <= pages:
            raise RenderError(f"page {page_no} is not in this {pages}-page PDF")
        page = pdf[page_no - 1]
        width_pt, height_pt = page.get_size()
        scale = min(MAX_SCALE, math.sqrt(max(max_pixels, 10_000) / max(width_pt * height_pt, 1.0)))
        image = page.render(scale=scale).to_pil().convert("RGBA")
        overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(overlay)
        textpage = page.get_textpage()
        found = 0
        for text in highlight:
            searcher = textpage.search(text, match_case=False)
            hit = searcher.get_next()
            if hit is None:
                continue
            found += 1
            start, count = hit
            for i in range(textpage.count_rects(start, count)):
                left, bottom, right, top = textpage.get_rect(i)
                box = (left * scale, (height_pt - top) * scale, right * scale, (height_pt - bottom) * scale)
                draw.rectangle(box, fill=MARK)
        out = io.BytesIO()
        Image.alpha_composite(image, overlay).convert("RGB").save(out, format="PNG", optimize=False)
        return out.getvalue(), image.width, image.height, pages, found
    finally:
        pdf.close()
