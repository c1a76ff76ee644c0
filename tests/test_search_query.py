"""What a search asks beyond its words, against a real kernel: quoted phrases, ``-word`` exclusion,
``min_score``, ``group_by_file`` and the blend fusion's keyword-signal rule, in every mode. The query
reading, the chunk check and the fusion are checked in-process too, on a real Tantivy index where an
index is involved."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    SearchReply,
    SearchRequest,
)
from foldermind.protocol.runtime.config import IngestPolicy, SearchPolicy
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.query import admits, parse
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from tests.config import merge
from tests.helpers import FAST_RESTART, SEARCH_OVER_BUS, RunningKernel, remove_tree, short_tmpdir, wait_for
from tests.world import KernelWorld

MODES = ("keyword", "semantic", "hybrid")

# ------------------------------------------------------------------------------------------------
# in-process: reading the query, checking a chunk, the fusion


def test_phrases_exclusions_and_plain_characters_are_read_by_our_rules() -> None:
    q = parse('how is the "Write-Ahead Log" flushed -checkpoint -Checkpoints')
    assert q.phrases == (("write", "ahead", "log"),)
    assert q.excluded == ("checkpoint", "checkpoints")  # tokens: each language's fields stem them their own way
    assert q.text == "how is the Write-Ahead Log flushed"  # phrase words stay, exclusions leave
    assert parse('"tantivy"').required == ("tantivy",) and parse('"tantivy"').phrases == ()
    for plain in ('"unclosed phrase', "x-ray", "-5 degrees", "a - b", "well-known -", "text:foo*"):
        q = parse(plain)
        assert not q.filters, plain  # a minus inside a word, before a number or alone is not an operator
    assert parse("“curly quotes”").phrases == (("curly", "quotes"),)
    assert parse("-only -exclusions").text == ""


def test_command_line_flags_are_words_of_the_search_not_exclusions() -> None:
    for flags in ("asy -V test.eps", "rm -rf build", "ls -la", "gcc -fPIC -O2 -DNDEBUG", "make --dry-run", "-la"):
        q = parse(flags)
        assert q.text == flags and not q.filters, flags
    assert parse("gcc -Wall -pedantic").excluded == ("wall", "pedantic")  # words of 3+ letters stay exclusions
    q = parse('find "-name" -print0')
    assert q.required == ("name",) and not q.excluded and q.text == "find -name -print0"  # quoted: looked for
    assert parse("kernel -well-known").excluded == ("well", "known")


def test_a_chunk_is_admitted_only_with_its_phrases_and_without_excluded_words() -> None:
    q = parse('"write-ahead log" -checkpoint')
    assert admits(q, "The write ahead logs are flushed.")
    assert not admits(q, "The log is written ahead of time.")  # the words, not in order
    assert not admits(q, "The write-ahead log and its checkpoints.")  # an excluded word's other form
    assert not admits(q, "A write-ahead log.", heading="Checkpoint")
    assert admits(q, "Flushed at commit.", heading="Write-ahead log")
    assert admits(parse("no operators"), "anything at all")


def _index(root: Path, texts: list[str]) -> KeywordIndex:
    index = KeywordIndex(root)
    rows = [{"id": i, "doc_id": i, "text": t, "heading": None, "folder_id": "f"} for i, t in enumerate(texts, 1)]
    index.replace([], rows)
    index.commit()
    return index


def test_the_keyword_index_applies_phrases_and_exclusions_inside_tantivy(tmp_path: Path) -> None:
    index = _index(
        tmp_path / "t",
        [
            "The write-ahead log is flushed at every commit.",
            "Write the log ahead of the meeting.",
            "A log of every write, ahead of the checkpoint.",
            "Python the snake swallows its prey whole.",
            "Python the language ships a large standard library.",
        ],
    )

    def ids(query: str) -> set[int]:
        q = parse(query)
        return {h.chunk_id for h in index.search(q.text, 10, None, q.phrases, q.required, q.excluded)[0]}

    assert ids("write ahead log") == {1, 2, 3}
    assert ids('"write-ahead log"') == {1} == ids('"WRITE AHEAD LOGS"')
    assert ids("write ahead log -checkpoint") == {1, 2}
    assert ids('log "ahead"') == {1, 2, 3}
    assert ids("python -snake") == {5} and ids("python -snakes -library") == set()
    assert ids('"python snake"') == set()  # "the" sits between them
    assert ids("-python") == set()  # nothing to look for
    index.close()


def test_a_query_with_a_short_flag_finds_the_text_holding_it_on_a_real_index(tmp_path: Path) -> None:
    index = _index(
        tmp_path / "t",
        ["Run asy -V test.eps to view the picture at once.", "asy writes test.eps and exits.", "rm -rf build"],
    )

    def ids(query: str) -> list[int]:
        q = parse(query)
        return [h.chunk_id for h in index.search(q.text, 10, None, q.phrases, q.required, q.excluded)[0]]

    assert ids("asy -V test") == [1, 2]  # -V is searched: the page with it first, the other kept
    assert ids("rm -rf") == [3]
    assert set(ids("asy -viewer")) == {1, 2} and ids("asy -picture") == [2]  # a word after a minus is left out
    index.close()


def test_blend_keeps_a_keyword_hit_far_above_the_rest_first_unless_the_query_is_a_question() -> None:
    keyword = [(1, 20.0), (2, 9.0), (3, 8.5)]
    semantic = [(4, 0.62), (5, 0.61), (2, 0.60), (3, 0.59), (1, 0.30)]
    semantic_only = replace(fusion.DEFAULT_RULES, keyword_weight=0.0)
    low = replace(fusion.DEFAULT_RULES, keyword_weight=0.2)
    assert fusion.blend(keyword, semantic, low)[0][0] == 1  # 20 >= strong_keyword_ratio * 9: it keeps its place
    assert fusion.blend(keyword, semantic, low, question=True)[0][0] != 1  # a question: the blend decides
    close = [(1, 10.0), (2, 9.5), (3, 9.0)]
    assert fusion.blend(close, semantic, semantic_only)[0][0] == 4  # no strong signal: the weights decide
    fused = fusion.blend(keyword, semantic)
    assert len(fused) == 5 and [c for c, _ in fused] == sorted({1, 2, 3, 4, 5}, key=lambda c: -dict(fused)[c])
    assert fusion.blend([], []) == [] and fusion.blend([], semantic)[0][0] == 4
    assert fusion.is_question("How do I close the window?") and fusion.is_question("why is it slow")
    assert not fusion.is_question("pause mouse close window") and not fusion.is_question("set decimalsign locale")


def test_a_list_of_remembered_words_weighs_the_keyword_side_more_than_a_sentence_or_a_question_does() -> None:
    assert fusion.is_lookup("pause mouse close window") and fusion.is_lookup("Obesity decreases life quality.")
    assert not fusion.is_lookup("set the decimal sign")  # a stop word: a sentence, however short
    assert not fusion.is_lookup("how close window") and not fusion.is_lookup("close window?")  # questions
    assert not fusion.is_lookup("") and not fusion.is_lookup("  -- ")
    # The strong-keyword rule and the bonus off: only the weights decide.
    rules = replace(
        fusion.DEFAULT_RULES,
        keyword_weight=0.5,
        lookup_keyword_weight=0.8,
        top_bonus=0.0,
        strong_ratio=100.0,
        tail_ratio=100.0,
    )
    keyword = [(1, 10.0), (2, 5.0), (3, 1.0)]  # min-max: 1, 0.444, 0
    semantic = [(2, 0.65), (3, 0.64), (1, 0.60)]  # min-max: 1, 0.8, 0
    # As a sentence, 0.5: chunk 1 0.5, chunk 2 0.722. As a lookup, 0.8: chunk 1 0.8, chunk 2 0.556.
    assert fusion.blend(keyword, semantic, rules)[0][0] == 2
    assert fusion.blend(keyword, semantic, rules, lookup=True)[0][0] == 1
    assert fusion.DEFAULT_RULES.lookup_keyword_weight > fusion.DEFAULT_RULES.keyword_weight


def test_blend_keeps_a_keyword_hit_far_above_the_tail_first_though_the_second_is_close() -> None:
    rules = replace(fusion.DEFAULT_RULES, keyword_weight=0.0)
    semantic = [(9, 0.70), (2, 0.60), (1, 0.30)]
    twins = [(1, 10.0), (2, 9.5), (3, 9.0), (4, 7.0), (5, 6.0)]  # 10 < 1.2 * 9.5, but 10 >= 1.6 * 6 (rank 5)
    assert fusion.strong_keyword_signal(twins, rules)
    assert fusion.blend(twins, semantic, rules)[0][0] == 1
    flat = [(1, 10.0), (2, 9.5), (3, 9.0), (4, 8.0), (5, 7.0)]  # the tail close behind too: the blend decides
    assert not fusion.strong_keyword_signal(flat, rules)
    assert fusion.blend(flat, semantic, rules)[0][0] == 9


def test_blend_gives_the_first_place_to_bm25s_passage_when_the_blend_picks_another_of_its_file() -> None:
    rules = replace(fusion.DEFAULT_RULES, keyword_weight=0.0, repeat_penalty=0.0)
    keyword = [(1, 10.0), (2, 9.5), (3, 9.0), (4, 8.5), (5, 8.0)]  # no strong signal
    semantic = [(2, 0.70), (3, 0.60), (1, 0.30)]
    documents = {1: 10, 2: 10, 3: 20, 4: 30, 5: 40}
    for question in (False, True):  # the file is the same: the rule holds for questions too
        ranked = fusion.blend(keyword, semantic, rules, question, documents)
        assert [c for c, _ in ranked][:3] == [1, 2, 3], question
    other = {**documents, 2: 50}  # the blend's first is another file's: it stays first
    assert fusion.blend(keyword, semantic, rules, False, other)[0][0] == 2
    asked: list[tuple[int, int]] = []

    def same_file(a: int, b: int) -> bool:
        asked.append((a, b))
        return documents[a] == documents[b]

    assert fusion.blend(keyword, semantic, rules, False, None, same_file)[0][0] == 1 and asked == [(2, 1)]


def test_a_files_further_passages_yield_to_the_next_files_best_and_the_first_hit_stays_first() -> None:
    ranked = [(1, 1.0), (2, 0.95), (3, 0.9), (4, 0.85), (5, 0.8), (6, 0.72), (7, 0.5)]
    documents = {1: 10, 2: 10, 3: 10, 4: 10, 5: 10, 6: 20}  # 7 has no document: it stands alone
    # 2 .. 5 lose 0.1 per passage of file 10 above them: 0.85, 0.7, 0.55, 0.4; file 20's best (0.72) passes 3.
    spread = fusion.spread(ranked, documents, 0.1)
    assert [c for c, _ in spread] == [1, 2, 6, 3, 4, 7, 5]
    assert dict(spread)[1] == 1.0 and dict(spread)[6] == 0.72 and dict(spread)[5] == pytest.approx(0.4)
    assert fusion.spread(ranked, documents, 0.0) == ranked
    assert fusion.spread(ranked, {}, 0.5) == ranked  # no documents known: nothing to spread
    assert fusion.spread([(1, 0.5), (2, 0.9)], {1: 1, 2: 1}, 0.1)[0][0] == 1  # the first place is the rules'
    assert fusion.spread([], documents, 0.1) == []
    # In blend: five passages of one file above another file's best, which only the penalty brings into the five.
    keyword = [(1, 10.0), (2, 9.8), (3, 9.6), (4, 9.4), (5, 9.2), (6, 8.0), (7, 1.0)]
    semantic = [(1, 0.60), (2, 0.59), (3, 0.58), (4, 0.57), (5, 0.56), (6, 0.55), (7, 0.1)]
    documents = {c: 10 for c in range(1, 6)} | {6: 20, 7: 30}
    off = replace(fusion.DEFAULT_RULES, repeat_penalty=0.0)
    assert [c for c, _ in fusion.blend(keyword, semantic, off, documents=documents)][:5] == [1, 2, 3, 4, 5]
    on = fusion.blend(keyword, semantic, fusion.DEFAULT_RULES, documents=documents)
    assert fusion.DEFAULT_RULES.repeat_penalty > 0 and 6 in [c for c, _ in on][:5] and on[0][0] == 1
    assert [c for c, _ in fusion.blend(keyword, semantic)][:5] == [1, 2, 3, 4, 5]  # no documents: no penalty


def test_the_evidence_for_an_answer_is_fused_without_the_repeat_penalty(tmp_path: Path) -> None:
    # A real store (the penalty reads each candidate's document there), and the two ranked lists as the indexes
    # would hand them over: one file of five passages above another file's one.
    store = Store(tmp_path / "index.sqlite")
    folder = store.folders.add(str(tmp_path / "docs"), "docs", "")
    row = {"text": "x", "tokens": 3, "line_start": 1, "line_end": 1, "char_start": 0, "char_end": 1}
    ids: dict[str, list[int]] = {}
    with store.tx() as db:
        for name, n in (("long.txt", 5), ("short.txt", 1)):
            path = str(tmp_path / "docs" / name)
            store.documents.mark_pending(db, folder.id, path, 1, 1)
            doc = store.documents.get(path)
            assert doc is not None
            rows = [{**row, "ordinal": i} for i in range(n)]
            ids[name] = store.documents.write(db, doc.id, 1, 1, "h", "txt", None, None, rows)
    encoder = QueryEncoder(SearchPolicy(), IngestPolicy(), "tcp://127.0.0.1:9", "t")  # not started: not asked
    vectors = VectorIndex(tmp_path / "v.usearch", 8)
    service = SearchService(store, KeywordIndex(tmp_path / "kw"), vectors, encoder, SearchPolicy())
    long, (short,) = ids["long.txt"], ids["short.txt"]
    keyword = [(c, 10.0 - 0.2 * i) for i, c in enumerate(long)] + [(short, 8.0)]
    semantic = [(c, 0.60 - 0.01 * i) for i, c in enumerate(long)] + [(short, 0.55)]
    question = "how do these passages rank?"
    page = [c for c, _ in service.fused(keyword, semantic, question, "blend")]
    evidence = [c for c, _ in service.fused(keyword, semantic, question, "blend", spread=False)]
    assert page[0] == long[0] and short in page[:5]  # a page of results: the other file rises into the five
    assert evidence[:5] == long  # the evidence: each file's passages as they score (pick_passages chooses)
    service.bm25.close()
    store.db.close()


# ------------------------------------------------------------------------------------------------
# a real kernel


def write_docs(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "wal.txt").write_text(
        "The write-ahead log records every change before the table file is written.\n"
        "At a checkpoint the log is copied back into the database.\n"
    )
    (root / "ahead.txt").write_text("Write the meeting log ahead of time, then send it to everyone.\n")
    (root / "snake.txt").write_text("Python the snake is a large reptile that swallows its prey whole.\n")
    (root / "language.txt").write_text("Python the programming language has a large standard library.\n")
    steps = [
        f"Step {i}: during battery calibration the inverter drains the pack to {100 - i} percent and logs the"
        f" runtime estimate, then the calibration table entry {i} is written to the controller."
        for i in range(1, 61)
    ]
    (root / "manual.txt").write_text("\n\n".join(steps) + "\n")
    (root / "scale.txt").write_text("Calibration of the kitchen scale: put a known weight on it and press tare.\n")
    (root / "codes.txt").write_text("Set zorbitrax_limit to 5 to cap the retries of the upload daemon.\n")
    (root / "flags.txt").write_text("To preview a figure run asy -V picture.asy, which opens the viewer.\n")
    (root / "limits.txt").write_text("Upload limits: the daemon retries a failed upload a few times before it stops.\n")


class World(KernelWorld):
    def __init__(self, kernel: RunningKernel, root: Path) -> None:
        super().__init__(kernel, root, "search-query-test")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    root = short_tmpdir("fmq-")
    w = World(RunningKernel(root, merge(FAST_RESTART, SEARCH_OVER_BUS)), root)
    try:
        w.kernel.start()
        write_docs(root / "docs")
        w.add("docs", root / "docs")
        wait_for(lambda: w.settled(9, count="files_total"), 180, 0.2, "the folder indexed and embedded")
        yield w
    finally:
        w.kernel.stop()
        remove_tree(root)


def names(reply: SearchReply) -> list[str]:
    return [r["file_name"] for r in reply.results]


def test_a_quoted_phrase_is_required_in_every_mode(world: World) -> None:
    assert "ahead.txt" in names(world.search("write ahead log", "keyword"))
    for mode in MODES:
        reply = world.search('"write-ahead log"', mode)
        assert names(reply) == ["wal.txt"], (mode, names(reply))
        assert "write-ahead log" in reply.results[0]["snippet"]


def test_an_excluded_word_leaves_every_mode(world: World) -> None:
    for mode in MODES:
        assert {"snake.txt", "language.txt"} <= set(names(world.search("python", mode))), mode
        found = names(world.search("python -snake", mode))
        assert "language.txt" in found and "snake.txt" not in found, (mode, found)
    assert world.search("-python -snake", "hybrid").results == []  # only exclusions: nothing to look for


def test_a_pasted_command_line_flag_is_searched_in_every_mode(world: World) -> None:
    for mode in ("keyword", "hybrid"):
        assert names(world.search("asy -V", mode))[:1] == ["flags.txt"], mode  # -V was read as "leave out v"
    assert "flags.txt" in names(world.search("asy -V preview figure", "semantic"))


def test_min_score_keeps_only_hits_at_or_above_it(world: World) -> None:
    for mode in MODES:
        full = world.search("battery calibration", mode, top_k=20).results
        assert len(full) >= 4, mode
        cut = full[2]["score"]
        kept = world.search("battery calibration", mode, top_k=20, min_score=cut).results
        assert kept and all(r["score"] >= cut for r in kept) and len(kept) < len(full), mode
        assert [r["chunk_id"] for r in kept] == [r["chunk_id"] for r in full[: len(kept)]]
        assert world.search("battery calibration", mode, min_score=full[0]["score"] + 1).results == []
    with pytest.raises(JobError) as info:
        world.call(SearchRequest("battery", "hybrid", min_score="high"), SearchReply)  # type: ignore[arg-type]
    assert info.value.code in ("invalid_query", "bad_request")


def test_group_by_file_gives_each_file_once_at_its_best_chunk(world: World) -> None:
    for mode in MODES:
        flat = world.search("battery calibration table", mode, top_k=6).results
        assert names(world.search("battery calibration table", mode, top_k=6)).count("manual.txt") >= 2, mode
        grouped = world.search("battery calibration table", mode, top_k=6, group_by_file=True).results
        files = [r["file_name"] for r in grouped]
        assert len(files) == len(set(files)) and "scale.txt" in files, (mode, files)
        first_manual = next(r for r in flat if r["file_name"] == "manual.txt")
        assert next(r for r in grouped if r["file_name"] == "manual.txt")["chunk_id"] == first_manual["chunk_id"]


def test_an_exact_identifier_keeps_its_keyword_rank_in_hybrid(world: World) -> None:
    keyword = world.search("zorbitrax_limit retries", "keyword")
    assert names(keyword)[0] == "codes.txt"
    for fuse in ("blend", ""):
        assert names(world.search("zorbitrax_limit retries", fusion=fuse))[0] == "codes.txt", fuse
