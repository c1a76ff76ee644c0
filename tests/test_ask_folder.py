"""An answer kept to one Smart Folder: ``chat_with_documents``' ``smart_folder_id`` and ``foldermind ask --folder``.

A real kernel (no llm: the answers are asked for their extractive quotes, which need no model) with two folders
that answer the same question differently; asked with one folder's id, over the MCP SDK client on real HTTP and
through the CLI, the answer quotes and cites only that folder's file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import mcpclient as mc
from tests.config import merge
from tests.helpers import FAST_RESTART, NO_LLM, ONE_PARSER, RunningKernel, cli, remove_tree, short_tmpdir
from tests.keyworld import embedded, structured

QUESTION = "When was the Oslo office opened?"
YEARS = {"north": "2011", "south": "2019"}


def write_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{name}-history.txt").write_text(
        f"Company history, {name} edition.\nThe Oslo office was opened in {YEARS[name]} by the two founders.\n"
    )
    (folder / f"{name}-cats.txt").write_text("Cats are small carnivorous mammals.\nA cat sleeps most of the day.\n")
    return folder


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    root = short_tmpdir()
    config = merge(FAST_RESTART, ONE_PARSER, {"mcp": {"port": 0, "rate_per_minute": 6000}}, NO_LLM)
    k = RunningKernel(root / "home", config)
    folders = {name: write_folder(root, name) for name in YEARS}
    try:
        k.start()
        for folder in folders.values():
            cli(k.root, "folders", "add", str(folder), "--wait", timeout=300)
        url, token = str(mc.mcp_info(k.root)["url"]), mc.token_of(k.root)
        embedded(url, token)
        listed = structured(mc.call(url, token, "list_smart_folders"))["folders"]
        ids = {Path(f["destination_path"]).name: f["id"] for f in listed}
        yield {"kernel": k, "url": url, "token": token, "folders": folders, "ids": ids}
    finally:
        k.stop()
        remove_tree(root)


def cited_folders(out: dict[str, Any]) -> set[str]:
    return {Path(c["file_path"]).parent.name for c in out["citations"]}


def test_both_folders_answer_the_question_so_an_unscoped_answer_could_draw_on_either(world: dict[str, Any]) -> None:
    hits = structured(mc.call(world["url"], world["token"], "search_documents", {"query": QUESTION}))["results"]
    assert {Path(h["file_path"]).parent.name for h in hits if "history" in h["file_name"]} == set(YEARS), hits


@pytest.mark.parametrize("name", sorted(YEARS))
def test_chat_with_a_folder_id_quotes_and_cites_only_that_folders_file(world: dict[str, Any], name: str) -> None:
    args = {"query": QUESTION, "answer_mode": "extractive", "smart_folder_id": world["ids"][name]}
    out = structured(mc.call(world["url"], world["token"], "chat_with_documents", args))
    other = next(n for n in YEARS if n != name)
    assert out["grounded"], out
    assert YEARS[name] in out["answer"] and YEARS[other] not in out["answer"], out["answer"]
    assert cited_folders(out) == {name}, out["citations"]


def test_chat_with_an_unknown_folder_id_is_refused_as_search_refuses_it(world: dict[str, Any]) -> None:
    url, token = world["url"], world["token"]
    for folder_id in ("no-such-folder", "x" * 201):  # one unknown, one past the argument's bound
        args = {"query": QUESTION, "smart_folder_id": folder_id}
        searched, asked = (mc.call(url, token, tool, args) for tool in ("search_documents", "chat_with_documents"))
        assert mc.error_code(asked) == mc.error_code(searched) == "INVALID_SMART_FOLDER", asked.content


def test_cli_ask_with_folder_answers_from_that_folder_only(world: dict[str, Any]) -> None:
    k, ids = world["kernel"], world["ids"]
    proc = cli(k.root, "ask", QUESTION, "--mode", "extractive", "--folder", ids["south"], "--json", timeout=120)
    out = json.loads(proc.stdout)
    assert YEARS["south"] in out["answer"] and YEARS["north"] not in out["answer"], out["answer"]
    assert cited_folders(out) == {"south"}, out["citations"]
    plain = cli(k.root, "ask", QUESTION, "--mode", "extractive", "--folder", str(world["folders"]["north"]))
    assert "north-history.txt" in plain.stdout and "south-history.txt" not in plain.stdout, plain.stdout
    refused = cli(k.root, "ask", QUESTION, "--folder", "no-such-folder", check=False)
    assert refused.returncode != 0 and "INVALID_SMART_FOLDER" in refused.stderr, refused.stderr
