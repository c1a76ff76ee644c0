"""The console's routes: sign-in, the overview (live over Server-Sent Events), search, a hit's preview, restart,
adding and removing a Smart Folder, the clients' setup (:mod:`.clients`), their keys (:mod:`.keys`) and activity
(:mod:`.activity`), and sign-out.

Pages are rendered on the server from the package's Jinja templates (autoescaped: a file name or a snippet is text,
never markup); the one script, ``static/console.js``, only swaps the live part of the overview as events arrive and
copies a snippet, so every page also works without it. A page without a session shows how to sign in (401); a POST
needs the session and its CSRF token, as well as the Origin :class:`~.auth.Gate` checked; one that writes a client's
file, rotates the token or revokes a key is asked for again first (the diff, a confirmation). Only such a session
manages keys: a client key opens no session, so a client holding one cannot reach these routes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import RestartReply, RestartRequest
from foldermind.protocol.runtime.config import ConsolePolicy, llm_from_env
from foldermind.workers.answers.engine import Chat
from foldermind.workers.console import activity, clients, keys, views
from foldermind.workers.console.auth import Links, Session, Sessions, csrf_ok
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.framework.base import testing

PACKAGE = "foldermind.workers.console"
RENDER_CACHE = 32
"""Rendered pages kept (each at most views.MAX_PIXELS pixels, a PNG of a few hundred KiB)."""
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def static_files() -> dict[str, tuple[bytes, str]]:
    """The package's ``static/`` files, read once: served by name from memory, so no URL reaches the disk."""
    folder = files(PACKAGE).joinpath("static")
    return {
        f.name: (f.read_bytes(), STATIC_TYPES[suffix])
        for f in folder.iterdir()
        if (suffix := "." + f.name.rpartition(".")[2]) in STATIC_TYPES
    }


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(PACKAGE, "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["mib"] = lambda n: "-" if n is None else f"{n / 1048576:.0f} MiB"
    env.filters["size"] = lambda n: f"{n / 1024:.0f} KiB" if n < 1048576 else f"{n / 1048576:.1f} MiB"
    return env


class Form(dict[str, str]):
    """A posted form: each field's first value, and ``every`` value of a field given more than once (checkboxes)."""

    def __init__(self, parsed: dict[str, list[str]]) -> None:
        super().__init__({k: v[0] for k, v in parsed.items()})
        self.every = parsed


class Pages:
    def __init__(
        self, bus: Bus, links: Links, sessions: Sessions, policy: ConsolePolicy, port: int, kept: Path | None = None
    ) -> None:
        self.bus, self.links, self.sessions, self.policy = bus, links, sessions, policy
        # chat_with_documents' engine, its own sessions (their turns kept in the SQLite file ``kept``)
        self.chat = Chat(bus, llm_from_env(), prefix="console", kept=kept)
        self.cookie = f"foldermind_console_{port}"
        self.env = templates()
        self.static = static_files()
        self.renders: OrderedDict[tuple[str, int, int, int], views.PageImage] = OrderedDict()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.overview),
                Route("/signin", self.signin),
                Route("/search", self.search),
                Route("/events", self.events),
                Route("/preview", self.preview),
                Route("/ask", self.ask),
                Route("/activity", self.activity),
                Route("/page", self.page_png),
                Route("/clients", self.clients),
                Route("/clients/doctor", self.doctor),
                Route("/clients/install", self.client_install, methods=["POST"]),
                Route("/clients/test", self.client_test, methods=["POST"]),
                Route("/clients/rotate", self.token_rotate, methods=["POST"]),
                Route("/keys", self.keys),
                Route("/keys/add", self.key_add, methods=["POST"]),
                Route("/keys/revoke", self.key_revoke, methods=["POST"]),
                Route("/restart", self.restart, methods=["POST"]),
                Route("/signout", self.signout, methods=["POST"]),
                Route("/folders/add", self.folder_add, methods=["POST"]),
                Route("/folders/remove", self.folder_remove, methods=["POST"]),
                Route("/static/{name}", self.asset),
                Route("/favicon.ico", lambda _request: Response(status_code=204)),
            ]
        )

    def render(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**values), status_code=status)

    def session(self, request: Request, touch: bool = True) -> Session | None:
        return self.sessions.get(request.cookies.get(self.cookie), touch)

    def signed_out(self, refused: bool = False) -> HTMLResponse:
        return self.render("signin.html", 403 if refused else 401, refused=refused, ttl=self.policy.link_ttl_s)

    async def asset(self, request: Request) -> Response:
        found = self.static.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("not found\n", status_code=404)
        return Response(found[0], media_type=found[1])

    async def overview(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        return await self._overview(session)

    async def _overview(self, session: Session, problem: str = "", path: str = "") -> HTMLResponse:
        data = await views.overview(self.bus)
        return self.render(
            "overview.html",
            400 if problem else 200,
            ov=data,
            csrf=session.csrf,
            page="overview",
            problem=problem,
            path=path,
        )

    async def signin(self, request: Request) -> Response:
        if not self.links.redeem(request.query_params.get("code", "")):
            return self.signed_out(refused=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(self.cookie, self.sessions.open(), httponly=True, samesite="strict", path="/")
        return response

    async def search(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        form = views.SearchForm.parse(request.query_params)
        if testing():
            from foldermind.workers.framework import faults  # only under a test switch (workers/framework/faults.py)

            faults.console_hang()
        results, folders = await asyncio.gather(views.search(self.bus, form), views.scopes(self.bus))
        return self.render(
            "search.html",
            form=form,
            results=results,
            folders=folders,
            modes=views.MODES,
            csrf=session.csrf,
            page="search",
        )

    async def preview(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        shown = await views.preview(self.bus, request.query_params)
        image: views.PageImage | str | None = None
        page = views.int_param(request.query_params, "page")
        if page and not shown.error:
            image = await self.render_page(shown.path, page, shown.passage)
        return self.render(
            "preview.html",
            404 if shown.error else 200,
            shown=shown,
            image=image,
            page_no=page,
            csrf=session.csrf,
            page="preview",
            step=views.PAGE_LINES,
        )

    async def render_page(self, path: str, page: int, lines: tuple[int, int]) -> views.PageImage | str:
        """A page image, from the cache of the last RENDER_CACHE renders or the parser (an error is not cached)."""
        key = (path, page, *lines)
        cached = self.renders.get(key)
        if cached is not None:
            self.renders.move_to_end(key)
            return cached
        made = await views.page_image(self.bus, path, page, lines)
        if isinstance(made, views.PageImage):
            self.renders[key] = made
            while len(self.renders) > RENDER_CACHE:
                self.renders.popitem(last=False)
        return made

    async def page_png(self, request: Request) -> Response:
        if self.session(request) is None:
            return PlainTextResponse("sign in first\n", status_code=401)
        params = request.query_params
        page = views.int_param(params, "page")
        lines = (views.int_param(params, "ls") or 0, views.int_param(params, "le") or 0)
        made = await self.render_page(str(params.get("path", ""))[:4096], page or 0, lines) if page else "no page"
        if isinstance(made, str):
            return PlainTextResponse(f"{made}\n", status_code=404)
        return Response(made.png, media_type="image/png")

    async def ask(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        params = request.query_params
        question = str(params.get("q", "")).strip()
        answer = await views.ask(self.chat, question, str(params.get("session", "")))
        return self.render("ask.html", answer=answer, csrf=session.csrf, page="ask")

    async def activity(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        shown = await activity.activity(self.bus, request.query_params)
        return self.render(
            "activity.html", 400 if shown.error else 200, shown=shown, csrf=session.csrf, page="activity"
        )

    async def events(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return PlainTextResponse("sign in first\n", status_code=401)
        sid = request.cookies.get(self.cookie)

        async def stream() -> AsyncIterator[dict[str, str]]:
            last = ""
            while True:
                live = self.sessions.get(sid, touch=False)  # an open page does not keep a session from idling out
                if live is None:
                    yield {"event": "signedout", "data": "signed out"}
                    return
                html = self.env.get_template("live.html").render(ov=await views.overview(self.bus), csrf=live.csrf)
                if html != last:
                    last = html
                    yield {"event": "overview", "data": html}
                await asyncio.sleep(self.policy.refresh_s)

        return EventSourceResponse(stream(), headers={"Cache-Control": "no-store"})

    async def _posted(self, request: Request) -> tuple[Session, Form] | Response:
        """The session and form of a POST, or the refusal: no session (401) or a CSRF token that does not match."""
        session = self.session(request)
        if session is None:
            return PlainTextResponse("sign in first\n", status_code=401)
        form = Form(parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
        if not csrf_ok(session, form.get("csrf", "")):
            return PlainTextResponse("missing or wrong CSRF token: reload the page\n", status_code=403)
        return session, form

    async def restart(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        _session, form = posted
        try:
            await self.bus.call("kernel", RestartRequest(form.get("worker", "")), RestartReply)
        except JobError as exc:
            return PlainTextResponse(f"{exc.message}\n", status_code=400)
        return RedirectResponse("/", status_code=303)

    async def folder_add(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        path = form.get("path", "").strip()
        problem = await views.add_folder(self.bus, path, form.get("name", "").strip())
        return await self._overview(session, problem, path) if problem else RedirectResponse("/", status_code=303)

    async def folder_remove(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        problem = await views.remove_folder(self.bus, form.get("folder", ""))
        return await self._overview(session, problem) if problem else RedirectResponse("/", status_code=303)

    async def clients(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        setup = clients.Setup()
        await clients.snippets(self.bus, setup)
        return self.render("clients.html", setup=setup, csrf=session.csrf, page="clients")

    async def doctor(self, request: Request) -> Response:
        """Doctor's findings: a page of its own, which the Clients page's script loads into itself (doctor takes
        seconds, the snippets do not wait for it)."""
        session = self.session(request)
        if session is None:
            return self.signed_out()
        setup = clients.Setup()
        await clients.doctor(self.bus, setup)
        return self.render("doctor.html", setup=setup, csrf=session.csrf, page="clients")

    async def client_install(self, request: Request) -> Response:
        """The diff of ``config install`` first; the change is made only by a second post naming that diff, and is
        shown again instead when the file changed meanwhile."""
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        name, confirmed = form.get("client", "")[:40], form.get("confirm", "")
        change = await clients.install(self.bus, name, write=False)
        stale = bool(confirmed) and not change.error and change.digest != confirmed
        if confirmed and not stale and not change.error and change.diff:
            change = await clients.install(self.bus, name, write=True)
            return self.render("install.html", change=change, done=True, stale=False, csrf=session.csrf, page="clients")
        status = 400 if change.error else 200
        return self.render(
            "install.html", status, change=change, done=False, stale=stale, csrf=session.csrf, page="clients"
        )

    async def client_test(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, _form = posted
        ok, said = await clients.test_connection(self.bus)
        return self.render("tested.html", 200 if ok else 502, ok=ok, said=said, csrf=session.csrf, page="clients")

    async def token_rotate(self, request: Request) -> Response:
        """A rotation asks first (the URL-form clients lose their access until they get the new token)."""
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        if form.get("confirm") != "rotate":
            return self.render("rotate.html", asked=True, problem="", csrf=session.csrf, page="clients")
        problem = await clients.rotate(self.bus)
        return self.render(
            "rotate.html", 502 if problem else 200, asked=False, problem=problem, csrf=session.csrf, page="clients"
        )

    async def keys(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.signed_out()
        return await self._keys(session)

    async def _keys(self, session: Session, problem: str = "", name: str = "") -> HTMLResponse:
        shown = await keys.listed(self.bus)
        status = 400 if problem else 200
        return self.render(
            "keys.html", status, shown=shown, problem=problem, typed=name, csrf=session.csrf, page="keys"
        )

    async def key_add(self, request: Request) -> Response:
        """A scoped key, its token shown on this page only (it is never shown again)."""
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        name = form.get("name", "").strip()[:63]
        made = await keys.add(self.bus, name, form.every.get("folder", [])[:1000])
        if made.error:
            return await self._keys(session, made.error, name)
        return self.render("key_made.html", made=made, csrf=session.csrf, page="keys")

    async def key_revoke(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        problem = await keys.revoke(self.bus, form.get("name", "")[:63])
        return await self._keys(session, problem) if problem else RedirectResponse("/keys", status_code=303)

    async def signout(self, request: Request) -> Response:
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        self.sessions.close(request.cookies.get(self.cookie))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(self.cookie, httponly=True, samesite="strict", path="/")
        return response
