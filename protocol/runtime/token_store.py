"""The MCP bearer token: generated once per home, kept in the OS secret store when there is one.

Without a real secret store the token lives in ``<config_dir>/mcp-token`` (0600). The sidecar
``<config_dir>/mcp-token.mode`` says where the token was last put, so it is read from the right place
even if keyring availability changes between runs. The token never travels in an environment
variable and is never logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import sys
import tempfile
import threading
from pathlib import Path
from typing import Literal

import keyring.backend
import keyring.core
from keyring.backends import chainer, fail, null

from foldermind.protocol.runtime.home import Home, fsync_path

log = logging.getLogger("foldermind.token")

Mode = Literal["keyring", "file"]
SERVICE = "foldermind"
TOKEN_FILE = "mcp-token"
MODE_FILE = "mcp-token.mode"
KEY_FILE = "client-key"
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


class TokenPersistError(Exception):
    """The new token could not be stored; the previous one is still in force."""


class TokenStore:
    def __init__(self, home: Home | str | os.PathLike[str], name: str = "") -> None:
        """``name``: a client key's (:mod:`.client_keys`), kept beside the owner's token (``""``) the same way."""
        config_dir = home.config_dir if isinstance(home, Home) else Path(home)
        self.config_dir = config_dir.expanduser().resolve()
        suffix = f":{name}" if name else ""
        # A client key's files never share a name with the owner's (a key name holds no dot).
        self.token_file = self.config_dir / (f"{KEY_FILE}.{name}" if name else TOKEN_FILE)
        self.mode_file = self.config_dir / (f"{KEY_FILE}.{name}.mode" if name else MODE_FILE)
        # One keyring entry per home, so two homes never share (or overwrite) a token.
        self.username = "mcp-token:" + hashlib.sha256(str(self.config_dir).encode()).hexdigest()[:16] + suffix
        self._lock = threading.Lock()
        self._token: str | None = None
        self._mode: Mode | None = None

    @property
    def current(self) -> str:
        if self._token is None:
            return self.load_or_create()
        return self._token

    @property
    def mode(self) -> Mode:
        if self._mode is None:
            self.load_or_create()
        assert self._mode is not None
        return self._mode

    def load_or_create(self) -> str:
        with self._lock:
            store = secret_store()
            token, found_in = self._read(store)
            if token is None:
                had_one = self._sidecar() is not None or self.token_file.exists()
                token = secrets.token_urlsafe(32)
                if had_one:
                    log.warning("the stored MCP token could not be read; generated a new one (re-copy client configs)")
                else:
                    log.info("generated a new MCP token")
            target: Mode = "keyring" if store is not None else "file"
            if found_in != target or self._sidecar() != target:
                if found_in == "file" and target == "keyring":
                    log.info("moving the MCP token from its plaintext file into the secret store")
                try:
                    self._persist(token, target, store)
                except Exception as exc:
                    if found_in is None:
                        raise TokenPersistError(f"could not store the new MCP token: {exc}") from exc
                    # The token is still where it was found: keep serving it from there.
                    log.warning("could not move the MCP token to %s (%s); keeping it where it was", target, exc)
                    target = found_in
            elif target == "keyring":
                # A crash between writing a file token and switching the sidecar back can leave one behind.
                try:
                    self.token_file.unlink(missing_ok=True)
                except OSError as exc:
                    log.warning("could not remove the leftover plaintext MCP token file (%s)", exc)
            if target == "file":
                log.warning("no OS secret store; token stored in a 0600 file (%s)", self.token_file)
            self._token, self._mode = token, target
            return token

    def stored(self) -> str | None:
        """The token stored now, read again from its place; None when there is none or it cannot be read.
        Creates nothing: a reader that runs beside the front door (the stdio bridge) must not replace it."""
        with self._lock:
            return self._read(secret_store())[0]

    def rotate(self, token: str | None = None) -> str:
        """Store a new token (``token``, else a fresh one) in place of the current one, and return it."""
        with self._lock:
            store = secret_store()
            target: Mode = "keyring" if store is not None else "file"
            token = token or secrets.token_urlsafe(32)
            try:
                self._persist(token, target, store)
            except Exception as exc:
                self._restore_after_failed_rotate(store)
                raise TokenPersistError(f"could not store the new MCP token: {exc}") from exc
            self._token, self._mode = token, target
            log.info("rotated the MCP token (%s)", target)
            return token

    def forget(self) -> None:
        """Delete the stored token from every place (a revoked client key)."""
        with self._lock:
            store = secret_store()
            if store is not None:
                with contextlib.suppress(Exception):  # keyring's PasswordDeleteError: nothing was there
                    store.delete_password(SERVICE, self.username)
            removed = [p for p in (self.token_file, self.mode_file) if p.exists()]
            for path in removed:
                path.unlink(missing_ok=True)
            if removed:
                fsync_path(self.config_dir)  # else a power cut puts a revoked key's token back on the disk
            self._token = self._mode = None

    def _restore_after_failed_rotate(self, store: keyring.backend.KeyringBackend | None) -> None:
        """Put the token the clients hold back if part of the failed write landed (a write that failed
        late, say in the sidecar, would otherwise hand out a token nobody was told about on restart)."""
        old = self._token
        if old is None or self._read(store)[0] == old:
            return
        try:
            self._persist(old, "keyring" if store is not None else "file", store)
        except Exception:
            log.exception("could not restore the previous MCP token after a failed rotate")

    # --- reading -------------------------------------------------------------------------------

    def _read(self, store: keyring.backend.KeyringBackend | None) -> tuple[str | None, Mode | None]:
        """The stored token and where it was, or (None, None) when it is absent or unreadable.

        The sidecar's place is tried first; the other place only when the first holds nothing, which
        is what a crash in the middle of a move between the two leaves behind. A garbled token is not
        looked past: an old token from the other place would be a surprise, a fresh one is not.
        """
        first: Mode = self._sidecar() or "file"
        second: Mode = "keyring" if first == "file" else "file"
        for place in (first, second):
            try:
                raw = self._read_file() if place == "file" else self._read_keyring(store)
            except Exception as exc:
                log.warning("stored MCP token unreadable (%s: %s)", place, type(exc).__name__)
                return None, None
            if raw is None:
                continue
            if _TOKEN_RE.fullmatch(raw):
                return raw, place
            log.warning("stored MCP token is malformed (%s)", place)
            return None, None
        if self._sidecar() == "keyring" and store is None:
            log.warning("the MCP token was kept in an OS secret store that is no longer available")
        return None, None

    def _read_file(self) -> str | None:
        try:
            data = self.token_file.read_bytes()
        except FileNotFoundError:
            return None
        if self.token_file.stat().st_mode & 0o077:
            os.chmod(self.token_file, 0o600)
        return data.decode("ascii").strip()

    def _read_keyring(self, store: keyring.backend.KeyringBackend | None) -> str | None:
        if store is None:
            return None
        value = store.get_password(SERVICE, self.username)
        return value.strip() if value is not None else None

    def _sidecar(self) -> Mode | None:
        try:
            value = self.mode_file.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if value == "keyring":
            return "keyring"
        if value == "file":
            return "file"
        return None

    # --- writing -------------------------------------------------------------------------------

    def _persist(self, token: str, target: Mode, store: keyring.backend.KeyringBackend | None) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        if target == "keyring":
            assert store is not None
            store.set_password(SERVICE, self.username, token)
            # Some backends (an empty chainer) accept a write and keep nothing: trust only a read-back.
            if store.get_password(SERVICE, self.username) != token:
                raise TokenPersistError("the secret store did not keep the token")
            # Keyring first, then drop the file, then the sidecar: a crash at any point leaves the
            # token readable (sidecar "file" with no file falls through to the keyring in _read).
            self.token_file.unlink(missing_ok=True)
        else:
            _atomic_write(self.token_file, token)
        if self._sidecar() != target:
            _atomic_write(self.mode_file, target)


def secret_store() -> keyring.backend.KeyringBackend | None:
    """The keyring backend to keep the token in, or None when there is no real secret store.

    Resolved on every call rather than through keyring's process-wide cache, so a store that appears
    later (or a PYTHON_KEYRING_BACKEND set by a test) is seen.
    """
    try:
        explicit = keyring.core.load_env() or keyring.core.load_config()
    except Exception as exc:
        log.warning("the configured keyring backend cannot be loaded (%s); ignoring it", exc)
        explicit = None
    if explicit is not None:
        return explicit if usable(explicit, explicit=True) else None
    skip_macos_api()
    candidates = keyring.backend.get_all_keyring()
    best = max(candidates, default=None, key=keyring.backend.by_priority)
    return best if best is not None and usable(best, explicit=False) else None


def skip_macos_api() -> None:
    """Off macOS, keep keyring from loading its macOS backend's ctypes module: that backend is never viable there
    (its priority raises "macOS required" first), but the module looks for the Security, CoreServices and
    Foundation frameworks with ``ctypes.util.find_library``, which on Linux runs ``ldconfig``, ``gcc`` and ``ld``
    for each, twelve processes per token read (docs/benchmarks/console.md, "The Clients page and CLI start-up").
    A ``None`` in ``sys.modules`` makes that import fail at once, which the backend already tolerates."""
    if sys.platform != "darwin":
        sys.modules.setdefault("keyring.backends.macOS.api", None)  # type: ignore[arg-type]  # None: "not importable"


def usable(backend: keyring.backend.KeyringBackend, *, explicit: bool) -> bool:
    """A real secret store: not the fail/null placeholders and either recommended or the user's choice.

    keyrings.alt's file backends rank below 1 and win auto-detection on a headless box only because
    nothing else is there; they count only when configured on purpose.
    """
    if isinstance(backend, fail.Keyring | null.Keyring):
        return False
    if isinstance(backend, chainer.ChainerBackend):
        return any(usable(b, explicit=explicit) for b in backend.backends)
    return explicit or backend.priority >= 1


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (0600) so that a reader sees the old or the new content, never a mix."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_path(path.parent)
