"""``doctor``'s check of the web console's port: who holds it, and whether the console answers on the one it bound.

Running, the console wrote the URL it bound to ``run/console.json``; it is asked for its sign-in page there, as a
browser would, and a console whose worker runs but whose web server does not answer is a failure (the kernel
restarts a worker whose heartbeats stop, not one whose web server alone is stuck). Not running, the configured port
is tried: held by another program, the console would bind another port at start, and `foldermind console` still
finds it, but a bookmark would not.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
from urllib.parse import urlsplit

import psutil

from foldermind.kernel.cli.common import typed
from foldermind.protocol.runtime.config import SupervisorConfig
from foldermind.protocol.runtime.home import Home

PROBE_S = 5.0
"""How long the console's sign-in page may take to come (it answers in milliseconds; a busy machine is slower)."""
HOST = "127.0.0.1"

Found = tuple[str, str, str, str]
"""(name, status, detail, fix): a doctor check."""


def listener(host: str, port: int) -> str | None:
    """Who holds ``port``, or None when it can be bound. SO_REUSEADDR: a port in TIME_WAIT is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return None
        except OSError:
            pass
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections("inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                return f"pid {conn.pid}, {psutil.Process(conn.pid).name()}"
    return "by another program"


def answers(url: str) -> str:
    """ "" when ``url`` answers an HTTP request within PROBE_S, else why not."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=PROBE_S)
    try:
        conn.request("GET", "/", headers={"Host": parts.netloc})
        conn.getresponse().read()
        return ""
    except TimeoutError:
        return f"no answer within {PROBE_S:g} s"
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def console_checks(home: Home, config: SupervisorConfig) -> list[Found]:
    spec = config.workers.get("console")
    if spec is None or not spec.enabled:
        return [("console", "info", "the web console is off ([workers.console] enabled = false)", "")]
    port = config.console.port
    restart = f"`{typed(home, 'restart', 'console')}` (`{typed(home, 'logs', 'console')}` says what happened)"
    if home.running_pid() is None:
        owner = listener(HOST, port) if port else None
        if owner is None:
            return [("console", "ok", f"port {port or 'any'} is free; the console binds it at start", "")]
        return [
            (
                "console",
                "warn",
                f"the console's port {port} is taken ({owner}): it would bind another port at start",
                f"stop that program, or set [console] port in {home.supervisor_override}",
            )
        ]
    info = home.serving_console_info()
    if info is None:
        return [("console", "warn", "foldermind runs but its console is not serving (`status` says why)", restart)]
    url = str(info.get("url", ""))
    why = answers(url)
    if why:
        return [("console", "fail", f"the console's worker runs but {url} does not answer ({why})", restart)]
    bound = urlsplit(url).port
    if port and bound != port:
        owner = listener(HOST, port)
        held = f" (held: {owner})" if owner else ""
        return [
            (
                "console",
                "warn",
                f"the console serves {url}, not its port {port}{held}, which was taken at start",
                f"free port {port} and {restart.split(' (')[0]}, or set [console] port in {home.supervisor_override}",
            )
        ]
    return [("console", "ok", f"the console serves {url} (`{typed(home, 'console')}` opens it signed in)", "")]
