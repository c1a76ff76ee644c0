"""Whose conversations a client key reaches (workers/frontdoor/keyscope.py ``asker``): conversations are kept in the
home for an hour across restarts, so a key revoked and made again under the same name must not reach its
predecessor's; a rotated token (same key) keeps them. Real registry files in a real home; no kernel is needed."""

from __future__ import annotations

from pathlib import Path

from foldermind.protocol.runtime.client_keys import ClientKeys
from foldermind.protocol.runtime.home import Home
from foldermind.workers.frontdoor.keyscope import CLIENT, asker


def asking_as(keys: ClientKeys, name: str) -> str:
    key = next(k for k in keys.all() if k.name == name)
    token = CLIENT.set(key)
    try:
        return asker()
    finally:
        CLIENT.reset(token)


def test_a_key_made_again_under_the_same_name_does_not_reach_its_predecessors_conversations(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path)
    home.ensure()
    keys = ClientKeys(home)
    keys.add("laptop", None)
    first = asking_as(keys, "laptop")
    keys.rotate("laptop")
    assert asking_as(keys, "laptop") == first  # the same key, a new token: its conversations go on
    keys.revoke("laptop")
    keys.add("laptop", None)
    assert asking_as(keys, "laptop") != first
    assert asker() == ""  # the owner's token: no client key
