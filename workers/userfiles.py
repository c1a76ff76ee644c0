"""Opening a user's file safely: once, following no link on the way in, and checking what was opened.

A file checked when its event arrived can be swapped for a symlink (or a folder on its path for a link to a
folder) leading out of every Smart Folder before it is read. So every read of a user's file goes through
:func:`open_file`, and its bytes are read from the descriptor it returns, never from the path again:

- the path is opened with ``O_NOFOLLOW`` (and ``O_NONBLOCK``: a FIFO put in its place cannot block the reader);
  a link that is itself a document (an alias inside a folder of a file inside it) is opened at the path it
  resolves to, again with ``O_NOFOLLOW``;
- the open descriptor must be a regular file (``fstat``) whose own path (``/proc/self/fd``, elsewhere the
  resolved parent folder) lies inside a registered Smart Folder: a folder on the way swapped for a link fails
  here too; and, where the caller knows the stat that queued the read, the same device and inode.

A refusal is an :class:`OSError` subclass, so callers that already handle unreadable files handle these.
A hardlink to a file outside cannot be told from an ordinary file: it is read like one (docs/security.md).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from types import TracebackType

LINK_OUTSIDE = "replaced by a link outside the folder"
"""The reason a document that became a link out of every Smart Folder is left unindexed with."""
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # what O_NOFOLLOW gives for a link (EMLINK on FreeBSD)
_PROC_FD = "/proc/self/fd"


class Outside(OSError):
    """What was opened (or the link to open) lies outside every Smart Folder."""

    def __init__(self) -> None:
        super().__init__(errno.EXDEV, LINK_OUTSIDE)


class NotRegular(OSError):
    """Not a regular file (a FIFO, a folder, a device, a link loop): never a document."""


class Replaced(OSError):
    """Another file than the one whose stat queued this read (its device or inode differ)."""


class Opened:
    """An open user file: its descriptor, ``fstat`` and resolved path. Read it, then close it (a context manager)."""

    def __init__(self, fd: int, st: os.stat_result, real: str) -> None:
        self.fd, self.st, self.real = fd, st, real

    @property
    def identity(self) -> tuple[int, int]:
        return identity(self.st)

    def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes from the start of the file, from this descriptor."""
        parts, left = [], limit
        while left > 0:
            block = os.pread(self.fd, min(left, 1 << 20), limit - left)
            if not block:
                break
            parts.append(block)
            left -= len(block)
        return b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def identity(st: os.stat_result) -> tuple[int, int]:
    """(device, inode): which file a stat describes."""
    return st.st_dev, st.st_ino


def open_file(path: str, inside: Callable[[str], bool], same: tuple[int, int] | None = None) -> Opened:
    """Open the user's file at ``path`` for reading, checked as the module says. ``inside(real)`` tells whether a
    resolved path lies inside a registered Smart Folder; ``same`` is the (device, inode) of the stat that queued
    this read, when there is one. Raises :class:`Outside`, :class:`NotRegular`, :class:`Replaced` or the
    open's own :class:`OSError` (``FileNotFoundError`` for a file that is gone)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno not in _LINK_ERRNOS:
            raise
        # A link: followed only to a target inside a Smart Folder, opened there without following again.
        target = os.path.realpath(path)
        if not inside(target):
            raise Outside() from None
        try:
            fd = os.open(target, _FLAGS)
        except OSError as again:
            if again.errno in _LINK_ERRNOS:
                raise NotRegular(again.errno, "a symlink loop") from None
            raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file")
        real = _opened_path(fd, path, st)
        if not inside(real):
            raise Outside()
        if same is not None and identity(st) != same:
            raise Replaced(errno.ESTALE, "not the file that was queued")
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, st, real)


def stat_file(path: str, inside: Callable[[str], bool], same: tuple[int, int] | None = None) -> os.stat_result:
    """The ``fstat`` of the user's file at ``path``, opened and checked as :func:`open_file` does."""
    with open_file(path, inside, same) as opened:
        return opened.st


def _opened_path(fd: int, path: str, st: os.stat_result) -> str:
    """The path the open descriptor ``fd`` has now, every link resolved."""
    try:
        real = os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        real = ""
    if real.startswith("/"):
        if real.endswith(" (deleted)") and st.st_nlink == 0:
            raise FileNotFoundError(errno.ENOENT, "deleted since it was opened")
        return real
    # No /proc (macOS, BSD): the resolved parent folder and the name, which must still be the opened file.
    real = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    try:
        if os.path.samestat(os.stat(real, follow_symlinks=False), st):
            return real
    except OSError:
        pass
    resolved = os.path.realpath(path)  # a link that was opened at its target
    try:
        if os.path.samestat(os.stat(resolved, follow_symlinks=False), st):
            return resolved
    except OSError:
        pass
    raise Replaced(errno.ESTALE, "moved or replaced while it was opened")
