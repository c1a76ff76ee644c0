"""A long PDF's pages chunked as they are read (:mod:`foldermind.workers.parser.stream`) give exactly the chunks of
a parse in one go: the same texts, ordinals, characters, lines and pages, each once.

The real PDF parser and the real tokenizer; the stream's clock is the test's, so the moments it sends at are
chosen (a part after every few pages, then doubling) instead of depending on how fast this machine parses.
"""

from __future__ import annotations

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
    """Moves on by ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def streamed(data: bytes, step: float) -> tuple[list[ParsePartial], list[ChunkInfo]]:
    tokenizer = load_tokenizer()
    sent: list[ParsePartial] = []
    stream = PageStream(sent.append, tokenizer, 256, 32, 16 * 1024 * 1024, clock=Clock(step))
    with progress.streaming(stream.offer):
        doc = parse_content(Path("/book.pdf"), data, len(data))
    rest = stream.finish(doc.segments)
    return sent, [c for part in sent for c in part.chunks] + rest


def test_a_pdf_sent_page_by_page_ends_with_the_chunks_of_a_parse_in_one_go(tmp_path: Path) -> None:
    data = book(tmp_path / "book.pdf").read_bytes()
    doc = parse_content(Path("/book.pdf"), data, len(data))
    whole = chunk(doc.segments, load_tokenizer(), 256, 32)
    assert len(whole) > PAGES // 2
    # Past the first wait at once, then doubling: parts after pages 1, 2, 4, 8, ...
    sent, chunks = streamed(data, FIRST_AFTER_S)
    read = [p.pages_read for p in sent]
    assert read == sorted(read) and read[0] is not None and read[-1] is not None
    assert read[0] < 4 and read[-1] < PAGES, read
    assert {p.pages for p in sent} == {PAGES}
    assert sum(len(p.chunks) for p in sent) < len(whole)
    assert chunks == whole
    # A part at every page once AT_MOST_S passes between pages: the same chunks again.
    sent, chunks = streamed(data, AT_MOST_S)
    assert [p.pages_read for p in sent] == list(range(1, PAGES + 1))
    assert chunks == whole


def test_a_parse_quicker_than_the_first_wait_sends_nothing_ahead(tmp_path: Path) -> None:
    data = book(tmp_path / "book.pdf").read_bytes()
    sent, chunks = streamed(data, 0.0)
    assert sent == []
    doc = parse_content(Path("/book.pdf"), data, len(data))
    assert chunks == chunk(doc.segments, load_tokenizer(), 256, 32)
