"""The index's state (``index.status``): totals, each folder's progress, the embedding model, the disk, the
formats read, OCR and the recent failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message
from foldermind.protocol.messages.indexer.folders import FolderInfo


class FailureInfo(TypedDict):
    path: str
    folder_id: str
    status: str
    error: str


class EmbeddingInfo(TypedDict):
    """The index's vectors and the query encoder (see ``index.status.reply``)."""

    model: str
    precision: str
    dim: int
    state: str
    note: str
    query_encoder: str
    query_backend: str | None
    query_backend_note: str | None


class StorageInfo(TypedDict):
    """The disk under the index: ``state`` is ``ok`` or ``disk_full`` (with what failed, where, the free
    bytes then and since when, epoch seconds)."""

    state: str
    message: str
    what: str
    path: str
    free_bytes: int
    since: float | None


class FormatInfo(TypedDict):
    """A file format the parsers read: its name, the suffixes that name it (any case), and whether its text is
    read with OCR (every image file; the pages of a PDF without a text layer)."""

    format: str
    suffixes: list[str]
    ocr: bool


class OcrInfo(TypedDict):
    """Whether scanned pages and image files are read: ``enabled`` is ``[ingest] ocr``, ``available`` that
    the engine is installed, ``engine`` its name, ``note`` why OCR does not run when it does not."""

    enabled: bool
    available: bool
    engine: str
    note: str


def ocr_unknown() -> OcrInfo:
    """OCR's state, not reported (an indexer of an older version)."""
    return OcrInfo(enabled=False, available=False, engine="", note="not reported")


def storage_ok() -> StorageInfo:
    """The disk has room (``free_bytes`` -1: not measured)."""
    return StorageInfo(state="ok", message="", what="", path="", free_bytes=-1, since=None)


@message("index.status.request")
@dataclass(slots=True)
class IndexStatusRequest(Message):
    """Totals, per-folder progress, the embedding model and its state, recent failures."""

    max_failures: int = 20
    """How many recent failures to list; clamped to 0..200."""
    folder: str = ""
    """Only this folder's failures and unsupported files (its id or registered path); `""`: every folder's. Errors:
    `unknown_folder`."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("index.status.reply")
@dataclass(slots=True)
class IndexStatusReply(Message):
    """``totals`` (files_total, files_indexed, files_failed, files_skipped, files_pending, files_unsupported, chunks,
    chunks_embedded), ``folders``, ``embedding`` (model, dim, state: ready/loading/unavailable, note) and the
    most recent failures with their reasons; ``storage``: ``{state: ok/disk_full, message, what, path,
    free_bytes, since}`` (a full disk pauses indexing, nothing is marked failed for it); the ``formats``
    read, whether ``ocr`` runs, and the ``unsupported`` files by suffix."""

    totals: dict[str, int]
    """Over every folder: `files_total`, `files_indexed`, `files_failed`, `files_skipped`, `files_pending`,
    `files_unsupported` (left out: no parser reads their suffix; as of each folder's last scan), `chunks`,
    `chunks_embedded`."""
    folders: list[FolderInfo]
    """One `FolderInfo` per folder (as `folders.list.reply`)."""
    embedding: EmbeddingInfo
    """`{model, precision, dim, state, note, query_encoder, query_backend, query_backend_note}`, see below."""
    recent_failures: list[FailureInfo]
    """Documents `failed` or `skipped`, most recently changed first, each `{path, folder_id, status, error}`
    (`FailureInfo`)."""
    storage: StorageInfo = field(default_factory=storage_ok)
    """`{state, message, what, path, free_bytes, since}`: `state` is `ok`, or `disk_full` while a write of the index
    found no room (indexing pauses and resumes by itself once space is freed; no file is marked failed for it;
    `since` is epoch seconds)."""
    formats: list[FormatInfo] = field(default_factory=list)
    """Every format the parsers read, each `{format, suffixes, ocr}` (`FormatInfo`)."""
    ocr: OcrInfo = field(default_factory=ocr_unknown)
    """`{enabled, available, engine, note}` (`OcrInfo`): whether scanned pages and image files are read."""
    unsupported: dict[str, int] = field(default_factory=dict)
    """The files left out because no parser reads their suffix, by suffix (`""`: no suffix), over every folder."""
    unsupported_files: list[str] = field(default_factory=list)
    """The first of those files (at most 200 a folder) as of each folder's last scan."""
    indexing: list[FailureInfo] = field(default_factory=list)
    """Long documents searchable in part while their parse goes on (status `indexing`), each with `error` saying
    how far: `n of N pages indexed, reading on` (as many as `max_failures`)."""
