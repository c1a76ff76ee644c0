"""The workers' way to get a checked ONNX export of a model: :func:`open_checked`.

It reuses the cached file in the machine's model cache when it matches its check record
(:mod:`foldermind.workers.embedding.onnx_model` loads and checks it), else exports it again, once per machine, in a
child process (:mod:`.onnx_trace`, run by :mod:`.onnx_child`): the worker never imports torch. An advisory
lock beside the file keeps a second home (or the other worker of this one) from exporting the same model
meanwhile: it waits, then loads what the first one wrote. When that export failed, the waiter gets its reason
(kept beside the file until an export succeeds) instead of running the same child on the same files again.
Exports of other versions of the model that no home has used for a month, and temporary files a killed export
left, are removed after a load.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from foldermind.workers.embedding import onnx_trace
from foldermind.workers.embedding.onnx_child import EXPORT_TIMEOUT_S, run_child
from foldermind.workers.embedding.onnx_model import (
    Check,
    OnnxEncoder,
    OnnxError,
    cache_file,
    check_file,
    int8_file,
    load_cached,
    model_digest,
    reason,
)

log = logging.getLogger("foldermind.onnx")

LOCK_POLL_S = 0.2
UNUSED_EXPORT_S = 30 * 86400.0
"""An export of another version of the model is removed once no home has loaded it for this long: the
cache is shared, and two homes may well run two versions."""
_TEMP_RE = re.compile(r"^\..+\.onnx(\.checked\.json)?\.\d+-[0-9a-f]+\.tmp$")
_STALE_TEMP_S = 3600.0

export_count = 0
"""Exports this process has run (the tests check that a cached file is reused)."""


# ---------------------------------------------------------------------------------------------
# the workers' entry point


@dataclass(frozen=True, slots=True)
class Loaded:
    encoder: OnnxEncoder
    path: Path
    check: Check
    exported: bool
    """True when this load exported the file; False when a cached, checked file was reused."""
    cosine: float
    """The least cosine of this load's probes against the recorded torch vectors."""
    seconds: float
    note: str
    """Why a cached file was replaced, else empty."""


def open_checked(
    model_dir: Path,
    name: str,
    cache_dir: Path,
    threads: int,
    stop: threading.Event | None = None,
    exporter: str = "auto",
    asked: float | None = None,
) -> Loaded:
    """A checked ONNX encoder for the model at ``model_dir``: the cached export if it matches its check
    record, else a fresh export (by a child process, checked there against torch). Never imports torch in
    this process. Raises :class:`OnnxError` when neither is usable, also when an export of the same files
    failed since ``asked`` (wall clock; default now: a caller that waited on a lock of its own first, as the
    int8 copy's, passes when it began)."""
    started = time.monotonic()
    asked = time.time() if asked is None else asked
    try:
        path = cache_file(cache_dir, name, model_digest(model_dir))
    except OSError as exc:
        raise OnnxError(f"the model's files are unreadable: {reason(exc)}") from exc
    why = ""
    if path.is_file():
        try:
            return _loaded(path, model_dir, threads, started)
        except OnnxError as exc:
            why = str(exc)
    with export_lock(path, stop):
        if path.is_file():  # another process may have exported it while this one waited for the lock
            with contextlib.suppress(OnnxError):
                return _loaded(path, model_dir, threads, started)
        failed = _failed_since(path, asked)
        if failed:  # the export this one waited for failed on the same model files: it would fail alike
            raise OnnxError(failed)
        if why:
            log.warning("%s (%s); exporting it again", why, path.name)
        if stop is not None and stop.is_set():
            raise OnnxError("export stopped")
        try:
            export(model_dir, path, stop, exporter)
        except OnnxError as exc:
            _note_failure(path, str(exc))
            raise
        failure_file(path).unlink(missing_ok=True)
        note = f"exported again: {why}" if why else ""
        try:
            loaded = _loaded(path, model_dir, threads, started, note, exported=True)
        except OnnxError:
            path.unlink(missing_ok=True)  # never leave a file that fails its check to the next start
            check_file(path).unlink(missing_ok=True)
            raise
    with contextlib.suppress(OSError):
        _tidy(path)
    return loaded


def _loaded(
    path: Path, model_dir: Path, threads: int, started: float, note: str = "", exported: bool = False
) -> Loaded:
    encoder, check, cosine = load_cached(path, model_dir, threads)
    return Loaded(encoder, path, check, exported, cosine, time.monotonic() - started, note)


def failure_file(dest: Path) -> Path:
    """Where the reason of the last failed export of ``dest`` is kept (beside it, hidden; removed by the
    next export that succeeds)."""
    return dest.with_name(f".{dest.name}.failed")


def _note_failure(dest: Path, why: str) -> None:
    if why.endswith(" stopped"):  # this process was told to stop: says nothing of the model's files
        return
    with contextlib.suppress(OSError):
        failure_file(dest).write_text(why, encoding="utf-8")


def _failed_since(dest: Path, since: float) -> str:
    """The reason of an export of ``dest`` that failed after ``since`` (wall clock), else "".

    The embedder and the indexer's query encoder ask for the same export at once: one exports, the other
    waits on the lock. When the first one fails, its waiter would run the same child on the same files
    (its name holds their digest) and fail alike: a damaged model cost two exports of ~4-9 CPU-s each at
    every start (tests/test_resource_faults.py's corrupt model: 3 export children in one run, 2 at start).
    A later attempt (the embedder's retry, a restart) still exports again."""
    marker = failure_file(dest)
    try:
        if marker.stat().st_mtime < since:
            return ""
        return marker.read_text(encoding="utf-8")
    except OSError:
        return ""


@contextlib.contextmanager
def export_lock(dest: Path, stop: threading.Event | None) -> Iterator[None]:
    """One export of ``dest`` at a time on this machine (any home, any worker): an advisory lock file
    beside it, polled so that ``stop`` still ends the wait."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the renames alone keep the files whole; two exports may both run
        yield
        return
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(dest.with_name(f".{dest.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OnnxError(f"cannot use the model cache {dest.parent}: {reason(exc)}") from exc
    try:
        waited = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - waited > EXPORT_TIMEOUT_S + 60:
                    raise OnnxError("another process has been exporting this model for too long") from None
                if (stop or threading.Event()).wait(LOCK_POLL_S) and stop is not None:
                    raise OnnxError("export stopped") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _tidy(dest: Path) -> None:
    """Remove this model's exports for other digests that no home has loaded for a month, and temporary
    files a killed export left."""
    prefix = dest.name[: -len("-0123456789abcdef.onnx")]
    pattern = re.compile(rf"^{re.escape(prefix)}-[0-9a-f]{{16}}(\.int8)?\.onnx$")
    now = time.time()
    for path in dest.parent.iterdir():
        with contextlib.suppress(OSError):
            if path.name not in (dest.name, int8_file(dest).name) and pattern.match(path.name):
                record = check_file(path)
                used = record.stat().st_mtime if record.exists() else path.stat().st_mtime
                if now - used > UNUSED_EXPORT_S:
                    path.unlink()
                    record.unlink(missing_ok=True)
                    log.info("removed %s (an export of another version of the model, unused for 30 days)", path.name)
            elif _TEMP_RE.match(path.name) and now - path.stat().st_mtime > _STALE_TEMP_S:
                path.unlink()


def export(model_dir: Path, dest: Path, stop: threading.Event | None = None, exporter: str = "auto") -> None:
    """Export the model at ``model_dir`` to ``dest`` and check it against torch, in a child process; the
    file and its check record are renamed into place only when both are complete.

    Raises :class:`OnnxError` with the child's reason when it fails, times out or ``stop`` is set.
    """
    global export_count
    if exporter not in onnx_trace.EXPORTERS:
        raise ValueError(f"exporter must be one of {onnx_trace.EXPORTERS}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OnnxError(f"cannot create the model cache {dest.parent}: {reason(exc)}") from exc
    started = time.monotonic()
    export_count += 1
    run_child([onnx_trace.MODULE, str(model_dir), "{file}", "{record}", "--exporter", exporter], dest, stop, "export")
    log.info("exported and checked %s as %s in %.1f s", model_dir, dest.name, time.monotonic() - started)
