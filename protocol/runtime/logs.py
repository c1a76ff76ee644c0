"""Logging: each process writes its own rotating file in the home's log folder."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"


def setup(log_file: Path, max_mb: int = 10, backups: int = 3, also_stderr: bool = False) -> None:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(logging.INFO)
    handler = logging.handlers.RotatingFileHandler(
        log_file, maxBytes=max_mb * 1024 * 1024, backupCount=backups, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    if also_stderr:
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(err)


def last_line(path: Path, since: int) -> str:
    """The last non-empty line written to ``path`` after byte ``since`` (at most 300 characters; '' for none): a
    worker whose start fails ends its stderr with its cause in one line, and an uncaught traceback ends with its
    exception."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, 2)
            fh.seek(max(since, end - 4096))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
