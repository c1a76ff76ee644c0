"""The code says what and why; the evidence lives in docs (docs/tuning.md and the benchmark reports).

Static checks of the production code's text: module docstrings stay short, config helps are one or two
sentences, the generated supervisor.toml stays readable, benchmark sets, splits, query ids and measurement dates
stay out of the code, and every attribute docstring sits under the name it documents.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from pydantic import BaseModel

from foldermind.protocol.runtime import config, defaults

REPO = Path(__file__).resolve().parents[1]
PRODUCTION = ("kernel", "workers", "protocol")
MODULE_DOCSTRING_LINES = 25
HELP_CHARS = 240
SUPERVISOR_TOML_LINES = 300

BENCH_MENTION = re.compile(
    r"SciFact"  # the benchmark sets
    r"|\b(?:answer|lookup|factoid|llm|shape|retrieval|fusion|ingest) bench\b"
    r"|\bfresh\d\b|\bfresh (?:set|question)s?\b"
    r"|\btune (?:split|set|part|question)s?\b|\bheld[- ]out\b|\bheld-aside\b"  # their splits
    r"|\b[kn]\d\d\b"  # query ids (k41, n04)
    r"|\b20\d\d-\d\d-\d\d(?=[,;)])"  # the date of a run: "(cProfile, 2026-12-01)", "2026-12-05, quiet machine"
)
"""What a measurement names. A date that is an example of a format ("e.g. 2025-01-31") is not followed by a comma,
semicolon or bracket."""
ALLOWED_MENTIONS = ("2025-06-18", "2026-07-28")
"""MCP specification revisions, which are named by their date."""
MAX_BENCH_MENTIONS = 10


def _production_files() -> list[Path]:
    return [p for folder in PRODUCTION for p in sorted((REPO / folder).rglob("*.py"))]


def _is_string(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def test_every_module_docstring_is_at_most_25_lines() -> None:
    long = []
    for path in _production_files():
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if body and _is_string(body[0]):
            lines = (body[0].end_lineno or body[0].lineno) - body[0].lineno + 1
            if lines > MODULE_DOCSTRING_LINES:
                long.append(f"{path.relative_to(REPO)} ({lines} lines)")
    assert not long, f"module docstrings over {MODULE_DOCSTRING_LINES} lines (evidence goes to docs/): {long}"


def _helps() -> dict[str, str]:
    """Every help text supervisor.toml shows: each table's docstring, each key's description, each worker's."""
    helps: dict[str, str] = {}
    for name, field in config.SupervisorConfig.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            helps[f"[{name}]"] = model.__doc__ or ""
            helps |= {f"{name}.{key}": f.description or "" for key, f in model.model_fields.items()}
        else:
            helps[name] = field.description or ""  # the process map's own help
    helps |= {f"workers.*.{key}": f.description or "" for key, f in config.WorkerSpec.model_fields.items()}
    helps |= {f"[workers.{name}]": text for name, text in config.WORKER_HELP.items()}
    return helps


def test_every_config_help_is_at_most_240_characters() -> None:
    helps = _helps()
    assert len(helps) > 100 and all(helps.values())  # the walk found every knob, and each has a help
    long = {key: len(text) for key, text in helps.items() if len(text) > HELP_CHARS}
    assert not long, f"config helps over {HELP_CHARS} characters (one or two sentences; figures in docs/): {long}"


def test_the_generated_supervisor_toml_is_at_most_300_lines() -> None:
    lines = defaults.render().count("\n")
    assert lines <= SUPERVISOR_TOML_LINES, f"supervisor.toml renders to {lines} lines"


def test_benchmark_sets_splits_query_ids_and_run_dates_stay_out_of_the_code() -> None:
    mentions = []
    for path in _production_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for allowed in ALLOWED_MENTIONS:
                line = line.replace(allowed, "")
            if BENCH_MENTION.search(line):
                mentions.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert len(mentions) <= MAX_BENCH_MENTIONS, "measurements belong in docs/tuning.md:\n" + "\n".join(mentions)


def test_the_mention_pattern_finds_what_measurements_name_and_not_format_examples() -> None:
    found = ["SciFact nDCG@10", "the tune splits", "held-out", "k41 of the first set", "(cProfile, 2026-12-01)"]
    assert all(BENCH_MENTION.search(text) for text in found)
    passed = ["an ISO date, e.g. 2025-01-31", "to tune", "k8s", "2026-12-06T07:04:05Z", "tokens"]
    assert not any(BENCH_MENTION.search(text) for text in passed)


def _orphans(source: str) -> list[int]:
    """Lines of the string statements in ``source`` that follow a statement other than an assignment."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, statement in itertools.pairwise(body):
                if _is_string(statement) and not isinstance(before, ast.Assign | ast.AnnAssign):
                    lines.append(statement.lineno)
    return lines


def test_every_attribute_docstring_sits_right_under_an_assignment() -> None:
    """A string statement documents the assignment just above it (or, first in a body, the module, class or
    function). One that follows another statement, a second string most often, has been cut off from its name:
    a constant added between a name and its docstring leaves the docstring under the wrong name."""
    orphans = [f"{p.relative_to(REPO)}:{line}" for p in _production_files() for line in _orphans(p.read_text("utf-8"))]
    assert not orphans, f"docstrings that follow no assignment (move each under its name): {orphans}"


def test_a_docstring_pushed_away_from_its_name_is_found() -> None:
    pushed = 'SPEED = 0.3\nFAULTS = (1, 2)\n"""What FAULTS holds."""\n"""How much SPEED moves."""\n'
    assert _orphans(pushed) == [4]
    placed = 'SPEED = 0.3\n"""How much SPEED moves."""\nFAULTS = (1, 2)\n"""What FAULTS holds."""\n'
    assert _orphans(placed) == []
    assert _orphans('class C:\n    """C."""\n\n    def f(self) -> None:\n        """f."""\n') == []


def test_every_pointer_into_docs_tuning_names_one_of_its_sections() -> None:
    headings = re.findall(r"^## (.+)$", (REPO / "docs" / "tuning.md").read_text(encoding="utf-8"), re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    texts = [p.read_text(encoding="utf-8") for p in _production_files()] + [defaults.render()]
    pointers = {m for text in texts for m in re.findall(r"docs/tuning\.md#([a-z0-9-]+)", text)}
    assert len(pointers) > 10, pointers  # the code points there
    assert pointers <= anchors, f"pointers to no section of docs/tuning.md: {sorted(pointers - anchors)}"
