"""A model child process: the way the workers run torch and onnxruntime's tools without importing them.

Exporting a model (:mod:`.onnx_trace`) or quantising it (:mod:`.onnx_int8`) traces for seconds, switches
global torch state and may crash: none of that has a place in a worker that answers meanwhile. So it runs in
``python -m <module>`` at a low priority and offline (:func:`child_main`), writing a file and its check
record under temporary names beside where they go; :func:`run_child` waits for it (a ``stop`` or
:data:`EXPORT_TIMEOUT_S` kills it) and renames both into place only when the child succeeded, the file first,
so a record never vouches for half a file. A failed child's last line is its reason.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from foldermind.protocol.runtime.home import fsync_path
from foldermind.workers.embedding.onnx_model import OnnxError, check_file, reason

EXPORT_TIMEOUT_S = 600.0
EXPORT_NICE = 10
"""The export child yields the CPU to the workers that are serving or indexing meanwhile."""


def run_child(args: list[str], dest: Path, stop: threading.Event | None, what: str) -> None:
    """Run ``python -m <args>`` (``{file}`` and ``{record}`` in them replaced by temporary names beside
    ``dest``), and when it succeeded move the file it wrote to ``dest`` and its check record beside it.

    Raises :class:`OnnxError` with the child's last line when it fails, takes over
    :data:`EXPORT_TIMEOUT_S` or ``stop`` is set (the child is killed)."""
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = dest.with_name(f".{dest.name}.{tag}.tmp")
    record = check_file(dest)
    tmp_record = dest.with_name(f".{record.name}.{tag}.tmp")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", *(a.replace("{file}", str(tmp)).replace("{record}", str(tmp_record)) for a in args)]
    started = time.monotonic()
    try:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
            while True:
                try:
                    code = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    stopped = stop is not None and stop.is_set()
                    if stopped or time.monotonic() - started > EXPORT_TIMEOUT_S:
                        proc.kill()
                        proc.wait()
                        why = f"{what} stopped" if stopped else f"{what} took over {EXPORT_TIMEOUT_S:.0f} s"
                        raise OnnxError(why) from None
            if code != 0:
                out.seek(0)
                raise OnnxError(f"{what} failed (exit {code}): {_last_line(out.read())}")
        if not tmp.is_file() or tmp.stat().st_size == 0 or not tmp_record.is_file():
            raise OnnxError(f"the {what} wrote no file")
        for path in (tmp, tmp_record):
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
        # The file first, its record after: a reader between the two finds a record of another file (the
        # hash differs) and takes the lock; never a record that vouches for half a file.
        os.replace(tmp, dest)
        os.replace(tmp_record, record)
        with contextlib.suppress(OSError):
            fsync_path(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)
        tmp_record.unlink(missing_ok=True)


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in raw[-8000:].decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def child_main(work: Callable[[], str]) -> int:
    """The main of a child :func:`run_child` starts: at a low priority and offline, run ``work``; print the
    line it returns (success) or the reason it failed on stderr, which :func:`run_child` reports."""
    with contextlib.suppress(OSError):
        os.nice(EXPORT_NICE)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
    try:
        done = work()
    except Exception as exc:
        print(reason(exc), file=sys.stderr, flush=True)
        return 1
    print(done, flush=True)
    return 0
