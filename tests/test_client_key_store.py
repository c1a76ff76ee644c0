"""The client key registry and the keys' stored tokens, against the real file system and a real keyring backend
(keyrings.alt's PlaintextKeyring through PYTHON_KEYRING_BACKEND, under a per-test XDG_DATA_HOME), as
tests/test_token_store.py does for the owner's token."""

from __future__ import annotations

import json
import stat
import subprocess

import pytest

from foldermind.protocol.runtime.client_keys import ClientKeyError, ClientKeys
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore
from tests import test_token_store as owner_tests
from tests.helpers import cli_process
from tests.test_token_store import NO_STORE, PLAINTEXT

# The same isolated keyring (autouse) and home as the owner's token tests: fixtures, found by name.
_isolated_keyring = owner_tests._isolated_keyring
home = owner_tests.home
ROUNDS = 25


@pytest.mark.parametrize("backend", [NO_STORE, PLAINTEXT])
def test_a_key_is_stored_apart_from_the_owners_token_and_found_by_its_token_only(
    home: Home, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", backend)
    owner = TokenStore(home).load_or_create()
    keys = ClientKeys(home)
    key, token = keys.add("agent", ["f1"])
    assert token != owner and keys.by_token(token) == key and keys.by_token(owner) is None
    assert keys.by_token(token + "x") is None
    assert TokenStore(home).stored() == owner  # the owner's token untouched
    assert keys.token("agent") == token
    registry = keys.path
    assert stat.S_IMODE(registry.stat().st_mode) == 0o600
    assert token not in registry.read_text()  # the registry holds its digest only
    assert json.loads(registry.read_text())["keys"]["agent"]["folders"] == ["f1"]


def test_rotate_and_revoke_take_effect_for_a_reader_that_kept_its_registry_open(home: Home) -> None:
    writer, reader = ClientKeys(home), ClientKeys(home)
    _, first = writer.add("agent", None)
    assert reader.by_token(first) is not None
    second = writer.rotate("agent")
    assert reader.by_token(first) is None and reader.by_token(second) is not None
    writer.revoke("agent")
    assert reader.by_token(second) is None and writer.token("agent") is None
    assert not any(p.name.startswith("client-key.agent") for p in home.config_dir.iterdir())
    with pytest.raises(ClientKeyError):
        writer.revoke("agent")


@pytest.mark.parametrize("name", ["owner", "mode", "x.mode", "", "A", "-a", "a/b", "a" * 64])
def test_a_name_that_could_clash_with_the_owners_files_or_another_key_is_refused_or_kept_apart(
    home: Home, name: str
) -> None:
    owner = TokenStore(home).load_or_create()
    try:
        ClientKeys(home).add(name, None)
    except ClientKeyError:
        return
    assert name == "mode"  # a legal name: its files must not be the owner's
    assert TokenStore(home).stored() == owner
    assert (home.config_dir / "mcp-token.mode").read_text() == "file"


def test_a_removed_folder_leaves_every_scope_and_an_emptied_scope_is_not_every_folder(home: Home) -> None:
    keys = ClientKeys(home)
    keys.add("one", ["gone"])
    keys.add("two", ["gone", "kept"])
    keys.add("all", None)
    keys.drop_folders({"gone"})
    assert {k.name: k.folders for k in keys.all()} == {"one": (), "two": ("kept",), "all": None}


def test_two_command_lines_adding_keys_at_once_lose_none(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real ``foldermind token add`` processes, two at a time, many times: each reads the registry, adds its key
    and writes it whole, so without the registry's lock the later writer drops the other's key. Each pair is
    started together and runs to its end; every key made must be listed, with the token it printed."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", PLAINTEXT)  # the secret store path too, as a user has it
    root = home.root
    assert root is not None
    made: dict[str, str] = {}
    for round_ in range(ROUNDS):
        pair = [
            cli_process(
                root, "token", "add", f"agent-{round_}-{side}", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for side in "ab"
        ]
        for proc in pair:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            got = json.loads(out)
            made[got["name"]] = got["token"]
    keys = ClientKeys(home)
    assert sorted(k.name for k in keys.all()) == sorted(made)
    assert all(keys.by_token(token) == keys.get(name) for name, token in made.items())
    assert all(keys.token(name) == token for name, token in made.items())  # what the bridge presents
