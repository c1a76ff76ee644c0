"""Smart Folders: adding, listing and removing them, the documents recorded for each, and trying its failed
files again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from foldermind.protocol.messages.criteria import CriteriaInfo
from foldermind.protocol.messages.envelope import Message, message


class FolderInfo(TypedDict):
    id: str
    name: str
    description: str
    path: str
    added_at: float
    last_organized_at: float | None
    files_total: int
    files_indexed: int
    files_failed: int
    """Files a parser could not read (a corrupt PDF, a file too large): each has its reason."""
    files_unsupported: int
    """Files in the folder that no parser reads (other formats, by their suffix), as of its last scan; they
    are not documents, so `files_total` leaves them out."""
    files_skipped: NotRequired[int]
    """Files left unindexed without being read (a name that is not UTF-8, a link out of the folder), each with its
    reason; `files_total` counts them, apart from `files_failed`."""
    unsupported: NotRequired[dict[str, int]]
    """`files_unsupported` by suffix (lower case, `""`: none), most first."""
    chunks: int
    chunks_embedded: int
    """Those chunks whose vectors a semantic search finds: a batch counts once it is in the vector index, not
    when the database has it."""
    state: str
    """``indexing`` (just added and not yet scanned, files pending, or not yet found by keyword search),
    ``embedding`` (every file found by keyword search, some chunks not yet by meaning), ``ready`` (all of it; or
    keyword search only while no embedder can embed), ``disk_full``."""
    changed_at: float | None
    """The last time one of its documents was recorded, indexed, failed or moved (epoch seconds); a reader that
    compares it (the MCP front door's resource notifications) learns that the folder's content changed."""


@message("folders.add.request")
@dataclass(slots=True)
class FolderAddRequest(Message):
    """Register ``path`` (absolute, an existing folder) as a Smart Folder; the indexer then has the watcher sync
    (``watch.sync``), so this one request is all adding a folder takes. Errors: ``invalid_path``,
    ``folder_overlap`` (inside or around a registered folder)."""

    path: str
    """Absolute path of an existing folder (the CLI makes it absolute)."""
    name: str = ""
    """Display name (cut to 200 characters); `""` means the folder's own name."""
    description: str = ""
    """What the folder holds (cut to 2000 characters)."""


@message("folders.add.reply")
@dataclass(slots=True)
class FolderAddReply(Message):
    """The registered folder."""

    folder: FolderInfo
    """The registered folder (`FolderInfo`, below)."""


@message("folders.list.request")
@dataclass(slots=True)
class FolderListRequest(Message):
    """Every Smart Folder with its indexing progress, and with ``with_criteria`` every criteria folder with its
    count."""

    with_criteria: bool = False
    """Add the criteria folders (`criteria` in the reply). Off by default: counting them resolves each one (several
    ms after an index commit: docs/tuning.md#search-filters), which the callers that poll the list for
    progress (the watcher, `status`, the front door's change feed) have no use for."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("folders.list.reply")
@dataclass(slots=True)
class FolderListReply(Message):
    """The folders, in the order they were added."""

    folders: list[FolderInfo]
    """One `FolderInfo` per folder, in the order they were added."""
    criteria: list[CriteriaInfo] = field(default_factory=list)
    """With `with_criteria`, one `CriteriaInfo` per criteria folder (`folders.criteria.add.request`), in the order they
    were added; else empty."""


@message("folders.remove.request")
@dataclass(slots=True)
class FolderRemoveRequest(Message):
    """Unregister a folder by id or path and purge its entries from every index (files are never
    touched), with the criteria folders ``within`` it; or remove a criteria folder by id or name (no
    document is purged); the indexer then has the watcher sync. Errors: ``unknown_folder``."""

    folder: str
    """The folder's id or its registered path (a trailing `/` is ignored), or a criteria folder's id or name; the CLI
    makes an existing path absolute."""


@message("folders.remove.reply")
@dataclass(slots=True)
class FolderRemoveReply(Message):
    """The folder removed, how many documents were purged and the criteria folders removed with it."""

    folder: FolderInfo | None
    """The removed folder's `FolderInfo`, as it was just before the removal; `null` when a criteria folder was named."""
    documents_purged: int
    """The number of documents deleted."""
    criteria: list[CriteriaInfo] = field(default_factory=list)
    """The criteria folders removed: the one named, or those `within` the removed folder."""


@message("folders.retry.request")
@dataclass(slots=True)
class FolderRetryRequest(Message):
    """Try the failed files of one Smart Folder (or of every folder) again: each goes back to pending with its
    attempts at zero, as a changed file does, so a file quarantined by a parser that since was fixed (or whose
    cause was) is parsed anew. Errors: ``unknown_folder``."""

    folder: str = ""
    """The folder's id, registered path or name (as `folders.remove` takes it); `""`: every Smart Folder."""


@message("folders.retry.reply")
@dataclass(slots=True)
class FolderRetryReply(Message):
    """How many failed files went back to pending."""

    retried: int
    """The files that were `failed` and are now `pending` (0: none had failed)."""
    folder: FolderInfo | None = None
    """The named folder's `FolderInfo` after the change; `null` when every folder was asked."""


class DocumentEntry(TypedDict):
    """One document of a folder's listing."""

    id: int
    """The document's id: stable while the file keeps its path or is moved; the listing's order."""
    path: str
    folder_id: str
    status: str
    """`pending`, `indexed`, `failed` or `skipped`."""
    size: int
    mtime_ns: int
    title: str | None
    format: str | None
    error: NotRequired[str | None]
    """Why a `failed` or `skipped` document is not indexed."""


@message("folders.documents.request")
@dataclass(slots=True)
class FolderDocumentsRequest(Message):
    """The documents recorded for one Smart Folder (or every folder), in id order, a page at a time: those
    with an id above ``after``, at most ``limit``. Errors: ``unknown_folder``."""

    folder: str = ""
    """The folder's id or registered path; `""` means every folder."""
    after: int = 0
    """Only documents with an id above this one (the previous page's `next_after`)."""
    limit: int = 100
    """Most documents to return; clamped to 1..500."""
    indexed_only: bool = False
    """Only documents whose status is `indexed` (those a read can open)."""
    statuses: list[str] = field(default_factory=list)
    """Only documents with one of these statuses (`pending`, `indexed`, `failed`, `skipped`); empty: any."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("folders.documents.reply")
@dataclass(slots=True)
class FolderDocumentsReply(Message):
    """A page of documents and where the next one starts."""

    documents: list[DocumentEntry]
    """At most `limit` `DocumentEntry` maps, in id order."""
    next_after: int | None = None
    """The `after` of the next page; `null` when this page is the last."""
