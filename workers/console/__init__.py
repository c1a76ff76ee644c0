"""The console worker: a local web console (HTTP on 127.0.0.1 only) to see the workers and the folders live, to
search and read a hit in its document, and to restart a worker or add and remove a folder, signed in through
one-time links that ``foldermind console`` asks for over the bus.

Its own process in the map, supervised like every worker: a crash or hang restarts it and touches neither search
nor MCP. The main thread serves the bus (``console.link``); uvicorn serves the pages on a second thread
(:mod:`foldermind.workers.framework.httpserve`), and every page asks the kernel and the indexer over the bus
(:mod:`foldermind.workers.framework.asyncbus`), never their files. The URL and port actually bound go to the home's
``run/console.json`` for ``foldermind status``.

- :mod:`.auth`: links, sessions and the gate (Host, Origin, body size, security headers);
- :mod:`.pages`: the routes; :mod:`.views`: what they ask of the other workers; :mod:`.clients`: the clients' setup,
  which the kernel runs through the command line;
- ``templates/`` and ``static/``: the HTML, the stylesheet and the one script, shipped as package data.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ConsoleLinkReply, ConsoleLinkRequest
from foldermind.protocol.runtime.config import console_from_env
from foldermind.protocol.runtime.home import Home
from foldermind.workers.answers import conversations
from foldermind.workers.console.auth import SESSIONS_FILE, Gate, Links, Sessions
from foldermind.workers.console.pages import Pages
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route
from foldermind.workers.framework.httpserve import HttpServer, bind, loopback_hosts, loopback_origins

log = logging.getLogger("foldermind.console")

HOST = "127.0.0.1"
EXIT_STALLED = 4
"""How the console exits when its web server's event loop stalled (the kernel restarts it, as after any crash)."""
REQUEST_TIMEOUT_S = 10.0


class ConsoleWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = console_from_env()
        self.home = Home.resolve(ctx.home or None)
        self.links = Links(self.policy.link_ttl_s)
        self.sessions = Sessions(self.policy.session_idle_s)  # until setup opens the home's store
        self.state, self.error, self.url, self.port = "starting", "", "", 0
        self.http: HttpServer | None = None
        self.gate: Gate | None = None

    def setup(self) -> None:
        self.home.ensure()
        self.sessions = Sessions(self.policy.session_idle_s, self.home.data_dir / SESSIONS_FILE)
        self.bus = Bus(self.ctx.bus_endpoint, f"{self.ctx.name}.pages", self.policy.deadline_s)
        sock = bind(HOST, self.policy.port)
        self.port = sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}/"
        kept = self.home.data_dir / conversations.FILE
        pages = Pages(self.bus, self.links, self.sessions, self.policy, self.port, kept)
        self.gate = Gate(
            pages.app(),
            hosts=loopback_hosts(self.port),
            origins=loopback_origins(self.port),
            max_body_bytes=self.policy.max_body_kb * 1024,
        )
        self.http = HttpServer(self.gate, sock, REQUEST_TIMEOUT_S, name="console-http")
        self.http.start()
        if self.http.wait_started(15):
            self.state = "running"
            log.info("console listening on %s", self.url)
            threading.Thread(target=self._watch_loop, name="console-watchdog", daemon=True).start()
        else:
            self.state, self.error = "error", f"the HTTP server did not start: {self.http.error!r}"
            log.error("%s", self.error)
        self.status_note = f"{self.state} {self.url}"
        self.home.write_console_info(
            {"url": self.url, "port": self.port, "state": self.state, "error": self.error, "pid": os.getpid()}
        )

    def _watch_loop(self) -> None:
        """Exit when the web server's event loop stops running for ``stall_s``: the kernel then restarts the console
        (a hang that also held the GIL stops the heartbeats instead, and the kernel restarts it for that)."""
        http, stall = self.http, self.policy.stall_s
        while http is not None and http.is_alive():
            if not http.responsive(stall):
                log.error("the console's web server did not run for %g s: exiting so that it is restarted", stall)
                logging.shutdown()
                os._exit(EXIT_STALLED)
            time.sleep(min(stall, 5.0))

    def teardown(self) -> None:
        if self.http is not None:
            self.http.stop()
        self.bus.close()
        with contextlib.suppress(FileNotFoundError):
            self.home.console_file.unlink()

    def handlers(self) -> dict[str, Handler]:
        return dict([*super().handlers().items(), route(ConsoleLinkRequest, self.on_link)])

    def details(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "state": self.state,
            "sessions": len(self.sessions),
            "refused": dict(self.gate.refused) if self.gate is not None else {},
        }

    def on_link(self, req: Request[ConsoleLinkRequest]) -> Result:
        if self.state != "running":
            raise JobError(ErrorCode.SERVICE_UNAVAILABLE, f"the console is not serving: {self.error or self.state}")
        link = f"{self.url}signin?code={self.links.issue()}"
        return ConsoleLinkReply(link=link, url=self.url, expires_s=self.policy.link_ttl_s)


WORKER = ConsoleWorker
