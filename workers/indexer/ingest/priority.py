"""A thread's own CPU priority (Linux gives each thread a nice value of its own)."""

from __future__ import annotations

import os
import sys
import threading


def lower_thread_priority(nice: int) -> str:
    """Give the calling thread at least ``nice`` (Linux, where a thread has a nice value of its own and the
    threads it starts inherit it); returns what was done, for describe. Elsewhere it would renice the whole
    indexer, searches included, so it is left alone there."""
    if nice <= 0:
        return "off"
    if not sys.platform.startswith("linux"):
        return f"not on {sys.platform}"
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)
        if now < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:
        return f"unchanged ({exc.strerror or exc})"
    return str(max(now, nice))
