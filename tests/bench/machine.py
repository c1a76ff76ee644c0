"""Facts about the machine a run was made on."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

import psutil
import zmq


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_rev(repo: Path) -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}{' (uncommitted changes)' if dirty else ''}" if rev else "unknown"


def version(name: str) -> str:
    """An installed distribution's version, or a dash."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def versions(facts: dict[str, str], *names: str, label: str = "") -> None:
    """Add the versions of the distributions ``names`` to ``facts``, as one "a / b / c" line."""
    facts[label or " / ".join(names)] = " / ".join(version(n) for n in names)


MCP_STACK = ("mcp", "uvicorn", "httpx2")
"""The distributions every MCP bench reports."""


def wait_for_quiet(limit_percent: float = 10.0, max_s: float = 60.0) -> tuple[float, float]:
    """Wait (at most ``max_s``) until the machine uses under ``limit_percent`` of its CPU over a
    second, so the figures are not someone else's; returns (the last load in %, seconds waited)."""
    t0 = time.monotonic()
    load = psutil.cpu_percent(interval=1.0)
    while load >= limit_percent and time.monotonic() - t0 < max_s:
        load = psutil.cpu_percent(interval=1.0)
    return load, time.monotonic() - t0


def facts(repo: Path) -> dict[str, str]:
    logical = os.cpu_count() or 0
    physical = psutil.cpu_count(logical=False)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "-"
    return {
        "date (UTC)": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "CPU": _cpu_model(),
        "cores": f"{logical} logical, {physical or '?'} physical, {usable} usable by this process",
        "RAM": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_version()} ({platform.python_implementation()})",
        "pyzmq / libzmq": f"{zmq.pyzmq_version()} / {zmq.zmq_version()}",
        "msgpack": metadata.version("msgpack"),
        "foldermind": f"{metadata.version('foldermind')}, commit {_git_rev(repo)}",
        "load average before the run": load,
    }


def facts_table(found: dict[str, str], before: tuple[float, ...], after: tuple[float, ...]) -> list[str]:
    """``found`` (:func:`facts`) and the load average before and after a run, as a markdown table."""
    return [
        "| machine | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in found.items()],
        f"| load average before / after | {', '.join(f'{x:.2f}' for x in before)} / "
        f"{', '.join(f'{x:.2f}' for x in after)} |",
    ]
