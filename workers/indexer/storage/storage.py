"""A full disk under the index, told apart from other failures; and the index's size on disk.

A write that runs out of space (SQLite's ``SQLITE_FULL``, an ``ENOSPC``/``EDQUOT`` OSError, or a
Tantivy / usearch failure that names no errno while the data folder has almost no room left) is a
transient condition, not a bad document: the ingest thread holds its writes, reports the condition,
retries with backoff and resumes by itself once space is freed. Nothing is marked failed for it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Tantivy ("An index writer was killed") and usearch ("Failed to serialize into stream") drop the errno.
# Such a failure counts as a full disk only when the data folder has less than this left: a segment or
# a vector file being written is megabytes, so after the partial file is gone a few MiB may be free.
LOW_SPACE_BYTES = 32 * 1024 * 1024
_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer could still use on ``path``'s file system (-1 when unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def _names_no_space(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _SPACE_ERRNOS:
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        return code == _SQLITE_FULL or "database or disk is full" in str(exc)
    return False


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during (its cause, else its context), and so on down the chain."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def is_disk_full(exc: BaseException, data_dir: Path, opaque: bool = False) -> bool:
    """Whether ``exc`` (or its cause) is a write that found no room on ``data_dir``'s file system.

    ``opaque``: the failed call is one that drops the errno (a Tantivy commit, a usearch save); its
    failure then counts as a full disk when little space is left. Other errors must name the cause.
    """
    if any(_names_no_space(seen) for seen in causes(exc)):
        return True
    if opaque and isinstance(exc, OSError | ValueError | RuntimeError):
        free = free_bytes(data_dir)
        return 0 <= free < LOW_SPACE_BYTES
    return False


class DiskFull(Exception):
    """A write of the index that found the disk full: ``what`` failed on ``path``."""

    def __init__(self, what: str, path: Path, detail: str, free_bytes: int) -> None:
        self.what, self.path, self.detail, self.free_bytes = what, path, detail, free_bytes
        self.since = time.time()
        super().__init__(str(self))

    def __str__(self) -> str:
        free = "unknown" if self.free_bytes < 0 else f"{self.free_bytes / 1048576:.1f} MiB"
        return f"disk full (ENOSPC): {self.what} failed on {self.path} ({free} free; {self.detail})"


def describe(exc: BaseException) -> str:
    """A short, content-free description of a storage error (library messages never quote documents)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"[:200]


def classify(exc: BaseException, what: str, path: Path, data_dir: Path, opaque: bool = False) -> DiskFull | None:
    """``exc`` as a :class:`DiskFull` when it is one, else None (``opaque`` as in :func:`is_disk_full`)."""
    if isinstance(exc, DiskFull):
        return exc
    if not is_disk_full(exc, data_dir, opaque):
        return None
    return DiskFull(what, path, describe(exc), free_bytes(data_dir))


@contextmanager
def writing(what: str, path: Path, data_dir: Path) -> Iterator[None]:
    """Run a write of ``path`` by a library that may drop the errno; a full disk comes out as
    :class:`DiskFull` naming ``what`` failed."""
    try:
        yield
    except Exception as exc:
        full = classify(exc, what, path, data_dir, opaque=True)
        if full is None:
            raise
        raise full from exc


def disk_bytes(folder: Path | str) -> int:
    """The index's size on disk: every file under its data folder (one that goes meanwhile counts 0)."""
    total = 0
    for path in Path(folder).rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total
