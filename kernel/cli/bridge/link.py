"""Where the stdio bridge finds its front door, with which token, and what it answers when it cannot.

Nothing is read once for good: the URL (``run/mcp.json``, trusted only while the home's kernel holds its lock)
and the bearer token (the home's token store) are read again whenever a request could not use them, so a
rotated token, a restart or a new port is followed without the client noticing.

With no supervisor running, a request starts one in the background (:class:`Starter`: one ``foldermind
start`` at a time, at most one every :data:`START_EVERY_S`), as launching the bridge does, and waits at most
:data:`CALL_WAIT_S` for a front door. A request that cannot be served gets a typed JSON-RPC error
(:class:`BridgeFailure`) instead of waiting on: ``NOT_RUNNING`` (with why the start failed, if it did),
``TOKEN_REFUSED``, or, for a request the connection dropped under, ``CONNECTION_LOST`` (retryable).
"""

from __future__ import annotations

import collections
import enum
import subprocess
import sys
import threading
import time
from typing import IO, Any

import anyio

from foldermind.protocol.errors import ErrorCode
from foldermind.protocol.runtime.home import Home, UnsafeHomeError
from foldermind.protocol.runtime.token_store import TokenStore

CALL_WAIT_S = 4.0
"""How long one request waits for a front door (and a start) before it is answered NOT_RUNNING."""
RESTART_WAIT_S = 30.0
"""How long one request waits for a front door while the home's kernel runs (a front door restarting imports the
MCP SDK and binds its port again: seconds, more on a busy machine; slow is not hung)."""
BROKE = "the connection to the front door broke before the answer came"
"""What a request whose answer was lost is told (its own error says what happened next)."""
START_EVERY_S = 10.0
"""At most one supervisor start in this many seconds, whatever the client asks meanwhile."""


class BridgeFailure(enum.Enum):
    """The bridge's own JSON-RPC errors: their number, and their entry in the error table."""

    NOT_RUNNING = -32010, ErrorCode.NOT_RUNNING
    TOKEN_REFUSED = -32011, ErrorCode.TOKEN_REFUSED
    CONNECTION_LOST = -32012, ErrorCode.CONNECTION_LOST

    def __init__(self, rpc: int, code: ErrorCode) -> None:
        self.rpc = rpc
        self.code = code

    def error(self, message: str) -> dict[str, Any]:
        """The JSON-RPC ``error`` member: the number, the sentence, and ``{code, retryable}`` as data."""
        return {"code": self.rpc, "message": message, "data": {"code": self.code.mcp, "retryable": self.code.retryable}}


def serving_url(home: Home) -> str | None:
    """Where the front door serves now (a restarted one may have bound another port), or None."""
    info = home.serving_mcp_info()
    return str(info["url"]) if info and info.get("url") else None


class Starter:
    """``foldermind start`` for the home, in the background: one at a time, at most one every
    :data:`START_EVERY_S`. Its output goes to the bridge's stderr; the last line of a failed one is kept."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = -START_EVERY_S
        self.failure = ""
        """The last line of the last start that failed, until one succeeds."""
        self._tail: collections.deque[str] = collections.deque(maxlen=1)

    def running(self) -> bool:
        if self.proc is None:
            return False
        code = self.proc.poll()
        if code is None:
            return True
        if code != 0:
            self.failure = self._tail[0] if self._tail else f"`foldermind start` exited with status {code}"
        else:
            self.failure = ""
        self.proc = None
        return False

    def kick(self) -> None:
        """Start the supervisor unless a start runs or one began less than START_EVERY_S ago."""
        if self.running() or time.monotonic() - self.started_at < START_EVERY_S:
            return
        args = [sys.executable, "-m", "foldermind.kernel.cli"]
        if self.home.root is not None:
            args += ["--home", str(self.home.root)]
        print("foldermind: starting the supervisor", file=sys.stderr, flush=True)
        self.started_at = time.monotonic()
        self._tail.clear()
        self.proc = subprocess.Popen(
            [*args, "start"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert self.proc.stdout is not None
        threading.Thread(target=self._echo, args=(self.proc.stdout,), daemon=True).start()

    def _echo(self, out: IO[bytes]) -> None:
        with out:
            for raw in out:
                line = raw.decode(errors="replace").rstrip()
                print(line, file=sys.stderr, flush=True)
                if line.strip():
                    self._tail.append(line.strip())


class Link:
    """The front door's URL and token as last read, read again on demand (:meth:`serving`, :meth:`reread_token`)."""

    def __init__(self, home: Home, key: str = "") -> None:
        self.resolved = home  # as this process resolved it; ``home``: as its kernel is reached now (follow)
        self.home = home
        self.key = key  # a client key's name; "": the owner's token
        self.url: str | None = None
        self.token: str | None = None
        self.starter = Starter(home)

    async def serving(self, wait_s: float = CALL_WAIT_S, start: bool = True, running_wait_s: float = 0.0) -> str | None:
        """The front door's URL, read again; while none serves, wait up to ``wait_s`` (starting the supervisor
        if none runs and ``start``), or up to ``running_wait_s`` while the home's kernel runs (its front door
        restarting), then None. Reads the token again too."""
        began = time.monotonic()
        while True:
            self.follow()
            url = serving_url(self.home)
            if url is not None:
                self.url = url
                await self.reread_token()
                return url
            if start and self.home.running_pid() is None:
                self.starter.kick()
            running = running_wait_s > wait_s and self.home.running_pid() is not None
            give_up = began + (running_wait_s if running else wait_s)
            if time.monotonic() >= give_up or (self.starter.failure and not self.starter.running()):
                return None
            await anyio.sleep(0.1)

    def follow(self) -> None:
        """Reach the kernel that serves this home's index now, wherever its sockets are (a kernel started again
        from a shell with another XDG_RUNTIME_DIR than this bridge's); an unsafe folder is not followed, and the
        start the bridge then tries says why."""
        try:
            self.home = self.starter.home = self.resolved.serving()
        except UnsafeHomeError:
            self.home = self.starter.home = self.resolved

    async def reread_token(self) -> None:
        """Read the token again from the store (kept as it was when the store has none to give)."""
        token = await anyio.to_thread.run_sync(TokenStore(self.home, self.key).stored)
        if token is not None:
            self.token = token

    def why_not_serving(self) -> str:
        """The NOT_RUNNING sentence for now: what runs, what the bridge did about it."""
        if self.home.running_pid() is not None:
            state = (self.home.read_mcp_info() or {}).get("state", "starting")
            return (
                f"foldermind is not serving MCP yet (its front door: {state}): ask again in a few seconds; "
                "`foldermind status` shows it"
            )
        if self.starter.running():
            return "foldermind is not running; the bridge is starting it: ask again in a few seconds"
        if self.starter.failure:
            return f"foldermind is not running and could not be started: {self.starter.failure}"
        return "foldermind is not running: `foldermind start` starts it (the bridge tries again shortly)"
