"""Client keys in the power-cut run (tests/powerloss.py): `token add NAME [--folders Soak]`, `token revoke NAME`
and `token rotate NAME` through the real CLI, what each acknowledged one left, and the check after a cut.

After a cut, for every key: an acknowledged add is registered with the scope it was given and its token lets a
client in (over HTTP, the SDK's client); the token stored for it (what `foldermind mcp --client NAME` presents)
is the one the last acknowledged add or rotate printed, and it too lets a client in; a scoped key's
`index_status` lists the Soak folder only. An acknowledged revoke leaves the key unregistered, and every token an
acknowledged revoke or rotate retired is refused with 401. A command cut short leaves either outcome: its key is
learned from the registry, and then its stored token must let a client in like any other.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from foldermind.protocol.runtime.client_keys import ClientKeys
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore
from tests import mcpclient as mc

MAIN_NAME = "Soak"
LIVE_KEYS = 3  # about this many keys registered at a time, so each cycle's checks stay short
RETIRED_KEPT = 12  # the latest retired tokens, checked again after each cut


@dataclass
class Key:
    registered: bool | None  # None: a command on it was cut short, learned at the next check
    token: str | None  # the token the last acknowledged add or rotate printed (None: not known)
    scoped: bool | None  # --folders Soak (None: not known)


class KeyLedger:
    def __init__(self, home: Path, main_folder: Path, rng: random.Random) -> None:
        self.home, self.main, self.rng = home, str(main_folder), rng
        self.keys: dict[str, Key] = {}
        self.retired: list[str] = []  # tokens an acknowledged revoke or rotate replaced: each must get 401
        self._names = 0

    def pick(self) -> tuple[str, tuple[str, ...]]:
        """(key name, CLI arguments) of a command that makes sense now."""
        live = [n for n, k in self.keys.items() if k.registered]
        if not live or (len(live) < LIVE_KEYS and self.rng.random() < 0.5):
            self._names += 1
            name = f"client{self._names}"
            scope = ("--folders", MAIN_NAME) if self.rng.random() < 0.5 else ()
            return name, ("token", "add", name, "--json", *scope)
        name = self.rng.choice(live)
        return name, ("token", "revoke" if self.rng.random() < 0.35 else "rotate", name)

    def acknowledged(self, name: str, args: tuple[str, ...], stdout: str) -> None:
        """The CLI reported ``args`` done (exit 0) with ``stdout``."""
        verb, key = args[1], self.keys.get(name)
        if verb == "add":
            made = json.loads(stdout)
            self.keys[name] = Key(True, made["token"], made["folders"] is not None)
            return
        assert key is not None
        if key.token is not None:
            self.retired.append(key.token)
        if verb == "revoke":
            self.keys[name] = Key(False, None, key.scoped)
        else:
            key.token = stdout.strip().splitlines()[0]

    def cut_short(self, name: str, args: tuple[str, ...]) -> None:
        """``args`` runs into the cut: never acknowledged, either outcome holds."""
        key = self.keys.setdefault(name, Key(None, None, None))
        key.registered, key.token = None, None
        if args[1] == "add":
            key.scoped = None

    def check(self) -> tuple[list[str], list[str]]:
        """After a cut, with the kernel serving: (acknowledged effects lost, other problems); learns what
        commands cut short left."""
        lost: list[str] = []
        problems: list[str] = []
        url = str(mc.mcp_info(self.home, timeout=120)["url"])
        registry = ClientKeys(Home.resolve(self.home))
        for name, key in list(self.keys.items()):
            entry = registry.get(name)
            if key.registered is not None and key.registered != (entry is not None):
                lost.append(f"client key {name} {'added' if key.registered else 'revoked'}")
            if entry is None:
                del self.keys[name]  # gone for good: its tokens are in retired when a revoke was acknowledged
                continue
            stored = TokenStore(Home.resolve(self.home), name).stored()
            if key.token is not None and stored != key.token:
                lost.append(f"client key {name}'s acknowledged token (another one is stored)")
            scoped = entry.folders is not None
            if key.scoped is not None and scoped != key.scoped:
                lost.append(f"client key {name}'s scope ({entry.folders})")
            for token, what in ((stored, "stored token"), (key.token, "acknowledged token")):
                if token is None or (what == "acknowledged token" and token == stored):
                    continue
                seen = self.folders_seen(url, token)
                if seen is None:
                    problems.append(f"client key {name}'s {what} is refused")
                elif scoped and seen != [self.main]:
                    problems.append(f"client key {name}, scoped to {MAIN_NAME}, sees {seen}")
                elif not scoped and self.main not in seen:
                    problems.append(f"client key {name}, scoped to every folder, sees {seen}")
            self.keys[name] = Key(True, stored, scoped)
        for token in self.retired:
            status = mc.raw(url, body=mc.initialize_body(), headers={"Authorization": f"Bearer {token}"})[0]
            if status != 401:
                lost.append(f"a revoked or rotated-out client token answered {status}, not 401")
        self.retired = self.retired[-RETIRED_KEPT:]
        return lost, problems

    @staticmethod
    def folders_seen(url: str, token: str) -> list[str] | None:
        """The folder paths `index_status` shows ``token`` (over HTTP, the SDK's client); None when refused."""
        status, _, _ = mc.raw(url, body=mc.initialize_body(), headers={"Authorization": f"Bearer {token}"})
        if status == 401:
            return None
        result = mc.call(url, token, "index_status")
        assert not result.is_error and result.structured_content is not None, result.content
        return [str(f["path"]) for f in result.structured_content["folders"]]
