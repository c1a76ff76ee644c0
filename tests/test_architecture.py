"""Meta-tests of where things live: test switches only in the faults module, test-only kinds only in tests/, error
codes only in the catalogue, and no module of the product code over 500 lines."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCTION = ("kernel", "workers", "protocol")
FAULTS = REPO / "workers" / "framework" / "faults.py"


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
    assert not offenders, f"test switches read outside workers/framework/faults.py: {offenders}"


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
            if any(n.endswith("workers.framework.faults") for n in names):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"module-level imports of the faults module: {offenders}"


def test_a_normal_process_has_no_test_kinds_and_never_loads_the_faults_module() -> None:
    probe = (
        "import sys\n"
        "import foldermind.workers.framework.base, foldermind.workers.parser, foldermind.workers.llm\n"
        "import foldermind.workers.indexer, foldermind.kernel.kernel\n"
        "from foldermind.protocol.messages import REGISTRY\n"
        "print(sorted(k for k in REGISTRY if k.startswith('fault.')),"
        " 'foldermind.workers.framework.faults' in sys.modules)\n"
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


def _code_literals(source: str) -> list[str]:
    """Error codes written as strings where code decides on them: compared with a ``.code``, two or more
    as the keys of one dict or in one set/tuple/list (a mapping table), or the code argument of an error."""
    from foldermind.protocol.errors import ErrorCode

    codes = {str(c) for c in ErrorCode} | {c.mcp for c in ErrorCode}

    def named(node: ast.AST | None) -> list[str]:
        if isinstance(node, ast.Constant) and node.value in codes:
            return [str(node.value)]
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            return [str(e.value) for e in node.elts if isinstance(e, ast.Constant) and e.value in codes]
        return []

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "code" for s in sides):
                found |= {f"{node.lineno}: {v}" for s in sides for v in named(s)}
        elif isinstance(node, ast.Dict):
            keys = [v for k in node.keys for v in named(k)]
            found |= {f"{node.lineno}: {v}" for v in keys} if len(keys) >= 2 else set()
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)) and len(named(node)) >= 2:
            found |= {f"{node.lineno}: {v}" for v in named(node)}
        elif isinstance(node, ast.Call) and node.args:
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func.endswith(("Error", "Info", "Failure", "Failed")):
                found |= {f"{node.lineno}: {v}" for v in named(node.args[0])}
    return sorted(found)


def test_the_code_scan_finds_a_mapping_table_a_string_code_and_a_string_comparison() -> None:
    source = (
        'CODES = {"worker_lost": "RETRIEVAL_FAILED", "internal": "RETRIEVAL_FAILED"}\n'
        'raise JobError("invalid_path", "no")\n'
        'if error.code in ("service_unavailable", "shutting_down"):\n    pass\n'
        'state = {"state": "disk_full"}\n'  # a status value that happens to read like a code: not a decision
    )
    assert _code_literals(source) == [
        "1: internal",
        "1: worker_lost",
        "2: invalid_path",
        "3: service_unavailable",
        "3: shutting_down",
    ]


def test_error_codes_are_written_only_in_the_catalogue() -> None:
    """Every code is an ``ErrorCode`` member (protocol/errors/codes.py) with its fault, retryable default and MCP
    code; nothing else keeps a table of codes or decides on a code spelled as a string."""
    catalogue = REPO / "protocol" / "errors" / "codes.py"
    offenders = [
        f"{path.relative_to(REPO)}:{hit}"
        for path in _production_files()
        if path != catalogue
        for hit in _code_literals(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"error codes written outside the catalogue: {offenders}"


MAX_MODULE_LINES = 500
"""No module of the product code is longer: a longer one is split by idea (the project's rule, without exceptions)."""


def _long_modules(paths: list[Path]) -> list[str]:
    """Each of ``paths`` over :data:`MAX_MODULE_LINES` lines, with its count."""
    counts = {path: path.read_text(encoding="utf-8").count("\n") for path in paths}
    return [f"{_shown(path)} ({lines} lines)" for path, lines in counts.items() if lines > MAX_MODULE_LINES]


def test_no_module_of_the_product_code_is_over_500_lines() -> None:
    long = _long_modules(_production_files())
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by idea): {long}"


def test_the_length_check_finds_a_module_one_line_over_the_limit(tmp_path: Path) -> None:
    at, over = tmp_path / "at.py", tmp_path / "over.py"
    at.write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    over.write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    assert _long_modules([at, over]) == [f"over.py ({MAX_MODULE_LINES + 1} lines)"]


MAX_FOLDER_MODULES = 20
"""No folder of the product code holds more modules: a fuller one is split into packages by role."""


def _crowded_folders(paths: list[Path]) -> list[str]:
    """Each folder of ``paths`` with more than :data:`MAX_FOLDER_MODULES` modules, with its count."""
    counts = Counter(path.parent for path in paths)
    return [f"{_shown(folder)} ({n} modules)" for folder, n in counts.items() if n > MAX_FOLDER_MODULES]


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def test_no_folder_of_the_product_code_holds_over_20_modules() -> None:
    crowded = _crowded_folders(_production_files())
    assert not crowded, f"folders over {MAX_FOLDER_MODULES} modules (split them by role): {crowded}"


def test_the_folder_check_finds_a_folder_one_module_over_the_limit(tmp_path: Path) -> None:
    full, over = tmp_path / "full", tmp_path / "over"
    paths = [full / f"m{i}.py" for i in range(MAX_FOLDER_MODULES)]
    paths += [over / f"m{i}.py" for i in range(MAX_FOLDER_MODULES + 1)]
    assert _crowded_folders(paths) == [f"over ({MAX_FOLDER_MODULES + 1} modules)"]


def _silent_packages(paths: list[Path]) -> list[str]:
    """Each package of ``paths`` whose ``__init__.py`` has no docstring saying what the folder is for."""
    return [
        _shown(path.parent)
        for path in paths
        if path.name == "__init__.py" and not (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
    ]


def test_every_package_of_the_product_code_says_its_role_in_its_docstring() -> None:
    silent = _silent_packages(_production_files())
    assert not silent, f"packages whose __init__.py does not say what the folder is for: {silent}"


def test_the_role_check_finds_a_package_without_a_docstring(tmp_path: Path) -> None:
    (tmp_path / "said").mkdir()
    (tmp_path / "silent").mkdir()
    (tmp_path / "said" / "__init__.py").write_text('"""Parsers of one format each."""\n', encoding="utf-8")
    (tmp_path / "silent" / "__init__.py").write_text("from x import y\n", encoding="utf-8")
    assert _silent_packages([tmp_path / "said" / "__init__.py", tmp_path / "silent" / "__init__.py"]) == ["silent"]
