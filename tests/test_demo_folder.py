"""The demo Smart Folder `make run` registers (`make demo`): the pages a user reads, never the benchmark pages,
whose text quotes the benchmarks' questions word for word (a greeting got grounded quotes from them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, only_workers, wait_found

REPO = Path(__file__).resolve().parents[1]
NOANSWER = REPO / "tests" / "bench" / "factoid_data" / "noanswer2.jsonl"


def make(*args: str) -> str:
    return subprocess.run(["make", "-s", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


def test_make_run_registers_a_demo_of_the_users_pages_without_the_benchmark_pages(home_dir: Path) -> None:
    demo = home_dir / "demo"
    make("demo", f"DEMO={demo}")
    names = {p.name for p in demo.iterdir()}
    assert names == {"README.md", *(p.name for p in (REPO / "docs").glob("*.md"))}
    greetings = [json.loads(line)["question"] for line in NOANSWER.read_text("utf-8").splitlines() if line]
    assert "good evening!" in greetings
    quoted = [(q, p.name) for p in demo.iterdir() for q in greetings if q in p.read_text("utf-8")]
    assert quoted == []  # on main the demo was docs/, whose benchmark pages hold every one of them
    assert f"--demo-folder {demo}" in make("-n", "run", f"DEMO={demo}")  # the folder `make run` registers

    (demo / "README.md").write_text("stale copy")
    make("demo", f"DEMO={demo}")  # a refresh brings the pages back as they are
    assert (demo / "README.md").read_text("utf-8") == (REPO / "README.md").read_text("utf-8")

    k = RunningKernel(home_dir / "home", merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"), ONE_PARSER))
    try:
        k.start("--demo-folder", str(demo))
        wait_found(k, "pipx", {"README.md"}, 120, "the demo's README searchable")
        assert not k.search('"good evening"')["results"]
        # The user's own first folder: told that the demo is still searched with it, and how to take it out.
        mine = home_dir / "mine"
        mine.mkdir()
        said = cli(k.root, "folders", "add", str(mine)).stdout
        assert "the demo folder (foldermind's own docs) is still searched with yours" in said, said
        assert f"folders remove {demo.resolve()}` takes it out" in said, said
        other = home_dir / "other"
        other.mkdir()
        cli(k.root, "folders", "remove", str(demo.resolve()))
        assert "demo folder" not in cli(k.root, "folders", "add", str(other)).stdout  # once it is gone, nothing
    finally:
        k.stop()
