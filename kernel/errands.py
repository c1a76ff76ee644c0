"""The command line's client-setup commands, run by the kernel for the web console (``ctl.cli``): the clients'
snippets, ``doctor``, ``config install``, the test connection, and the client keys (``token list|add|revoke``).

The client formats, ``doctor``'s checks and ``config install`` live in the command line, which no worker may
import; the console asks the kernel, and the kernel runs the very command a user would type (``foldermind doctor
--json``, ``config install --client X --dry-run``, ...) as its child and answers with what it printed. So there is
one source for each, and a change to ``config install`` reaches the console without a word changed here.

The loop never waits for a command: each runs on a thread of its own, which queues the finished result and wakes
the loop through a socket pair; the loop sends every reply itself (its tables stay single-threaded). A command
still running after ``TIMEOUT_S`` is killed and answered as failed. At most ``MAX_RUNNING`` run at once.
"""

from __future__ import annotations

import contextlib
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import CliReply, CliRequest, Envelope
from foldermind.protocol.runtime.home import Home

TIMEOUT_S = 180.0
"""A command still running after this long is killed (a test connection waits for the front door: seconds)."""
MAX_RUNNING = 4
CLIENT_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")
KEY_NAME = re.compile(r"\w[\w-]{0,62}")
"""A key's name as far as the kernel checks it (after ``--``, never an option); ``token add`` checks the rest."""
FOLDER_ID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
MAX_FOLDERS = 1000

TASKS: dict[str, Callable[[CliRequest], list[str]]] = {
    "snippets": lambda _body: ["config", "snippet", "--json"],
    "doctor": lambda _body: ["doctor", "--json"],
    "install-preview": lambda body: ["config", "install", "--client", body.client, "--dry-run"],
    "install": lambda body: ["config", "install", "--client", body.client],
    "test-connection": lambda _body: ["test-connection"],
    "keys": lambda _body: ["token", "list", "--json"],
    "key-add": lambda body: ["token", "add", "--json", "--folders", ",".join(body.folders), "--", body.client],
    "key-revoke": lambda body: ["token", "revoke", "--", body.client],
}
"""Task name -> the command's arguments (the command line checks the client and key names against its own rules)."""


def refused(body: CliRequest) -> str:
    """Why the kernel will not run ``body``'s command ("" when it will)."""
    if body.task not in TASKS:
        return f"unknown task {body.task!r}: one of {', '.join(TASKS)}"
    if body.task.startswith("install") and not CLIENT_NAME.fullmatch(body.client):
        return f"{body.client!r} is not a client name"
    if body.task.startswith("key-") and not KEY_NAME.fullmatch(body.client):
        return f"{body.client!r} is not a key name"
    if body.task == "key-add" and not 0 < len(body.folders) <= MAX_FOLDERS:
        return f"a key made here sees 1 to {MAX_FOLDERS} Smart Folders, not {len(body.folders)}"
    if body.task == "key-add" and not all(FOLDER_ID.fullmatch(f) for f in body.folders):
        return "a key's folders are given by their ids"
    return ""


Done = tuple[bytes, Envelope, CliReply | JobError]


class Errands:
    def __init__(self, home: Home) -> None:
        self.home = home
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._running = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def fileno(self) -> int:
        """Readable when a command has finished (:meth:`finished` then has its reply)."""
        return self._wake_r.fileno()

    def start(self, client: bytes, env: Envelope, body: CliRequest) -> None:
        """Start the command ``body`` asks for; its reply comes from :meth:`finished`. Raises :class:`JobError`
        for a command :func:`refused` names, or when ``MAX_RUNNING`` already run."""
        why = refused(body)
        if why:
            raise JobError(ErrorCode.BAD_REQUEST, why)
        if self._running >= MAX_RUNNING:
            raise JobError(ErrorCode.SERVICE_UNAVAILABLE, f"{MAX_RUNNING} setup commands already run: try again")
        home = ["--home", str(self.home.root)] if self.home.root is not None else []
        argv = [sys.executable, "-m", "foldermind.kernel.cli", *home, *TASKS[body.task](body)]
        self._running += 1
        threading.Thread(target=self._run, args=(client, env, argv), name=f"cli-{body.task}", daemon=True).start()

    def _run(self, client: bytes, env: Envelope, argv: list[str]) -> None:
        result: CliReply | JobError
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                cwd=self.home.data_dir,  # not the folder `start` ran in: doctor would judge its project files
            )
            result = CliReply(done.returncode, done.stdout, done.stderr)
        except subprocess.TimeoutExpired:
            result = JobError(ErrorCode.DEADLINE_EXCEEDED, f"`{' '.join(argv[3:])}` ran over {TIMEOUT_S:g} s")
        except OSError as exc:
            result = JobError(ErrorCode.INTERNAL, f"could not run the command line: {exc}")
        self._done.put((client, env, result))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def finished(self) -> list[Done]:
        """The commands that ended since the last call, each with its reply or error."""
        with contextlib.suppress(OSError):
            while self._wake_r.recv(64):
                pass
        out: list[Done] = []
        while not self._done.empty():
            out.append(self._done.get())
        self._running -= len(out)
        return out

    def close(self) -> None:
        self._wake_r.close()
        self._wake_w.close()
