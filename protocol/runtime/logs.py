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
