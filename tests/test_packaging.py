"""The distribution: a built wheel installs the three packages under `foldermind` and runs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_built_wheel_holds_the_layout_and_runs(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    # Every folder of the package is declared: setuptools warns (dozens of lines on `make run`) about one it finds
    # with files in it but not in the packages setting (the console's static/ and templates/ were).
    assert "Package would be ignored" not in built.stdout + built.stderr
    wheel = next(tmp_path.glob("foldermind-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("kernel/cli/__init__.py", "kernel/supervisor.py", "protocol/frames.py", "workers/framework/base.py"):
        assert f"foldermind/{module}" in names
    assert "foldermind/protocol/runtime/supervisor.toml" in names
    for shipped in ("workers/console/static/console.js", "workers/console/templates/overview.html"):
        assert f"foldermind/{shipped}" in names  # the console's pages and script
    assert not any(n.startswith(("kernel/", "workers/", "protocol/", "tests/")) for n in names), (
        "generic top-level names"
    )
    assert any(n.endswith("entry_points.txt") for n in names)
    # The shipped defaults are the real file, not a dangling symlink.
    with zipfile.ZipFile(wheel) as zf:
        assert b"[restart]" in zf.read("foldermind/protocol/runtime/supervisor.toml")

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    # Run from the installed copy only (-I drops the source tree and PYTHONPATH; -S site-packages),
    # adding back this venv's site-packages for the dependencies.
    deps = next(p for p in sys.path if p.endswith("site-packages"))
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "import foldermind.kernel.cli as c, foldermind.workers.framework.base, foldermind.protocol.frames;"
        "from foldermind.protocol.runtime.config import load; cfg = load();"
        "assert c.__file__.startswith(sys.argv[1]), c.__file__;"
        "print(sorted(cfg.workers)); sys.argv = ['foldermind', '--help']; c.main()"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(target), deps], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "['console', 'embedder', 'frontdoor', 'indexer', 'llm', 'parser', 'watcher']" in out.stdout
    assert "worker" in out.stdout and "restart" in out.stdout


def test_editable_install_points_at_this_checkout() -> None:
    import foldermind.kernel.cli

    assert Path(foldermind.kernel.cli.__file__).resolve() == ROOT / "kernel" / "cli" / "__init__.py"
