"""Telling MCP clients that the resources changed: ``notifications/resources/list_changed`` and
``notifications/resources/updated``, on both protocol eras the front door serves.

- The stateless 2026-07-28 revision: a client opens a ``subscriptions/listen`` stream; the SDK's listen
  handler serves it from a :class:`SubscriptionBus`, which this feed is (so it knows whether anyone
  listens), and filters each stream by the kinds and URIs it asked for.
- The initialize handshake: a session's standalone (GET) stream carries the notifications; the feed learns
  the sessions and their ``resources/subscribe`` URIs as a server middleware (the SDK serves neither
  ``resources/subscribe`` nor a list-changed capability for this era by itself), and it forgets a session
  once the session manager has.

How the feed learns that a folder's content changed: the indexer publishes no event (the kernel's PUB
socket carries worker state only, and a worker has no way to publish), so while at least one client
listens, and only then, it asks the indexer for the folder list (``folders.list``, a few counts per
folder) every :data:`POLL_S` seconds and compares each folder's counts and ``changed_at``. A change is
announced as list_changed, plus updated for that folder's resource and for every subscribed document URI
inside it (a document's own change is not told apart from its neighbours': a client rereads at worst a
document that did not change). A client key scoped to some folders is told only of theirs (:func:`sees_any`).
Nothing is logged with a path or a URI in it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import FolderInfo, FolderListReply, FolderListRequest
from foldermind.protocol.runtime.client_keys import ClientKey
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.frontdoor.keyscope import CLIENT
from foldermind.workers.frontdoor.resources import MAX_URI_CHARS, document_path, folder_uri

log = logging.getLogger("foldermind.frontdoor")

POLL_S = 2.0
MAX_SUBSCRIPTIONS = 1000  # per handshake-era session
Fingerprint = tuple[object, ...]


def fingerprint(folder: FolderInfo) -> Fingerprint:
    """What changes when a folder's listing or one of its documents does."""
    return (
        folder["path"],
        folder["name"],
        folder["files_total"],
        folder["files_indexed"],
        folder["files_failed"],
        folder["changed_at"],
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class ChangeFeed:
    """The subscription bus of the stateless era, the handshake era's sessions, and the poll between them."""

    def __init__(self, bus: Bus, sessions: Callable[[], Collection[str]], poll_s: float = POLL_S) -> None:
        self.bus = bus
        self.sessions = sessions  # the session ids the session manager still holds
        self.poll_s = poll_s
        self.listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self.keys: dict[object, ClientKey | None] = {}  # each listener's or session's client key
        self.legacy: dict[str, ServerSession] = {}
        self.subscribed: dict[str, set[str]] = {}  # handshake-era session id -> URIs
        self.listened: Counter[str] = Counter()  # URIs open subscriptions/listen streams asked for
        self.seen: dict[str, tuple[str, Fingerprint]] | None = None  # folder id -> (path, fingerprint)
        self.task: asyncio.Task[None] | None = None

    # -- the SubscriptionBus protocol (the SDK's listen handler subscribes each stream)

    async def publish(
        self, event: ServerEvent, folder_ids: Collection[str] | None = None, path_folders: Collection[str] = ()
    ) -> None:
        """``event`` to every listener, or (``folder_ids``: the folders it is about) to those whose key sees one."""
        for token, listener in list(self.listeners.items()):
            if folder_ids is not None and not sees_any(self.keys.get(token), folder_ids, path_folders):
                continue
            try:
                listener(event)
            except Exception:  # one broken stream must not starve the others
                log.exception("a subscription listener failed")
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self.listeners[token] = listener
        self.keys[token] = CLIENT.get()  # the listen request's key
        self._wake()

        def unsubscribe() -> None:
            self.listeners.pop(token, None)
            self.keys.pop(token, None)

        return unsubscribe

    # -- the server middleware (every inbound request and notification passes through it)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return self._advertise(await call_next(ctx))
        if ctx.method == "subscriptions/listen":
            return await self._listening(ctx, call_next)
        sid = self._handshake_session(ctx)
        if sid is None:
            return await call_next(ctx)
        self.legacy[sid] = ctx.session
        self.keys[sid] = CLIENT.get()
        self._wake()
        if ctx.method in ("resources/subscribe", "resources/unsubscribe"):
            uri = (ctx.params or {}).get("uri")
            if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
                raise MCPError(INVALID_PARAMS, "INVALID_ARGUMENT: uri must be a resource URI")
            uris = self.subscribed.setdefault(sid, set())
            if ctx.method == "resources/unsubscribe":
                uris.discard(uri)
            elif len(uris) >= MAX_SUBSCRIPTIONS:
                raise MCPError(INVALID_PARAMS, f"INVALID_ARGUMENT: at most {MAX_SUBSCRIPTIONS} subscriptions")
            else:
                uris.add(uri)
            return {}
        return await call_next(ctx)

    @staticmethod
    def _handshake_session(ctx: ServerRequestContext[Any, Any]) -> str | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.request is None:
            return None
        sid = ctx.request.headers.get("mcp-session-id")
        return sid if isinstance(sid, str) and sid else None

    @staticmethod
    def _advertise(result: HandlerResult) -> HandlerResult:
        """The handshake's capabilities say resources can be subscribed to and their list changes (the
        stateless era's derive from the listen handler, which the SDK registers)."""
        caps = result.get("capabilities") if isinstance(result, dict) else None
        if isinstance(caps, dict) and isinstance(caps.get("resources"), dict):
            caps["resources"] = {**caps["resources"], "subscribe": True, "listChanged": True}
        return result

    async def _listening(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A listen request lasts as long as its stream: the URIs it watches count while it does."""
        wanted = ((ctx.params or {}).get("notifications") or {}).get("resourceSubscriptions") or []
        uris = [u for u in wanted if isinstance(u, str)][:MAX_SUBSCRIPTIONS] if isinstance(wanted, list) else []
        self.listened.update(uris)
        try:
            return await call_next(ctx)
        finally:
            self.listened.subtract(uris)
            self.listened += Counter()  # drops the URIs nobody watches any more

    # -- the poll

    def listening(self) -> bool:
        live = set(self.sessions())
        for sid in [s for s in self.legacy if s not in live]:
            del self.legacy[sid]
            self.keys.pop(sid, None)
            self.subscribed.pop(sid, None)
        return bool(self.listeners or self.legacy)

    def _wake(self) -> None:
        if self.task is None or self.task.done():
            # A context of its own: the poll must not run as the client key of the request that woke it.
            self.task = asyncio.get_running_loop().create_task(self._watch(), context=contextvars.Context())

    async def _watch(self) -> None:
        while self.listening():
            try:
                folders = (await self.bus.call("indexer", FolderListRequest(), FolderListReply)).folders
            except JobError as exc:  # the indexer restarting: the next poll tells
                log.debug("resource change poll: %s", exc.code)
            else:
                now = {f["id"]: (f["path"], fingerprint(f)) for f in folders}
                before, self.seen = self.seen, now
                if before is not None and now != before:
                    ids = [fid for fid in before.keys() | now.keys() if before.get(fid) != now.get(fid)]
                    await self.announce(ids, [(now.get(fid) or before[fid])[0] for fid in ids])
            await anyio.sleep(self.poll_s)

    async def announce(self, folder_ids: list[str], folder_paths: list[str]) -> None:
        """list_changed to everyone; updated for the changed folders' resources and the subscribed documents
        inside them, to whoever asked for those URIs (a scoped client key: only of its folders)."""

        def touched(uri: str) -> list[str]:
            """The changed folders ``uri`` is about."""
            path = document_path(uri)
            if path is not None:
                return [fid for fid, folder in zip(folder_ids, folder_paths, strict=True) if _inside(path, folder)]
            return [fid for fid in folder_ids if uri == folder_uri(fid)]

        paths = {*(self.seen or {}), *folder_ids}
        await self.publish(ResourcesListChanged(), folder_ids, paths)
        for uri in sorted(set(self.listened) | {folder_uri(f) for f in folder_ids}):
            if about := touched(uri):
                await self.publish(ResourceUpdated(uri=uri), about, paths)
        for sid, session in list(self.legacy.items()):
            key = self.keys.get(sid)
            if not sees_any(key, folder_ids, paths):
                continue  # a client key scoped elsewhere is not told that another folder changed
            try:
                await session.send_resource_list_changed()
                for uri in sorted(self.subscribed.get(sid, ())):
                    if (about := touched(uri)) and sees_any(key, about, paths):
                        await session.send_resource_updated(uri)
            except Exception as exc:  # a session gone mid-send; the manager forgets it too
                log.debug("resource notification not sent: %s", type(exc).__name__)
                self.legacy.pop(sid, None)
                self.subscribed.pop(sid, None)


def sees_any(key: ClientKey | None, folder_ids: Collection[str], path_folders: Collection[str] = ()) -> bool:
    """Whether a client key sees one of these folders. A criteria folder in its scope (an id that is no path folder)
    may change with any folder: such a key is told of every change."""
    if key is None or key.folders is None:
        return True
    scope = set(key.folders)
    return bool(scope & set(folder_ids)) or bool(scope - set(path_folders) - set(folder_ids))
