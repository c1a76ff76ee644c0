"""What the watcher tells the indexer: the files of a folder (``index.reconcile``) and the events since
(``index.changes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message


class FileEntry(TypedDict):
    path: str
    size: int
    mtime_ns: int


class ChangeEvent(TypedDict):
    """``kind``: created, modified, deleted or moved (then ``dest`` is the new path)."""

    kind: str
    path: str
    dest: str | None


@message("index.reconcile.request")
@dataclass(slots=True)
class ReconcileRequest(Message):
    """Watcher -> indexer: the full list of eligible files now in folder ``folder_id``. The indexer
    queues new and changed files, forgets vanished ones, and records ``skipped`` (path -> reason)."""

    folder_id: str
    """The Smart Folder's id."""
    files: list[FileEntry]
    """Every eligible file now in the folder, each `{path, size, mtime_ns}` (absolute path, bytes, modification time in
    ns)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Paths to record as skipped, with the reason (a file name that is not valid UTF-8)."""
    unsupported: dict[str, int] = field(default_factory=dict)
    """How many files of the folder no parser reads, by suffix (lower case, `""` for none): left out, counted in
    `index.status.reply`."""
    unsupported_files: list[str] = field(default_factory=list)
    """The first of those files (at most 200, paths as `skipped` shows them), listed by `index.status.reply`."""


@message("index.reconcile.reply")
@dataclass(slots=True)
class ReconcileReply(Message):
    """How many files were new, changed, unchanged and deleted."""

    new: int
    """Files recorded as new."""
    changed: int
    """Known files queued again."""
    unchanged: int
    """Known files left as they were."""
    deleted: int
    """Documents deleted because their file is gone."""


@message("index.changes.request")
@dataclass(slots=True)
class ChangesRequest(Message):
    """Watcher -> indexer: debounced file events. A move inside the indexed set keeps the document
    (and its analysis) and only updates its path."""

    events: list[ChangeEvent]
    """Each `{kind, path, dest}` (`ChangeEvent`)."""


@message("index.changes.reply")
@dataclass(slots=True)
class ChangesReply(Message):
    """How many events were taken into account."""

    accepted: int
    """Documents affected: deleted or moved ones, plus 1 per `created`/`modified` event inside a Smart Folder."""
