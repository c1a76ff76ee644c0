"""A document's type on real files: a page made for reading that holds prose is a document whatever code it shows
(zlib's HTML how-to, pytest's how-to pages in reStructuredText), while code read as plain text is still code. Each
file goes through its real parser and the stored-text preparation, as the indexer's analysis reads it."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import FolderAddReply, FolderAddRequest, SummaryReply, SummaryRequest
from foldermind.workers.indexer.analysis import analyze, infer_type
from foldermind.workers.indexer.analysis.doctype import reads_as_document
from foldermind.workers.indexer.analysis.text import prepare
from foldermind.workers.parser.formats import html, txt
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, remove_tree, short_tmpdir, wait_for

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def typed(path: Path) -> tuple[str, bool]:
    """The type the analysis gives a file, read by the parser its suffix names."""
    parsed = html.parse_html(path.read_bytes()) if path.suffix == ".html" else txt.parse_txt(path.read_bytes())
    fmt = "html" if path.suffix == ".html" else "txt"
    return infer_type(prepare([parsed.text]), fmt, parsed.title, str(path))


def test_zlibs_annotated_example_page_is_a_document_not_source_code() -> None:
    kind, _ = typed(TESTS / "pages" / "zlib_how.html")
    assert kind != "source_code", kind


@pytest.mark.parametrize("page", ["assert.rst", "skipping.rst"])
def test_pytests_how_to_pages_in_restructuredtext_are_documents_not_source_code(page: str) -> None:
    kind, _ = typed(TESTS / "pytest_docs" / page)
    assert kind != "source_code", (page, kind)


@pytest.mark.parametrize(
    "module", ["workers/questions.py", "kernel/cli/bridge/transport.py", "workers/answers/engine.py"]
)
def test_code_read_as_plain_text_is_still_source_code(module: str) -> None:
    """The project's own modules, their docstrings and comments prose enough, saved as text."""
    source = (REPO / module).read_text(encoding="utf-8")
    assert infer_type(prepare([source]), "txt", None, "/notes/pasted.txt") == ("source_code", True)


def test_the_same_page_as_plain_text_is_code_the_format_decides() -> None:
    """The prose is there either way: what changes is whether the file is a page made for reading."""
    parsed = html.parse_html((TESTS / "pages" / "zlib_how.html").read_bytes())
    head = prepare([parsed.text])
    assert reads_as_document(head, "html", "/docs/zlib_how.html")
    assert not reads_as_document(head, "txt", "/docs/zlib_how.txt")
    assert reads_as_document(head, "txt", "/docs/zlib_how.rst")


def test_a_page_that_is_only_code_is_still_source_code() -> None:
    """zlib's program alone (the page's <pre> blocks, its annotations left out), as a listing exported to HTML:
    no line of prose, so code whatever the format."""
    page = (TESTS / "pages" / "zlib_how.html").read_text(encoding="latin-1")
    blocks = re.findall(r"<pre>(.*?)</pre>", page, re.DOTALL | re.IGNORECASE)
    listing = html.parse_html(("<html><body><pre>" + "\n".join(blocks) + "</pre></body></html>").encode())
    code = prepare([listing.text])
    assert "deflateInit(&strm, level)" in code and "We often get questions" not in code
    assert not reads_as_document(code, "html")
    assert infer_type(code, "html", None, "/docs/zpipe.html")[0] == "source_code"


def test_the_stored_analysis_of_the_how_to_does_not_call_it_code() -> None:
    parsed = html.parse_html((TESTS / "pages" / "zlib_how.html").read_bytes())
    out = analyze(path="/docs/zlib_how.html", fmt="html", title=parsed.title, texts=[parsed.text], mtime=0)
    assert out["type"] != "source_code", out["type"]


NO_MODELS = merge(FAST_RESTART, {"workers": {"llm": {"enabled": False}, "embedder": {"enabled": False}}})
CONTRACT = """Acme MSA Extension

This extension of the Master Services Agreement is made on June 30, 2026 between Acme Corp and Globex LLC.
The parties hereby agree that the term continues for twelve months. Either party may terminate it.
Globex LLC shall indemnify Acme Corp. Governing law: the State of Delaware.
"""


def test_a_real_folders_documents_are_categorised_by_what_they_are_not_by_the_folders_name() -> None:
    """A real kernel indexes a small folder of real pages (a manual page, the project's architecture notes, a pytest
    how-to, zlib's annotated example) and a contract: each category comes from its document's type."""
    root = short_tmpdir("fmty-")
    kernel = RunningKernel(root, NO_MODELS)
    try:
        kernel.start()
        folder = root / "walk-docs"
        folder.mkdir()
        files = {
            "passwd.txt": TESTS / "manpages" / "passwd.txt",
            "architecture.md": TESTS / "pages" / "architecture.md",
            "skipping.rst": TESTS / "pytest_docs" / "skipping.rst",
            "zlib_how.html": TESTS / "pages" / "zlib_how.html",
        }
        for name, source in files.items():
            shutil.copyfile(source, folder / name)
        (folder / "acme.txt").write_text(CONTRACT)
        client = kernel.client("types-test")
        client.request("indexer", FolderAddRequest(str(folder), "walk-docs"), FolderAddReply, timeout=20)

        def analysed(name: str) -> dict[str, Any] | None:
            try:
                return client.request(
                    "indexer", SummaryRequest(str(folder / name)), SummaryReply, timeout=20
                ).body.analysis
            except JobError:
                return None

        names = [*files, "acme.txt"]
        got = {name: wait_for(functools.partial(analysed, name), 120, 0.2, f"{name} analysed") for name in names}
        shelves = {name: (a["type"], a["category"]) for name, a in got.items()}
        assert shelves == {
            "passwd.txt": ("manual", "technical"),
            "architecture.md": ("manual", "technical"),
            "skipping.rst": ("notes", "notes"),
            "zlib_how.html": ("notes", "notes"),
            "acme.txt": ("contract", "legal"),
        }, shelves
    finally:
        kernel.stop()
        remove_tree(root)
