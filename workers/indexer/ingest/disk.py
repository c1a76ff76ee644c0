"""A full disk under the index: writes pause with a doubling backoff, and resume when space comes back.

Nothing is marked failed for it: status and index_status show :attr:`DiskGuard.full` (the first failure's
time kept) until a write goes through with room to spare.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from foldermind.workers.indexer.storage.storage import LOW_SPACE_BYTES, DiskFull, free_bytes

log = logging.getLogger("foldermind.indexer.pipeline")


class DiskGuard:
    RETRY_MIN_S = 0.5
    """The first wait before writing again on a full disk; it doubles with each retry that fails."""
    RETRY_MAX_S = 5.0
    """The longest wait between two tries."""
    FREED_BYTES = 4 * 1024 * 1024
    """Space freed since the failure that ends the wait at once."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.full: DiskFull | None = None
        self._retry_at = 0.0
        self._backoff = self.RETRY_MIN_S
        self._free_at_fault = 0

    def failed(self, full: DiskFull) -> None:
        """A write found the disk full."""
        now = time.monotonic()
        if self.full is None:
            log.warning("%s; indexing paused until space is freed", full)
            self._backoff = self.RETRY_MIN_S
            self._retry_at = now + self._backoff
        else:
            full.since = self.full.since
            if now >= self._retry_at:  # a retry failed (not a straggler reply): back off further
                self._backoff = min(self._backoff * 2, self.RETRY_MAX_S)
                self._retry_at = now + self._backoff
        self.full = full
        self._free_at_fault = full.free_bytes

    def allowed(self) -> bool:
        """False while the disk is full, until the backoff has passed or space has been freed."""
        if self.full is None or time.monotonic() >= self._retry_at:
            return True
        return free_bytes(self.data_dir) >= self._free_at_fault + self.FREED_BYTES

    def wrote(self) -> None:
        """A write succeeded: a full disk is over once there is room again. A small write can fit in
        space SQLite already holds (a checkpointed WAL) on a disk still full: that alone proves nothing."""
        if self.full is not None:
            free = free_bytes(self.data_dir)
            if free < self._free_at_fault + self.FREED_BYTES and free < LOW_SPACE_BYTES:
                return
            log.warning("disk space available again: indexing resumed after %.1f s", time.time() - self.full.since)
            self.full = None
