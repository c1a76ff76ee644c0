"""Parsing benchmark of the office, e-book and mail formats: files/s, chunks/s and parse time per MB, per format.

``python -m tests.bench.formats [--files N] [--no-write]`` from the repository root. For each format a
corpus of ``N`` files (200 by default) is written by that format's own library (tests/filemakers.py: python-pptx,
openpyxl, stdlib csv, ebooklib, stdlib email and mailbox, odfpy; RTF by hand), of varied sizes, then
every file is parsed (``formats.parse_file``) and chunked (``chunker.chunk`` with the bundled model's
tokenizer, 256 tokens, 32 overlap) in this process, one after the other: the work one parser process does
per ``parse.request``, without the bus and without embedding (embedding costs the same per chunk whatever
the format: docs/benchmarks/ingest.md's SciFact runs measure it). Writing the corpus is not timed.

The report is printed and written into ``docs/benchmarks/ingest.md`` as its section "Other formats"
(replaced if there, appended if not; ``tests.bench.ingest`` keeps the sections it does not write).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench import machine
from tests.bench.kernels import say
from tests.bench.machine import wait_for_quiet
from tests.bench.markdown import para, section, table
from tests.filemakers import (
    make_csv,
    make_docx,
    make_eml,
    make_epub,
    make_mbox,
    make_odp,
    make_ods,
    make_odt,
    make_pptx,
    make_rtf,
    make_xlsx,
)

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "benchmarks" / "ingest.md"
HEADING = "Other formats (parse and chunk, in-process)"
MB = 1024 * 1024

Maker = Callable[[Path, str, random.Random], Path]


def _eml(path: Path, marker: str, rng: random.Random) -> Path:
    body = "\n\n".join(f"Paragraph {n} of the {marker} thread about the budget." for n in range(rng.randint(2, 20)))
    attachments: list[tuple[str, bytes]] = []
    if rng.random() < 0.3:  # about a third carry a DOCX, as real mail does
        doc = make_docx(path.with_suffix(".att.docx"), "Terms", [("Payment", [f"The {marker} invoice."])], [])
        attachments.append(("terms.docx", doc.read_bytes()))
        doc.unlink()
    return make_eml(path, f"Re: {marker}", body, attachments)


MAKERS: dict[str, tuple[str, Maker]] = {  # label -> (suffix, writer of one file of a varied size)
    "pptx": (".pptx", lambda p, m, r: make_pptx(p, m, slides=r.randint(3, 15), marked=2)),
    "xlsx": (".xlsx", lambda p, m, r: make_xlsx(p, m, rows=r.randint(20, 600), marked_row=7)),
    "csv": (".csv", lambda p, m, r: make_csv(p, m, rows=r.randint(50, 2000), marked_row=7)),
    "epub": (".epub", lambda p, m, r: make_epub(p, m, chapters=r.randint(3, 12), marked=2)),
    "eml": (".eml", _eml),
    "mbox": (".mbox", lambda p, m, r: make_mbox(p, m, messages=r.randint(5, 40), marked=3)),
    "odt": (".odt", lambda p, m, r: make_odt(p, m, paragraphs=r.randint(5, 200))),
    "ods": (".ods", lambda p, m, r: make_ods(p, m, rows=r.randint(20, 400), marked_row=4)),
    "odp": (".odp", lambda p, m, r: make_odp(p, m, slides=r.randint(3, 15), marked=2)),
    "rtf": (".rtf", lambda p, m, r: make_rtf(p, m, lines=r.randint(10, 400), marked=3)),
}


@dataclass
class Result:
    label: str
    files: int = 0
    bytes: int = 0
    chunks: int = 0
    parse_s: float = 0.0
    chunk_s: float = 0.0
    per_file_ms: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def run(label: str, count: int, root: Path) -> Result:
    from foldermind.workers.parser.chunker import chunk, load_tokenizer
    from foldermind.workers.parser.formats import ParseError, parse_file

    suffix, make = MAKERS[label]
    folder = root / label
    folder.mkdir()
    rng = random.Random(16)
    paths = [make(folder / f"f{n:04d}{suffix}", f"marker{n}", rng) for n in range(count)]
    tokenizer = load_tokenizer()
    result = Result(label)
    for path in paths:
        result.bytes += path.stat().st_size
        t0 = time.perf_counter()
        try:
            doc = parse_file(path, 50 * MB)
        except ParseError as exc:
            result.failed.append(f"{path.name}: {exc.message}")
            continue
        t1 = time.perf_counter()
        chunks = chunk(doc.segments, tokenizer)
        t2 = time.perf_counter()
        result.files += 1
        result.chunks += len(chunks)
        result.parse_s += t1 - t0
        result.chunk_s += t2 - t1
        result.per_file_ms.append((t2 - t0) * 1000)
    shutil.rmtree(folder, ignore_errors=True)
    return result


def render(results: list[Result], facts: dict[str, str], count: int) -> str:
    rows = []
    for r in results:
        total = r.parse_s + r.chunk_s
        mb = r.bytes / MB
        rows.append(
            [
                r.label,
                f"{r.files}",
                f"{mb:.2f}",
                f"{r.chunks:,}",
                f"{r.files / total:.1f}" if total else "-",
                f"{r.chunks / total:,.0f}" if total else "-",
                f"{r.parse_s / mb:.2f}" if mb else "-",
                f"{total / mb:.2f}" if mb else "-",
                f"{statistics.median(r.per_file_ms):.1f}" if r.per_file_ms else "-",
            ]
        )
    lines = [
        f"## {HEADING}",
        "",
        *para(
            f"Generated by `python -m tests.bench.formats --files {count}`: {count} files per format written by "
            "the format's own library (varied sizes: 3-15 slides, 20-600 sheet rows, 50-2,000 CSV rows, 3-12 "
            "chapters, 5-200 ODT paragraphs, 2-20 mail paragraphs with a DOCX attached to about a third, 5-40 "
            "messages a mailbox), each parsed and chunked in one process, one after the other (a parser's work "
            "per file, no bus, no embedding)."
        ),
        "",
        *table(
            [
                "format",
                "files",
                "MB",
                "chunks",
                "files/s",
                "chunks/s",
                "parse s/MB",
                "parse+chunk s/MB",
                "median ms/file",
            ],
            rows,
        ),
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in facts.items()) + ".",
    ]
    failures = [f for r in results for f in r.failed]
    if failures:
        lines += ["", "Failed (none expected): " + "; ".join(failures[:10])]
    return "\n".join(lines) + "\n"


def write_section(text: str, report: Path = REPORT, heading: str = HEADING) -> None:
    old = report.read_text(encoding="utf-8") if report.exists() else ""
    body = section(old, heading)
    if body:
        old = old.replace(f"## {heading}\n\n{body}", text.rstrip("\n"))
        report.write_text(old if old.endswith("\n") else old + "\n", encoding="utf-8")
    else:
        report.write_text(old.rstrip("\n") + "\n\n" + text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.formats", description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200, help="files per format (default 200)")
    parser.add_argument("--only", nargs="*", choices=list(MAKERS), help="just these formats")
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {REPORT}")
    args = parser.parse_args(argv)
    say("waiting for the machine to be quiet (under 10% CPU, at most 60 s)")
    quiet, waited = wait_for_quiet()
    facts = {
        k: v for k, v in machine.facts(REPO).items() if k in ("date (UTC)", "CPU", "cores", "Python", "foldermind")
    }
    facts["load average before the run"] = machine.facts(REPO)["load average before the run"]
    facts["CPU in use when the run began"] = f"{quiet:.0f}% of all cores (after waiting {waited:.0f} s)"
    root = Path(tempfile.mkdtemp(prefix="fmf-"))
    results = []
    try:
        for label in args.only or list(MAKERS):
            say(f"{label}: writing and parsing {args.files} files")
            results.append(run(label, args.files, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = render(results, facts, args.files)
    print(text)
    if not args.no_write:
        write_section(text)
        say(f"wrote the section {HEADING!r} of {REPORT.relative_to(REPO)}")
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
