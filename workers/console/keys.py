"""What the Keys page asks for: the client keys with the folders each sees by name, a scoped key made (its token
shown once, on the page that made it), and a key revoked.

The key store and its rules live in the command line (``token list|add|revoke``), which no worker imports: the
kernel runs the very command (``ctl.cli``, :mod:`.clients`' :func:`~.clients.run`), so the page and the terminal
can never disagree. The folders' names come from the indexer. Only a signed-in console session reaches these
pages (:mod:`.pages`); a client key is a bearer token for the front door and opens no console session. Nothing
here logs a token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from foldermind.workers.console.clients import failed, run
from foldermind.workers.console.views import Scope, scopes
from foldermind.workers.framework.asyncbus import Bus


@dataclass(slots=True)
class Keys:
    keys: list[dict[str, Any]] = field(default_factory=list)
    """``token list --json``'s keys, each with ``sees``: the names of the folders it sees (None: every folder)."""
    folders: list[Scope] = field(default_factory=list)
    """The Smart Folders a new key may be given."""
    problems: list[str] = field(default_factory=list)


def named(ids: list[str] | None, folders: list[Scope]) -> list[str] | None:
    """A scope's folders by name ("a removed folder" for an id the indexer no longer has)."""
    if ids is None:
        return None
    names = {f.id: f.name for f in folders}
    return [names.get(i, "a removed folder") for i in ids]


async def listed(bus: Bus) -> Keys:
    out = Keys(folders=await scopes(bus))
    reply = await run(bus, "keys")
    if isinstance(reply, str) or reply.exit_code != 0:
        out.problems.append(f"the keys could not be listed: {reply if isinstance(reply, str) else failed(reply)}")
        return out
    out.keys = [{**k, "sees": named(k["folders"], out.folders)} for k in json.loads(reply.stdout)]
    if not out.folders:
        out.problems.append("no Smart Folders are listed now (is the indexer running?): a key needs one to see")
    return out


@dataclass(slots=True)
class Made:
    name: str = ""
    token: str = ""
    sees: list[str] = field(default_factory=list)
    error: str = ""


async def add(bus: Bus, name: str, folder_ids: list[str]) -> Made:
    """A key ``name`` that sees ``folder_ids`` only (``token add NAME --folders ... --json``), with its token."""
    if not folder_ids:
        return Made(name, error="choose at least one Smart Folder for the key to see")
    reply = await run(bus, "key-add", name, folder_ids)
    if isinstance(reply, str):
        return Made(name, error=reply)
    if reply.exit_code != 0:
        return Made(name, error=failed(reply))
    made = json.loads(reply.stdout)
    return Made(made["name"], made["token"], named(made["folders"], await scopes(bus)) or [])


async def revoke(bus: Bus, name: str) -> str:
    """ "" when key ``name`` was revoked (``token revoke NAME``), else why not."""
    reply = await run(bus, "key-revoke", name)
    if isinstance(reply, str):
        return reply
    return failed(reply) if reply.exit_code != 0 else ""
