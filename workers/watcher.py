"""The watcher worker: watchdog observers on every Smart Folder.

On start (and on ``watch.sync``) it asks the indexer for the folders, reconciles each one against
the database by sending the full list of eligible files (so changes made while foldermind was
stopped are caught), and watches them. File events are debounced: a path is reported once it has
been quiet for ``debounce_s``, so a file being written is indexed once, after it settles. Events of a folder
being scanned are held until its reconcile is applied: the scan's list replaces the folder's rows, so a change
sent before it (a file written after the scan listed its folder) would be undone, the file deleted as gone.

What is not a regular file (a FIFO, a socket, a device, a symlink loop, a symlink leading out of the
folder) is never a document: the scan does not list it and its events are dropped, so nothing ever
opens it (opening a FIFO blocks). A path that is not valid UTF-8 cannot travel on the bus (msgpack
strings) nor live in the index (SQLite text): the file is listed as skipped under its name with each
undecodable byte shown as U+FFFD, and any event that names such a path makes the watcher rescan that
folder instead of sending the event.

Which files are documents, and in which format, is :mod:`..ingest_rules`'s (``[ingest] exclude`` and
``extra_text_suffixes``; a file with no known suffix is a text document when its first bytes are text). Files
no parser reads are not documents, but users ask why a file is not found: each scan counts them by suffix and
lists the first of them, and the indexer keeps that of the folder's last scan for ``index_status`` and
``folders show`` (a file added later is counted at the next scan; rescanning on every such event would cost
a folder walk per unrelated file).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError, ErrorCode, JobError
from foldermind.protocol.messages import (
    ChangeEvent,
    ChangesReply,
    ChangesRequest,
    FileEntry,
    FolderInfo,
    FolderListReply,
    FolderListRequest,
    ReconcileReply,
    ReconcileRequest,
    WatchSyncReply,
    WatchSyncRequest,
)
from foldermind.protocol.runtime.config import ingest_from_env
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route, testing
from foldermind.workers.ingest_rules import Rules, suffix_of
from foldermind.workers.parser.formats import SUFFIXES

log = logging.getLogger("foldermind.watcher")

NAME_NOT_UTF8 = "file name is not valid UTF-8: rename the file to index it"
_RESCAN = "\x00rescan:"
"""Key prefix of a pending folder rescan (NUL never appears in a path)."""
DELIVERY_RETRY_MAX_S = 15.0
"""The longest wait before changes the indexer refused are sent again (the wait doubles from 1 s per refusal)."""

SUPPORTED = frozenset(SUFFIXES)
"""The suffixes (lower case) the parsers read: taken from their registry, so a new format is watched the
moment it is parsed (a list kept here once missed .rst)."""
MAX_UNSUPPORTED_LISTED = 200
"""How many of a folder's unsupported files a scan lists by name (all are counted)."""
NO_RULES = Rules()
TEMPORARY = ("~$*", "*.swp", "*.swo", "*.swx", "*~", "*.part", "*.crdownload", "*.download", "*.tmp", "#*#", ".~lock*")


def eligible_name(name: str) -> bool:
    """Hidden files, editor/download temporaries and unsupported formats are never indexed."""
    return not ignored_name(name) and os.path.splitext(name)[1].lower() in SUPPORTED


def ignored_name(name: str) -> bool:
    """Hidden files and editor/download temporaries: not documents, not even unsupported ones."""
    return name.startswith(".") or any(fnmatch.fnmatch(name, pat) for pat in TEMPORARY)


def may_be_document(path: str, root: str, rules: Rules = NO_RULES) -> bool:
    """``path`` (inside ``root``) could be a document, whatever its suffix: no hidden folder on the way, not a
    temporary, not excluded."""
    rel = os.path.relpath(path, root)
    if rel.startswith("..") or any(part.startswith(".") for part in Path(rel).parts):
        return False
    return not ignored_name(os.path.basename(path)) and not rules.excluded(rel.replace(os.sep, "/"))


def document_name(path: str, root: str, rules: Rules = NO_RULES) -> bool:
    """``path`` (inside ``root``) names a document, whatever is there now: it may be one, and its name says
    a format."""
    return may_be_document(path, root, rules) and rules.known_format(os.path.basename(path)) is not None


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip("/") + "/")


def eligible_path(path: str, root: str, rules: Rules = NO_RULES) -> bool:
    """``path`` (inside ``root``) is eligible: it may be a document, it resolves, symlinks followed, to a
    regular file inside ``root``, and its name or (no known suffix) its first bytes say a format."""
    if not may_be_document(path, root, rules):
        return False
    real = os.path.realpath(path)
    return (
        _inside(real, root) and os.path.isfile(real) and rules.format_of(path, lambda r: _inside(r, root)) is not None
    )


def unread_format(path: str, root: str, rules: Rules = NO_RULES) -> bool:
    """``path``, not eligible, is a file of the folder that no parser reads: a regular file inside ``root``
    (symlinks followed) whose name says no format. A link leading out of the folder is no file of it, and
    one whose name says a format is no "format no parser reads" (it is left out as the module says)."""
    real = os.path.realpath(path)
    name = os.path.basename(path)
    return _inside(real, root) and os.path.isfile(real) and not ignored_name(name) and rules.known_format(name) is None


def sendable(path: str) -> bool:
    """``path`` can be sent and stored: it holds no undecodable byte (a surrogate escape)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: str) -> str:
    """``path`` with every undecodable byte as U+FFFD: how the index lists a file it cannot name."""
    return os.fsencode(path).decode("utf-8", "replace")


def scan(
    root: str,
    unsupported: dict[str, int] | None = None,
    rules: Rules = NO_RULES,
    listed: list[str] | None = None,
) -> tuple[list[FileEntry], dict[str, str]]:
    """Every eligible file under ``root``, and the eligible files that cannot be indexed (shown path ->
    reason); symlinked folders and excluded paths are not followed. ``unsupported``, when given, counts the
    files left out because no parser reads them (suffix -> files; ``index_status`` shows the count), and
    ``listed`` gets the first of them (shown paths)."""
    found: list[FileEntry] = []
    skipped: dict[str, str] = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            log.warning("cannot list a folder: %s", exc.strerror)
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if rules.exclude and rules.excluded(shown_path(os.path.relpath(entry.path, root))):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif eligible_path(entry.path, root, rules):
                    if not sendable(entry.path):
                        skipped[shown_path(entry.path)] = NAME_NOT_UTF8
                        continue
                    st = entry.stat(follow_symlinks=True)
                    found.append(FileEntry(path=entry.path, size=st.st_size, mtime_ns=st.st_mtime_ns))
                elif unsupported is not None and unread_format(entry.path, root, rules):
                    suffix = suffix_of(entry.name)
                    unsupported[suffix] = unsupported.get(suffix, 0) + 1
                    if listed is not None and len(listed) < MAX_UNSUPPORTED_LISTED:
                        listed.append(shown_path(entry.path))
            except OSError:
                continue
    return found, skipped


# Not opened/closed-without-write: our own hashing and parsing read every file and would wake us twice.
_WATCHED = (
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
)


class _Events(FileSystemEventHandler):
    def __init__(self, watcher: WatcherWorker, root: str) -> None:
        self.watcher, self.root = watcher, root

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = os.fsdecode(event.src_path)
        dest = os.fsdecode(event.dest_path) if getattr(event, "dest_path", "") else None
        if kind in ("opened", "closed_no_write"):
            return
        if not sendable(src) or (dest is not None and not sendable(dest)):
            # Cannot be sent as it is: the folder's scan lists it under a name that can (or forgets it).
            self.watcher.note_rescan(self.root)
            return
        rules = self.watcher.rules
        if kind == "moved" and dest:
            if event.is_directory and not may_be_document(src, self.root, rules):
                if may_be_document(dest, self.root, rules):  # out of an excluded folder: its files are new
                    self.watcher.note_rescan(self.root)
                return
            src_ok = may_be_document(src, self.root, rules)  # the indexer ignores a path it does not know
            dest_ok = (
                may_be_document(dest, self.root, rules) if event.is_directory else eligible_path(dest, self.root, rules)
            )
            if src_ok and dest_ok:
                self.watcher.note_event(ChangeEvent(kind="moved", path=src, dest=dest))
            elif dest_ok:  # e.g. a download renamed from .part to .pdf
                self.watcher.note_event(ChangeEvent(kind="created", path=dest, dest=None))
            elif src_ok:
                self.watcher.note_event(ChangeEvent(kind="deleted", path=src, dest=None))
            if not dest_ok and not event.is_directory and document_name(dest, self.root, rules):
                # Something that is no document (a link out of the folder, say) renamed over one: the indexer
                # looks at what is there now, and leaves it unindexed with the reason.
                self.watcher.note_event(ChangeEvent(kind="modified", path=dest, dest=None))
            return
        if kind == "deleted":
            self.watcher.note_event(ChangeEvent(kind="deleted", path=src, dest=None))
        elif (
            not event.is_directory
            and kind in ("created", "modified", "closed")
            and eligible_path(src, self.root, rules)
        ):
            self.watcher.note_event(ChangeEvent(kind="modified", path=src, dest=None))


class WatcherWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = ingest_from_env()
        self.rules = Rules.of(self.policy)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: dict[str, tuple[ChangeEvent, float]] = {}
        self._observers: dict[str, Any] = {}
        self._folders: dict[str, FolderInfo] = {}
        self._reconciled: set[str] = set()
        self._scanning: dict[str, int] = {}
        """Folders (root -> scans in flight) whose events wait for their reconcile."""
        self._local = threading.local()
        self._stop = threading.Event()

    def setup(self) -> None:
        threading.Thread(target=self._start_sync, name="initial-sync", daemon=True).start()
        threading.Thread(target=self._debounce_loop, name="debounce", daemon=True).start()

    def teardown(self) -> None:
        self._stop.set()
        with self._lock:
            self._changed.notify()
        for observer in self._observers.values():
            observer.stop()

    def handlers(self) -> dict[str, Handler]:
        return dict([*super().handlers().items(), route(WatchSyncRequest, self.on_sync)])

    def details(self) -> dict[str, Any]:
        return {"watching": len(self._observers)}

    def client(self) -> BusClient:
        client: BusClient | None = getattr(self._local, "client", None)
        if client is None:
            client = BusClient(self.ctx.bus_endpoint, name=f"{self.ctx.name}.{threading.current_thread().name}")
            self._local.client = client
        return client

    # ---------------------------------------------------------------------------------------

    def _start_sync(self) -> None:
        for delay in (0.0, 1.0, 2.0, 5.0, 10.0, 30.0):
            time.sleep(delay)
            try:
                self.sync()
                return
            except JobError as exc:
                if exc.code is ErrorCode.DATABASE_DAMAGED:  # nothing to watch until it is repaired (and started)
                    log.warning("folders not watched: %s", exc.message)
                    return
                log.warning("initial sync failed (%s); retrying", exc)
            except BusError as exc:
                log.warning("initial sync failed (%s); retrying", exc)
            except Exception:
                log.exception("initial sync failed; retrying")

    def on_sync(self, req: Request[WatchSyncRequest]) -> Result:
        return WatchSyncReply(self.sync())

    def sync(self) -> int:
        """Watch exactly the registered folders; reconcile the ones not watched yet."""
        folders = self.client().request("indexer", FolderListRequest(), FolderListReply, timeout=30).body.folders
        wanted = {f["path"]: f for f in folders}
        with self._lock:
            for path in [p for p in self._observers if p not in wanted]:
                self._observers.pop(path).stop()
            fresh = [f for p, f in wanted.items() if p not in self._observers]
            for folder in fresh:
                observer = Observer()
                observer.schedule(
                    _Events(self, folder["path"]), folder["path"], recursive=True, event_filter=list(_WATCHED)
                )
                observer.daemon = True
                observer.start()
                self._observers[folder["path"]] = observer
            self._folders = wanted
            self._reconciled &= set(wanted)
            # Watched before it is scanned, so nothing changed during the scan is missed; a folder whose
            # reconcile failed is scanned again by the next sync.
            todo = [f for p, f in wanted.items() if p not in self._reconciled]
        for folder in todo:
            self.reconcile(folder)
        self.status_note = f"watching {len(self._observers)} folder(s)"
        return len(self._observers)

    def reconcile(self, folder: FolderInfo) -> None:
        """Send the folder's full list of files to the indexer."""
        t0 = time.monotonic()
        root = folder["path"]
        unsupported: dict[str, int] = {}
        listed: list[str] = []
        with self._lock:
            self._scanning[root] = self._scanning.get(root, 0) + 1
        try:
            files, skipped = scan(root, unsupported, self.rules, listed)
            if testing():
                from foldermind.workers.framework import faults

                faults.watcher_hold()
            request = ReconcileRequest(
                folder_id=folder["id"], files=files, skipped=skipped, unsupported=unsupported, unsupported_files=listed
            )
            reply = self.client().request("indexer", request, ReconcileReply, timeout=120).body
        finally:
            with self._lock:
                if self._scanning[root] > 1:
                    self._scanning[root] -= 1
                else:
                    del self._scanning[root]
                self._changed.notify()  # the events it held may be ripe
        with self._lock:
            self._reconciled.add(root)
        log.info(
            "folder %s: %d files scanned in %.2f s (%d new, %d changed, %d deleted, %d skipped, %d unsupported)",
            folder["id"],
            len(files),
            time.monotonic() - t0,
            reply.new,
            reply.changed,
            reply.deleted,
            len(skipped),
            sum(unsupported.values()),
        )

    def note_rescan(self, root: str) -> None:
        """Rescan the folder at ``root`` once its events settle."""
        self.note_event(ChangeEvent(kind="rescan", path=_RESCAN + root, dest=None))

    def note_event(self, event: ChangeEvent) -> None:
        with self._lock:
            key = event["path"]
            previous = self._pending.get(key)
            if previous and previous[0]["kind"] == "moved" and event["kind"] == "modified":
                return
            self._pending[key] = (event, time.monotonic())
            self._changed.notify()

    def _held(self, event: ChangeEvent) -> bool:
        """``event`` waits for the reconcile of a folder being scanned (called with the lock held)."""
        paths = [event["path"], event.get("dest") or ""]
        return any(p.startswith(root.rstrip("/") + "/") for root in self._scanning for p in paths)

    def _debounce_loop(self) -> None:
        # Sleeps until an event arrives or the oldest pending one settles: no ticking while idle.
        refused = 0  # deliveries refused in a row (an indexer restarting, a read-only index): back off, log less
        while not self._stop.is_set():
            with self._lock:
                now = time.monotonic()
                free = {k: t for k, (e, t) in self._pending.items() if not self._held(e)}
                if not free:
                    self._changed.wait(timeout=60)
                    continue
                oldest = min(free.values())
                if now - oldest < self.policy.debounce_s:
                    self._changed.wait(timeout=self.policy.debounce_s - (now - oldest) + 0.01)
                    continue
                ripe = [k for k, t in free.items() if now - t >= self.policy.debounce_s]
                events = [self._pending.pop(k)[0] for k in ripe]
            if not events:
                continue
            rescans = [e["path"][len(_RESCAN) :] for e in events if e["kind"] == "rescan"]
            changes = [e for e in events if e["kind"] != "rescan"]
            try:
                if changes:
                    self.client().request("indexer", ChangesRequest(changes), ChangesReply, timeout=60)
                for root in rescans:
                    with self._lock:
                        folder = self._folders.get(root)
                    if folder is not None:
                        self.reconcile(folder)
                refused = 0
            except BusError as exc:
                refused += 1
                wait = min(2.0 ** (refused - 1), DELIVERY_RETRY_MAX_S)
                if refused & (refused - 1) == 0:  # the 1st, 2nd, 4th, ... refusal: repeats are counted, not each told
                    told = "could not deliver %d change(s) to the indexer (%s; %d tries); will retry in %.0f s"
                    log.warning(told, len(events), exc, refused, wait)
                with self._lock:
                    for event in events:  # a newer event for the same path wins
                        self._pending.setdefault(event["path"], (event, time.monotonic()))
                self._stop.wait(wait)
            except Exception:
                # Never let one bad batch stop event delivery for good: the folders are rescanned instead.
                log.exception("could not deliver %d change(s) to the indexer; rescanning their folders", len(events))
                with self._lock:
                    roots = {r for r in self._folders for e in changes if e["path"].startswith(r.rstrip("/") + "/")}
                for root in roots - set(rescans):
                    self.note_rescan(root)
                self._stop.wait(1.0)


WORKER = WatcherWorker
