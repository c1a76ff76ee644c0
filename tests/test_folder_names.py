"""Which Smart Folder a typed word names, one rule for the indexer and the command line
(protocol/runtime/folder_names.py): its id, its path, or its name when no other folder has it; a name that is also a
directory where the command runs names the folder of that name, and when the name and the directory are two
different folders the refusal names both. walk2: `folders remove docs` beside a local docs/ directory sent that
directory's path, and the folder named docs was "no Smart Folder". The rule as a pure function, then through the
real command line against a real kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.runtime.folder_names import Known, NotOneFolder, choose
from tests.config import merge
from tests.helpers import ONE_PARSER, RunningKernel, cli, only_workers, remove_tree, short_tmpdir

FOLDERS = [Known("id-a", "docs", "/h/a"), Known("id-b", "notes", "/h/docs"), Known("id-c", "twin", "/h/c")]


def test_an_id_a_path_or_a_name_no_other_folder_has_names_one_folder() -> None:
    assert choose(FOLDERS, "id-b") == 1
    assert choose(FOLDERS, "/h/c/") == choose(FOLDERS, "/h/c") == 2
    assert choose(FOLDERS, "notes") == 1
    assert choose(FOLDERS, "docs") == 0  # a name: no directory named docs where it was typed
    assert choose(FOLDERS, "x", here="/h/docs") == 1  # a directory here that is a registered folder


def test_a_name_that_is_also_another_folder_s_directory_here_is_refused_naming_both() -> None:
    with pytest.raises(NotOneFolder) as both:
        choose(FOLDERS, "docs", here="/h/docs")
    assert "Smart Folder docs (id-a)" in str(both.value) and "Smart Folder notes (id-b)" in str(both.value)
    assert choose(FOLDERS, "docs", here="/h/a") == 0  # the same folder either way
    assert choose(FOLDERS, "docs", here="/h/unregistered") == 0  # the name wins over a directory no folder is


def test_two_folders_of_one_name_or_none_are_refused_and_a_client_key_looks_names_up_among_its_own() -> None:
    twins = [*FOLDERS, Known("id-d", "twin", "/h/d")]
    with pytest.raises(NotOneFolder, match="2 Smart Folders are named 'twin'"):
        choose(twins, "twin")
    assert choose(twins, "twin", sees=lambda i: i != "id-c") == 3
    with pytest.raises(NotOneFolder, match="no Smart Folder 'notes'"):
        choose(twins, "notes", sees=lambda i: i != "id-b")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningKernel, Path]]:
    root = short_tmpdir()
    k = RunningKernel(root / "home", merge(ONE_PARSER, only_workers("watcher", "parser", "indexer")))
    try:
        k.start()
        yield k, root
    finally:
        k.stop()
        remove_tree(root)


def typed_in(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line run from ``cwd`` (where a relative name is also a directory)."""
    argv = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)


def names(k: RunningKernel) -> list[str]:
    return [f["name"] for f in json.loads(cli(k.root, "folders", "list", "--json").stdout)]


def test_folders_remove_docs_beside_a_docs_directory_removes_the_folder_named_docs(served: Any) -> None:
    k, root = served
    (root / "work" / "docs").mkdir(parents=True)  # a docs/ directory where the user types, not registered
    (root / "a").mkdir()
    cli(k.root, "folders", "add", str(root / "a"), "--name", "docs")
    said = typed_in(root / "work", k.root, "folders", "remove", "docs")
    assert said.returncode == 0 and said.stdout.startswith("removed docs"), said
    assert "docs" not in names(k)


def test_a_name_that_is_another_folder_s_directory_here_is_refused_naming_both_and_the_path_works(
    served: Any,
) -> None:
    k, root = served
    (root / "b").mkdir()
    (root / "here" / "docs").mkdir(parents=True)
    cli(k.root, "folders", "add", str(root / "b"), "--name", "docs")
    cli(k.root, "folders", "add", str(root / "here" / "docs"), "--name", "notes")
    ids = {f["name"]: f["id"] for f in json.loads(cli(k.root, "folders", "list", "--json").stdout)}
    for args in (
        ("folders", "remove", "docs"),
        ("folders", "show", "docs"),
        ("token", "add", "x", "--folders", "docs"),
    ):
        refused = typed_in(root / "here", k.root, *args)
        assert refused.returncode == 1, (args, refused)
        assert f"docs ({ids['docs']})" in refused.stderr and f"notes ({ids['notes']})" in refused.stderr, refused
    assert sorted(names(k)) == ["docs", "notes"]
    shown = json.loads(typed_in(root / "here", k.root, "folders", "show", "./docs", "--json").stdout)
    assert shown["folder"]["id"] == ids["notes"]  # not a name: the directory here
    for name in ("docs", "notes"):
        cli(k.root, "folders", "remove", ids[name])
