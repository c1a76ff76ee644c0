"""A SQLite file only its owner can read, in WAL mode: made ``0600`` before SQLite writes a byte, for files that hold
what a person typed (the console's sign-ins, the answer engine's conversations)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def open_private(path: Path, timeout: float = 5) -> sqlite3.Connection:
    """An autocommit connection (``isolation_level=None``) any thread may use under its caller's lock."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    return db
