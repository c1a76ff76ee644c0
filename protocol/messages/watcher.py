"""The watcher (CLI -> watcher)."""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the watcher"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


@message("watch.sync.request")
@dataclass(slots=True)
class WatchSyncRequest(Message):
    """Indexer -> watcher (after a folder is added or removed): re-read the folder list from the indexer,
    (un)watch folders accordingly and reconcile the new ones."""


@message("watch.sync.reply")
@dataclass(slots=True)
class WatchSyncReply(Message):
    """How many folders are now watched."""

    folders: int
    """The number of folders now watched."""
