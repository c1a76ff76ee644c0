"""Who may join the kernel's tcp bus: the allow list of worker keys and the ZAP handler that applies it.

The allow list is ``<config>/keys/allowed.json`` (name -> Z85 public key, 0600), written by ``foldermind bus
allow`` / ``bus deny`` and read by the ZAP handler at every handshake, so a change applies to the next
connection without a control message or a kernel restart (handshakes are rare: one per worker socket).

The handler is pyzmq's :class:`~zmq.auth.thread.ThreadAuthenticator` (libzmq's own ZAP protocol on its own
thread) with a credentials callback. It names an admitted connection after its key's allow-list entry
(ZeroMQ's User-Id), which the broker reads off each message to show in ``status``. A refusal is logged with
the key's first characters only (enough to tell keys apart), never anything the peer sent, and at most a few
times a minute: anyone who can reach the port can make one.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator

from foldermind.protocol.runtime.home import Home, fsync_path
from foldermind.protocol.runtime.keys import ZAP_DOMAIN, valid_key

log = logging.getLogger("foldermind.curve")

NAME_MAX = 64


def valid_name(name: str) -> bool:
    """An allow-list name: short, printable, no '@' or '/' (it becomes part of a remote member's name)."""
    return 0 < len(name) <= NAME_MAX and name.isprintable() and not any(c in name for c in "@/ ")


def allowed(home: Home) -> dict[str, str]:
    """The allow list: name -> public key (empty when there is no file or it cannot be read)."""
    try:
        data = json.loads(home.allowed_keys_file.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def _write(home: Home, entries: dict[str, str]) -> None:
    """Replace the allow list atomically and durably: what `bus allow` / `bus deny` report done survives a
    power cut (the file's bytes synced before the rename, the folder's names after it)."""
    made = not home.keys_dir.exists()
    home.keys_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home.keys_dir, 0o700)
    if made:
        fsync_path(home.keys_dir.parent)
    fd, tmp = tempfile.mkstemp(dir=home.keys_dir, prefix=".allowed.", suffix=".json")  # mkstemp: 0600
    with os.fdopen(fd, "w") as fh:
        json.dump(entries, fh, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, home.allowed_keys_file)
    fsync_path(home.keys_dir)


def allow(home: Home, name: str, key: str) -> None:
    """Admit ``key`` under ``name`` (replacing what that name admitted before); ValueError for a bad one."""
    if not valid_name(name):
        raise ValueError(f"{name!r} is not a key name (1-{NAME_MAX} printable characters, no '@', '/' or space)")
    if not valid_key(key):
        raise ValueError("not a CURVE public key (40 Z85 characters, as `foldermind worker keys` prints it)")
    entries = {n: k for n, k in allowed(home).items() if k != key}  # one key, one name
    entries[name] = key
    _write(home, entries)


def deny(home: Home, name: str) -> bool:
    """Remove ``name`` from the allow list; False if it was not on it."""
    entries = allowed(home)
    if entries.pop(name, None) is None:
        return False
    _write(home, entries)
    return True


class _Refusals:
    """Log the first few refusals a minute, then count them (anyone who can reach the port can make one)."""

    def __init__(self, per_minute: int = 10) -> None:
        self.per_minute, self.window_start, self.count = per_minute, 0.0, 0

    def note(self, key: str) -> None:
        now = time.monotonic()
        if now - self.window_start > 60:
            if self.count > self.per_minute:
                log.warning("%d more tcp bus handshakes were refused in the last minute", self.count - self.per_minute)
            self.window_start, self.count = now, 0
        self.count += 1
        if self.count <= self.per_minute:
            log.warning("refused a tcp bus handshake: key %s... is not on the allow list", key[:8])


class Gate(ThreadAuthenticator):
    """The ZAP handler: a CURVE key on the allow list gets in, named after its entry; any other is refused."""

    def __init__(self, context: zmq.Context[Any], home: Home) -> None:
        super().__init__(context, log=logging.getLogger("foldermind.curve.zap"))
        self.home = home
        self._refusals = _Refusals()
        # pyzmq's own handler logs each key at debug; nothing of ours needs it.
        logging.getLogger("foldermind.curve.zap").setLevel(logging.WARNING)

    def open(self) -> None:
        """Start answering ZAP requests: before the CURVE socket binds, or a handshake could find no handler."""
        self.start()
        self.configure_curve_callback(ZAP_DOMAIN, credentials_provider=self)

    def _name_of(self, key: str) -> str | None:
        for name, allowed_key in allowed(self.home).items():
            if allowed_key == key:
                return name
        return None

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials provider: ``key`` is the client's public key in Z85."""
        text = key.decode("ascii", "replace")
        if self._name_of(text) is not None:
            return True
        self._refusals.note(text)
        return False

    def curve_user_id(self, client_public_key: bytes) -> str:
        """The User-Id ZeroMQ attaches to every message of an admitted connection: its allow-list name."""
        from zmq.utils import z85

        return self._name_of(z85.encode(client_public_key).decode("ascii")) or "?"
