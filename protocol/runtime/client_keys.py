"""Named client keys: one bearer token per MCP client, each optionally scoped to some Smart Folders.

The owner's token (:class:`~.token_store.TokenStore` with no name) is the all-folders key. A client key's
token is stored exactly as the owner's is (the OS secret store, else a 0600 file), under its name, so the
stdio bridge of that client (``foldermind mcp --client NAME``) can present it. Beside them, the registry
``<config_dir>/client-keys.json`` (0600, written whole and renamed) holds each key's name, scope, creation
time and the SHA-256 of its token: the front door authenticates against those digests, re-reading the file
when its size or modification time moves, so a key added, rotated or revoked counts from the next request
without the secret store being asked on the request path. ``folders`` None is every folder; a list (even an
empty one, once its folders were removed) is only those.

Every change reads the registry, changes it and writes it whole (a temporary file, synced, renamed, the folder
synced), under an exclusive ``flock`` of ``client-keys.json.lock`` beside it held across the stored token's
write too: two command lines changing keys at once (or ``folders remove`` taking a folder out of every scope)
take turns, so neither drops the other's key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore, _atomic_write

REGISTRY_FILE = "client-keys.json"
LOCK_FILE = REGISTRY_FILE + ".lock"
OWNER = "owner"
"""The name activity records the owner's token under."""
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


class ClientKeyError(ValueError):
    """A key name or request the registry refuses; the message says why."""


@dataclass(frozen=True, slots=True)
class ClientKey:
    name: str
    folders: tuple[str, ...] | None
    """Smart Folder ids the key sees; None: every folder."""
    created: float = 0.0
    digest: str = ""
    pending: str = ""
    """The digest of a token a rotate is putting in place, accepted beside ``digest`` until it is done: a crash
    between its writes leaves the stored token, old or new, still letting its client in."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name) or name == OWNER:
        raise ClientKeyError(
            f"a key name is 1-63 characters of a-z, 0-9, '_' and '-', from a letter or digit, and not {OWNER!r}"
        )
    return name


class ClientKeys:
    """The registry of one home, and the named tokens it lists."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.path: Path = home.config_dir / REGISTRY_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._by_digest: dict[str, ClientKey] = {}

    # --- reading

    def all(self) -> list[ClientKey]:
        return sorted(self._read().values(), key=lambda k: k.name)

    def get(self, name: str) -> ClientKey | None:
        return self._read().get(name)

    def by_token(self, token: str) -> ClientKey | None:
        """The key ``token`` is, read again when the registry file changed (the front door's per-request check)."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # each write is a new file: two in one tick differ
        except FileNotFoundError:
            stamp = (0, 0, 0)
        with self._lock:
            if stamp != self._stamp:
                self._by_digest = {d: k for k in self._read().values() for d in (k.digest, k.pending) if d}
                self._stamp = stamp
            return self._by_digest.get(digest(token))

    def names(self) -> frozenset[str]:
        """The names of the keys registered now, read again."""
        return frozenset(self._read())

    def _read(self) -> dict[str, ClientKey]:
        try:
            raw: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: no client key authenticates (the owner's token still does)
        keys: dict[str, ClientKey] = {}
        for name, entry in (raw.get("keys") or {}).items() if isinstance(raw, dict) else ():
            folders = entry.get("folders")
            keys[name] = ClientKey(
                name=name,
                folders=None if folders is None else tuple(str(f) for f in folders),
                created=float(entry.get("created", 0.0)),
                digest=str(entry.get("sha256", "")),
                pending=str(entry.get("pending_sha256", "")),
            )
        return keys

    # --- writing (the command line)

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, ClientKey]]:
        """The registry as it is now, for one change written before the lock is let go."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes, whatever happens between
            yield self._read()
        finally:
            os.close(fd)

    def _write(self, keys: dict[str, ClientKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "keys": {
                k.name: {
                    "folders": None if k.folders is None else list(k.folders),
                    "created": k.created,
                    "sha256": k.digest,
                }
                | ({"pending_sha256": k.pending} if k.pending else {})
                for k in sorted(keys.values(), key=lambda k: k.name)
            }
        }
        _atomic_write(self.path, json.dumps(body, indent=1))

    def add(self, name: str, folders: list[str] | None) -> tuple[ClientKey, str]:
        """A new key and its token; refused if the name is taken."""
        check_name(name)
        with self._changing() as keys:
            if name in keys:
                raise ClientKeyError(
                    f"a key named {name!r} exists: `foldermind token rotate {name}` replaces its token"
                )
            store = TokenStore(self.home, name)
            store.forget()  # a leftover of a crash between the two writes below
            token = store.load_or_create()
            key = ClientKey(name, None if folders is None else tuple(folders), time.time(), digest(token))
            keys[name] = key
            self._write(keys)
        return key, token

    def token(self, name: str) -> str | None:
        """The stored token of key ``name`` (None when it has none); creates nothing."""
        return TokenStore(self.home, check_name(name)).stored() if name in self._read() else None

    def rotate(self, name: str) -> str:
        with self._changing() as keys:
            key = keys.get(name)
            if key is None:
                raise ClientKeyError(f"no key named {name!r} (`foldermind token list`)")
            token = secrets.token_urlsafe(32)
            keys[name] = replace(key, pending=digest(token))  # both count until the token is stored
            self._write(keys)
            store = TokenStore(self.home, name)
            store.load_or_create()
            store.rotate(token)
            keys[name] = replace(key, digest=digest(token), pending="")
            self._write(keys)
        return token

    def set_scope(self, name: str, folders: list[str] | None) -> None:
        """Key ``name`` sees ``folders`` from its next request (None: every folder); its token is kept."""
        with self._changing() as keys:
            key = keys.get(name)
            if key is None:
                raise ClientKeyError(f"no key named {name!r} (`foldermind token list`)")
            keys[name] = ClientKey(name, None if folders is None else tuple(folders), key.created, key.digest)
            self._write(keys)

    def revoke(self, name: str) -> None:
        """The registry first (refused at the next request), then the stored token."""
        with self._changing() as keys:
            if keys.pop(name, None) is None:
                raise ClientKeyError(f"no key named {name!r} (`foldermind token list`)")
            self._write(keys)
            TokenStore(self.home, name).forget()

    def drop_folders(self, gone: set[str]) -> None:
        """Take removed Smart Folders out of every scope (a scope left empty sees nothing, never everything)."""
        with self._changing() as keys:
            changed = False
            for name, key in keys.items():
                if key.folders is not None and gone & set(key.folders):
                    keys[name] = replace(key, folders=tuple(f for f in key.folders if f not in gone))
                    changed = True
            if changed:
                self._write(keys)
