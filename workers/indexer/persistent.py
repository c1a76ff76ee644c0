"""A write of the index that keeps failing: told once, shown in ``status`` with its fix, retried ever less often.

A read-only data folder, no permission, a folder where an index file belongs (or any failure that repeats)
does not go away by retrying every second (a library error that names no errno, Tantivy's or usearch's, is
named by making a file in the data folder). :class:`PersistentFault` keeps the current one: its first
occurrence is logged with the traceback (a kind already told in the last :data:`TOLD_FOR_S` gets one line),
repeats are counted and summarised at each doubling, and the next try waits twice as long each time, up to
:data:`RETRY_MAX_S`. Its :attr:`note` (what fails, since when, how often, and the fix) rides on the indexer's
heartbeat into ``foldermind status``; the first write that goes through again clears it and says so once.
A full disk is not one of these: :mod:`.storage` has its own pause and resume.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from foldermind.workers.indexer.storage.storage import causes, describe

RETRY_MIN_S = 1.0
RETRY_MAX_S = 30.0
TOLD_FOR_S = 600.0
"""A kind of failure whose traceback was logged this recently is told again in one line, without it."""
NOTE_MAX = 300
"""The longest note the kernel keeps of a heartbeat: a long cause is cut, never the fix after it."""
_SQLITE_READONLY = 8
_NAMED = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR})
"""The errnos :func:`diagnose` names with a fix of their own: a write that fails so is the data folder's fault."""


@dataclass(slots=True)
class Fault:
    key: str
    """What makes two failures the same one: the exception's type, errno and file."""
    doing: str
    what: str
    fix: str
    since: float  # wall clock, for the note
    count: int = 1

    @property
    def note(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.since))
        tries = f", {self.count} tries" if self.count > 1 else ""
        return with_fix(f"indexing held: {self.what}", f" (since {when}{tries}); fix: {self.fix}")


def with_fix(cause: str, fix: str) -> str:
    """``cause`` then ``fix`` in at most :data:`NOTE_MAX` characters, the cause cut short if need be."""
    room = NOTE_MAX - len(fix)
    return (cause if len(cause) <= room else cause[: room - 3] + "...") + fix


def _os_error(exc: BaseException) -> OSError | None:
    return next((seen for seen in causes(exc) if isinstance(seen, OSError) and seen.errno is not None), None)


def _readonly_database(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorcode", None) == _SQLITE_READONLY or "readonly database" in str(exc)
    )


def refusal(exc: BaseException, data_dir: Path) -> OSError | None:
    """The OSError behind ``exc``; for a library error that names none (Tantivy's "index writer was killed", a
    usearch save), the error that making a file in ``data_dir`` meets now, if any."""
    found = _os_error(exc)
    if found is not None or _readonly_database(exc):
        return found
    try:
        with tempfile.TemporaryFile(dir=data_dir, prefix=".write-check."):
            return None
    except OSError as probe:  # named by the folder: the probe's own file name differs at every try
        return OSError(probe.errno, probe.strerror, str(data_dir))


def diagnose(exc: BaseException, data_dir: Path) -> tuple[str, str, str]:
    """(key, what, fix) of a failed write under ``data_dir``: its cause in words and what the user can do
    (the fix is the log's for a cause it does not know)."""
    os_error = refusal(exc, data_dir)
    if os_error is not None:
        raw = os_error.filename2 if os_error.errno == errno.EISDIR and os_error.filename2 else os_error.filename
        where = raw if raw is not None else data_dir
        key = f"{type(os_error).__name__}:{os_error.errno}:{where}"
        code = os_error.errno or 0
        if code == errno.EROFS:
            return key, f"{data_dir} is on a read-only file system", "remount it read-write"
        if code in (errno.EACCES, errno.EPERM):
            what = f"no permission to write {where} ({errno.errorcode[code]})"
            return key, what, f"give this user write access to {data_dir}"
        if code == errno.EISDIR:
            return key, f"{where} is a folder where the index keeps a file", "move it away: the file is written again"
        if code == errno.ENOTDIR:
            return key, f"a file stands where a folder of the index belongs ({where})", "move that file away"
        return key, f"{describe(os_error)} ({where})", "see `foldermind logs indexer`"
    if _readonly_database(exc):
        return "sqlite:readonly", f"the database in {data_dir} is read-only", f"make {data_dir} writable again"
    return f"{type(exc).__name__}:{exc}"[:200], describe(exc), "see `foldermind logs indexer`"


def named_fault(exc: BaseException, data_dir: Path) -> bool:
    """Whether ``exc`` is a write the data folder refused (read-only, no permission, the wrong kind of entry)."""
    os_error = refusal(exc, data_dir)
    return os_error.errno in _NAMED if os_error is not None else _readonly_database(exc)


class PersistentFault:
    """The failure that holds the ingest thread now, if any (the indexer keeps another for its requests'
    writes, which the next write that goes through clears)."""

    def __init__(self, data_dir: Path, log: logging.Logger) -> None:
        self.data_dir, self.log = data_dir, log
        self.current: Fault | None = None
        self._retry_at = 0.0
        self._backoff = RETRY_MIN_S
        self._told: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, exc: BaseException, doing: str) -> Fault:
        """``doing`` failed with ``exc``: record it, log it as its first or a repeat, push the next try back."""
        key, what, fix = diagnose(exc, self.data_dir)
        now = time.monotonic()
        with self._lock:
            fault = self.current
            if fault is None:
                fault = self.current = Fault(key, doing, what, fix, time.time(), count=0)
                self._backoff = RETRY_MIN_S / 2
            fault.count += 1
            fault.doing = doing
            if now >= self._retry_at:  # a retry failed, not a straggler of the same moment: back off further
                self._backoff = min(self._backoff * 2, RETRY_MAX_S)
            if fault.count == 1 or key != fault.key:  # a fault, or another cause of the one holding indexing
                fault.key, fault.what, fault.fix = key, what, fix
                told = self._told.get(key)
                fresh = told is None or now - told > TOLD_FOR_S
                self.log.error("%s failed: %s; fix: %s", doing, what, fix, exc_info=exc if fresh else None)
                if fresh:
                    self._told[key] = now
            elif fault.count & (fault.count - 1) == 0:  # 2, 4, 8, ...: a summary, no traceback
                again = "%s still failing (%d times): %s; next try in %.0f s"
                self.log.warning(again, doing, fault.count, what, self._backoff)
            self._retry_at = now + self._backoff
            return fault

    def due(self) -> bool:
        """Whether the held work may be tried now (always, when nothing fails)."""
        return self.current is None or time.monotonic() >= self._retry_at

    def wait_ms(self) -> int | None:
        """Milliseconds until the next try (at least 1), or None when nothing fails."""
        if self.current is None:
            return None
        return max(1, int((self._retry_at - time.monotonic()) * 1000) + 1)

    def worked(self) -> None:
        """A try went through: the fault is over (said once)."""
        if self.current is None:
            return
        with self._lock:
            fault, self.current = self.current, None
            self._retry_at = 0.0
        if fault is not None:
            took = time.time() - fault.since
            again = "%s works again after %d failed tries over %.0f s (%s)"
            self.log.warning(again, fault.doing, fault.count, took, fault.what)

    @property
    def note(self) -> str:
        fault = self.current
        return fault.note if fault is not None else ""
