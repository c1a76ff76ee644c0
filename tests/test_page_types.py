"""A document's type on real files: a page made for reading that holds prose is a document whatever code it shows
(zlib's HTML how-to, pytest's how-to pages in reStructuredText), while code read as plain text is still code. Each
file goes through its real parser and the stored-text preparation, as the indexer's analysis reads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foldermind.workers.indexer.analysis import analyze, infer_type
from foldermind.workers.indexer.analysis.doctype import reads_as_document
from foldermind.workers.indexer.analysis.text import prepare
from foldermind.workers.parser.formats import html, txt

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
    out = analyze(
        path="/docs/zlib_how.html", fmt="html", title=parsed.title, texts=[parsed.text], folder_name="docs", mtime=0
    )
    assert out["type"] != "source_code", out["type"]
