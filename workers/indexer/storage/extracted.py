"""A document's extracted text, rebuilt from its stored chunks (``read_document``).

The parser sends only chunks, never the whole text, so the text is put back together from them:
each chunk is exactly ``extracted_text[char_start:char_end]``, consecutive chunks of a section
overlap, and what lies between two chunks that do not touch (a heading or page change, blank
lines, the start of the file) is text the chunker skipped. It skips only what the model's
tokenizer yields no token for: whitespace, and control or format characters. The line numbers
say how many of those characters were line breaks, so a gap is refilled with that many ``"\\n"``
and spaces for the rest (put after the breaks, as indentation).

So the rebuilt text has the same length and the same line breaks as the extracted text, and the
same characters wherever a chunk holds them; it differs only in whitespace that no chunk holds
(and it ends where the last chunk ends: trailing blank lines are not kept).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from foldermind.workers.indexer.storage.chunks import ChunkPos
from foldermind.workers.indexer.storage.store import Store


def rebuild(chunks: Iterable[ChunkPos], pos: int = 0, line: int = 1) -> str:
    """The text from offset ``pos`` (which is on line ``line``) to the end of the last chunk.
    ``chunks`` are in document order and the first one starts at or after ``pos``."""
    out: list[str] = []
    for c in chunks:
        if c.char_start > pos:
            gap = c.char_start - pos
            breaks = max(0, min(gap, c.line_start - line))
            out.append("\n" * breaks + " " * (gap - breaks))
            line += breaks
            pos = c.char_start
        end = c.char_start + len(c.text)
        if end > pos:
            piece = c.text[pos - c.char_start :]
            out.append(piece)
            line += piece.count("\n")
            pos = end
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Lines:
    text: str
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool


def read_lines(store: Store, doc_id: int, start_line: int, end_line: int | None, max_chars: int) -> Lines:
    """Lines ``start_line..end_line`` (1-based, inclusive; ``None``: to the end) of the document's
    extracted text, whole lines only while they fit in ``max_chars`` (a first line longer than that
    is cut). Only the chunks around the range are read, so paging through a big file stays cheap."""
    total = store.chunks.last_line(doc_id)
    last_wanted = total if end_line is None else min(end_line, total)
    asked_past_end = end_line is not None and end_line > total
    if start_line > last_wanted:
        return Lines("", start_line, start_line - 1, total, asked_past_end)
    first = _first_chunk_reaching(store, doc_id, start_line)
    # Start one chunk earlier: where that one ends tells how much of a gap precedes the first.
    begin = max(0, first - 1)
    picked: list[ChunkPos] = []
    budget_end: int | None = None
    stream = store.chunks.from_ordinal(doc_id, begin)
    try:
        for c in stream:
            picked.append(c)
            if c.line_start > last_wanted:
                # Past the range, but its start tells how long the gap before it is: lines that no
                # chunk holds (a blank line before a heading) exist only once this chunk is read.
                break
            if c.ordinal == first:
                budget_end = _line_offset(c, start_line) + max_chars + 1
            elif budget_end is not None and c.char_start > budget_end:
                break  # past the budget: this chunk's start closes every line that can still fit
    finally:
        stream.close()
    if not picked:
        return Lines("", start_line, start_line - 1, total, asked_past_end)
    text = rebuild(picked, picked[0].char_start, picked[0].line_start)
    # Never empty: the first chunk reaching start_line is picked, so the text gets to that line.
    lines = text.split("\n")[start_line - picked[0].line_start : last_wanted - picked[0].line_start + 1]
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = len(line) + (1 if kept else 0)
        if used + cost > max_chars:
            break
        kept.append(line)
        used += cost
    if not kept:  # one line longer than the whole budget: its beginning
        return Lines(lines[0][:max_chars], start_line, start_line, total, True)
    cut = len(kept) < len(lines)
    return Lines("\n".join(kept), start_line, start_line + len(kept) - 1, total, cut or asked_past_end)


def _first_chunk_reaching(store: Store, doc_id: int, line: int) -> int:
    """The first ordinal whose chunk ends on or after ``line`` (chunk ends only grow with ordinal)."""
    lo, hi = 0, store.chunks.count(doc_id) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if store.chunks.line_end(doc_id, mid) >= line:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _line_offset(c: ChunkPos, line: int) -> int:
    """Where ``line`` starts, for a chunk that reaches it (its own start if the line begins earlier)."""
    pos = 0
    for _ in range(line - c.line_start):
        found = c.text.find("\n", pos)
        if found < 0:
            break
        pos = found + 1
    return c.char_start + pos
