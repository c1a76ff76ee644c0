"""foldermind's own folders (its home's parts and the model cache) are never a Smart Folder."""

from __future__ import annotations

import json
from pathlib import Path

from foldermind.protocol.runtime.home import Home
from foldermind.workers.indexer.storage.reserved import own_folders, refusal
from tests.helpers import MODEL_CACHE, RunningKernel, cli, only_workers

OWN = {"/h/data": "data folder", "/c/models": "model cache"}


def test_an_own_folder_a_folder_inside_it_and_one_holding_it_are_refused() -> None:
    assert refusal("/h/data", OWN) == "/h/data is foldermind's own data folder"
    assert "inside foldermind's own model cache /c/models" in refusal("/c/models/onnx", OWN)
    assert "/h holds foldermind's own data folder /h/data" in refusal("/h", OWN)
    assert "/ holds foldermind's own" in refusal("/", OWN)


def test_a_folder_beside_an_own_folder_or_holding_it_only_below_a_hidden_folder_is_accepted() -> None:
    assert refusal("/h/docs", OWN) == ""
    assert refusal("/h/database", OWN) == "", "a name that merely starts like an own folder"
    # The watcher never walks into hidden folders: ~ holding ~/.cache/foldermind/models is indexed without it.
    assert refusal("/home/u", {"/home/u/.cache/foldermind/models": "model cache"}) == ""


def test_the_own_folders_are_the_home_s_parts_and_the_model_cache(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    own = own_folders(home, str(tmp_path / "models"))
    assert set(own.values()) == {"config folder", "data folder", "log folder", "runtime folder", "model cache"}
    assert str(tmp_path / "models") in own and str(home.data_dir) in own


def test_folders_add_refuses_the_home_its_data_and_the_model_cache(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)  # made by the first export on this machine
    k = RunningKernel(home_dir, only_workers("watcher", "indexer")).start()
    try:
        for folder, said in [
            (home_dir, f"{home_dir} holds foldermind's own"),
            (home_dir / "data", f"{home_dir / 'data'} is foldermind's own data folder"),
            (home_dir / "logs", "is foldermind's own log folder"),
            (MODEL_CACHE, "is foldermind's own model cache"),
        ]:
            refused = cli(home_dir, "folders", "add", str(folder), check=False)
            assert refused.returncode != 0 and said in refused.stderr, refused.stderr
            assert refused.stderr.count("\n") <= 2, "one clear line, no traceback"
        assert json.loads(cli(home_dir, "folders", "list", "--json").stdout) == []
        # A folder the user keeps in the home beside its parts is theirs.
        cli(home_dir, "folders", "add", str(docs))
        assert [f["path"] for f in json.loads(cli(home_dir, "folders", "list", "--json").stdout)] == [str(docs)]
    finally:
        k.stop()
