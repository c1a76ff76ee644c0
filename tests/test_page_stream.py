"""A long PDF's pages chunked as they are read (:mod:`foldermind.workers.parser.stream`) give exactly the chunks of
a parse in one go: the same texts, ordinals, characters, lines and pages, each once.

The real PDF parser and the real tokenizer; the stream's clock is the test's, so the moments it sends at are
chosen (a part after the first page, then each time the pages read doubled, or grew by a quarter) instead of
depending on how fast this machine parses.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from foldermind.protocol.messages import ChunkInfo, ParsePartial
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import parse_content, progress
from foldermind.workers.parser.stream import AT_MOST_S, FIRST_AFTER_S, PageStream
from tests.filemakers import make_pdf

PAGES = 60


def book(path: Path) -> Path:
    """A PDF whose pages differ in length (a page of one line, pages of many) and one page with no text."""
    pages = []
    for p in range(PAGES):
        lines = [f"Page {p} line {n}: the {p}th lemming counts {n * p} pebbles. " * (1 + p % 3) for n in range(p % 17)]
        pages.append(lines)
    pages[0] = ["A book of pages, opening with the aardvark."]
    return make_pdf(path, pages)


class Clock:
    """0 when first read (the stream's start), then ``first`` and on by ``step`` seconds each time it is read."""

    def __init__(self, first: float, step: float) -> None:
        self.now: float | None = None
        self.first, self.step = first, step

    def __call__(self) -> float:
        self.now = 0.0 if self.now is None else max(self.now + self.step, self.first)
        return self.now


def streamed(data: bytes, first: float, step: float) -> tuple[list[ParsePartial], list[ChunkInfo]]:
    tokenizer = load_tokenizer()
    sent: list[ParsePartial] = []
    stream = PageStream(sent.append, tokenizer, 256, 32, 16 * 1024 * 1024, clock=Clock(first, step))
    with progress.streaming(stream.offer):
        doc = parse_content(Path("/book.pdf"), data, len(data))
    rest = stream.finish(doc.segments)
    return sent, [c for part in sent for c in part.chunks] + rest


def test_a_pdf_sent_page_by_page_ends_with_the_chunks_of_a_parse_in_one_go(tmp_path: Path) -> None:
    data = book(tmp_path / "book.pdf").read_bytes()
    doc = parse_content(Path("/book.pdf"), data, len(data))
    whole = chunk(doc.segments, load_tokenizer(), 256, 32)
    assert len(whole) > PAGES // 2
    # Past the first wait at once, then quickly: parts after pages 1, 2, 4, 8, ... (doubling)
    sent, chunks = streamed(data, FIRST_AFTER_S, 0.01)
    read = [p.pages_read for p in sent]
    assert all(isinstance(n, int) for n in read)
    pages = [int(n or 0) for n in read]
    assert pages[0] == 1 and pages[-1] < PAGES and all(b >= 2 * a for a, b in itertools.pairwise(pages))
    assert {p.pages for p in sent} == {PAGES}
    assert sum(len(p.chunks) for p in sent) < len(whole)
    assert chunks == whole
    # AT_MOST_S between pages: a part each time the pages read grew by a quarter; the same chunks again.
    sent, chunks = streamed(data, FIRST_AFTER_S, AT_MOST_S)
    pages = [int(p.pages_read or 0) for p in sent]
    assert len(pages) > 10 and pages[0] == 1 and pages[-1] > PAGES * 3 // 4, pages
    assert all(4 * b >= 5 * a and b < 2 * a for a, b in itertools.pairwise(pages[2:])), pages
    assert chunks == whole


def test_a_parse_quicker_than_the_first_wait_sends_nothing_ahead(tmp_path: Path) -> None:
    data = book(tmp_path / "book.pdf").read_bytes()
    sent, chunks = streamed(data, 0.0, 0.0)
    assert sent == []
    doc = parse_content(Path("/book.pdf"), data, len(data))
    assert chunks == chunk(doc.segments, load_tokenizer(), 256, 32)
