"""What a scoped client key sees: the documents of its Smart Folders, resolved once per request.

The front door puts the key's folder ids on every request it makes for a scoped key (``scope``, see
:class:`~foldermind.protocol.messages.SearchRequest`); :meth:`Visibility.scoped` wraps each of the indexer's
handlers, resolves that list into a :class:`Visible` and holds it for the request's thread, and the services
ask :func:`current` where they choose documents: the searches take its document set as one more filter
(:class:`.filters.Admitted`, applied inside Tantivy and the vector search alike), a path or chunk outside it is
refused with the words used for a path outside every folder, and listings leave out what it does not hold.
A request without ``scope`` (the owner's key, the CLI, the other workers) sees everything.

A scope id is a path Smart Folder's id (its documents, whatever their status) or a criteria folder's (the
documents matching it now). An id that no longer names a folder drops out: a removed folder leaves every
scope, and a scope left empty sees nothing.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.workers.framework.base import Handler, Request, Result
from foldermind.workers.indexer.criteria import CriteriaTable
from foldermind.workers.indexer.search import filters
from foldermind.workers.indexer.search.criteria_scope import CriteriaScopes
from foldermind.workers.indexer.storage.store import Store

CACHED_SCOPES = 16
_VISIBLE: contextvars.ContextVar[Visible | None] = contextvars.ContextVar("visible", default=None)


@dataclass(frozen=True, slots=True)
class Visible:
    folders: frozenset[str]
    """The path Smart Folders of the scope."""
    criteria: frozenset[str]
    """The criteria Smart Folders of the scope."""
    docs: frozenset[int]
    """Every document of the scope, of any status."""
    admitted: filters.Admitted
    """Its searchable documents, as a search filter (every other document is among ``others``)."""
    one_folder: str | None = None
    """The one path folder whose documents are all the scope's (its criteria folders hold none outside it): a
    search is then that folder's, as ``folder_id`` scopes it, rather than one filtered by the document set."""

    def sees_folder(self, folder_id: str) -> bool:
        return folder_id in self.folders or folder_id in self.criteria

    def sees_document(self, folder_id: str | None, doc_id: int | None) -> bool:
        return (folder_id is not None and folder_id in self.folders) or (doc_id is not None and doc_id in self.docs)


def current() -> Visible | None:
    """What the request being served may see; None: everything."""
    return _VISIBLE.get()


def hidden_folder(asked: str) -> JobError:
    """The refusal of a folder the key does not see: the store's own for an unknown one."""
    return JobError(ErrorCode.UNKNOWN_FOLDER, f"no Smart Folder {asked!r}")


class Visibility:
    def __init__(
        self, store: Store, resolver: filters.FilterIndex, criteria: CriteriaTable, scopes: CriteriaScopes
    ) -> None:
        self.store, self.resolver, self.criteria, self.scopes = store, resolver, criteria, scopes
        self._cache: OrderedDict[tuple[str, ...], tuple[int, Visible]] = OrderedDict()
        self._lock = threading.Lock()

    def scoped(self, handler: Handler) -> Handler:
        """``handler`` run with its request's scope resolved (:func:`current`)."""

        def run(req: Request[Any]) -> Result:
            scope = getattr(req.body, "scope", None)
            if scope is None:
                return handler(req)
            if not isinstance(scope, list) or not all(isinstance(s, str) for s in scope):
                raise JobError(ErrorCode.BAD_REQUEST, "scope must be a list of Smart Folder ids")
            token = _VISIBLE.set(self.resolve(tuple(sorted(set(scope)))))
            try:
                return handler(req)
            finally:
                _VISIBLE.reset(token)

        return run

    def resolve(self, scope: tuple[str, ...]) -> Visible:
        with self._lock:
            change = self.store.change_token()
            cached = self._cache.get(scope)
            if cached is not None and cached[0] == change:
                self._cache.move_to_end(scope)
                return cached[1]
            visible = self._resolve(scope)
            self._cache[scope] = (change, visible)
            self._cache.move_to_end(scope)
            while len(self._cache) > CACHED_SCOPES:
                self._cache.popitem(last=False)
            return visible

    def _resolve(self, scope: tuple[str, ...]) -> Visible:
        registered = {f.id for f in self.store.folders.all()}
        folders = frozenset(s for s in scope if s in registered)
        saved = [c for s in scope if s not in registered and (c := self.criteria.find(s)) is not None and c.id == s]
        docs: set[int] = set()
        for folder_id in folders:
            held = self.resolver.admitted(filters.Filters(), folder_id)
            docs |= held.docs
            docs.update(held.others)
        in_folders = len(docs)
        for c in saved:
            docs |= self.scopes.admitted(c).docs
        everything = self.resolver.admitted(filters.Filters(), None)
        frozen = frozenset(docs)
        alone = next(iter(folders)) if len(folders) == 1 and len(docs) == in_folders else None
        return Visible(folders, frozenset(c.id for c in saved), frozen, filters.intersect(everything, frozen), alone)


def limit(only: filters.Admitted | None) -> filters.Admitted | None:
    """A search's filter with the request's scope applied (unchanged for an unscoped request)."""
    visible = current()
    if visible is None:
        return only
    return visible.admitted if only is None else filters.intersect(only, visible.admitted.docs)


def visible_rows(rows: list[Any], folder_key: str = "folder_id", doc_key: str | None = None) -> list[Any]:
    """The rows (mappings with a folder id, and a document id under ``doc_key``) the request may see."""
    visible = current()
    if visible is None:
        return rows
    return [r for r in rows if visible.sees_document(r[folder_key], r[doc_key] if doc_key else None)]
