"""The indexer's kinds: changes from the watcher, Smart Folders, search, evidence and documents.

One module per group of kinds: :mod:`.changes` (what the watcher reports), :mod:`.folders`, :mod:`.search`,
:mod:`.evidence` (and checking an answer's sentences), :mod:`.documents` (one document: read, similar, summary)
and :mod:`.status`; its criteria folders' own kind is in :mod:`foldermind.protocol.messages.criteria`. The names
are re-exported here.
"""

from __future__ import annotations

from datetime import UTC, datetime

from foldermind.protocol.messages.indexer.changes import (
    ChangeEvent,
    ChangesReply,
    ChangesRequest,
    FileEntry,
    ReconcileReply,
    ReconcileRequest,
)
from foldermind.protocol.messages.indexer.documents import (
    ReadDocumentReply,
    ReadDocumentRequest,
    SimilarReply,
    SimilarRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.protocol.messages.indexer.evidence import (
    CheckReply,
    CheckRequest,
    Claim,
    ClaimCheck,
    EvidenceReply,
    EvidenceRequest,
    EvidenceSpan,
)
from foldermind.protocol.messages.indexer.folders import (
    DocumentEntry,
    FolderAddReply,
    FolderAddRequest,
    FolderDocumentsReply,
    FolderDocumentsRequest,
    FolderInfo,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    FolderRetryReply,
    FolderRetryRequest,
)
from foldermind.protocol.messages.indexer.search import (
    Location,
    OcrPage,
    SearchHit,
    SearchReply,
    SearchRequest,
)
from foldermind.protocol.messages.indexer.status import (
    EmbeddingInfo,
    FailureInfo,
    FormatInfo,
    IndexStatusReply,
    IndexStatusRequest,
    OcrInfo,
    StorageInfo,
    ocr_unknown,
    storage_ok,
)


def iso_time(epoch: float | None) -> str | None:
    """A time (epoch seconds on the bus) as every user-facing answer gives it, the MCP tools and the CLI's
    ``--json`` alike: ISO 8601 in UTC to the second (``2026-12-06T07:04:05Z``)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


SERVED_BY = "the indexer"
"""Who answers the kinds of this package's modules (docs/protocol.md's service table)."""


__all__ = [
    "SERVED_BY",
    "ChangeEvent",
    "ChangesReply",
    "ChangesRequest",
    "CheckReply",
    "CheckRequest",
    "Claim",
    "ClaimCheck",
    "DocumentEntry",
    "EmbeddingInfo",
    "EvidenceReply",
    "EvidenceRequest",
    "EvidenceSpan",
    "FailureInfo",
    "FileEntry",
    "FolderAddReply",
    "FolderAddRequest",
    "FolderDocumentsReply",
    "FolderDocumentsRequest",
    "FolderInfo",
    "FolderListReply",
    "FolderListRequest",
    "FolderRemoveReply",
    "FolderRemoveRequest",
    "FolderRetryReply",
    "FolderRetryRequest",
    "FormatInfo",
    "IndexStatusReply",
    "IndexStatusRequest",
    "Location",
    "OcrInfo",
    "OcrPage",
    "ReadDocumentReply",
    "ReadDocumentRequest",
    "ReconcileReply",
    "ReconcileRequest",
    "SearchHit",
    "SearchReply",
    "SearchRequest",
    "SimilarReply",
    "SimilarRequest",
    "StorageInfo",
    "SummaryReply",
    "SummaryRequest",
    "iso_time",
    "ocr_unknown",
    "storage_ok",
]
