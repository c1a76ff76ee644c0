"""The deterministic document analysis behind get_document_summary: the pure rules of
:mod:`foldermind.workers.indexer.analysis` in-process (dates, types, keywords with and without IDF,
summaries, names, odd input), the store's analysis table (migration, enrichment, failures, moves),
Tantivy document frequencies, and the whole path against a real kernel: indexed -> analysed, renamed
-> found by both paths, edited -> analysed again, broken or deleted -> not analysed."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    FolderAddReply,
    FolderAddRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.workers.indexer.analysis import analyze, find_date, infer_type, key_entities, keywords, summarize, text
from foldermind.workers.indexer.storage.database import SCHEMA
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, remove_tree, short_tmpdir, wait_for

MTIME = datetime(2024, 5, 17, 23, 30, tzinfo=UTC).timestamp()


def run(text: str, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "path": "/docs/file.txt",
        "fmt": "txt",
        "title": None,
        "texts": [text],
        "mtime": MTIME,
    }
    args.update(kw)
    return analyze(**args)


# ------------------------------------------------------------------------------------------------
# dates


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Signed on 2025-03-04.", "2025-03-04"),
        ("Created 2025-03-04T10:15:00Z by the system", "2025-03-04"),
        ("Filed 2025/11/09 in the archive", "2025-11-09"),
        ("Dated March 3, 2025, at the office", "2025-03-03"),
        ("as of Mar. 3rd 2025 the fee is", "2025-03-03"),
        ("Sept 14, 2023 was a Thursday", "2023-09-14"),
        ("on 3 March 2025 we met", "2025-03-03"),
        ("the 21st of June, 2024 deadline", "2024-06-21"),
        ("due 9-Feb-2026", "2026-02-09"),
        ("Berlin, 24.12.2024", "2024-12-24"),
        ("paid 13/04/2025 in full", "2025-04-13"),  # 13 cannot be a month: day first
        ("paid 04/13/2025 in full", "2025-04-13"),  # 13 cannot be a month: month first
        ("on 05/05/2025 both readings agree", "2025-05-05"),
        ("FEBRUARY 28, 2024", "2024-02-28"),
        ("leap day 2024-02-29", "2024-02-29"),
    ],
)
def test_dates_of_every_supported_shape(text: str, expected: str) -> None:
    assert find_date(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2025-02-30",  # no such day
        "2023-02-29",  # not a leap year
        "2025-13-01",
        "31 April 2025",
        "1899-12-31",  # before 1900
        "2101-01-01",  # after 2100
        "03/04/2025",  # ambiguous, and nothing in the document says which convention it uses
        "order 12025-03-04",  # part of a longer number
        "version 2025-03-04-7",
        "March 2025",  # no day
        "Mayday 5, 2025",
        "no date at all",
    ],
)
def test_what_is_no_date(text: str) -> None:
    assert find_date(text) is None


def test_an_ambiguous_numeric_date_follows_the_documents_convention() -> None:
    # 03/04 alone could be March 4 or April 3; a later 25/12 says this document writes the day first.
    assert find_date("Issued 03/04/2025. Valid until 25/12/2025.") == "2025-04-03"
    assert find_date("Issued 03/04/2025. Valid until 12/25/2025.") == "2025-03-04"
    # Both conventions seen: the document decides nothing, the ambiguous date is passed over.
    assert find_date("Issued 03/04/2025, 25/12/2025 and 12/25/2025.") == "2025-12-25"


def test_the_first_valid_date_wins_and_invalid_ones_are_skipped() -> None:
    assert find_date("Draft 2025-02-30, final version February 3, 2025, reviewed 2025-06-01") == "2025-02-03"


def test_the_date_falls_back_to_the_mtime_in_utc() -> None:
    out = run("Nothing dated here, just words about gardening and compost.")
    assert out["date"] == "2024-05-17"  # 23:30 UTC, whatever the local time zone says
    assert run("Planted 2023-04-01 in the garden.")["date"] == "2023-04-01"


# ------------------------------------------------------------------------------------------------
# types


INVOICE = """INVOICE
Invoice No: 2025-0042
Bill to: Globex Corporation
Subtotal: 1,200.00
VAT 20%: 240.00
Amount due: 1,440.00
Due date: 2025-04-30
"""
CONTRACT = """This Master Services Agreement (the "Agreement") is made between Acme Corp and Globex LLC
(each a "Party", together "the Parties"). WHEREAS the Parties wish to cooperate, they hereby agree:
1. Either Party may terminate this Agreement on 30 days' notice.
2. Globex LLC shall indemnify Acme Corp against third-party claims.
3. Governing law: the State of Delaware.
"""
MINUTES = """Weekly sync
Attendees: Ana, Bo, Chen
Agenda: release, hiring
Decisions: ship on Friday.
Action items: Bo prepares the release notes.
"""
PAPER = """Abstract
We study glaciers.
1 Introduction
2 Methods
3 Results
4 Conclusion
References
Smith et al. 2020.
"""
EMAIL = """From: ana@example.com
To: bo@example.com
Subject: lunch
Date: Mon, 3 Mar 2025

Thanks for yesterday.
"""
CODE = """import os
from pathlib import Path

def main(argv):
    return len(argv)

class Runner:
    pass
"""
RESUME = "Curriculum Vitae\nWork Experience\nAcme, 2019-2024\nEducation\nMSc\nSkills\nPython, SQL\n"
LETTER = "Dear Ms. Jones,\n\nPlease find the report enclosed.\n\nSincerely,\nBo"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (INVOICE, "invoice"),
        (CONTRACT, "contract"),
        (MINUTES, "meeting_notes"),
        (PAPER, "research_paper"),
        (EMAIL, "email"),
        (CODE, "source_code"),
        (RESUME, "resume"),
        (LETTER, "letter"),
    ],
)
def test_type_rules(text: str, expected: str) -> None:
    kind, by_rule = infer_type(text, "pdf")
    assert (kind, by_rule) == (expected, True)


def test_type_falls_back_to_the_format() -> None:
    bland = "The cat sat in the sun."
    assert infer_type(bland, "pdf") == ("pdf_document", False)
    assert infer_type(bland, "txt") == ("text_document", False)
    assert infer_type(bland, "md") == ("markdown_document", False)
    assert infer_type(bland, "docx") == ("word_document", False)
    assert infer_type(bland, "html") == ("web_page", False)
    assert infer_type(bland, "Fancy Format!") == ("fancy_format_document", False)
    assert infer_type(bland, "") == ("document", False)


def test_cues_match_whole_words_only_and_the_file_name_counts() -> None:
    # "reinvoiced" and "subtotals" hide the cue words inside longer words: no invoice.
    assert infer_type("reinvoiced bill tomorrow; subtotals", "txt") == ("text_document", False)
    # Two cues in the text and a third in the file name.
    assert infer_type("Amount due: 12. Subtotal: 10.", "pdf", path="/x/invoice_0042.pdf")[0] == "invoice"
    assert infer_type("Amount due: 12. Subtotal: 10.", "pdf", path="/x/scan_0042.pdf")[0] == "pdf_document"


# ------------------------------------------------------------------------------------------------
# keywords


def test_keywords_by_term_frequency_without_stopwords_numbers_or_short_words() -> None:
    text = (
        "The glacier melts. Glaciers retreat and glaciers thin; the glacier's lake grows. "
        "Meltwater feeds the lake. Meltwater is cold. 2024 2024 2024 ox ox ox ox and and and the the"
    )
    words = keywords(text)
    # glacier, glaciers and glacier's are one group of 4 (spelled glacier: 2 with the possessive, seen
    # first); then lake and meltwater, 2 each, in order of appearance.
    assert words[:3] == ["glacier", "lake", "meltwater"]
    assert not {"the", "and", "is", "2024", "ox"} & set(words)
    assert all(w == w.lower() for w in words)


def test_the_most_frequent_spelling_stands_for_its_group() -> None:
    assert keywords("Invoice invoices invoices invoiced")[0] == "invoices"
    assert keywords("Invoice invoice invoices")[0] == "invoice"


def test_idf_demotes_words_common_in_the_index() -> None:
    text = "report report report report budget budget zanzibar zanzibar"
    assert keywords(text)[:3] == ["report", "budget", "zanzibar"]
    df = {"report": 900, "budget": 50, "zanzibar": 0}
    with_idf = keywords(text, lambda w: df.get(w, 0), total_docs=1000)
    assert with_idf[:3] == ["zanzibar", "budget", "report"]
    # More chunks than the index holds (deleted ones not merged yet) is capped, never negative.
    assert keywords(text, lambda w: 5000, total_docs=1000) == keywords(text)[: len(keywords(text))]


def test_idf_failure_or_an_empty_index_falls_back_to_term_frequency() -> None:
    text = "report report report budget budget zanzibar"

    def broken(word: str) -> int:
        raise RuntimeError("index closed")

    assert keywords(text, broken, total_docs=10) == keywords(text)
    assert keywords(text, lambda w: 0, total_docs=0) == keywords(text)


def test_at_most_eight_keywords() -> None:
    names = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
    text = " ".join(f"{w} {w}" for w in names)
    assert len(keywords(text)) == 8
    assert len(run(text)["keywords"]) == 8


def test_addresses_make_no_keywords() -> None:
    text = "See https://www.example.com/a/b and https://example.com/c, or mail ana@example.com. Ferns ferns."
    words = run(text)["keywords"]
    assert words[0] == "ferns" and not {"https", "www", "example", "com"} & set(words)
    assert "ana" in words  # a mail address's local part may be a name: only the domain goes


# ------------------------------------------------------------------------------------------------
# key entities


def test_key_entities_are_repeated_names_and_acronyms() -> None:
    found = key_entities(CONTRACT + "\nAcme Corp and Globex LLC signed. The NDA and the NDA annex apply.\n")
    assert found[:2] == ["Acme Corp", "Globex LLC"]
    assert "NDA" in found
    assert "Master Services Agreement" not in found  # seen once
    assert not any(name.startswith(("The ", "Either ")) for name in found)


def test_shouted_headings_and_roman_numerals_are_no_acronyms() -> None:
    text = "TERMS AND CONDITIONS OF SALE\nII. Scope\nTERMS AND CONDITIONS OF SALE\nII. Scope\nThe EU and the EU."
    assert key_entities(text) == ["EU"]


# ------------------------------------------------------------------------------------------------
# summary


def test_summary_takes_leading_sentences_and_skips_the_title_line() -> None:
    text = (
        "Acme MSA Extension\n\nThis extension renews the Master Services Agreement for one year.   It keeps\n"
        "the original   rates. Mr. Smith signs for Acme. " + "Further detail follows here. " * 20
    )
    out = summarize(text, "ACME msa extension")
    assert out.startswith("This extension renews the Master Services Agreement for one year. It keeps the original")
    assert "Mr. Smith signs for Acme." in out  # "Mr." ends no sentence
    assert len(out) <= 300 and out.endswith(".") and "  " not in out and "\n" not in out


def test_summary_skips_headings_before_the_first_prose() -> None:
    text = "Setup\n\nWindows\n\nInstall the frobnicator with the wizard, then\nrestart.\n\nLinux\n\nUse apt for it."
    # Headings before and between paragraphs are left out; a wrapped paragraph's short last line stays.
    assert summarize(text, None) == "Install the frobnicator with the wizard, then restart. Use apt for it."


def test_a_long_first_sentence_is_cut_between_words() -> None:
    text = "This " + "very " * 100 + "long sentence ends here."
    out = summarize(text, None)
    assert len(out) <= 300 and out.endswith("…")
    assert out[:-1].split(" ")[-1] == "very"  # a whole word before the mark


def test_summary_of_text_without_words_is_empty() -> None:
    assert summarize("1.0 2.0 3.0\n4.0 5.0 6.0", None) == ""
    assert summarize("", "Title") == ""


# ------------------------------------------------------------------------------------------------
# names, confidence, the whole result


def test_suggested_name_from_title_or_keywords() -> None:
    out = run("Dated June 30, 2026. " + CONTRACT, title="Acme MSA Extension", path="/d/scan 7.PDF", fmt="pdf")
    assert out["suggested_name"] == "2026-06-30-acme-msa-extension.pdf"
    headed = run("Fern Care Guide\n\nFerns love shade and water.", path="/d/x.txt")
    assert headed["suggested_name"] == "2024-05-17-fern-care-guide.txt"  # no title: the leading heading
    untitled = run("Ferns and mosses. Ferns love shade; mosses love water. Ferns!", path="/d/x.txt")
    assert untitled["suggested_name"] == "2024-05-17-ferns-mosses-love.txt"
    junk_title = run("Ferns ferns", title="Microsoft Word - draft3.docx", path="/d/x.docx")
    assert junk_title["suggested_name"] == "2024-05-17-ferns.docx"
    long_title = run("x", title="Über " + "extraordinarily " * 10 + "long", path="/d/x.md")["suggested_name"]
    slug = long_title.removeprefix("2024-05-17-").removesuffix(".md")
    assert slug.startswith("uber-extraordinarily") and len(slug) <= 60 and not slug.endswith("-")
    assert re.fullmatch(r"[a-z0-9-]+", slug)
    assert run("", title="2024-05-17 Minutes", path="/d/m.md")["suggested_name"] == "2024-05-17-minutes.md"


def test_the_whole_result_is_json_shaped_and_confident_with_evidence() -> None:
    rich = run(CONTRACT * 3 + "\nSigned June 30, 2026.", fmt="pdf", path="/d/a.pdf")
    assert set(rich) == {
        "summary",
        "category",
        "entity",
        "type",
        "date",
        "keywords",
        "key_entities",
        "suggested_name",
        "confidence",
        "summary_model",
    }
    assert rich["category"] == "legal" and rich["entity"] is None and rich["summary_model"] is None
    assert rich["type"] == "contract" and rich["date"] == "2026-06-30"
    bare = run("Short note.")
    assert 0 <= bare["confidence"] < rich["confidence"] <= 100
    assert bare["type"] == "text_document" and bare["category"] == "general"


def test_empty_and_odd_input_gives_a_valid_result() -> None:
    for texts in ([], [""], ["   \n\t  "], ["\x00\x01\x02" * 1000], ["\ufffd" * 500]):
        out = run("", texts=texts)
        assert out["summary"] == "" and out["keywords"] == [] and out["key_entities"] == []
        assert out["type"] == "text_document" and out["date"] == "2024-05-17"
        assert out["suggested_name"] == "2024-05-17-file.txt"
    weird = run("", texts=[], mtime=float("nan"), path="/d/.hidden", fmt="", title="   ")
    assert weird["date"] is None and weird["suggested_name"] == "undated-hidden" and weird["type"] == "document"


def test_huge_text_is_capped_and_stays_cheap() -> None:
    head = "Kelp forests shelter otters. " * 7000  # 203,000 characters: past the cap already
    tail = "zebra " * 1_000_000  # beyond the cap: never read
    started = time.perf_counter()
    out = run("", texts=[head, tail])
    assert time.perf_counter() - started < 2.0  # generous: ~0.1 s on a slow machine
    assert "zebra" not in out["keywords"] and out["keywords"][0] in ("kelp", "forests", "otters")
    assert len(text.prepare([head, tail])) <= text.MAX_CHARS


# ------------------------------------------------------------------------------------------------
# the store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "index.sqlite")
    folder = s.folders.add("/f", "F", "")
    with s.tx() as db:
        for name in ("a.txt", "b.txt"):
            s.documents.mark_pending(db, folder.id, f"/f/{name}", 1, 1)
    return s


def index(store: Store, path: str, fields: dict[str, Any]) -> int:
    doc = store.documents.get(path)
    assert doc is not None
    chunk = {"ordinal": 0, "text": "t", "tokens": 1, "line_start": 1, "line_end": 1, "char_start": 0, "char_end": 1}
    with store.tx() as db:
        store.documents.write(db, doc.id, 1, 1, "sha", "txt", None, None, [chunk])
    due = store.analyses.due_at(path)
    assert due is not None, "a written document's analysis is due"
    store.analyses.store([(due, fields)])
    assert store.analyses.due_at(path) is None
    return doc.id


def test_an_old_database_gains_the_enriched_column(tmp_path: Path) -> None:
    old_schema = re.sub(r",(\s*-- JSON object)\n\s*enriched INTEGER[^\n]*", r"\1", SCHEMA)
    assert "enriched" not in old_schema
    db = sqlite3.connect(tmp_path / "old.sqlite")
    db.executescript(old_schema)
    db.execute("INSERT INTO folders(id, name, path, added_at) VALUES('f', 'F', '/f', 0)")
    db.execute(
        "INSERT INTO documents(folder_id, path, original_path, status, updated_at) VALUES('f', '/f/a', '/f/a', "
        "'indexed', 0)"
    )
    db.execute("""INSERT INTO analysis VALUES(1, '/f/a', 1.0, '{"summary": "old"}')""")
    db.commit()
    db.close()
    store = Store(tmp_path / "old.sqlite")
    Store(tmp_path / "old.sqlite")  # a second opening finds the column there
    columns = [r[1] for r in store.db.execute("PRAGMA table_info(analysis)")]
    assert columns[-1] == "enriched"
    assert [p[:3] for p in store.analyses.pending_enrichment(5)] == [(1, "/f/a", {"summary": "old"})]


def test_pending_enrichment_and_enrich(store: Store) -> None:
    a = index(store, "/f/a.txt", {"summary": "first", "keywords": ["x"]})
    time.sleep(0.01)  # analyzed_at orders them
    b = index(store, "/f/b.txt", {"summary": "second"})
    assert [p[:2] for p in store.analyses.pending_enrichment(10)] == [(a, "/f/a.txt"), (b, "/f/b.txt")]
    assert [p[:3] for p in store.analyses.pending_enrichment(1)] == [
        (a, "/f/a.txt", {"summary": "first", "keywords": ["x"]})
    ]
    before = store.analyses.get("/f/a.txt")
    assert before is not None
    updates = {"summary": "by the model", "summary_model": "m1", "analyzed_at": 1, "file_path": "/elsewhere"}
    assert store.analyses.enrich(a, updates, 1)
    after = store.analyses.get("/f/a.txt")
    assert after is not None
    assert after["summary"] == "by the model" and after["summary_model"] == "m1" and after["keywords"] == ["x"]
    assert after["file_path"] == "/f/a.txt" and after["analyzed_at"] >= before["analyzed_at"]
    assert [p[0] for p in store.analyses.pending_enrichment(10)] == [b]
    assert store.analyses.enrich(b, {}, 2) and store.analyses.pending_enrichment(10) == []
    assert not store.analyses.enrich(9999, {"summary": "nobody"}, 1)  # the row is gone: ignored
    # Given the analyzed_at it read, a late enrichment of content re-analyzed since changes nothing.
    stale_at = after["analyzed_at"]
    index(store, "/f/a.txt", {"summary": "edited"})
    assert not store.analyses.enrich(a, {"summary": "stale"}, 1, analyzed_at=stale_at)
    fresh = store.analyses.get("/f/a.txt")
    assert fresh is not None and fresh["summary"] == "edited"
    assert [p[0] for p in store.analyses.pending_enrichment(10)] == [a]  # re-analysis waits for the model again
    with pytest.raises(ValueError):
        store.analyses.enrich(a, {}, 3)


def test_moves_keep_the_analysis_failures_and_deletes_drop_it(store: Store) -> None:
    a = index(store, "/f/a.txt", {"summary": "a"})
    with store.tx() as db:
        assert store.documents.move(db, "/f/a.txt", "/f/c.txt", store.folders.all()[0].id)
    for path in ("/f/c.txt", "/f/a.txt"):
        found = store.analyses.get(path)
        assert found is not None and found["summary"] == "a" and found["file_path"] == "/f/c.txt", path
    store.documents.set_failed(a, "now unreadable")
    assert store.analyses.get("/f/c.txt") is None and store.analyses.get("/f/a.txt") is None
    b = index(store, "/f/b.txt", {"summary": "b"})
    with store.tx() as db:
        store.documents.mark_skipped(db, store.folders.all()[0].id, "/f/b.txt", "too large")
    assert store.analyses.get("/f/b.txt") is None
    index(store, "/f/b.txt", {"summary": "b again"})
    with store.tx() as db:
        store.documents.delete(db, [b])
    assert store.analyses.get("/f/b.txt") is None and store.analyses.pending_enrichment(10) == []


def test_pending_enrichment_skips_documents_not_indexed(store: Store) -> None:
    a = index(store, "/f/a.txt", {"summary": "a"})
    store.documents.requeue(a)  # edited, waiting for its parse: the model should not summarise the old text
    assert store.analyses.pending_enrichment(10) == []


# ------------------------------------------------------------------------------------------------
# Tantivy document frequencies


def test_term_stats_stem_like_the_index_and_see_commits(tmp_path: Path) -> None:
    kw = KeywordIndex(tmp_path / "tantivy")
    try:
        doc_freq, total = kw.term_stats()
        assert (doc_freq("invoice"), total) == (0, 0)
        rows = [
            {"id": 1, "doc_id": 1, "text": "Running invoices", "heading": None, "folder_id": "f"},
            {"id": 2, "doc_id": 2, "text": "the invoice was paid", "heading": None, "folder_id": "f"},
            {"id": 3, "doc_id": 2, "text": "nothing here", "heading": None, "folder_id": "f"},
        ]
        kw.replace([], rows)
        assert kw.term_stats()[0]("invoice") == 0  # not committed yet: not visible
        kw.commit()
        doc_freq, total = kw.term_stats()
        assert total == 3
        assert doc_freq("Invoices") == doc_freq("invoice") == 2  # stemmed and lower-cased, as indexed
        assert doc_freq("run") == doc_freq("RUNNING") == 1
        assert doc_freq("zebra") == 0 and doc_freq("x" * 60) == 0  # an over-long word is not indexed
    finally:
        kw.close()


# ------------------------------------------------------------------------------------------------
# end to end: a real kernel

# The LLM would replace the summary and the embedder has nothing to do with analysis: both are left
# out, so the test sees the deterministic analysis alone and starts fast.
NO_MODELS = merge(FAST_RESTART, {"workers": {"llm": {"enabled": False}, "embedder": {"enabled": False}}})
CONTRACT_DOC = """Acme MSA Extension

This extension of the Master Services Agreement is made on June 30, 2026 between Acme Corp and Globex LLC.
The parties hereby agree that the term continues for twelve months. Either party may terminate it.
Globex LLC shall indemnify Acme Corp. Governing law: the State of Delaware.
"""
MINUTES_DOC = """Minutes of the weekly sync, January 15, 2027

Attendees: Ana, Bo, Chen. Agenda: the release and hiring.
Decisions: the release ships on Friday. Action items: Bo writes the release notes.
"""


class Kernel:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.kernel = RunningKernel(root, NO_MODELS)
        self.client = self.kernel.client("analysis-test")

    def summary(self, path: Path) -> dict[str, Any]:
        reply = self.client.request("indexer", SummaryRequest(str(path)), SummaryReply, timeout=20).body
        assert isinstance(reply, SummaryReply)
        return reply.analysis

    def summary_or_code(self, path: Path) -> dict[str, Any] | str:
        try:
            return self.summary(path)
        except JobError as exc:
            return exc.code


@pytest.fixture(scope="module")
def live() -> Iterator[Kernel]:
    root = short_tmpdir("fma-")
    k = Kernel(root)
    try:
        k.kernel.start()
        docs = root / "Contracts"
        docs.mkdir()
        (docs / "acme.txt").write_text(CONTRACT_DOC)
        (docs / "later.txt").write_text("A plain file about gardening, written later than the others.\n")
        (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
        k.client.request("indexer", FolderAddRequest(str(docs), "Contracts"), FolderAddReply, timeout=20)
        yield k
    finally:
        k.kernel.stop()
        remove_tree(root)


def test_end_to_end_analysis_follows_the_file(live: Kernel) -> None:
    docs = live.root / "Contracts"
    acme = docs / "acme.txt"

    def analysed(path: Path) -> dict[str, Any] | None:
        found = live.summary_or_code(path)
        return found if isinstance(found, dict) else None

    first = wait_for(lambda: analysed(acme), 120, 0.1, "acme.txt analysed after indexing")
    assert first["file_path"] == str(acme)
    assert first["category"] == "legal" and first["type"] == "contract" and first["date"] == "2026-06-30"
    assert first["suggested_name"] == "2026-06-30-acme-msa-extension.txt"
    assert first["summary"].startswith("This extension of the Master Services Agreement is made on June 30, 2026")
    assert first["summary_model"] is None and first["entity"] is None
    assert {"Acme Corp", "Globex LLC"} <= set(first["key_entities"])
    assert isinstance(first["analyzed_at"], float) and 0 < first["confidence"] <= 100
    # A file the parser refuses is never analysed.
    wait_for(lambda: analysed(docs / "later.txt"), 60, 0.1, "later.txt analysed")
    assert live.summary_or_code(docs / "broken.pdf") == "file_not_analyzed"

    # Renamed: the same analysis, by the new path and by the old one, which says where the file is now.
    moved = docs / "acme-renamed.txt"
    os.rename(acme, moved)
    by_new = wait_for(lambda: analysed(moved), 30, 0.05, "the analysis found by the new path")
    by_old = live.summary_or_code(acme)
    assert isinstance(by_old, dict)
    assert by_new["file_path"] == by_old["file_path"] == str(moved)
    assert by_new == by_old and by_new["analyzed_at"] == first["analyzed_at"]
    assert by_new["suggested_name"] == first["suggested_name"]

    # Edited: analysed again from the new content (and now "analyzed at" its new path only).
    moved.write_text(MINUTES_DOC)
    edited = wait_for(
        lambda: (a := analysed(moved)) and a["analyzed_at"] != first["analyzed_at"] and a,
        60,
        0.05,
        "a fresh analysis of the edited file",
    )
    assert edited["type"] == "meeting_notes" and edited["date"] == "2027-01-15"
    assert edited["summary"] != first["summary"] and edited["file_path"] == str(moved)
    assert live.summary_or_code(acme) == "file_not_analyzed"

    # Edited into something the parser refuses: the old analysis is not served any more.
    later = docs / "later.txt"
    later.write_bytes(b"\x00\x01\x02binary" * 200)
    wait_for(lambda: live.summary_or_code(later) == "file_not_analyzed", 60, 0.05, "a failed file unanalysed")

    # Deleted: nothing by either path.
    moved.unlink()
    wait_for(lambda: live.summary_or_code(moved) == "file_not_analyzed", 30, 0.05, "a deleted file unanalysed")
    assert live.summary_or_code(acme) == "file_not_analyzed"
