"""OCR: scanned PDF pages and image files, made here by typesetting text into a page image with
Pillow (and wrapping it in a PDF with Pillow's writer), read by the real RapidOCR engine; its bounds (pages,
time, pixels, switched off); and one real kernel that indexes a folder of scans and finds them through the
MCP tools with ``ocr`` in their location.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from tokenizers import Tokenizer

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import NO_TEXT_PDF, format_of, ocr
from foldermind.workers.parser.formats.image import FORMAT as IMAGE
from foldermind.workers.watcher import eligible_name, scan
from tests import mcpclient as mc
from tests.config import merge
from tests.filemakers import make_image, make_image_bomb, make_mixed_pdf, make_scanned_pdf
from tests.helpers import FAST_RESTART, NO_LLM, RunningKernel, cli, remove_tree, short_tmpdir, wait_for
from tests.test_formats import parsed, refused
from tests.test_frontdoor import structured
from tests.test_ingest import documents

MB = 1024 * 1024
PAGE_1 = ["The first page of the scan is about the harbour crane.", "It has a second line."]
PAGE_2 = ["On the second page the pelican ferry contract is signed.", "Payment is due in thirty days."]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer()


def ingest(monkeypatch: pytest.MonkeyPatch, **settings: object) -> None:
    """This process's [ingest] settings, as the kernel hands them to a parser."""
    monkeypatch.setenv("FOLDERMIND_INGEST", json.dumps(settings))


def letters(text: str) -> str:
    """``text`` without its spaces: the recognizer drops one now and then between words that Pillow's font
    sets close (the bench measures how often: "CER without spaces" in docs/benchmarks/ingest.md)."""
    return "".join(text.split()).lower()


# ------------------------------------------------------------------------------------------------
# The parser: what OCR reads, and where it says it read it.


def test_a_scanned_pdf_is_read_page_by_page_with_ocr_and_cites_page_lines_and_confidence(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    doc = parsed(make_scanned_pdf(tmp_path / "scan.pdf", [PAGE_1, PAGE_2]))
    assert (doc.format, doc.pages) == ("pdf", 2)
    assert [seg.page for seg in doc.segments if seg.text] == [1, 2]
    for seg, lines in zip(doc.segments, (PAGE_1, PAGE_2), strict=True):
        assert letters(seg.text) == letters(" ".join(lines)), seg.text
        assert seg.ocr is not None and 0.8 < seg.ocr <= 1.0
    [second] = [c for c in chunk(doc.segments, tokenizer) if "pelican" in c["text"]]
    assert (second["page_start"], second["line_start"], second["line_end"]) == (2, 3, 4)
    assert second["ocr_confidence"] == doc.segments[1].ocr


def test_a_mixed_pdf_keeps_its_text_page_and_reads_only_its_image_page_with_ocr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    real = ocr.read_page

    def spy(image: Any, page: int, timeout_s: float) -> ocr.PageText:
        read.append(page)
        return real(image, page, timeout_s)

    monkeypatch.setattr(ocr, "read_page", spy)
    typed = "The invoice for the walrus shipment is attached to this letter."
    doc = parsed(make_mixed_pdf(tmp_path / "mixed.pdf", [typed], PAGE_2))
    assert read == [2]
    first, second = (seg for seg in doc.segments if seg.text)
    assert (first.page, first.text, first.ocr) == (1, typed, None)
    assert second.page == 2 and second.ocr is not None and "pelican" in second.text


@pytest.mark.parametrize("suffix", [".png", ".JPG", ".tiff", ".webp", ".bmp"])
def test_an_image_file_is_read_with_ocr_as_page_one(tmp_path: Path, suffix: str) -> None:
    # A strip of a page (a photo of a board, a screenshot), not a whole letter page: OCR's time follows the
    # pixels (~0.7 against ~1.5 CPU-s a file) and the format, not the size, is what is read here.
    doc = parsed(make_image(tmp_path / f"board{suffix}", PAGE_2, inches=(8.5, 3.5)))
    assert (doc.format, doc.pages) == (IMAGE, 1)
    [seg] = doc.segments
    assert seg.page == 1 and seg.ocr is not None and letters(seg.text) == letters(" ".join(PAGE_2))


def test_an_image_of_30000_by_30000_pixels_is_refused_from_its_header_without_decoding_it(tmp_path: Path) -> None:
    bomb = make_image_bomb(tmp_path / "bomb.png", 30_000)
    assert bomb.stat().st_size < 5 * MB
    rss = psutil.Process().memory_info().rss
    started = time.monotonic()
    err = refused(bomb)
    assert (err.code, err.message) == (ErrorCode.PARSE_FAILED, ocr.image_too_large(30_000, 30_000))
    assert time.monotonic() - started < 5
    assert psutil.Process().memory_info().rss - rss < 100 * MB  # 900 Mpx decoded would be 900 MiB


def test_ocr_reads_at_most_ocr_max_pages_and_a_page_past_ocr_timeout_s_fails_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(monkeypatch, ocr_max_pages=1)
    doc = parsed(make_scanned_pdf(tmp_path / "scan.pdf", [PAGE_1, PAGE_2]))
    assert [seg.page for seg in doc.segments if seg.text] == [1]
    ingest(monkeypatch, ocr_timeout_s=0.001)
    err = refused(make_image(tmp_path / "slow.png", PAGE_2))
    assert (err.code, err.message) == (ErrorCode.PARSE_FAILED, ocr.ocr_timed_out(1, 0.001))
    err = refused(tmp_path / "scan.pdf")
    assert err.message == ocr.ocr_timed_out(1, 0.001)  # no page read: the first page's reason


def test_with_ocr_off_an_image_fails_as_ocr_off_and_a_scan_as_without_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(monkeypatch, ocr=False)
    assert refused(make_image(tmp_path / "board.png", PAGE_2)).message == ocr.OCR_OFF
    assert refused(make_scanned_pdf(tmp_path / "scan.pdf", [PAGE_1])).message == NO_TEXT_PDF


def test_every_image_suffix_is_read_and_watched_in_any_case_and_unknown_ones_are_counted(tmp_path: Path) -> None:
    for suffix in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"):
        for name in (f"a{suffix}", f"A{suffix.upper()}", f"b{suffix.title()}"):
            assert format_of(Path(name)) == IMAGE and eligible_name(name), name
    for name in ("notes.xyz", "DATA.BIN", "README", "board.png", ".hidden.xyz", "draft.tmp"):
        (tmp_path / name).write_bytes(b"\x00\x01x")  # not text: an unknown suffix is read only when it is
    unsupported: dict[str, int] = {}
    files, _ = scan(str(tmp_path), unsupported)
    assert [Path(f["path"]).name for f in files] == ["board.png"]
    assert unsupported == {".xyz": 1, ".bin": 1, "": 1}


# ------------------------------------------------------------------------------------------------
# A real kernel: a folder of scans, found through the MCP tools.


@pytest.fixture
def served_scans() -> Iterator[tuple[RunningKernel, Path, str, str]]:
    root = short_tmpdir()
    docs = root / "scans"
    docs.mkdir()
    # OCR's time limits are wall-clock: a page costs 5-8 CPU-s, but at a load average of 19 on this shared
    # 2-core machine every page here took over ocr_timeout_s (30 s). This test is about what is read and where;
    # the limits have their own test above, and the speed is the OCR bench's.
    deadlines = {"ingest": {"ocr_timeout_s": 600, "parse_timeout_s": 1200}}
    # Searched, never chatted with.
    k = RunningKernel(
        root / "home", merge(FAST_RESTART, NO_LLM, {"mcp": {"port": 0, "rate_per_minute": 6000}}, deadlines)
    )
    try:
        k.start()
        info = mc.mcp_info(k.root)
        yield k, docs, str(info["url"]), mc.token_of(k.root)
    finally:
        k.stop()
        remove_tree(root)


def test_a_folder_of_scans_is_found_by_page_with_ocr_in_the_location_and_the_image_bomb_fails_alone(
    served_scans: tuple[RunningKernel, Path, str, str],
) -> None:
    k, docs, url, token = served_scans
    make_scanned_pdf(docs / "contract.pdf", [PAGE_1, PAGE_2])
    make_mixed_pdf(docs / "mixed.pdf", ["The invoice for the walrus shipment is attached."], ["The iguana receipt."])
    make_image(docs / "Board.PNG", ["The whiteboard lists the okapi budget for March."])
    make_image_bomb(docs / "bomb.png", 30_000)
    (docs / "notes.txt").write_text("A plain neighbour about capybaras.\n")
    (docs / "model.xyz").write_bytes(b"not a format anyone reads\x00")  # nor text
    cli(k.root, "folders", "add", str(docs), "--name", "Scans", "--wait", timeout=300)

    state = documents(k.root)
    assert {n: r["error"] for n, r in state.items() if r["status"] == "failed"} == {
        "bomb.png": ocr.image_too_large(30_000, 30_000)
    }

    def search(query: str) -> list[dict[str, Any]]:
        args = {"query": query, "mode": "keyword", "top_k": 3}
        results: list[dict[str, Any]] = structured(mc.call(url, token, "search_documents", args))["results"]
        return results

    hit = wait_for(lambda: search("pelican ferry contract"), 30, 0.3, "the scanned page found")[0]
    location = hit["location"]
    assert (hit["file_name"], location["page"], location["ocr"]) == ("contract.pdf", 2, True), hit
    assert 0.8 < location["ocr_confidence"] <= 1.0
    assert [(h["file_name"], h["location"]["page"], h["location"]["ocr"]) for h in search("iguana")] == [
        ("mixed.pdf", 2, True)
    ]
    walrus = search("walrus shipment")[0]
    assert (walrus["location"]["page"], walrus["location"]["ocr"], walrus["location"]["ocr_confidence"]) == (
        1,
        False,
        None,
    )
    board = search("okapi budget")[0]
    assert (board["file_name"], board["location"]["page"], board["location"]["ocr"]) == ("Board.PNG", 1, True)
    printed = cli(k.root, "search", "okapi budget", "--mode", "keyword", "--top-k", "1").stdout.splitlines()[0]
    confidence = f"{board['location']['ocr_confidence']:.0%}"
    assert printed.startswith(f"1. {docs / 'Board.PNG'}  (p. 1, OCR, {confidence} confident, lines 1-"), printed

    args = {"file_path": hit["file_path"], "start_line": location["line_start"], "end_line": location["line_end"]}
    read = structured(mc.call(url, token, "read_document", args))
    assert "pelican" in read["text"]
    assert [(p["page"], p["line_start"]) for p in read["ocr_pages"]] == [(2, location["line_start"])]

    status = structured(mc.call(url, token, "index_status"))
    formats = {f["format"]: f for f in status["formats"]}
    assert formats["image"]["ocr"] and formats["pdf"]["ocr"] and not formats["docx"]["ocr"]
    assert ".png" in formats["image"]["suffixes"] and {"pptx", "xlsx", "csv", "epub", "email", "odf"} <= set(formats)
    assert (status["ocr"]["enabled"], status["ocr"]["available"], status["ocr"]["note"]) == (True, True, None)
    assert status["unsupported"] == {".xyz": 1} and status["totals"]["files_unsupported"] == 1
    restarts = {w["name"]: w["restarts"] for w in k.status().workers}
    assert sum(restarts.values()) == 0, restarts
    # A parser that read scans gave the memory OCR left behind back to the system after the parse (its RSS then
    # is under a third of its peak; without the trim, 0.36-0.57 of it here), and logged it.
    readers = {}
    for name, pid in k.pids().items():
        if name.startswith("parser") and pid:
            fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            rss, peak = (int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM"))
            if peak > 500 * 2**20:  # text detection on a page image: it read scans
                readers[name] = (rss, peak)
    assert readers and all(rss < peak / 3 for rss, peak in readers.values()), readers
    logged = "".join(p.read_text(errors="replace") for p in k.home.log_dir.glob("parser*.log*"))
    assert "heap trimmed after a parse" in logged
