"""The parser: real files of every format, made here on the fly, and the worker behind a real kernel."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest
from pypdf import PdfReader, PdfWriter
from tokenizers import Tokenizer

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import DescribeReply, DescribeRequest, Envelope, ParseReply, ParseRequest
from foldermind.workers import parser as parser_module
from foldermind.workers.framework.base import Request, WorkerContext
from foldermind.workers.parser import ParserWorker, apply_memory_limit
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import (
    ENCRYPTED_PDF,
    NO_TEXT_PDF,
    NOT_PDF,
    NOT_TEXT,
    ZIP_BOMB,
    ParsedDocument,
    ParseError,
    Segment,
    document_text,
    format_of,
    parse_file,
)
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, only_workers, remove_tree, short_tmpdir

MB = 1024 * 1024
ALL_FORMATS = ["txt", "md", "pdf", "docx", "html", "pptx", "xlsx", "csv", "epub", "email", "odf", "rtf", "image"]


# ------------------------------------------------------------------------------------------------
# File makers: every test document is generated, none is committed.


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF, written by hand: one page per list of lines, set in Helvetica.

    An empty list makes a page without any text (what a scan looks like to a text extractor).
    """
    font = 3 + 2 * len(pages)
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (" ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages))).encode(), len(pages)),
        font: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    }
    for i, lines in enumerate(pages):
        page, content = 3 + 2 * i, 4 + 2 * i
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 740 Td"] + [f"{_pdf_string(line)} Tj T*" for line in lines] + ["ET"]
        stream = "\n".join(ops).encode("cp1252") if lines else b""
        objects[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content, font)
        )
        objects[content] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    if title is not None:
        objects[font + 1] = b"<< /Title %s >>" % _pdf_string(title).encode("latin-1")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, objects[number]))
    xref = out.tell()
    size = max(objects) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    for number in range(1, size):
        out.write(b"%010d 00000 n \n" % offsets[number])
    info = b" /Info %d 0 R" % (font + 1) if title is not None else b""
    out.write(b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (size, info, xref))
    return out.getvalue()


def encrypt_pdf(data: bytes, user_password: str, owner_password: str = "owner") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password=owner_password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(path: Path) -> Path:
    """Title, two levels of headings, paragraphs and a table (python-docx writes a real DOCX)."""
    document = docx.Document()
    document.core_properties.title = "Field Guide"
    document.add_paragraph("Field Guide", style="Title")
    document.add_paragraph("This guide explains how the field kit is installed.")
    document.add_heading("Setup", level=1)
    document.add_paragraph("Unpack the kit and check every part.")
    document.add_heading("Windows", level=2)
    document.add_paragraph("Run the installer as an administrator.")
    table = document.add_table(rows=2, cols=3)
    for r, row in enumerate([["Part", "Count", "Weight"], ["Tripod", "1", "2 kg"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_heading("Linux", level=2)
    document.add_paragraph("Install the package with your package manager.")
    document.add_heading("Usage", level=1)
    document.add_paragraph("Point the sensor north and press start.")
    document.save(str(path))
    return path


def write(path: Path, data: bytes | str) -> Path:
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def parse_error(path: Path, max_bytes: int = 50 * MB) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_file(path, max_bytes)
    return info.value


def assert_positions(doc: ParsedDocument) -> None:
    """Every segment's char and line range points at its own text in the extracted text."""
    text = doc.text
    lines = text.split("\n")
    assert text.splitlines() == lines[: len(text.splitlines())]
    for seg in doc.segments:
        assert text[seg.char_start : seg.char_end] == seg.text
        assert "\n".join(lines[seg.line_start - 1 : seg.line_end]) == seg.text


def by_text(doc: ParsedDocument, needle: str) -> Segment:
    return next(seg for seg in doc.segments if needle in seg.text)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer()


# ------------------------------------------------------------------------------------------------
# PDF


def test_pdf_pages_are_known_for_every_segment_and_chunk(tmp_path: Path, tokenizer: Tokenizer) -> None:
    pages = [
        ["Alpha page opens the report.", "It talks about glaciers."],
        ["Beta page covers the budget (in euros)."],
        [],  # a blank page in the middle
        ["Delta page closes with the outlook."],
    ]
    path = write(tmp_path / "report.pdf", make_pdf(pages, title="Annual Report"))
    doc = parse_file(path, 50 * MB)
    assert (doc.format, doc.pages, doc.title) == ("pdf", 4, "Annual Report")
    assert_positions(doc)
    assert by_text(doc, "glaciers").page == 1
    assert by_text(doc, "budget (in euros)").page == 2
    assert by_text(doc, "outlook").page == 4
    assert all(seg.page != 3 for seg in doc.segments)
    chunks = chunk(doc.segments, tokenizer)
    assert [c["page_start"] for c in chunks] == [1, 2, 4]
    assert all(c["page_start"] == c["page_end"] for c in chunks)
    assert "glaciers" in chunks[0]["text"] and "budget" not in chunks[0]["text"]
    assert "budget" in chunks[1]["text"] and "outlook" not in chunks[1]["text"]
    for c in chunks:
        assert doc.text[c["char_start"] : c["char_end"]] == c["text"]


def test_long_pdf_chunks_never_span_pages(tmp_path: Path, tokenizer: Tokenizer) -> None:
    rng = random.Random(7)
    words = ["river", "stone", "maple", "harbor", "lantern", "copper", "meadow", "signal", "orbit", "velvet"]
    pages = [[" ".join(rng.choice(words) for _ in range(12)) + f" page{n}." for _ in range(45)] for n in range(1, 4)]
    doc = parse_file(write(tmp_path / "long.pdf", make_pdf(pages)), 50 * MB)
    chunks = chunk(doc.segments, tokenizer)
    assert len(chunks) > 3
    for c in chunks:
        own = {f"page{n}" for n in range(1, 4) if f"page{n}" in c["text"]}
        assert own == {f"page{c['page_start']}"}
        assert c["tokens"] <= 256


def test_pdf_without_text_is_reported_as_scanned(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", make_pdf([[], []]))
    err = parse_error(path)
    assert (err.code, err.message) == ("parse_failed", NO_TEXT_PDF)
    assert err.message == "no extractable text (scanned?)"


def test_encrypted_pdf_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "secret.pdf", encrypt_pdf(make_pdf([["Top secret plans."]]), user_password="hunter2"))
    err = parse_error(path)
    assert (err.code, err.message) == ("parse_failed", ENCRYPTED_PDF)
    assert err.message == "encrypted PDF"


def test_pdf_encrypted_with_an_empty_user_password_opens(tmp_path: Path) -> None:
    path = write(tmp_path / "owner-only.pdf", encrypt_pdf(make_pdf([["Readable by anyone."]]), user_password=""))
    assert PdfReader(path).is_encrypted
    doc = parse_file(path, 50 * MB)
    assert "Readable by anyone." in doc.text
    assert doc.segments[0].page == 1


def test_corrupt_pdf(tmp_path: Path) -> None:
    err = parse_error(write(tmp_path / "junk.pdf", b"%PDF-1.4\n" + random.Random(1).randbytes(3000)))
    assert err.code == "parse_failed"
    assert err.message.startswith("corrupt PDF: ")
    assert parse_error(write(tmp_path / "empty.pdf", b"")).message.startswith("corrupt PDF: ")


def test_a_file_of_another_format_named_pdf_is_said_to_be_no_pdf(tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body>Saved from a browser as report.pdf</body></html>"
    assert parse_error(write(tmp_path / "report.pdf", html)).message == NOT_PDF
    junk_first = b"\r\n" * 20 + make_pdf([["A header after some junk is still a PDF."]])
    assert "still a PDF" in parse_file(write(tmp_path / "late.pdf", junk_first), 50 * MB).text


# ------------------------------------------------------------------------------------------------
# DOCX


def test_docx_headings_paragraphs_and_table(tmp_path: Path) -> None:
    doc = parse_file(make_docx(tmp_path / "guide.docx"), 50 * MB)
    assert (doc.format, doc.title, doc.pages) == ("docx", "Field Guide", None)
    assert_positions(doc)
    assert by_text(doc, "field kit is installed").heading is None
    assert by_text(doc, "Unpack the kit").heading == "Setup"
    assert by_text(doc, "as an administrator").heading == "Setup > Windows"
    row = by_text(doc, "Tripod")
    assert row.text == "Tripod | 1 | 2 kg"
    assert row.heading == "Setup > Windows"
    assert by_text(doc, "Part | Count").text == "Part | Count | Weight"
    assert by_text(doc, "package manager").heading == "Setup > Linux"
    assert by_text(doc, "Point the sensor").heading == "Usage"
    # The heading text itself opens its section.
    assert by_text(doc, "Windows").text == "Windows"


def test_docx_random_bytes_are_corrupt(tmp_path: Path) -> None:
    err = parse_error(write(tmp_path / "random.docx", random.Random(2).randbytes(4096)))
    assert err.code == "parse_failed"
    assert err.message == "corrupt DOCX: File is not a zip file"


def test_docx_truncated_zip_is_corrupt(tmp_path: Path) -> None:
    data = make_docx(tmp_path / "whole.docx").read_bytes()
    err = parse_error(write(tmp_path / "truncated.docx", data[: len(data) // 2]))
    assert err.code == "parse_failed"
    assert err.message.startswith("corrupt DOCX: ")


def test_docx_zip_without_a_document_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "not a word document")
    err = parse_error(path)
    assert err.code == "parse_failed"
    assert err.message.startswith("corrupt DOCX: ")


def make_zip_bomb(path: Path, megabytes: int) -> Path:
    """A DOCX-shaped zip whose document part inflates to ``megabytes`` MiB of zeros (~1000:1)."""
    block = bytes(MB)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as entry:
            for _ in range(megabytes):
                entry.write(block)
    return path


def test_docx_zip_bomb_is_refused_before_python_docx_opens_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = make_zip_bomb(tmp_path / "bomb.docx", 200)
    assert bomb.stat().st_size < 2 * MB

    def must_not_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("python-docx opened a zip bomb")

    monkeypatch.setattr(docx, "Document", must_not_open)
    err = parse_error(bomb)
    assert (err.code, err.message) == ("parse_failed", ZIP_BOMB)
    assert err.message == "suspicious DOCX (zip bomb?)"


def test_docx_whose_entries_add_up_past_twenty_times_the_limit_is_refused(tmp_path: Path) -> None:
    # Many parts each just under the size where the ratio test starts: only their total gives them away.
    path = make_docx(tmp_path / "big.docx")
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        for n in range(40):
            zf.writestr(f"word/media/part{n}.bin", bytes(MB - 1))
    limit = path.stat().st_size + 1
    assert limit * 20 < 40 * (MB - 1)
    err = parse_error(path, max_bytes=limit)
    assert (err.code, err.message) == ("parse_failed", ZIP_BOMB)
    assert parse_file(path, 50 * MB).title == "Field Guide"  # the same file is fine under the normal limit


# ------------------------------------------------------------------------------------------------
# HTML and Markdown

HTML = """<!doctype html>
<html><head><title>  Kitchen
  Handbook </title>
<style>body { color: red; } .secret { display: none }</style>
<script>var tracking = "SCRIPT-TEXT";</script>
</head>
<body>
<nav><a href="/">Home</a> <a href="/menu">NAV-TEXT</a></nav>
<noscript>NOSCRIPT-TEXT enable javascript</noscript>
<template><p>TEMPLATE-TEXT</p></template>
<h1>Kitchen Handbook</h1>
<p>Welcome to the <b>kitchen</b>.
Keep it clean.</p>
<h2>Knives</h2>
<p>Sharpen knives weekly.<br>Store them dry.</p>
<h3>Storage</h3>
<ul><li>Use a magnetic strip.</li><li>Never in the sink.</li></ul>
<h2>Ovens</h2>
<table><tr><th>Oven</th><th>Max</th></tr><tr><td>Main</td><td>250 C</td></tr></table>
<!-- COMMENT-TEXT -->
<script>alert("SCRIPT-TWO")</script>
</body></html>
"""


def test_html_visible_text_with_heading_paths(tmp_path: Path) -> None:
    doc = parse_file(write(tmp_path / "handbook.html", HTML), 50 * MB)
    assert (doc.format, doc.title) == ("html", "Kitchen Handbook")
    assert_positions(doc)
    for hidden in ("SCRIPT-TEXT", "SCRIPT-TWO", "NAV-TEXT", "NOSCRIPT-TEXT", "TEMPLATE-TEXT", "COMMENT-TEXT", "color"):
        assert hidden not in doc.text
    assert by_text(doc, "Welcome").text == "Welcome to the kitchen. Keep it clean."
    assert by_text(doc, "Welcome").heading == "Kitchen Handbook"
    assert by_text(doc, "Sharpen").text == "Sharpen knives weekly.\nStore them dry."
    assert by_text(doc, "Sharpen").heading == "Kitchen Handbook > Knives"
    assert by_text(doc, "magnetic").heading == "Kitchen Handbook > Knives > Storage"
    assert by_text(doc, "Oven: Main").text == "Oven: Main; Max: 250 C"  # a row with its header (th)
    assert by_text(doc, "Oven: Main").heading == "Kitchen Handbook > Ovens"


def test_htm_suffix_and_declared_charset(tmp_path: Path) -> None:
    page = '<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head><body><p>cr\xe8me br\xfbl\xe9e</p>'
    doc = parse_file(write(tmp_path / "menu.HTM", page.encode("latin-1")), 50 * MB)
    assert (doc.format, doc.title) == ("html", "Café")
    assert "crème brûlée" in doc.text


MARKDOWN = """---
title: front matter is not text
---
# Install Guide

Read this *first*.
It is short.

## Setup

Prepare the `tools`.

### Windows

Use [the installer](https://example.com).

| Step | Time |
|------|------|
| Copy | 2 min |

### Linux

```sh
make install
```

## Usage

- run it
- stop it

# Appendix

Nothing here.
"""


def test_markdown_nested_headings(tmp_path: Path) -> None:
    doc = parse_file(write(tmp_path / "guide.md", MARKDOWN), 50 * MB)
    assert (doc.format, doc.title) == ("md", "front matter is not text")  # the front matter names it
    assert_positions(doc)
    assert "front matter" not in doc.text
    assert parse_file(write(tmp_path / "plain.md", MARKDOWN.split("---\n", 2)[2]), MB).title == "Install Guide"
    assert by_text(doc, "Read this").text == "Read this first.\nIt is short."
    assert by_text(doc, "Read this").heading == "Install Guide"
    assert by_text(doc, "Prepare the tools.").heading == "Install Guide > Setup"
    assert by_text(doc, "the installer").text == "Use the installer."
    assert by_text(doc, "the installer").heading == "Install Guide > Setup > Windows"
    assert by_text(doc, "Step: Copy").text == "Step: Copy; Time: 2 min"  # a row with its header
    assert by_text(doc, "make install").heading == "Install Guide > Setup > Linux"
    assert by_text(doc, "run it").heading == "Install Guide > Usage"
    assert by_text(doc, "Nothing here").heading == "Appendix"


def test_markdown_chunks_break_at_headings(tmp_path: Path, tokenizer: Tokenizer) -> None:
    doc = parse_file(write(tmp_path / "guide.markdown", MARKDOWN), 50 * MB)
    chunks = chunk(doc.segments, tokenizer)
    assert [c["heading"] for c in chunks] == [
        "Install Guide",
        "Install Guide > Setup",
        "Install Guide > Setup > Windows",
        "Install Guide > Setup > Linux",
        "Install Guide > Usage",
        "Appendix",
    ]
    assert chunks[2]["text"] == "Windows\nUse the installer.\n\nStep: Copy; Time: 2 min"
    lines = doc.text.split("\n")
    for c in chunks:
        assert doc.text[c["char_start"] : c["char_end"]] == c["text"]
        assert "\n".join(lines[c["line_start"] - 1 : c["line_end"]]) == c["text"]


# ------------------------------------------------------------------------------------------------
# Plain text and its encodings


def test_txt_extracted_text_is_the_file_line_for_line(tmp_path: Path) -> None:
    raw = "First line\r\nsecond line\r\n\r\n\r\nAfter two blank lines\rold Mac line\n\ttabbed\n"
    doc = parse_file(write(tmp_path / "notes.txt", raw.encode()), 50 * MB)
    assert doc.format == "txt" and doc.title is None and doc.pages is None
    assert doc.text == "First line\nsecond line\n\n\nAfter two blank lines\nold Mac line\n\ttabbed\n"
    assert_positions(doc)
    seg = by_text(doc, "After two")
    assert (seg.line_start, seg.line_end) == (5, 7)
    assert document_text(tmp_path / "notes.txt", 50 * MB) == doc.text


RST = """\
=========================
:mod:`Template` reference
=========================

.. templatefilter:: apnumber

``apnumber``
============

For numbers 1-9, returns the number spelled out.
Otherwise, returns the number.

Someday/Maybe
-------------
Used for high-level ideas.

Not a title
--

An em dash line
---
is not a title either: its adornment is shorter than the text.

:tfilter:`~humanize.intcomma`
============

Adds commas.
"""


def test_rest_section_titles_make_heading_paths_and_the_first_is_the_title(tmp_path: Path) -> None:
    doc = parse_file(write(tmp_path / "ref.txt", RST), 50 * MB)
    assert (doc.format, doc.title) == ("txt", "Template reference")
    assert doc.text == RST  # still the file, line for line
    assert_positions(doc)
    assert by_text(doc, ".. templatefilter").heading == "Template reference"
    assert by_text(doc, "For numbers 1-9").heading == "Template reference > apnumber"
    assert by_text(doc, "``apnumber``").text == "``apnumber``\n============"
    # A title followed at once by its text, one level down (a new adornment style).
    assert by_text(doc, "Used for high-level").heading == "Template reference > apnumber > Someday/Maybe"
    assert by_text(doc, "Not a title").heading == "Template reference > apnumber > Someday/Maybe"
    assert by_text(doc, "An em dash").text.startswith("An em dash line\n---\nis not")
    # Back up a level; roles shown as reST renders them; an adornment a little short still counts.
    assert by_text(doc, "Adds commas").heading == "Template reference > intcomma"
    assert format_of(Path("guide.rst")) == "txt"
    assert parse_file(write(tmp_path / "plain.txt", "no titles\n\nat all\n"), MB).title is None


def test_utf16_with_bom(tmp_path: Path) -> None:
    text = "Grüße aus Köln.\nΚαλημέρα κόσμε.\nEmoji: 🎉 done.\n"  # noqa: RUF001
    for encoding in ("utf-16", "utf-16-be", "utf-32"):
        data = text.encode(encoding)
        if encoding == "utf-16-be":
            data = b"\xfe\xff" + data
        doc = parse_file(write(tmp_path / f"{encoding}.txt", data), 50 * MB)
        assert doc.text == text, encoding


def test_utf16_without_bom_is_detected(tmp_path: Path) -> None:
    text = "This file was saved as UTF-16 little endian without a byte order mark. " * 3
    doc = parse_file(write(tmp_path / "nobom.txt", text.encode("utf-16-le")), 50 * MB)
    assert doc.text == text


def test_utf8_with_bom_and_latin1(tmp_path: Path) -> None:
    text = "Le café était très agréable, et la crème brûlée délicieuse. Où est la gare ? Ça va.\n"
    assert parse_file(write(tmp_path / "bom.txt", b"\xef\xbb\xbf" + text.encode()), MB).text == text
    assert parse_file(write(tmp_path / "latin1.txt", text.encode("latin-1")), MB).text == text


def test_cjk_text(tmp_path: Path, tokenizer: Tokenizer) -> None:
    text = "这是一个中文文本文件，用于测试分块。我们希望每个块都不超过限制！日本語の文章も少し入れます。\n" * 60  # noqa: RUF001
    doc = parse_file(write(tmp_path / "cjk.txt", text), 50 * MB)
    assert doc.text == text
    gb = parse_file(write(tmp_path / "gb.txt", text.encode("gb18030")), 50 * MB)
    assert gb.text.startswith("这是一个中文文本文件")
    chunks = chunk(doc.segments, tokenizer)
    assert len(chunks) > 1
    for c in chunks:
        assert c["tokens"] <= 256
        assert len(tokenizer.encode(c["text"]).ids) == c["tokens"]
        assert doc.text[c["char_start"] : c["char_end"]] == c["text"]
    assert all(c["text"][-1] in "\u3002\uff01" for c in chunks[:-1])  # whole sentences: ends at a full stop or !


def test_binary_file_named_txt(tmp_path: Path) -> None:
    elf = b"\x7fELF\x02\x01\x01" + bytes(400) + b"\x03\x00\x3e\x00" * 50 + bytes(range(256)) * 4
    err = parse_error(write(tmp_path / "program.txt", elf))
    assert (err.code, err.message) == ("parse_failed", NOT_TEXT)
    assert err.message == "not a text file"
    noise = parse_error(write(tmp_path / "noise.txt", random.Random(4).randbytes(8192)))
    assert (noise.code, noise.message) == ("parse_failed", "not a text file")
    # The HTML parsers take any bytes: the same data named .html is refused the same way, not indexed as junk.
    for name, data in (("program.html", elf), ("noise.html", random.Random(4).randbytes(8192))):
        err = parse_error(write(tmp_path / name, data))
        assert (err.code, err.message) == ("parse_failed", NOT_TEXT), name
    stray = b"<html><body><p>" + b"Plain words about herons. " * 20 + b"</p></body></html>"
    assert "herons" in parse_file(write(tmp_path / "stray.html", stray), MB).text  # one control char is still text


def test_empty_text_file_has_no_segments(tmp_path: Path) -> None:
    assert parse_file(write(tmp_path / "empty.txt", b""), MB).segments == []
    assert parse_file(write(tmp_path / "blank.txt", "\n  \n\t\n"), MB).segments == []


# ------------------------------------------------------------------------------------------------
# Sizes, paths and formats


def test_file_over_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", "x" * 2000)
    err = parse_error(path, max_bytes=1000)
    assert err.code == "file_too_large"
    assert err.message == "file too large: 2000 bytes (the limit is 1000)"
    assert parse_file(path, 2000).text == "x" * 2000


def test_unreadable_and_unsupported(tmp_path: Path) -> None:
    missing = parse_error(tmp_path / "gone.txt")
    assert missing.code == "unreadable"
    assert missing.message == "unreadable: No such file or directory"
    folder = tmp_path / "folder.md"
    folder.mkdir()
    assert parse_error(folder).code == "unreadable"
    if os.geteuid() != 0:  # root reads anything
        locked = write(tmp_path / "locked.txt", "secret")
        locked.chmod(0)
        assert parse_error(locked).message == "unreadable: Permission denied"
    other = parse_error(write(tmp_path / "drawing.dwg", b"AC1032"))  # .xlsx is read now (workers/parser/formats)
    assert (other.code, other.message) == ("parse_failed", "unsupported format: .dwg")


def test_memory_limit_from_the_environment() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        assert apply_memory_limit({"FOLDERMIND_PARSER_MEMORY_MB": "0"}) == 0
        assert resource.getrlimit(resource.RLIMIT_AS) == (soft, hard)
        assert apply_memory_limit({"FOLDERMIND_PARSER_MEMORY_MB": "65536"}) == 65536
        assert resource.getrlimit(resource.RLIMIT_AS)[0] == 65536 * MB
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_memory_cap_turns_a_huge_allocation_into_memory_error() -> None:
    """In a process of its own (the cap cannot be lifted again from inside)."""
    code = (
        "from foldermind.workers.parser import apply_memory_limit\n"
        "assert apply_memory_limit({'FOLDERMIND_PARSER_MEMORY_MB': '512'}) == 512\n"
        "try:\n"
        "    blob = bytearray(1024 * 1024 * 1024)\n"
        "except MemoryError:\n"
        "    print('MemoryError')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "MemoryError", out.stderr


def parser_worker() -> ParserWorker:
    ctx = WorkerContext(name="parser#9", service="parser", bus_endpoint="ipc:///nowhere")
    return ParserWorker(ctx)


def request(body: ParseRequest, path: Path) -> Request:
    """A parse request as the indexer sends it: the file's bytes with it (a parser opens no path)."""
    body.content = True
    return Request(Envelope(kind=ParseRequest.KIND), body, [path.read_bytes()])


def test_worker_handler_maps_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = parser_worker()
    assert ParseRequest.KIND in worker.handlers()
    assert worker.details()["formats"] == ALL_FORMATS
    assert worker.details()["tokenizer"] == "not loaded yet"
    path = write(tmp_path / "hello.txt", "Hello there.\n")
    reply = worker.on_parse(request(ParseRequest(path=str(path)), path))
    assert isinstance(reply, ParseReply)
    assert [c["text"] for c in reply.chunks] == ["Hello there."]
    assert worker.details()["tokenizer"] == "loaded"

    def exhausted(path: Path, data: bytes, max_bytes: int, fmt: str = "") -> ParsedDocument:
        raise MemoryError

    monkeypatch.setattr(parser_module, "parse_content", exhausted)
    with pytest.raises(JobError) as info:
        worker.on_parse(request(ParseRequest(path=str(path)), path))
    assert (info.value.info.code, info.value.info.message) == ("parse_failed", "out of memory")
    with pytest.raises(JobError) as info:
        worker.on_parse(request(ParseRequest(path=str(path), max_tokens=4), path))
    assert info.value.info.code == "bad_request"


# ------------------------------------------------------------------------------------------------
# The worker for real: a kernel, its parser pool, requests over the bus


@pytest.fixture(scope="module")
def parser_kernel() -> Iterator[RunningKernel]:
    """A kernel running only the parser pool (the other workers have tests of their own)."""
    root = short_tmpdir()
    k = RunningKernel(root, merge(FAST_RESTART, only_workers("parser")))
    try:
        yield k.start()
    finally:
        k.stop()
        remove_tree(root)


def parse(client: BusClient, body: ParseRequest, path: Path) -> ParseReply:
    body.content = True
    return client.request("parser", body, ParseReply, [path.read_bytes()], timeout=30).body


def test_parser_worker_answers_parse_requests(parser_kernel: RunningKernel, tmp_path: Path) -> None:
    client = parser_kernel.client()
    pdf = write(tmp_path / "two-pages.pdf", make_pdf([["Page one speaks of apples."], ["Page two of pears."]]))
    reply = parse(client, ParseRequest(path=str(pdf)), pdf)
    assert (reply.format, reply.pages) == ("pdf", 2)
    assert [(c["ordinal"], c["page_start"], c["text"]) for c in reply.chunks] == [
        (0, 1, "Page one speaks of apples."),
        (1, 2, "Page two of pears."),
    ]
    guide = make_docx(tmp_path / "guide.docx")
    reply = parse(client, ParseRequest(path=str(guide), max_tokens=64), guide)
    assert reply.title == "Field Guide"
    assert {c["heading"] for c in reply.chunks} == {None, "Setup", "Setup > Windows", "Setup > Linux", "Usage"}
    assert all(c["tokens"] <= 64 for c in reply.chunks)
    text = document_text(guide, 50 * MB)
    for c in reply.chunks:
        assert text[c["char_start"] : c["char_end"]] == c["text"]

    details = client.request("parser#1", DescribeRequest(), DescribeReply, timeout=10).body.details
    assert details["formats"] == ALL_FORMATS
    assert details["memory_limit_mb"] == 3072 // 2  # the default pool budget, shared by the default two parsers
    assert details["inflate_limit_mb"] == 3072 // 2 // 16


def test_parser_worker_errors_are_typed(parser_kernel: RunningKernel, tmp_path: Path) -> None:
    client = parser_kernel.client()
    cases = {
        write(tmp_path / "scan.pdf", make_pdf([[]])): ("parse_failed", "no extractable text (scanned?)"),
        write(tmp_path / "program.txt", b"\x00\x01\x02" * 500): ("parse_failed", "not a text file"),
        write(tmp_path / "big.txt", "y" * 5000): ("file_too_large", "file too large: 5000 bytes (the limit is 4096)"),
    }
    for path, (code, message) in cases.items():
        with pytest.raises(JobError) as info:
            parse(client, ParseRequest(path=str(path), max_bytes=4096), path)
        assert (info.value.code, info.value.info.message) == (code, message)
    with pytest.raises(JobError) as info:  # a path alone is never opened
        client.request("parser", ParseRequest(path=str(tmp_path / "scan.pdf")), ParseReply, timeout=30)
    assert info.value.code == "file_content_needed" and "reads no path" in info.value.info.message
    with pytest.raises(JobError) as info:
        client.request("parser", ParseRequest(path="relative/file.txt"), ParseReply, timeout=30)
    assert info.value.code == "bad_request"
    # No error took a parser down: each is serving, or idle (on demand: one the errors never reached may not
    # have started), and none was restarted.
    for name in ("parser#1", "parser#2"):
        assert parser_kernel.worker(name)["state"] in ("RUNNING", "IDLE")
        assert parser_kernel.worker(name)["restarts"] == 0
