"""A markdown (or HTML) table quoted in an answer reads as the table's row with its header (formats/md.py, html.py,
document.table_row): "command: foldermind restart WORKER; does: restart one worker ...", one row a quote, not the
cells of several rows run together with pipes ("... progress foldermind restart WORKER | restart one worker ...",
as the walk of s51 found it quoting the README). The parser's text, then end to end: a real kernel indexing the
page, the real embedding model choosing the sentence, ``chat_with_documents`` over the MCP SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from foldermind.workers.parser.formats import html
from foldermind.workers.parser.formats.md import parse_md
from tests.test_answers import extractive, serving

PAGE = """# Commands

Inside the venv, the `foldermind` command:

| command | does |
|---|---|
| `foldermind start [--port N]` | start the supervisor and every worker; prints the MCP URL once it serves |
| `foldermind stop` | SIGTERM every worker, a grace period, SIGKILL stragglers, then stop the kernel |
| `foldermind status [--json]` | every worker: state, pid, uptime, restarts, jobs in flight, last error, RSS |
| `foldermind restart WORKER` | restart one worker (`parser#2`) or a pool (`parser`), FAILED ones included |
| `foldermind logs WORKER [-f]` | that worker's log (`kernel` for the kernel's) |

|  | port |
|---|---|
| MCP | 53827 |
| console | |
"""
ROW = "command: foldermind restart WORKER; does: restart one worker (parser#2) or a pool (parser), FAILED ones included"


def test_a_markdown_table_row_is_a_block_of_its_own_with_each_cell_after_its_header() -> None:
    doc = parse_md(PAGE.encode())
    texts = [s.text for s in doc.segments]
    assert ROW in texts
    assert "command: foldermind logs WORKER [-f]; does: that worker's log (kernel for the kernel's)" in texts
    assert "command | does" not in doc.text and "|" not in doc.text  # the header is said with each row
    # an empty header leaves its cell alone, an empty cell is left out; every row is a paragraph (a blank line after)
    assert "MCP; port: 53827" in texts and "console" in texts
    lines = doc.text.split("\n")
    assert lines[lines.index(ROW) + 1] == ""


def test_an_html_table_row_is_said_with_its_th_header_and_a_table_without_one_cell_by_cell() -> None:
    page = (
        "<table><tr><th>Oven</th><th>Max</th></tr><tr><td>Main</td><td>250 C</td></tr>"
        "<tr><td>Side</td><td>200 C</td></tr></table><table><tr><td>a</td><td>b</td></tr></table><p>after</p>"
    )
    doc = html.parse(f"<html><body>{page}</body></html>".encode(), 10**6)
    assert doc.text == "Oven: Main; Max: 250 C\n\nOven: Side; Max: 200 C\n\na; b\n\nafter"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    with serving({"commands.md": PAGE}) as url_token:
        yield url_token


def test_an_answer_that_quotes_a_table_quotes_one_row_with_its_header(served: Any) -> None:
    out = extractive(served, "How do I restart one worker?")
    quotes = [c["quote"] for c in out["citations"]]
    assert ROW in quotes, quotes
    for c in out["citations"]:
        assert "|" not in c["quote"] and c["quote"].count("command:") <= 1, c["quote"]  # one row, not a run of them
        assert c["quote"] in out["answer"]  # quoted verbatim, as the answer's checks rely on
    row = next(c for c in out["citations"] if c["quote"] == ROW)
    assert row["location"]["line_start"] == row["location"]["line_end"], row["location"]
