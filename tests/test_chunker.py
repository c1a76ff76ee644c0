"""The chunker: the embedding model's own tokenizer decides what fits; sections and pages are walls."""

from __future__ import annotations

import itertools
import random
from typing import Any, cast

import pytest
from tokenizers import Tokenizer

from foldermind.protocol.messages import ChunkInfo
from foldermind.workers.parser import chunker
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import Segment, extracted_text, parse_txt

VOCABULARY = (
    "the protein binding assay showed that mitochondrial expression increased significantly in treated "
    "cells while control samples remained stable across all measured time points during the trial"
)
WORDS = VOCABULARY.split()


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer()


def sentences(n: int, seed: int = 1, lo: int = 6, hi: int = 30) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "." for _ in range(n)]


def prose(words: int, seed: int = 1) -> str:
    """About ``words`` words of sentences, in paragraphs of a few sentences."""
    out: list[str] = []
    count = 0
    rng = random.Random(seed)
    while count < words:
        para = sentences(rng.randint(2, 6), seed=rng.randint(0, 10**9))
        count += sum(len(s.split()) for s in para)
        out.append(" ".join(para))
    return "\n\n".join(out) + "\n"


def model_tokens(tokenizer: Tokenizer, text: str) -> int:
    """What the model will see: the text with its [CLS]/[SEP]."""
    return len(tokenizer.encode(text, add_special_tokens=True).ids)


def assert_on_lines(c: ChunkInfo, lines: list[str]) -> None:
    """The chunk's text starts on line_start, ends on line_end and is the text of the lines between."""
    first, *_, last = c["text"].split("\n") if "\n" in c["text"] else (c["text"], c["text"])
    assert c["line_end"] - c["line_start"] == c["text"].count("\n")
    if c["line_start"] == c["line_end"]:
        assert c["text"] in lines[c["line_start"] - 1]
    else:
        assert lines[c["line_start"] - 1].endswith(first)
        assert lines[c["line_end"] - 1].startswith(last)
        assert "\n".join(lines[c["line_start"] : c["line_end"] - 1]) in c["text"]


def check_invariants(chunks: list[ChunkInfo], segments: list[Segment], tokenizer: Tokenizer, limit: int) -> None:
    text = extracted_text(segments)
    lines = text.split("\n")
    assert [c["ordinal"] for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c["text"] == text[c["char_start"] : c["char_end"]]
        assert c["text"] == c["text"].strip()
        assert c["tokens"] == model_tokens(tokenizer, c["text"]) <= limit
        assert_on_lines(c, lines)
    # Nothing is lost: every token-bearing character of the text is inside some chunk.
    covered = [False] * len(text)
    for c in chunks:
        covered[c["char_start"] : c["char_end"]] = [True] * (c["char_end"] - c["char_start"])
    missed = "".join(ch for ch, hit in zip(text, covered, strict=True) if not hit)
    assert not missed.strip(), f"text outside every chunk: {missed[:80]!r}"


def test_long_text_fits_the_model_with_specials(tokenizer: Tokenizer) -> None:
    doc = parse_txt(prose(5000).encode())
    chunks = chunk(doc.segments, tokenizer, max_tokens=256, overlap_tokens=32)
    assert len(chunks) > 20
    check_invariants(chunks, doc.segments, tokenizer, 256)
    assert max(c["tokens"] for c in chunks) <= 256
    assert sum(c["tokens"] for c in chunks) / len(chunks) > 256 * 0.6  # packed, not one sentence per chunk
    # Whole sentences: every chunk but the last ends at the end of a sentence.
    assert all(c["text"].endswith(".") for c in chunks)


def test_consecutive_chunks_overlap_modestly(tokenizer: Tokenizer) -> None:
    doc = parse_txt(prose(3000, seed=2).encode())
    chunks = chunk(doc.segments, tokenizer, max_tokens=256, overlap_tokens=32)
    text = doc.text
    for prev, nxt in itertools.pairwise(chunks):
        assert prev["char_start"] < nxt["char_start"] < prev["char_end"] < nxt["char_end"]
        shared = text[nxt["char_start"] : prev["char_end"]]
        assert 0 < len(tokenizer.encode(shared, add_special_tokens=False).ids) <= 32
    without = chunk(doc.segments, tokenizer, max_tokens=256, overlap_tokens=0)
    for prev, nxt in itertools.pairwise(without):
        assert nxt["char_start"] > prev["char_end"]
    assert len(without) < len(chunks)


def test_chunks_break_at_headings_and_pages(tokenizer: Tokenizer) -> None:
    segments = [
        Segment("Setup", heading="Setup"),
        Segment(" ".join(sentences(3, seed=3)), heading="Setup"),
        Segment(" ".join(sentences(2, seed=4)), heading="Setup > Windows"),
        Segment(" ".join(sentences(2, seed=5)), heading="Setup > Windows"),
        Segment("", heading="Setup > Windows"),
        Segment(" ".join(sentences(40, seed=6)), heading="Setup > Linux", page=None),
        Segment(" ".join(sentences(2, seed=7)), page=1),
        Segment(" ".join(sentences(2, seed=8)), page=2),
        Segment(" ".join(sentences(1, seed=9)), page=2),
    ]
    chunks = chunk(segments, tokenizer)
    check_invariants(chunks, segments, tokenizer, 256)
    keys = [(c["heading"], c["page_start"]) for c in chunks]
    linux = keys.count(("Setup > Linux", None))
    assert linux >= 2  # a long section makes several chunks...
    assert keys == [("Setup", None), ("Setup > Windows", None)] + [("Setup > Linux", None)] * linux + [
        (None, 1),
        (None, 2),
    ]
    # No chunk straddles two sections: each lies inside the char span of its own section.
    text = extracted_text(segments)
    spans: dict[tuple[str | None, int | None], tuple[int, int]] = {}
    pos = 0
    for seg in segments:
        if seg.text:
            a, b = spans.get((seg.heading, seg.page), (pos, pos))
            spans[(seg.heading, seg.page)] = (a, pos + len(seg.text))
        pos += len(seg.text) + 1
    assert pos == len(text) + 1
    for c in chunks:
        a, b = spans[(c["heading"], c["page_start"])]
        assert a <= c["char_start"] < c["char_end"] <= b
        assert c["page_start"] == c["page_end"]
    assert chunks[0]["text"].startswith("Setup\n")
    assert chunks[-1]["text"] == segments[-2].text + "\n" + segments[-1].text


def test_line_and_char_ranges_map_back(tokenizer: Tokenizer) -> None:
    raw = "Title line\n\n" + "\n".join(sentences(120, seed=10)) + "\n\nLast paragraph here.\n"
    doc = parse_txt(raw.encode())
    chunks = chunk(doc.segments, tokenizer, max_tokens=128, overlap_tokens=16)
    check_invariants(chunks, doc.segments, tokenizer, 128)
    lines = raw.split("\n")
    for c in chunks:
        # A text file's extracted text is the file: its line numbers are the file's.
        assert_on_lines(c, lines)
    assert any(c["line_start"] != c["line_end"] for c in chunks)
    assert chunks[0]["line_start"] == 1
    assert chunks[-1]["text"].endswith("Last paragraph here.")
    assert chunks[-1]["line_end"] == len(lines) - 1


def test_overlong_sentence_is_split_between_words(tokenizer: Tokenizer) -> None:
    rng = random.Random(11)
    sentence = " ".join(rng.choice(WORDS) for _ in range(1500)) + "."
    segments = [Segment(sentence)]
    chunks = chunk(segments, tokenizer)
    check_invariants(chunks, segments, tokenizer, 256)
    assert len(chunks) >= 6
    for c in chunks:
        start, end = c["char_start"], c["char_end"]
        assert start == 0 or sentence[start - 1] == " "
        assert end == len(sentence) or sentence[end] == " "


def test_no_space_scripts_and_giant_words(tokenizer: Tokenizer) -> None:
    cjk = "机器学习模型需要大量数据进行训练和验证以确保结果可靠" * 80  # no punctuation at all
    blob = "".join(random.Random(12).choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5000))
    segments = [Segment(cjk, page=1), Segment(blob, page=2), Segment("x" * 50_000, page=3)]
    chunks = chunk(segments, tokenizer)
    check_invariants(chunks, segments, tokenizer, 256)
    assert sum(c["page_start"] == 1 for c in chunks) >= 4


def test_tiny_budgets_cut_inside_words_and_still_fit(tokenizer: Tokenizer) -> None:
    words = "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis floccinaucinihilipilification"
    segments = [Segment(" ".join([words] * 20))]
    for limit in (8, 12, 16):
        chunks = chunk(segments, tokenizer, max_tokens=limit, overlap_tokens=4)
        check_invariants(chunks, segments, tokenizer, limit)


def test_cuts_inside_words_are_re_encoded_and_refit(tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece cut from inside a word can need more tokens on its own ("##ous" becomes "o", "##us"):
    the re-encoding check catches it and cuts that chunk again."""
    refits: list[object] = []
    original = chunker._refit

    def spy(*args: Any) -> Any:
        result = original(*args)
        refits.append(result)
        return result

    monkeypatch.setattr(chunker, "_refit", spy)
    word = "wheneverfbisimpsonblindingpuzzledfrankliavickydoublesbecameastonishmentcommunistskyrgyzstanarrayhous"
    segments = [Segment(" ".join([word] * 3))]
    chunks = chunk(segments, tokenizer, max_tokens=8, overlap_tokens=2)
    check_invariants(chunks, segments, tokenizer, 8)
    assert refits


def test_blank_segments_make_no_chunks(tokenizer: Tokenizer) -> None:
    assert chunk([], tokenizer) == []
    assert chunk([Segment(""), Segment("   "), Segment("\t\n")], tokenizer) == []
    chunks = chunk([Segment(""), Segment("Hello there."), Segment("")], tokenizer)
    assert [(c["text"], c["char_start"], c["line_start"], c["tokens"]) for c in chunks] == [("Hello there.", 1, 2, 5)]


def test_max_tokens_must_leave_room_for_text(tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match="special tokens"):
        chunk([Segment("hello")], tokenizer, max_tokens=2)


class CountingTokenizer:
    """The real tokenizer, counting the characters it is given: how much work chunking does, on any machine."""

    def __init__(self, inner: Tokenizer) -> None:
        self.inner, self.chars = inner, 0
        # What the chunker reads to know whether a count needs a re-encoding check.
        self.model, self.pre_tokenizer, self.normalizer = inner.model, inner.pre_tokenizer, inner.normalizer

    def num_special_tokens_to_add(self, is_pair: bool) -> int:
        return int(self.inner.num_special_tokens_to_add(is_pair))

    def encode(self, text: str, **kw: Any) -> Any:
        self.chars += len(text)
        return self.inner.encode(text, **kw)

    def encode_batch(self, texts: list[str], **kw: Any) -> Any:
        self.chars += sum(len(t) for t in texts)
        return self.inner.encode_batch(texts, **kw)


def test_many_small_documents_are_tokenized_a_bounded_number_of_times(tokenizer: Tokenizer) -> None:
    """The shape of the SciFact benchmark: thousands of abstracts of a few hundred tokens. Chunking is linear:
    each character reaches the tokenizer a few times at most (a per-document re-tokenisation that grew with
    the document would show here; its speed is the ingest benchmark's business, not a timed assert)."""
    docs = [parse_txt(("An abstract title\n\n" + " ".join(sentences(10, seed=n))).encode()) for n in range(500)]
    counting = CountingTokenizer(tokenizer)
    total = sum(len(chunk(d.segments, cast(Tokenizer, counting))) for d in docs)
    text = sum(len(s.text) for d in docs for s in d.segments)
    assert total >= 500
    # Once: cut at word boundaries, every chunk's count is known without re-encoding it (see chunker.py).
    assert counting.chars <= 1.05 * text, f"{counting.chars} characters tokenized for {text} of text"


def test_only_a_wordpiece_tokenizer_behind_the_bert_pre_tokenizer_skips_the_re_encoding(tokenizer: Tokenizer) -> None:
    from tokenizers import models, pre_tokenizers

    assert chunker._word_exact(tokenizer)  # the bundled model's
    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel()  # its tokens carry the space before a word
    assert not chunker._word_exact(byte_level)
    other = Tokenizer(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]"))
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    assert not chunker._word_exact(other)


def test_chunks_with_known_counts_equal_the_re_encoded_ones(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping the re-encoding changes nothing: the same chunks and counts as checking every chunk (also
    measured on 2,312 SciFact abstracts, Debian HTML and PDF manuals and this repository's docs at 256, 64
    and 12 tokens: identical, chunking 1.8-2.1x faster)."""
    rng = random.Random(5)
    accents = "Ça déjà vu, naïve coöperation — “quoted” (parenthesised) e.g. 3.14; x-ray/URL http://a.b/c?d=e "
    texts = [
        prose(900, seed=3),
        accents * 40,
        "机器学习模型需要大量数据。進行訓練和驗證\uff01" * 60,
        "".join(rng.choice("abc def.,;") for _ in range(6000)),
        "y" * 40_000 + " tail words here",
    ]
    segments = [Segment(t, page=i + 1) for i, t in enumerate(texts)]
    for limit, overlap in ((256, 32), (24, 6), (8, 2)):
        fast = chunk(segments, tokenizer, limit, overlap)
        check_invariants(fast, segments, tokenizer, limit)
        with monkeypatch.context() as m:
            m.setattr(chunker, "_word_exact", lambda _tokenizer: False)
            assert chunk(segments, tokenizer, limit, overlap) == fast
