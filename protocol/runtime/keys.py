"""CURVE keypairs on disk, and a socket set up as a CURVE client: shared by the kernel (its server key) and
by a remote worker (its client key), so both read and write the one file format.

A keypair lives in a folder of its own (``<config>/keys/bus/`` or ``<config>/keys/worker/``) as ZeroMQ's
certificate files (``NAME.key`` public, ``NAME.key_secret`` both keys; what :func:`zmq.auth.load_certificate`
reads), every file 0600 in a 0700 folder. It is written in a private temporary folder and renamed into place,
so two processes making it on first use at once (the kernel starting, ``foldermind bus keys``) end with one
keypair, never a half-written or mixed one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.utils import z85

from foldermind.protocol.runtime.home import fsync_path

KEY_LENGTH = 40
"""A CURVE key in Z85 text: 32 bytes as 40 characters."""
ZAP_DOMAIN = "foldermind"
"""The ZAP domain of the kernel's tcp bus: the handler answers for it only."""


def _secret_file(folder: Path) -> Path:
    """The certificate holding both keys (``NAME.key`` beside it holds the public one only)."""
    return folder / f"{folder.name}.key_secret"


def ensure_keypair(folder: Path) -> str:
    """The public key (Z85) of the keypair in ``folder``, made first if there is none."""
    secret_file = _secret_file(folder)
    if not secret_file.exists():
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder.parent, 0o700)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
        old_umask = os.umask(0o177)
        try:
            zmq.auth.create_certificates(tmp, folder.name)
        finally:
            os.umask(old_umask)
        for path in tmp.iterdir():
            os.chmod(path, 0o600)
            fsync_path(path)  # its bytes on disk before the folder's rename is
        fsync_path(tmp)
        try:
            tmp.rename(folder)
        except OSError:
            # Another process made it first (the rename of a folder onto a full one fails): keep theirs.
            shutil.rmtree(tmp, ignore_errors=True)
        # The rename, and keys/ itself when it is new, survive a power cut: a cut that left the bus folder
        # empty or half-written would stop the kernel's tcp bus at every start.
        fsync_path(folder.parent)
        fsync_path(folder.parent.parent)
    public, _secret = load_keypair(folder)
    return public


def load_keypair(folder: Path) -> tuple[str, str]:
    """(public, secret) in Z85 from ``folder``'s secret certificate."""
    secret_file = _secret_file(folder)
    public, secret = zmq.auth.load_certificate(secret_file)
    if secret is None:
        raise ValueError(f"{secret_file} holds no secret key")
    return public.decode("ascii"), secret.decode("ascii")


def valid_key(key: str) -> bool:
    """``key`` is a CURVE public key in Z85 (40 characters that decode to 32 bytes)."""
    if len(key) != KEY_LENGTH:
        return False
    try:
        return len(z85.decode(key.encode("ascii"))) == 32
    except (ValueError, UnicodeEncodeError, KeyError):
        return False


def curve_client(sock: zmq.Socket[Any], keypair: tuple[str, str], server_key: str) -> None:
    """Make ``sock`` a CURVE client of the server whose public key is ``server_key``: call before connect."""
    public, secret = keypair
    sock.setsockopt(zmq.CURVE_PUBLICKEY, public.encode("ascii"))
    sock.setsockopt(zmq.CURVE_SECRETKEY, secret.encode("ascii"))
    sock.setsockopt(zmq.CURVE_SERVERKEY, server_key.encode("ascii"))


def curve_server(sock: zmq.Socket[Any], keypair: tuple[str, str]) -> None:
    """Make ``sock`` a CURVE server with ``keypair``: every peer must complete a CURVE handshake (no plaintext),
    and the ZAP handler decides which client keys may."""
    public, secret = keypair
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, public.encode("ascii"))
    sock.setsockopt(zmq.CURVE_SECRETKEY, secret.encode("ascii"))
    sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN.encode())
    with contextlib.suppress(AttributeError):
        # Refuse a handshake when no ZAP handler answers, instead of admitting every key (libzmq >= 4.3).
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
