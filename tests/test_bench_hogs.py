"""The answer bench's CPU hogs (:mod:`tests.bench.hogs`) are real busy processes that the bench ends, and its time
targets (:mod:`tests.bench.answer_times`) judge a run beside hogs against limits twice the quiet ones."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import psutil

from tests.bench import answer_times, hogs
from tests.helpers import wait_for


def test_hogs_spin_real_processes_that_are_gone_when_the_run_ends() -> None:
    with hogs.running(2) as h:
        pids = [p.pid for p in h.procs]
        assert len(pids) == 2
        assert all(psutil.pid_exists(pid) for pid in pids)
        wait_for(
            lambda: all(sum(psutil.Process(pid).cpu_times()[:2]) > 0.05 for pid in pids), 60, 0.05, "hogs spinning"
        )
    assert all(p.returncode is not None for p in h.procs)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids)
    assert h.cpu_s > 0.1 and h.wall_s > 0
    assert "2 CPU hogs" in h.describe()


def test_no_hogs_start_no_process() -> None:
    with hogs.running(0) as h:
        assert h.procs == []
    assert h.describe() == "no CPU hogs"


@dataclass
class _Q:
    corpus: str
    question: str = "Which port?"
    split: str = "tune"


@dataclass
class _A:
    question: Any
    mode: str
    first_text_s: float
    total_s: float
    mode_used: str | None = "extractive"
    completion_tokens: int = 0
    error: str = ""
    cpu_s: float = 0.1


def _rows(answers: list[_A], hogs_n: int) -> list[list[str]]:
    lines = answer_times.render(answers, ["auto", "generative"], ["scifact", "manuals"], hogs_n)
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def test_a_run_beside_hogs_is_judged_against_limits_twice_the_quiet_ones() -> None:
    answers = [_A(_Q("scifact"), "auto", 0.8, 4.0), _A(_Q("manuals"), "auto", 0.2, 1.0)]
    quiet = {(r[0], r[1]): r for r in _rows(answers, 0)}
    busy = {(r[0], r[1]): r for r in _rows(answers, 2)}
    assert quiet["auto", "scifact"][4] == "**MISS**" and quiet["auto", "scifact"][6] == "**MISS**"
    assert busy["auto", "scifact"][4] == "**PASS**" and busy["auto", "scifact"][6] == "**PASS**"
    assert quiet["auto", "manuals"][4] == "**PASS**"
    assert answer_times.limits(2) == (1.0, 6.0) and answer_times.limits(0) == (0.5, 3.0)


def test_the_model_is_counted_where_it_ran_and_generative_is_not_judged() -> None:
    answers = [
        _A(_Q("scifact"), "generative", 3.0, 9.0, "generative+checked", 40),
        _A(_Q("scifact"), "generative", 3.0, 9.0, "fallback", 40),
        _A(_Q("scifact"), "generative", math.nan, math.nan, None, 0, "timeout"),
    ]
    row = {(r[0], r[1]): r for r in _rows(answers, 0)}["generative", "scifact"]
    assert row[2] == "2/3"
    assert row[4] == "—" and row[6] == "—"  # for reference only
    assert row[7] == "0.10"  # the kernel's CPU per answer
    assert row[8] == "2" and row[9] == "1/2 (50%)"
