"""Meta-tests of where things live: test switches only in the faults module, test-only kinds only in tests/."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCTION = ("kernel", "workers", "protocol")
FAULTS = REPO / "workers" / "faults.py"


def _production_files() -> list[Path]:
    return [p for folder in PRODUCTION for p in sorted((REPO / folder).rglob("*.py"))]


def test_production_code_names_no_test_switch_outside_the_faults_module() -> None:
    offenders = []
    for path in _production_files():
        if path == FAULTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                if value.startswith(("FOLDERMIND_TEST_", "FOLDERMIND_FAULT")) and value != "FOLDERMIND_TEST_":
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {value}")
    assert not offenders, f"test switches read outside workers/faults.py: {offenders}"


def test_the_faults_module_is_imported_only_inside_a_function() -> None:
    """A module-level import would load it in every normal run; inside ``if testing():`` it never is."""
    offenders = []
    for path in _production_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n.endswith("workers.faults") for n in names):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"module-level imports of the faults module: {offenders}"


def test_a_normal_process_has_no_test_kinds_and_never_loads_the_faults_module() -> None:
    probe = (
        "import sys\n"
        "import foldermind.workers.base, foldermind.workers.parser, foldermind.workers.llm\n"
        "import foldermind.workers.indexer, foldermind.kernel.kernel\n"
        "from foldermind.protocol.messages import REGISTRY\n"
        "print(sorted(k for k in REGISTRY if k.startswith('fault.')), 'foldermind.workers.faults' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOLDERMIND_")}
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "False"]
    # The same probe with the test module loaded does see its kinds: the probe can tell.
    with_tests = probe.replace("import sys\n", "import sys\nimport tests.faultworker\n")
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", with_tests], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0].startswith("['fault.reply',")
