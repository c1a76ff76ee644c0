"""Segments -> chunks that fit the embedding model, measured with the model's own tokenizer.

Rules:

- A chunk never holds more than ``max_tokens`` tokens *including* the special tokens the model adds
  (``[CLS]``/``[SEP]``). A chunk is re-encoded to check it unless its count is known exactly: with a
  WordPiece tokenizer behind BERT's pre-tokenizer (the bundled model's), a span cut where a word starts
  and ends is tokenized on its own as it was in the whole text, so its count is the tokens between its
  cuts plus the specials. On the benches' abstracts that skips every re-encoding, a third of the parsers' work.
- A chunk never crosses a heading or a page: a section is a run of segments with the same heading
  path and page (and OCR confidence, for text read from a page image), and sections are chunked on
  their own.
- Inside a section, whole sentences (or lines, or paragraphs) are packed up to the limit; a sentence
  too long for one chunk is cut between words (between tokens for one enormous word).
- A chunk never holds more than :data:`MAX_CHUNK_CHARS` characters either: a word the tokenizer cannot
  split is one unknown token however long it is (up to a piece, below), so text without spaces would
  otherwise make chunks of megabytes.
- The next chunk of a section starts up to ``overlap_tokens`` before the end of the previous one,
  at a sentence start if the overlap holds one, else at a word start.
- A chunk's text is exactly ``extracted_text[char_start:char_end]``, its lines and page those of
  that text.

Each segment is tokenized once (``encode_batch``); boundaries come from the token offsets.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from foldermind.protocol.messages import ChunkInfo
from foldermind.workers.parser.formats import Segment, progress

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# Boundary strength before a token: where a chunk would best end (and the next one start).
PARAGRAPH = 3  # a new segment, or a blank line
SENTENCE = 2  # after ., !, ?, 。 ...
LINE = 1  # a line break inside a segment
WORD = 0  # a new word (the pre-tokenizer's words: whitespace and punctuation split them)
INSIDE = -1  # inside a word, between word pieces

# Ideographic and fullwidth stops (and the halfwidth ideographic one) end a sentence even with no space after them.
_FULLWIDTH_END = frozenset("\u3002\uff01\uff1f\uff0e\uff61")
_SENTENCE_END = frozenset(".!?\u2026") | _FULLWIDTH_END
_CLOSERS = frozenset("\"')]}\u00bb\u201d\u2019\u300d\u300f\uff09")  # closing quotes and brackets


def load_tokenizer(path: Path | None = None) -> Tokenizer:
    """The embedding model's tokenizer, with the file's padding and truncation switched off."""
    from tokenizers import Tokenizer

    if path is None:
        from foldermind.workers.embedding.model_files import tokenizer_file

        path = tokenizer_file()
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.no_truncation()
    return tok


PIECE_CHARS = 16_384
"""Longer segments are tokenized in pieces of about this size (cut at a line break or space)."""
MAX_CHUNK_CHARS = 2 * PIECE_CHARS
"""The most characters one chunk holds (a token spans at most a piece, so one always fits)."""
ENCODE_BATCH = 32
"""Pieces per ``encode_batch`` call; with streaming packing this bounds memory on huge files."""
VERIFY_BATCH = 256
"""Chunks per re-encoding check."""


def chunk(
    segments: Sequence[Segment], tokenizer: Tokenizer, max_tokens: int = 256, overlap_tokens: int = 32
) -> list[ChunkInfo]:
    """Chunks of ``segments`` (positions into their extracted text, ``"\\n"``.join of their texts)."""
    specials = tokenizer.num_special_tokens_to_add(False)
    budget = max_tokens - specials
    if budget < 1:
        raise ValueError(f"max_tokens {max_tokens} leaves no room next to {specials} special tokens")
    overlap = max(0, min(overlap_tokens, budget // 2))

    # Where each segment starts in the extracted text (recomputed: the definition is the join).
    starts: list[int] = []
    pos = 0
    for seg in segments:
        starts.append(pos)
        pos += len(seg.text) + 1
    full = "\n".join(seg.text for seg in segments)
    newlines = [m.start() for m in re.finditer("\n", full)]

    chunks: list[ChunkInfo] = []
    # char_start, char_end, a segment of the section, the chunk's count with the specials when known exactly
    pending: list[tuple[int, int, Segment, int | None]] = []
    exact = _word_exact(tokenizer)

    def verify() -> None:
        # Re-encode with the specials, as the model will see each chunk; cut again what does not fit.
        unknown = [full[a:b] for a, b, _, known in pending if known is None]
        encoded = iter(len(enc.ids) for enc in tokenizer.encode_batch(unknown)) if unknown else iter(())
        counts = [next(encoded) if known is None else known for _, _, _, known in pending]
        for (a, b, seg, _), count in zip(pending, counts, strict=True):
            pieces = [(a, b, count)] if count <= max_tokens else _refit(full, a, b, tokenizer, budget, specials)
            for ca, cb, n in pieces:
                info = ChunkInfo(
                    ordinal=len(chunks),
                    text=full[ca:cb],
                    tokens=n,
                    heading=seg.heading,
                    page_start=seg.page,
                    page_end=seg.page,
                    line_start=bisect.bisect_left(newlines, ca) + 1,
                    line_end=bisect.bisect_left(newlines, cb - 1) + 1,
                    char_start=ca,
                    char_end=cb,
                )
                if seg.ocr is not None:
                    info["ocr_confidence"] = seg.ocr
                chunks.append(info)
        pending.clear()

    for section in _sections(segments):
        progress.step()
        first = segments[section[0]]
        for a, b, n, clean in _pack(_tokens(section, segments, starts, full, tokenizer), budget, overlap):
            pending.append((a, b, first, n + specials if exact and clean else None))
            if len(pending) >= VERIFY_BATCH:
                verify()
    if pending:
        verify()
    return chunks


def _word_exact(tokenizer: Tokenizer) -> bool:
    """Whether a span cut at word boundaries tokenizes on its own as it did inside the whole text: true of
    WordPiece behind BERT's pre-tokenizer (whitespace dropped, punctuation and CJK split into words, a
    normalizer that works a character at a time), not of byte-level BPE, whose tokens carry the space."""
    from tokenizers import models, normalizers, pre_tokenizers

    return (
        isinstance(getattr(tokenizer, "model", None), models.WordPiece)
        and isinstance(getattr(tokenizer, "pre_tokenizer", None), pre_tokenizers.BertPreTokenizer)
        and isinstance(getattr(tokenizer, "normalizer", None), normalizers.BertNormalizer | type(None))
    )


def _sections(segments: Sequence[Segment]) -> Iterator[list[int]]:
    """Runs of non-blank segments with the same heading path, page and OCR confidence (blank ones are
    skipped): a chunk of OCR'd text carries the confidence of the page it was read from."""
    run: list[int] = []
    key: tuple[str | None, int | None, float | None] | None = None
    for i, seg in enumerate(segments):
        if not seg.text.strip():
            continue
        if run and (seg.heading, seg.page, seg.ocr) != key:
            yield run
            run = []
        key = (seg.heading, seg.page, seg.ocr)
        run.append(i)
    if run:
        yield run


def _pieces(text: str) -> Iterator[tuple[int, str, bool]]:
    """``text`` in pieces of at most ``PIECE_CHARS``, cut after a line break or a space when possible; each
    with whether it starts where a word does (the text's start, or after such a cut)."""
    pos, n, clean = 0, len(text), True
    while n - pos > PIECE_CHARS:
        hi = pos + PIECE_CHARS
        cut = text.rfind("\n", pos + PIECE_CHARS // 2, hi)
        if cut < 0:
            cut = text.rfind(" ", pos + PIECE_CHARS // 2, hi)
        yield pos, text[pos : hi if cut < 0 else cut + 1], clean
        pos, clean = (hi, False) if cut < 0 else (cut + 1, True)
    yield pos, text[pos:], clean


Token = tuple[int, int, int, bool]
"""A token as ``(char_start, char_end, level, forced)``: its span in the extracted text, the strength of
the boundary before it, and whether it opens a piece cut inside a word (a word longer than half a piece):
the tokenizer saw the two sides of that cut apart, so a chunk across or at it is re-encoded."""


def _tokens(
    section: list[int], segments: Sequence[Segment], starts: list[int], full: str, tokenizer: Tokenizer
) -> Iterator[Token]:
    """The section's tokens in order, tokenized a batch of pieces at a time."""
    pieces = (
        (starts[i] + off, text, off == 0, clean) for i in section for off, text, clean in _pieces(segments[i].text)
    )
    prev_end = -1
    prev_word: int | None = None
    after_end = False  # the previous token closed a sentence (a closing quote may follow)
    while batch := list(itertools.islice(pieces, ENCODE_BATCH)):
        encodings = tokenizer.encode_batch([text for _, text, _, _ in batch], add_special_tokens=False)
        for (base, _, new_segment, clean), enc in zip(batch, encodings, strict=True):
            words = enc.word_ids
            for j, (a, b) in enumerate(enc.offsets):
                a += base
                b += base
                if prev_end < 0 or (j == 0 and new_segment):
                    level = PARAGRAPH
                else:
                    gap = full[prev_end:a]
                    if "\n" in gap:
                        level = PARAGRAPH if gap.count("\n") > 1 else (SENTENCE if after_end else LINE)
                    elif after_end and (gap or full[prev_end - 1] in _FULLWIDTH_END):
                        level = SENTENCE
                    elif gap or j == 0 or words[j] != prev_word:
                        level = WORD
                    else:
                        level = INSIDE
                yield a, b, level, j == 0 and not clean
                if b - a == 1:
                    ch = full[a]
                    if ch in _SENTENCE_END:
                        after_end = True
                    elif not (after_end and ch in _CLOSERS and a == prev_end):
                        after_end = False
                else:
                    after_end = False
                prev_end = b
                prev_word = words[j]


def _pack(tokens: Iterator[Token], budget: int, overlap: int) -> Iterator[tuple[int, int, int, bool]]:
    """Character spans of one section's chunks, each at most ``budget`` tokens, with its number of tokens
    and whether that number is exact (:func:`_exact`, see the module).

    Streams: only the tokens from the current chunk's start to its limit are held."""
    buf: list[Token] = []
    exhausted = False
    start = done = 0  # indexes into buf: this chunk's first token, the previous chunk's end
    min_fill = max(1, budget // 4)  # end at a sentence only if the chunk is at least this full
    while True:
        while not exhausted and len(buf) <= start + budget:
            tok = next(tokens, None)
            if tok is None:
                exhausted = True
            else:
                buf.append(tok)
        n = len(buf)
        if start >= n:
            return
        # The first token past MAX_CHUNK_CHARS from the chunk's start ends it at the latest.
        past = max(start + 1, bisect.bisect_right(buf, buf[start][0] + MAX_CHUNK_CHARS, start, n, key=lambda t: t[1]))
        if past <= done:  # not one new token fits after the overlap: this chunk starts without it
            del buf[:done]
            start = done = 0
            continue
        limit = min(start + budget, past)
        if limit >= n:
            yield buf[start][0], buf[n - 1][1], n - start, _exact(buf, start, n)
            return
        lo = max(done + 1, start + min_fill)
        end = (
            _last(buf, lo, limit, SENTENCE) or _last(buf, lo, limit, LINE) or _last(buf, done + 1, limit, WORD) or limit
        )
        yield buf[start][0], buf[end - 1][1], end - start, _exact(buf, start, end)
        next_start = end
        if overlap:
            lo = max(end - overlap, start + 1)
            next_start = _first(buf, lo, end - 1, SENTENCE) or _first(buf, lo, end - 1, WORD) or end
        del buf[:next_start]
        start, done = 0, end - next_start


def _exact(buf: list[Token], start: int, end: int) -> bool:
    """Whether ``buf[start:end]`` is cut where words start (its end: where the next token starts, or the
    section's end) and no piece was cut inside a word within it: its tokens are then those of its text."""
    if buf[start][2] < WORD or (end < len(buf) and buf[end][2] < WORD):
        return False
    return not any(buf[i][3] for i in range(start, min(end + 1, len(buf))))


def _last(buf: list[Token], lo: int, hi: int, at_least: int) -> int:
    """The last index in ``[lo, hi]`` whose level is ``at_least`` or more, else 0 (never a cut)."""
    for i in range(hi, lo - 1, -1):
        if buf[i][2] >= at_least:
            return i
    return 0


def _first(buf: list[Token], lo: int, hi: int, at_least: int) -> int:
    for i in range(lo, hi + 1):
        if buf[i][2] >= at_least:
            return i
    return 0


def _refit(full: str, a: int, b: int, tokenizer: Tokenizer, budget: int, specials: int) -> list[tuple[int, int, int]]:
    """Cut ``full[a:b]`` into pieces that fit once re-encoded (a cut inside a word can re-tokenize
    the pieces differently); returns ``(char_start, char_end, tokens with specials)``."""
    pieces: list[tuple[int, int, int]] = []
    pos = a
    while pos < b:
        rest = full[pos:b]
        offsets = tokenizer.encode(rest, add_special_tokens=False).offsets
        if not offsets:
            break
        if len(offsets) <= budget:
            pieces.append((pos + offsets[0][0], pos + offsets[-1][1], len(offsets) + specials))
            break
        k = budget
        while True:
            cut = offsets[k - 1][1]
            got = len(tokenizer.encode(rest[:cut], add_special_tokens=False).ids)
            if got <= budget or k == 1:
                break
            k = max(1, k - (got - budget))
        pieces.append((pos + offsets[0][0], pos + cut, got + specials))
        pos += offsets[k][0]
    return pieces
