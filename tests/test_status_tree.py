"""The processes status counts in the kernel's tree RSS: read from the tree's own /proc files, the same ones
psutil finds by reading every process on the machine."""

from __future__ import annotations

import subprocess
import sys
import threading

import psutil

from foldermind.kernel.kernel import _children_rss, _descendants
from tests.helpers import wait_for

GRANDPARENT = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print('ready', flush=True); sys.stdin.read()"
)


def test_the_tree_holds_children_started_from_any_thread_and_their_children_as_psutil_finds_them() -> None:
    me = psutil.Process()
    started: list[subprocess.Popen[str]] = []

    def spawn() -> None:  # a child of a thread other than the main one is listed in that thread's file
        started.append(
            subprocess.Popen(
                [sys.executable, "-c", GRANDPARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        )

    spawn()
    thread = threading.Thread(target=spawn)
    thread.start()
    thread.join()
    try:
        for child in started:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        wait_for(lambda: all(psutil.Process(c.pid).children() for c in started), timeout=30)
        expected = {p.pid for p in me.children(recursive=True)}
        assert len(expected) >= 4  # two children, each with its own
        assert set(_descendants(me)) == expected
        assert len(_descendants(me)) == len(expected), "each process once"
        assert _children_rss(me) >= sum(psutil.Process(pid).memory_info().rss for pid in expected) * 0.5
    finally:
        for child in started:
            grandchildren = psutil.Process(child.pid).children()
            child.kill()
            child.wait()
            for g in grandchildren:
                g.kill()
    wait_for(lambda: not set(_descendants(me)) & expected, timeout=30)
