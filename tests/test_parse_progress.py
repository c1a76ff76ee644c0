"""Slow is not hung for parsing: a parse's deadline follows its progress, not the wall clock.

The parser's progress count (:mod:`foldermind.workers.parser.formats.progress`) is tested on real threads, and
OCR's limits on CPU time, not the wall clock (a wait past them is no timeout). Then a real kernel (watcher, one
parser, indexer) with ``parse_timeout_s = 0.5`` parses a long PDF beside CPU hogs, the parser itself starved
to a quarter of its time, which outlives its
wall-clock deadline and is indexed on its first try, and a parse held by the parser's test switch (no page
read, no CPU used) is still cut off, retried once and failed with the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldermind.workers.parser.formats import ocr, progress
from tests.filemakers import make_pdf
from tests.helpers import (
    STALL_NEEDLE,
    RunningKernel,
    cli,
    found,
    remove_tree,
    short_tmpdir,
    stalling_parser,
    wait_for,
    wait_found,
)

PARSE_TIMEOUT_S = 0.5
HOGS = 6
HOG_MAX_S = 240
"""A hog ends by itself after this long, should the test die before it kills them."""
PAGES = 800
FIRST, LAST = "aardvarkopening", "zanzibarfinale"


# ------------------------------------------------------------------------------------------------
# the progress count, on real threads


class Parse(threading.Thread):
    """A stand-in parse on a thread of its own, told what to do next: wait, take a step, or spin the CPU."""

    def __init__(self, meter: progress.Meter, budget_s: float) -> None:
        super().__init__(daemon=True)
        self.meter, self.budget_s = meter, budget_s
        self.todo = "wait"
        self.go = threading.Event()
        self.started = threading.Event()
        self.done = False

    def run(self) -> None:
        self.meter.begin(self.budget_s)
        self.started.set()
        while not self.done:
            if self.todo == "spin":
                continue
            self.go.wait()
            self.go.clear()
            if self.todo == "step":
                progress.step()
                self.todo = "wait"
        self.meter.end()

    def do(self, what: str) -> None:
        self.todo = what
        self.go.set()

    def cpu_s(self) -> float:
        assert self.ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(self.ident))

    def stop(self) -> None:
        self.done = True
        self.go.set()
        self.join(5)


def test_a_step_moves_the_count_and_a_parse_that_only_waits_does_not() -> None:
    meter = progress.Meter()
    parse = Parse(meter, budget_s=60)
    parse.start()
    try:
        parse.started.wait(5)
        before = meter.read()
        for _ in range(5):  # waiting on an event: no step, no CPU
            time.sleep(0.05)
            assert meter.read() == before
        parse.do("step")
        wait_for(lambda: meter.read() > before, 5, 0.02, "the step counted")
        # The count moves at progress.step(); the thread marks the step done just after it.
        wait_for(lambda: parse.todo == "wait", 5, 0.02, "the step finished")
        after = meter.read()
        time.sleep(0.1)
        assert meter.read() == after
    finally:
        parse.stop()
    ended = meter.read()
    progress.step()  # a step with no parse in hand counts for nothing
    assert meter.read() == ended


def test_cpu_without_a_step_counts_until_the_parse_has_used_its_deadline() -> None:
    meter = progress.Meter()
    budget = 0.3
    parse = Parse(meter, budget_s=budget)
    parse.start()
    try:
        parse.started.wait(5)
        start_cpu = parse.cpu_s()
        first = meter.read()
        parse.do("spin")
        wait_for(lambda: meter.read() > first, 10, 0.05, "CPU counted as progress")
        # Past its budget of CPU since its last step, the spinning parse no longer counts.
        wait_for(lambda: parse.cpu_s() - start_cpu > budget + 0.05, 30, 0.05, "the spin past its budget")
        meter.read()
        stuck = meter.read()
        for _ in range(5):
            time.sleep(0.05)
            assert meter.read() == stuck
        # A step resets the budget: it counts, and CPU after it counts again.
        parse.do("step")
        wait_for(lambda: meter.read() > stuck, 5, 0.02, "the step counted")
    finally:
        parse.stop()


def test_ocr_limits_count_cpu_time_not_the_wall_clock() -> None:
    with ocr.time_limit(0.2):
        time.sleep(0.5)  # a wait past the limit uses no CPU: not a timeout
    budget = ocr.Settings(True, 1, 1.0, time.thread_time() + 0.1)
    time.sleep(0.3)
    assert budget.left_s() > 0.05
    give_up = time.monotonic() + 60
    with pytest.raises(ocr.OcrTimeout), ocr.time_limit(0.2):
        while time.monotonic() < give_up:  # CPU past the limit: cut off
            pass
    assert budget.left_s() < 0


# ------------------------------------------------------------------------------------------------
# a real kernel


def document(home: Path, name: str) -> sqlite3.Row | None:
    """The index's row of the file ``name``, None before it has one."""
    with contextlib.closing(sqlite3.connect(home / "data" / "index.sqlite")) as db:
        db.row_factory = sqlite3.Row
        row: sqlite3.Row | None = db.execute("SELECT * FROM documents WHERE path LIKE ?", (f"%/{name}",)).fetchone()
        return row


def long_pdf(path: Path) -> Path:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega"]
    pages = [
        [
            f"Page {p} line {n}: " + " ".join(words[(p * 7 + n * 3 + i) % len(words)] for i in range(10))
            for n in range(40)
        ]
        for p in range(PAGES)
    ]
    pages[0][0] = f"The manual opens with the {FIRST}."
    pages[-1][-1] = f"The manual ends with the {LAST}."
    return make_pdf(path, pages)


@pytest.fixture
def pipeline(home_dir: Path) -> Iterator[tuple[RunningKernel, Path, Path]]:
    root = short_tmpdir("fmp-")
    docs = root / "docs"
    docs.mkdir()
    flag = root / "hold-flag"
    k = RunningKernel(home_dir, stalling_parser(flag, PARSE_TIMEOUT_S)).start()
    try:
        yield k, docs, flag
    finally:
        flag.unlink(missing_ok=True)
        k.stop()
        remove_tree(root)


@contextlib.contextmanager
def starved(pid: int, stop_s: float = 0.03, run_s: float = 0.01) -> Iterator[None]:
    """The process ``pid`` given a quarter of its time (SIGSTOP ``stop_s``, SIGCONT ``run_s``, over and over), as
    on a machine far busier than the hogs alone make this one: without it a quiet 2-core machine parsed the PDF
    inside its deadline beside six hogs, and the test tested nothing. Each pause is far shorter than a heartbeat."""
    done = threading.Event()

    def cycle() -> None:
        while not done.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            done.wait(stop_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            done.wait(run_s)

    thread = threading.Thread(target=cycle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def hogs(n: int) -> list[subprocess.Popen[bytes]]:
    spin = f"import time\nend = time.monotonic() + {HOG_MAX_S}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n)]


def test_a_long_pdf_beside_cpu_hogs_outlives_its_deadline_and_is_indexed_and_a_stalled_parse_is_cut_off(
    pipeline: tuple[RunningKernel, Path, Path],
) -> None:
    k, docs, flag = pipeline
    home = k.root
    pdf = long_pdf(docs / "manual.pdf")
    deadline = PARSE_TIMEOUT_S + 2.0 * pdf.stat().st_size / 1_048_576
    busy = hogs(HOGS)
    try:
        cli(home, "folders", "add", str(docs))
        wait_for(lambda: (r := document(home, "manual.pdf")) is not None and r["attempts"] >= 1, 120, 0.05, "sent")
        sent = time.monotonic()
        parser = wait_for(lambda: k.pids().get("parser"), 60, 0.05, "the parser running")
        with starved(parser):
            row = wait_for(
                lambda: (r := document(home, "manual.pdf")) is not None and r["status"] in ("indexed", "failed") and r,
                600,
                0.2,
                "parsed",
            )
        took = time.monotonic() - sent
    finally:
        for hog in busy:
            hog.kill()
        for hog in busy:
            hog.wait(10)
    assert row["status"] == "indexed", row["error"]
    assert row["attempts"] == 1, "the parse was cut off and retried"
    assert row["pages"] == PAGES
    # Before a parse's deadline followed its progress, this parse was cut off at its wall-clock deadline.
    assert took > deadline, f"the parse took {took:.1f} s, inside its {deadline:.1f} s deadline: nothing was tested"

    # Pages sent ahead reach Tantivy before the final reply, and the final reply's chunks at its next commit
    # (``KeywordJournal.COMMIT_EVERY_S`` after SQLite marks the document indexed): wait for both ends.
    wait_found(k, FIRST, {"manual.pdf"}, 60, "the first page findable")
    wait_found(k, LAST, {"manual.pdf"}, 60, "the last page findable")

    # A parse that makes no progress at all (held by the parser's test switch: no page, no CPU) is cut off
    # at its deadline, retried once on a fresh parser, then failed with the reason.
    flag.write_text("hold")
    (docs / f"{STALL_NEEDLE}notes.txt").write_text("Notes that never get parsed, about the quokka.\n")
    stalled = f"{STALL_NEEDLE}notes.txt"
    row = wait_for(lambda: (r := document(home, stalled)) is not None and r["status"] == "failed" and r, 90, 0.1)
    assert row["attempts"] == 2
    assert row["error"].startswith("quarantined: its parse made no progress (no page read, no CPU used) for "), row[
        "error"
    ]
    flag.unlink()
    assert found(home, "quokka") == set()
