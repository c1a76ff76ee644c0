"""A bench that writes a whole report (``tests.bench.search``, ``tests.bench.run_all``) keeps the sections of that
file it does not write: other benches' sections and the ones written by hand (:func:`tests.bench.markdown.merged`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import run_all
from tests.bench.markdown import merged, section

OLD = """# Report

Old intro.

## Summary

old summary

## A study written by hand

its figures

## Machine

old machine

## 1. Quality

old quality

## 6. Written by another bench

its table
"""
GENERATED = """# Report

New intro.

## Summary

new summary

## Machine

new machine

## 1. Quality

new quality

## 2. Latency

new latency
"""


def test_a_rerun_replaces_its_own_sections_and_keeps_the_others_where_they_were(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    report.write_text(OLD, encoding="utf-8")
    out = merged(report, GENERATED)
    headings = [line for line in out.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Summary",
        "## A study written by hand",  # just before "Machine", which came next after it
        "## Machine",
        "## 1. Quality",
        "## 2. Latency",  # new: in the generated order
        "## 6. Written by another bench",  # no generated section came after it: at the end
    ]
    assert "New intro." in out and "Old intro." not in out
    for fresh in ("new summary", "new machine", "new quality", "new latency", "its figures", "its table"):
        assert fresh in out
    assert "old summary" not in out and "old quality" not in out


def test_one_blank_line_parts_two_sections_whichever_bench_wrote_each(tmp_path: Path) -> None:
    # A bench whose last section ends without a blank line (a table's last row), then a kept section: the kept
    # heading must not run on from the table.
    report = tmp_path / "report.md"
    report.write_text("# R\n\n## Mine\n\n| a |\n|---|\n| 1 |\n\n## Kept\n\nby hand\n\n\n", encoding="utf-8")
    out = merged(report, "# R\n\n## Mine\n\n| a |\n|---|\n| 2 |\n")
    assert out == "# R\n\n## Mine\n\n| a |\n|---|\n| 2 |\n\n## Kept\n\nby hand\n"
    assert merged(report, out) == out  # a rerun of the same text changes nothing


def test_a_first_run_writes_the_generated_report_as_it_is(tmp_path: Path) -> None:
    assert merged(tmp_path / "absent.md", GENERATED) == GENERATED


def test_the_overview_tail_is_rewritten_and_the_sections_after_it_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overview = tmp_path / "benchmarks.md"
    overview.write_text(
        "# Benchmarks\n\n## Machine\n\nbus machine\n\n## Search and MCP\n\nan old summary\n\n"
        "## Answers from evidence\n\nwritten by hand\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(run_all, "REPORT", overview)
    run_all.refresh_tail()
    out = overview.read_text(encoding="utf-8")
    assert "an old summary" not in out  # the Summary of the search report now
    assert section(run_all.MCP_REPORT.read_text(encoding="utf-8"), "Summary") in out
    assert "## Answers from evidence\n\nwritten by hand" in out and "bus machine" in out
