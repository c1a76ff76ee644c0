"""Failures you can list: `folders show` names every file with its state and reason (a corrupt PDF, a name that is
not UTF-8, a binary file of an unknown suffix), `status` counts failed and skipped apart and names the unsupported
suffixes, `summary` of a failed file says why; a file with no known suffix whose first bytes are text (README,
NEWS.Debian) is indexed and found; `[ingest] extra_text_suffixes` and `exclude` do what they say. Real kernels,
the real watcher, parser and indexer, the CLI as a user runs it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.workers.ingest_rules import Rules, starts_as_text
from tests.config import merge
from tests.helpers import ONE_PARSER, RunningKernel, cli, only_workers, remove_tree, short_tmpdir, wait_found

BAD_NAME = os.fsdecode(b"bad-\xff\xfe-name.txt")  # not UTF-8
BAD_SHOWN = "bad-\ufffd\ufffd-name.txt"
NOT_UTF8 = "file name is not valid UTF-8"
MAP = merge(only_workers("watcher", "parser", "indexer"), ONE_PARSER)
"""No embedder (keyword search is enough here), no llm; the front door only where `summary` is run."""
RULES = {"ingest": {"exclude": ["drafts", "*.bak"], "extra_text_suffixes": ["dat"]}}


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[RunningKernel, Path, str]]:
    root = short_tmpdir("fms-")
    docs = root / "docs"
    (docs / "drafts").mkdir(parents=True)
    (docs / "good.txt").write_text("Herons nest in tall reeds by the river.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / BAD_NAME).write_text("A badly named file about marmosets.\n")
    (docs / "blob.xyz").write_bytes(b"\x00\x01\x02\x03XYZ\xff" * 300)
    (docs / "README").write_text("Quokkas\n=======\n\nThis package keeps quokkas fed and counted.\n")
    (docs / "NEWS.Debian").write_text("foo (1.2-1) unstable; urgency=low\n\n  * Marmalade support.\n")
    (docs / "legacy.dat").write_text("Pangolins roll into a ball.\n", encoding="utf-16")  # a BOM, then NULs
    (docs / "drafts" / "secret.txt").write_text("Narwhals have one long tooth.\n")
    (docs / "old.bak").write_text("Walruses rest on the ice.\n")
    # Links leading out of the folder, one named as a format a parser reads and one as none: no files of it.
    (root / "elsewhere.txt").write_text("Not this folder's.\n")
    (root / "elsewhere.bin").write_bytes(b"\x00\x01\x02\xff" * 300)
    (docs / "linked-out.txt").symlink_to(root / "elsewhere.txt")
    (docs / "linked-out.xyz").symlink_to(root / "elsewhere.bin")
    k = RunningKernel(root, merge(only_workers("watcher", "parser", "indexer", "frontdoor"), ONE_PARSER, RULES))
    try:
        k.start()
        out = cli(root, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=120).stdout
        folder_id = out.split("(", 1)[1].split(")", 1)[0]
        yield k, docs, folder_id
    finally:
        k.stop()
        remove_tree(root)


def show(k: RunningKernel, *args: str) -> dict[str, Any]:
    return dict(json.loads(cli(k.root, "folders", "show", *args, "--json").stdout))


def states(listing: dict[str, Any]) -> dict[str, tuple[str, str]]:
    root = listing["folder"]["path"] + "/"
    return {f["path"].removeprefix(root): (f["state"], f["reason"]) for f in listing["files"]}


def keyword(k: RunningKernel, query: str) -> list[str]:
    out = json.loads(cli(k.root, "search", query, "--mode", "keyword", "--json").stdout)
    return [Path(r["file_path"]).name for r in out["results"]]


def test_folders_show_lists_each_file_with_its_state_and_reason(world: tuple[RunningKernel, Path, str]) -> None:
    k, docs, folder_id = world
    by_path = show(k, str(docs))
    got = states(by_path)
    assert set(got) == {"good.txt", "broken.pdf", BAD_SHOWN, "blob.xyz", "README", "NEWS.Debian", "legacy.dat"}, got
    for name in ("good.txt", "README", "NEWS.Debian", "legacy.dat"):
        assert got[name] == ("indexed", "read as txt"), (name, got[name])
    assert got["broken.pdf"][0] == "failed" and "PDF" in got["broken.pdf"][1], got["broken.pdf"]
    assert got[BAD_SHOWN][0] == "skipped" and got[BAD_SHOWN][1].startswith(NOT_UTF8), got[BAD_SHOWN]
    assert got["blob.xyz"] == ("unsupported", "no parser reads .xyz files, and its first bytes are not text")
    folder = by_path["folder"]
    assert (folder["files_indexed"], folder["files_failed"], folder["files_skipped"]) == (4, 1, 1), folder
    assert (folder["files_unsupported"], folder["unsupported"]) == (1, {".xyz": 1}), folder
    assert show(k, folder_id) == by_path  # by id as by path

    assert set(states(show(k, folder_id, "--failed"))) == {"broken.pdf"}
    assert set(states(show(k, folder_id, "--skipped"))) == {BAD_SHOWN}
    assert set(states(show(k, folder_id, "--unsupported"))) == {"blob.xyz"}
    assert set(states(show(k, folder_id, "--failed", "--unsupported"))) == {"broken.pdf", "blob.xyz"}

    text = cli(k.root, "folders", "show", folder_id).stdout.splitlines()
    assert text[0] == f"{folder_id}  Docs  {docs}", text
    assert "4/6 files indexed, 1 failed, 1 skipped, 1 not read (other formats: .xyz 1)" in text[1], text
    assert "    not read, by suffix: .xyz 1" in text, text
    lines = {line.split()[1]: line for line in text[3:]}
    assert lines["broken.pdf"].startswith("failed       broken.pdf  ") and "PDF" in lines["broken.pdf"], text
    assert lines[BAD_SHOWN].startswith(f"skipped      {BAD_SHOWN}  {NOT_UTF8}"), text
    assert lines["blob.xyz"].startswith("unsupported  blob.xyz  no parser reads .xyz files"), text
    assert lines["README"] == "indexed      README  read as txt", text
    unsupported_only = cli(k.root, "folders", "show", folder_id, "--unsupported").stdout.splitlines()
    assert [line.split()[0] for line in unsupported_only[3:]] == ["unsupported"], unsupported_only


def test_a_link_out_of_the_folder_is_not_listed_as_a_format_no_parser_reads(
    world: tuple[RunningKernel, Path, str],
) -> None:
    k, _docs, folder_id = world
    listing = show(k, folder_id)
    got = states(listing)
    assert "linked-out.txt" not in got and "linked-out.xyz" not in got, got
    assert listing["folder"]["unsupported"] == {".xyz": 1}, listing["folder"]  # blob.xyz alone, no ".txt"
    text = cli(k.root, "folders", "show", folder_id, "--unsupported").stdout
    assert "no parser reads .txt files" not in text and "linked-out" not in text, text


def test_status_and_folders_list_count_failed_and_skipped_apart(world: tuple[RunningKernel, Path, str]) -> None:
    k, _docs, _ = world
    counts = "1 failed, 1 skipped, 1 not read (other formats: .xyz 1)"
    line = next(x for x in cli(k.root, "status").stdout.splitlines() if x.startswith("folder  Docs"))
    assert f"4/6 files indexed, {counts}" in line, line
    listed = cli(k.root, "folders", "list").stdout
    assert f"ready: 4/6 files, {counts}" in listed, listed


def test_text_without_a_known_suffix_is_found_and_excluded_files_are_not(
    world: tuple[RunningKernel, Path, str],
) -> None:
    k, docs, folder_id = world
    assert keyword(k, "quokkas") == ["README"]
    assert keyword(k, "marmalade") == ["NEWS.Debian"]
    assert keyword(k, "pangolins") == ["legacy.dat"]  # UTF-16, NULs and all: read as text by its suffix
    assert keyword(k, "narwhals") == [] and keyword(k, "walruses") == []  # excluded
    # The watcher's events decide alike: a file in an excluded folder is left out, a new CHANGELOG is read.
    (docs / "drafts" / "later.txt").write_text("Okapis hide in the forest.\n")
    (docs / "ChangeLog").write_text("2026-12-01  Added support for capybaras.\n")
    wait_found(k, "capybaras", {"ChangeLog"}, 60, "a new ChangeLog indexed")
    assert keyword(k, "capybaras") == ["ChangeLog"]
    assert keyword(k, "okapis") == []
    assert "drafts/later.txt" not in states(show(k, folder_id))


def test_a_folder_is_found_by_the_name_status_shows_unless_two_share_it(
    world: tuple[RunningKernel, Path, str],
) -> None:
    k, docs, folder_id = world
    assert show(k, "Docs") == show(k, folder_id)  # `status` shows "folder  Docs  PATH"
    found = json.loads(cli(k.root, "search", "quokkas", "--folder", "Docs", "--mode", "keyword", "--json").stdout)
    assert [Path(r["file_path"]).name for r in found["results"]] == ["README"], found
    twin = docs.parent / "twin"
    twin.mkdir()
    cli(k.root, "folders", "add", str(twin), "--name", "Docs")
    try:
        refused = cli(k.root, "folders", "show", "Docs", check=False)
        assert refused.returncode != 0 and "2 Smart Folders are named 'Docs'" in refused.stderr, refused
        refused = cli(k.root, "search", "quokkas", "--folder", "Docs", check=False)
        assert refused.returncode != 0 and "2 Smart Folders are named 'Docs'" in refused.stderr, refused
    finally:
        cli(k.root, "folders", "remove", str(twin))


def test_summary_of_a_corrupt_pdf_says_it_failed_and_why(world: tuple[RunningKernel, Path, str]) -> None:
    k, docs, folder_id = world
    reason = states(show(k, folder_id, "--failed"))["broken.pdf"][1]
    out = cli(k.root, "summary", str(docs / "broken.pdf"), check=False)
    assert out.returncode != 0 and "FILE_NOT_ANALYZED" in out.stderr, out
    assert "broken.pdf could not be indexed" in out.stderr and f"failed: {reason}" in out.stderr, out.stderr
    assert f"foldermind folders show {folder_id} --failed" in out.stderr, out.stderr


def test_an_exclude_added_later_takes_indexed_files_out_of_the_index(home_dir: Path) -> None:
    docs = home_dir / "docs"
    (docs / "build").mkdir(parents=True)
    (docs / "kept.txt").write_text("Axolotls regrow their limbs.\n")
    (docs / "build" / "out.txt").write_text("Tardigrades survive the vacuum.\n")
    k = RunningKernel(home_dir, MAP)
    try:
        k.start()
        cli(home_dir, "folders", "add", str(docs), "--wait", timeout=120)
        assert keyword(k, "tardigrades") == ["out.txt"]
        k.stop()
        k.configure(merge(MAP, {"ingest": {"exclude": ["build"]}}))
        k.start()
        wait_found(k, "tardigrades", set(), 60, "the excluded file out of the index")
        assert keyword(k, "tardigrades") == []
        assert keyword(k, "axolotls") == ["kept.txt"]
        assert set(states(show(k, str(docs)))) == {"kept.txt"}
    finally:
        k.stop()


def test_exclude_globs_match_the_path_inside_the_folder_or_a_name_on_it() -> None:
    rules = Rules(["build", "*.bak", "docs/old/**", "{tmp,cache}"], ["LOG", ".conf"])
    left_out = ("build/a.txt", "src/build/a.txt", "notes.bak", "x/y.bak", "docs/old/a.txt", "docs/old/deep/b.md")
    kept = ("builder/a.txt", "notes.bak.txt", "docs/older/a.txt", "old/a.txt", "a/docs/old/b.txt", "notes.txt")
    assert [p for p in left_out if not rules.excluded(p)] == []
    assert [p for p in kept if rules.excluded(p)] == []
    assert rules.excluded("cache/x.txt") and rules.excluded("a/tmp/x.txt")  # braces
    assert not Rules().excluded("build/a.txt")
    assert (rules.known_format("server.log"), rules.known_format("a.CONF"), rules.known_format("README")) == (
        "txt",
        "txt",
        None,
    )
    assert rules.known_format("report.PDF") == "pdf"  # a parser's suffix keeps its format


def test_first_bytes_are_text_when_they_decode_and_hold_no_nul() -> None:
    cut = ("é" * 3000).encode()[:4095]  # a character cut at the end of the bytes read
    assert starts_as_text(b"Changelog\n\n* fixed\n") and starts_as_text(cut)
    assert starts_as_text("Café crème, déjà vu.\n".encode("latin-1"))  # decodable in another encoding
    assert not starts_as_text(b"ELF\x02\x01\x01\x00\x00\x00")  # a NUL
    assert not starts_as_text("text".encode("utf-16"))  # NULs: only extra_text_suffixes read it
    assert not starts_as_text(bytes(range(1, 32)) * 40)  # control characters
