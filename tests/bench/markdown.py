"""Markdown pieces every bench report uses: tables, verdicts, numbers."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path


def table(header: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    """A markdown table; ``align`` has one letter a column (l, r, c), by default l then r."""
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(marks[a] for a in align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def para(text: str, width: int = 110) -> list[str]:
    """A paragraph as lines of at most ``width`` characters."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False).splitlines()


def verdict(ok: bool | None) -> str:
    """PASS or MISS, in bold; a dash where there is nothing to judge."""
    return "—" if ok is None else ("**PASS**" if ok else "**MISS**")


def ms(x: float) -> str:
    """Milliseconds: one decimal under 100, whole above, a dash for no value."""
    if math.isnan(x):
        return "-"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def section(text: str, heading: str) -> str:
    """The body of ``## heading`` in ``text`` (up to the next ``## ``), without its heading line."""
    lines = text.splitlines()
    try:
        start = lines.index(f"## {heading}") + 1
    except ValueError:
        return ""
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip("\n")


def add_rows(text: str, heading: str, fresh: str, rows: list[str]) -> str:
    """``text`` with ``rows`` added at the end of the table under ``## heading``; when there is no such
    section, ``fresh`` (its heading, words and table header) is added at the end first."""
    if f"## {heading}" not in text.splitlines():
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + fresh.strip("\n") + "\n"
    lines = text.splitlines()
    start = lines.index(f"## {heading}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    last = max((i for i in range(start, end) if lines[i].startswith("|")), default=end - 1)
    return "\n".join(lines[: last + 1] + rows + lines[last + 1 :]).rstrip("\n") + "\n"


def put_section(path: Path, heading: str, body: str) -> None:
    """Put ``## heading`` with ``body`` into the markdown file ``path`` (if it exists): in place of that
    section when it is there (the sections after it kept), else at the end."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    new = f"\n## {heading}\n\n{body}"
    start = next((i for i, line in enumerate(lines) if line.rstrip("\n") == f"## {heading}"), None)
    if start is None:
        path.write_text("".join(lines).rstrip("\n") + "\n" + new, encoding="utf-8")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    before = "".join(lines[:start]).rstrip("\n") + "\n"
    after = "".join(lines[end:])
    path.write_text(before + new + ("\n" + after if after else ""), encoding="utf-8")


def _sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the first ``## `` heading, then each ``## `` section as (heading line, whole section)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    head = "".join(lines[: starts[0]] if starts else lines)
    ends = [*starts[1:], len(lines)]
    return head, [(lines[a].rstrip("\n"), "".join(lines[a:b])) for a, b in zip(starts, ends, strict=True)]


def merged(report: Path, generated: str) -> str:
    """``generated`` with the ``## `` sections of ``report`` it does not have kept (another bench's section, or
    one written by hand, survives a rerun): each just before the generated section that came next after it in
    ``report``, or at the end when none did. The generated text's own sections replace their namesakes and keep
    its order; its title and intro come first."""
    if not report.exists():
        return generated
    head, fresh = _sections(generated)
    _, old = _sections(report.read_text(encoding="utf-8"))
    made = {heading for heading, _ in fresh}
    before: dict[str, list[str]] = {}  # generated heading -> kept sections to put just before it
    pending: list[str] = []
    for heading, body in old:
        if heading in made:
            before.setdefault(heading, []).extend(pending)
            pending = []
        else:
            pending.append(body)
    parts = [head]
    for heading, body in fresh:
        parts += [*before.get(heading, []), body]
    parts += pending
    # One blank line between two sections, whichever bench wrote each: a heading never runs on from a table.
    return "\n\n".join(part.rstrip("\n") for part in parts if part.strip()) + "\n"


def summary_overview(report: Path, intro: str) -> str:
    """A section of docs/benchmarks/README.md that points at ``report``: ``intro`` (it names and links the report), then
    the report's own Summary ("" before the report is written)."""
    summary = section(report.read_text(encoding="utf-8"), "Summary") if report.exists() else ""
    return f"{intro}\n\n{summary}\n" if summary else ""
