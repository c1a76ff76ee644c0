"""The boosted keyword fields (file name, title, heading; :mod:`foldermind.workers.indexer.storage.keyword.bm25`) and
per-document evidence (:func:`foldermind.workers.indexer.search.fusion.with_evidence`): in-process on a real Tantivy
index, then a real kernel indexing a folder and searched over the bus, and an index of the previous field layout built
again from SQLite on start without losing a chunk."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tantivy

from foldermind.protocol.messages import DescribeReply, DescribeRequest, SearchHit
from foldermind.workers.indexer.search import fusion
from foldermind.workers.indexer.storage.keyword.bm25 import SCHEMA_VERSION, KeywordIndex
from foldermind.workers.indexer.storage.keyword.fields import Boosts, name_words
from foldermind.workers.indexer.storage.keyword.terms import text_terms
from tests.folder_world import FolderWorld, folder_world
from tests.helpers import remove_tree, wait_for

FILLER = (
    "The team met on Tuesday to go through the open items of the quarter. Most of them were closed, a few were"
    " moved to the next quarter, and two were dropped because nobody needed them any more."
)
PLAN = (
    f"Release notes. {FILLER} The zephyr release ships in May, once the two new engineers have started and the"
    f" build has moved to the new runners. {FILLER}\n"
)
WIND = f"Sailing log. {FILLER} A zephyr came in from the west in the afternoon. {FILLER}\n"
GARDEN = f"Garden notes. {FILLER} The roses by the fence, a variety called Zephyr, flowered late. {FILLER}\n"
GUIDE = (
    "# Storage guide\n\n"
    "## Logging\n\n"
    f"Logs are written to the data folder. {FILLER} The logger keeps its own retention of seven days.\n\n"
    "## Retention policy\n\n"
    f"Snapshots older than thirty days are removed every night. {FILLER} {FILLER} It is set per bucket, and"
    " retention never removes the newest snapshot.\n\n"
    "## Installing\n\n"
    f"Unpack the archive and run the installer. {FILLER} Retention is configured after the first start.\n"
)
FILES = {
    "zephyrProject_plan.txt": PLAN,
    "sailing.txt": WIND,
    "garden.txt": GARDEN,
    "guide.md": GUIDE,
}


# ------------------------------------------------------------------------------------------------
# in-process: a real Tantivy index


def test_a_file_name_is_cut_into_words_at_separators_and_camel_case() -> None:
    assert name_words("/a/zephyrProject_plan.txt") == "zephyr Project plan"
    assert name_words("lang_createtable.html") == "lang createtable"
    assert name_words("readHTTPHeader-v2.tar.gz") == "read HTTP Header v2 tar"
    assert name_words("Größe der Straße.pdf") == "Größe der Straße"
    assert text_terms(name_words("RunningNotes.md")) == ["run", "note"]  # stemmed as the text is


def _index(path: Path, boosts: Boosts, rows: list[dict[str, Any]], proximity: float = 0.0) -> KeywordIndex:
    index = KeywordIndex(path, boosts=boosts, proximity=proximity)
    index.replace([], rows)
    index.commit()
    return index


def test_a_title_or_file_name_word_is_found_only_with_its_boost(tmp_path: Path) -> None:
    rows = [
        {
            "id": 1,
            "doc_id": 1,
            "text": "Milestones: hire two engineers.",
            "heading": None,
            "folder_id": "f",
            "path": "/d/zephyr-plan.txt",
        },
        {"id": 2, "doc_id": 2, "text": FILLER, "heading": None, "folder_id": "f", "title": "Zorblax review"},
        {"id": 3, "doc_id": 3, "text": WIND, "heading": None, "folder_id": "f", "path": "/d/sailing.txt"},
    ]
    off = _index(tmp_path / "off", Boosts(heading=0.5, title=0.0, name=0.0), rows)
    assert [h.chunk_id for h in off.search("zorblax", 5)[0]] == []  # only in the title
    assert [h.chunk_id for h in off.search("milestones zephyr", 5)[0]] == [1, 3]  # by the text alone
    off.close()
    on = _index(tmp_path / "on", Boosts(heading=0.5, title=1.0, name=1.0), rows)
    assert [h.chunk_id for h in on.search("zorblax", 5)[0]] == [2]
    assert [h.chunk_id for h in on.search("zephyr", 5)[0]] == [3, 1]  # the name alone: found, after the text
    assert [h.chunk_id for h in on.search("plan", 5)[0]] == [1]
    on.close()


def test_a_heading_word_lifts_its_section_above_longer_mentions(tmp_path: Path) -> None:
    long_text = f"{FILLER} Retention of the logs is kept short. {FILLER}"
    rows = [
        {"id": 1, "doc_id": 1, "text": long_text, "heading": "Logging", "folder_id": "f"},
        {"id": 2, "doc_id": 1, "text": long_text + " " + FILLER, "heading": "Retention policy", "folder_id": "f"},
    ]
    flat = _index(tmp_path / "flat", Boosts(heading=0.0), rows)
    assert [h.chunk_id for h in flat.search("retention", 5)[0]] == [1, 2]  # the shorter text wins by BM25
    flat.close()
    boosted = _index(tmp_path / "boosted", Boosts(), rows)
    assert [h.chunk_id for h in boosted.search("retention", 5)[0]] == [2, 1]
    boosted.close()


def test_words_standing_as_in_the_query_rank_above_the_same_words_apart(tmp_path: Path) -> None:
    apart = f"The decline was slow at first. {FILLER} The rate was measured each week."
    together = f"The rate of decline was slow at first. {FILLER} It was measured each week too."
    rows = [
        {"id": 1, "doc_id": 1, "text": apart, "heading": None, "folder_id": "f"},
        {"id": 2, "doc_id": 2, "text": together + " Notes were kept.", "heading": None, "folder_id": "f"},
    ]
    flat = _index(tmp_path / "flat", Boosts(), rows)
    plain = {h.chunk_id: h.score for h in flat.search("the rate of decline", 5)[0]}
    assert list(plain) == [1, 2]  # without the bonus the shorter chunk wins: the same words, once each
    flat.close()
    near = _index(tmp_path / "near", Boosts(), rows, proximity=0.1)
    scored = {h.chunk_id: h.score for h in near.search("the rate of decline", 5)[0]}
    assert list(scored) == [2, 1]  # "rate", then "decline" two places on, as the query has them
    assert scored[1] == pytest.approx(plain[1])  # apart: nothing added
    # The gap is the query's: "rate decline" asks for them side by side, which neither chunk has.
    assert [h.chunk_id for h in near.search("rate decline", 5)[0]] == [1, 2]
    # One content word makes no pair: the scores are the plain ones.
    assert {h.chunk_id: h.score for h in near.search("the decline", 5)[0]} == pytest.approx(
        {h.chunk_id: h.score for h in _index(tmp_path / "one", Boosts(), rows).search("the decline", 5)[0]}
    )
    near.close()


def test_a_files_other_matching_chunks_lift_all_of_its_chunks_its_best_still_first() -> None:
    scores = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6, 5: 0.5, 9: 0.85}
    documents = {1: 10, 2: 20, 3: 20, 4: 20, 5: 20}  # 9 has no document: it stands alone
    lifted = fusion.with_evidence(scores, documents, 0.5, chunks=2)
    assert lifted[1] == pytest.approx(0.9)  # alone in its file
    assert lifted[9] == pytest.approx(0.85)
    assert lifted[2] == pytest.approx(0.8 + 0.5 * (0.7 + 0.6))  # the 2nd and 3rd best count, the 4th not
    assert lifted[2] > lifted[3] > lifted[4] > lifted[5]
    keyword = [(1, 10.0), (2, 9.5), (3, 9.0), (4, 8.5), (5, 6.5)]  # no strong keyword signal: the blend decides
    semantic = [(2, 0.9), (1, 0.88), (3, 0.85), (4, 0.8), (5, 0.1)]
    documents = {1: 10, 2: 20, 3: 20, 4: 20, 5: 30}
    alone = replace(fusion.DEFAULT_RULES, repeat_penalty=0)  # the evidence alone
    off, on = replace(alone, evidence=0), replace(alone, evidence=0.3)
    assert [c for c, _ in fusion.blend(keyword, semantic, off, documents=documents)] == [1, 2, 3, 4, 5]
    # File 20 matches three times: with evidence its best chunk leads, its others follow in their order.
    assert [c for c, _ in fusion.blend(keyword, semantic, on, documents=documents)] == [2, 3, 4, 1, 5]
    # A BM25 first hit far above the second keeps its place whatever the evidence (the strong-keyword rule).
    far = [(1, 20.0), *keyword[1:]]
    assert [c for c, _ in fusion.blend(far, semantic, on, documents=documents)][:2] == [1, 2]


# ------------------------------------------------------------------------------------------------
# a real kernel


def _scored(results: list[SearchHit]) -> list[tuple[float, int]]:
    return sorted((-round(r["score"], 4), r["chunk_id"]) for r in results)


@pytest.fixture(scope="module")
def world() -> Iterator[FolderWorld]:
    with folder_world(FILES, "fmf-", "fields-test", FolderWorld) as w:
        yield w


def test_a_file_name_word_finds_its_file_first(world: FolderWorld) -> None:
    # "zephyr" stands once in each of three texts, the longest of them in the file of that name (BM25 alone
    # would put it last); "project" and "plan" only in that file's name.
    assert all(text.lower().count("zephyr") == 1 for text in (PLAN, WIND, GARDEN))
    assert len(PLAN) > max(len(WIND), len(GARDEN))
    assert "project" not in PLAN.lower() and "plan" not in PLAN.lower().split()
    for mode in ("keyword", "hybrid"):
        assert world.found("zephyr", mode)[0] == "zephyrProject_plan.txt", mode
        assert world.found("project plan", mode)[0] == "zephyrProject_plan.txt", mode
    assert world.found("project plan") == ["zephyrProject_plan.txt"]


def test_a_heading_word_puts_its_section_first(world: FolderWorld) -> None:
    for mode in ("keyword", "hybrid"):
        first = world.hits("retention", mode)[0]
        assert first["file_name"] == "guide.md", mode
        assert first["location"]["heading"].endswith("Retention policy"), (mode, first["location"])
    assert world.found("storage guide")[0] == "guide.md"  # its title


def test_an_index_of_the_previous_fields_is_built_again_without_losing_a_chunk(world: FolderWorld) -> None:
    """Put version 2's index in place (the same chunks, no ``title`` or ``name`` field; the meta saying 2) and
    start again: the indexer empties it and replays every document from SQLite into this version's fields."""
    queries = ["milestones engineers", "sailing afternoon", "roses fence", "snapshots bucket", "installer", "team"]
    before = {q: world.hits(q) for q in queries}
    assert all(0 < len(found) < 10 for found in before.values())  # every match, none cut at top_k
    chunks = world.call(DescribeRequest(), DescribeReply).details["chunks_in_bm25"]
    world.kernel.stop()
    data = world.kernel.home.data_dir
    db = sqlite3.connect(data / "index.sqlite")
    rows = db.execute(
        "SELECT c.id, c.doc_id, c.text, c.heading, d.folder_id FROM chunks c JOIN documents d ON d.id = c.doc_id"
    ).fetchall()
    assert len(rows) == chunks
    remove_tree(data / "tantivy")
    (data / "tantivy").mkdir()
    builder = tantivy.SchemaBuilder()  # version 2's fields
    builder.add_integer_field("chunk_id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("doc_id", stored=False, indexed=True, fast=True)
    builder.add_text_field("folder_id", stored=False, tokenizer_name="raw")
    for name in ("text", "heading", "cjk"):
        builder.add_text_field(name, stored=False, tokenizer_name="whitespace")
    builder.add_text_field("lang", stored=False, tokenizer_name="raw")
    writer = tantivy.Index(builder.build(), path=str(data / "tantivy")).writer(heap_size=15_000_000, num_threads=1)
    for cid, doc_id, text, heading, folder_id in rows:
        writer.add_document(
            tantivy.Document(
                chunk_id=cid,
                doc_id=doc_id,
                folder_id=folder_id,
                text=" ".join(text_terms(text)),
                heading=" ".join(text_terms(heading or "")),
                cjk="",
                lang="en",
            )
        )
    writer.commit()
    writer.wait_merging_threads()
    with db:
        db.execute("UPDATE meta SET value = '2' WHERE key = 'tantivy_schema'")
    db.close()
    world.restart()
    wait_for(lambda: world.found("zephyr")[:1] == ["zephyrProject_plan.txt"], 60, 0.2, "the name field rebuilt")
    wait_for(world.ready, 60, 0.2, "every chunk in the rebuilt keyword index")
    assert world.call(DescribeRequest(), DescribeReply).details["chunks_in_bm25"] == chunks
    for q in queries:
        # The same chunks at the same scores (equal scores may come in another order: new segments).
        assert _scored(world.hits(q)) == _scored(before[q]), q
    db = sqlite3.connect(data / "index.sqlite")
    assert db.execute("SELECT value FROM meta WHERE key = 'tantivy_schema'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()
