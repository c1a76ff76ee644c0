"""The indexer's answers about single documents and the index as a whole: ``doc.read``,
``doc.similar``, ``doc.summary`` and ``index.status``.

Path rules (the indexer is the only process that knows the folders): a path must be absolute,
without NUL bytes or ``..`` segments; it is resolved with symlinks followed and must then lie
inside a registered Smart Folder, so a symlink inside a folder that points outside it is refused
like any outside path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    EmbeddingInfo,
    FailureInfo,
    FolderInfo,
    FormatInfo,
    IndexStatusReply,
    IndexStatusRequest,
    OcrInfo,
    OcrPage,
    ReadDocumentReply,
    ReadDocumentRequest,
    SearchHit,
    SimilarReply,
    SimilarRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.analysis.analyzer import analyze_stored
from foldermind.workers.indexer.search import visibility
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.search import hit_from_row
from foldermind.workers.indexer.search.snippets import snippet
from foldermind.workers.indexer.storage import analyses, database, folders
from foldermind.workers.indexer.storage.embeddings import unpack
from foldermind.workers.indexer.storage.extracted import read_lines
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex
from foldermind.workers.parser import formats
from foldermind.workers.parser.formats import ocr

MAX_PATH_CHARS = 4096
MAX_READ_CHARS = 100_000
MAX_SIMILAR = 50
MAX_FAILURES = 200
UNITS = ("chunks", "lines")
MAX_ORDINAL = 10_000_000
MAX_CHUNK_ID = 2**63 - 1  # SQLite's largest integer
NOT_ANALYZED_HINT = (
    "hint: a file is analyzed once it is indexed; wait until indexing is done (index_status over MCP, `foldermind"
    " folders show FOLDER` in a terminal, list every file that could not be indexed and why)"
)


class DocumentService:
    def __init__(
        self,
        store: Store,
        bm25: KeywordIndex,
        vectors: VectorIndex,
        encoder: QueryEncoder,
        folder_info: Callable[[folders.Folder], FolderInfo],
        embed_error: Callable[[], str | None],
    ) -> None:
        self.store, self.bm25, self.vectors, self.encoder = store, bm25, vectors, encoder
        self.folder_info, self.embed_error = folder_info, embed_error

    # ---------------------------------------------------------------------------------------
    # paths

    def resolve(self, raw: object) -> str:
        """The real path of ``raw`` if it lies inside a Smart Folder, else ``invalid_path``."""
        if not isinstance(raw, str) or not raw or len(raw) > MAX_PATH_CHARS or "\x00" in raw:
            raise JobError(ErrorCode.INVALID_PATH, "the path must be 1..4096 characters without NUL bytes")
        if not os.path.isabs(raw):
            raise JobError(ErrorCode.INVALID_PATH, f"not an absolute path: {_short(raw)}")
        if ".." in raw.replace(os.sep, "/").split("/"):
            raise JobError(ErrorCode.INVALID_PATH, f"'..' segments are not accepted: {_short(raw)}")
        real = os.path.realpath(raw)
        folder = self.store.folders.containing(real)
        visible = visibility.current()
        if folder is None or (visible is not None and not self._sees(visible, folder.id, real)):
            # A document the client's key does not see is refused in the same words as one outside every folder.
            raise JobError(ErrorCode.INVALID_PATH, f"{_short(raw)} is not inside any Smart Folder (symlinks followed)")
        return real

    def _sees(self, visible: visibility.Visible, folder_id: str, real: str) -> bool:
        state = self.store.documents.state(real) if not visible.folders or folder_id not in visible.folders else None
        return visible.sees_document(folder_id, state[0] if state is not None else None)

    def indexed_document(self, raw: object) -> tuple[str, int]:
        """(real path, document id) of an indexed file, else ``invalid_path`` / ``file_not_indexed``."""
        real = self.resolve(raw)
        if not os.path.isfile(real):
            raise JobError(ErrorCode.INVALID_PATH, f"not a file: {_short(real)}")
        state = self.store.documents.state(real)
        if state is None:
            raise JobError(
                ErrorCode.FILE_NOT_INDEXED, f"{Path(real).name} is not indexed (hidden, unsupported, or not seen yet)"
            )
        doc_id, status, error = state
        if status != "indexed" and not (status in database.SEARCHABLE and self.store.chunks.count(doc_id)):
            why = f": {error}" if error else ""
            raise JobError(ErrorCode.FILE_NOT_INDEXED, f"{Path(real).name} is not indexed (status {status}{why})")
        return real, doc_id

    # ---------------------------------------------------------------------------------------
    # doc.read

    def read(self, body: ReadDocumentRequest) -> ReadDocumentReply:
        start, end, max_chars = body.start_line, body.end_line, body.max_chars
        if not _is_int(start) or start < 1:
            raise JobError(ErrorCode.BAD_REQUEST, "start_line must be an integer >= 1")
        if end is not None and (not _is_int(end) or end < start):
            raise JobError(ErrorCode.BAD_REQUEST, "end_line must be an integer >= start_line, or null")
        if not _is_int(max_chars) or max_chars < 1:
            raise JobError(ErrorCode.BAD_REQUEST, "max_chars must be an integer >= 1")
        real, doc_id = self.indexed_document(body.path or self._chunk_file(body.chunk_id))
        if body.chunk_id is not None:
            if start != 1 or end is not None:
                raise JobError(ErrorCode.BAD_REQUEST, "give chunk_id or a line range (start_line, end_line), not both")
            start, end = self._around(real, doc_id, body)
        lines = read_lines(self.store, doc_id, start, end, min(max_chars, MAX_READ_CHARS))
        scanned = [
            OcrPage(page=page, line_start=first, line_end=last, confidence=round(confidence, 3))
            for page, first, last, confidence in self.store.chunks.ocr_pages(doc_id, lines.start_line, lines.end_line)
        ]
        return ReadDocumentReply(
            file_path=real,
            text=lines.text,
            start_line=lines.start_line,
            end_line=lines.end_line,
            total_lines=lines.total_lines,
            truncated=lines.truncated,
            ocr_pages=scanned,
        )

    def _chunk_file(self, chunk_id: object) -> str:
        """The file to read when a request names only a chunk (a search hit's ``chunk_id``)."""
        if chunk_id is None:
            raise JobError(ErrorCode.INVALID_PATH, "give the file's path, or a chunk_id from a search result")
        if not isinstance(chunk_id, int) or isinstance(chunk_id, bool):
            raise JobError(ErrorCode.BAD_REQUEST, "chunk_id must be an integer")
        path = self.store.chunks.file(chunk_id) if 0 < chunk_id <= MAX_CHUNK_ID else None
        visible = visibility.current()
        if path is not None and visible is not None:
            folder = self.store.folders.containing(path)
            if folder is None or not self._sees(visible, folder.id, path):
                path = None  # another client's chunk is no chunk for this one
        if path is None:
            raise JobError(
                ErrorCode.UNKNOWN_CHUNK,
                f"chunk {chunk_id} is no chunk now: its file changed since the search that gave it (search again)",
            )
        return path

    def _around(self, real: str, doc_id: int, body: ReadDocumentRequest) -> tuple[int, int]:
        """The lines of chunk ``chunk_id`` of the document and of ``before`` / ``after`` chunks or lines around
        it, cut at the document's first and last line."""
        chunk_id, before, after, unit = body.chunk_id, body.before, body.after, body.unit
        if not isinstance(chunk_id, int) or isinstance(chunk_id, bool):
            raise JobError(ErrorCode.BAD_REQUEST, "chunk_id must be an integer")
        if not _is_int(before) or not _is_int(after) or before < 0 or after < 0:
            raise JobError(ErrorCode.BAD_REQUEST, "before and after must be integers >= 0")
        if unit not in UNITS:
            raise JobError(ErrorCode.BAD_REQUEST, f"unit must be one of {', '.join(UNITS)}")
        stale = JobError(
            ErrorCode.UNKNOWN_CHUNK,
            f"chunk {chunk_id} is not a chunk of {Path(real).name} now: the file changed since the search that "
            "gave it (search again), or the chunk is another file's",
        )
        place = self.store.chunks.place(chunk_id) if 0 < chunk_id <= MAX_CHUNK_ID else None
        if place is None or place[0] != doc_id:
            raise stale
        ordinal = place[1]
        if unit == "chunks":
            span = self.store.chunks.lines(doc_id, max(0, ordinal - before), ordinal + min(after, MAX_ORDINAL))
        else:
            span = self.store.chunks.lines(doc_id, ordinal, ordinal)
        if span is None:  # written again between the two reads
            raise stale
        _, _, first, last = span
        if unit == "lines":
            first, last = max(1, first - before), min(self.store.chunks.last_line(doc_id), last + after)
        return first, last

    # ---------------------------------------------------------------------------------------
    # doc.similar

    def similar(self, body: SimilarRequest) -> SimilarReply:
        if not _is_int(body.top_k):
            raise JobError(ErrorCode.BAD_REQUEST, "top_k must be an integer")
        top_k = max(1, min(body.top_k, MAX_SIMILAR))
        real, doc_id = self.indexed_document(body.path)
        blobs, ndim = self.store.embeddings.of_document(doc_id), self.vectors.ndim
        embedded = [rows for _, blob in blobs if (rows := unpack(blob, ndim)) is not None]
        if not embedded:
            why = self.embed_error()
            raise JobError(
                ErrorCode.NOT_EMBEDDED, f"{Path(real).name} has no vectors yet" + (f" ({why})" if why else "")
            )
        # The document's direction: the mean of its unit vectors (:mod:`.units`). One search, and it stands
        # for the whole file, where a best-of-units match lets one shared sentence (a licence, a disclaimer)
        # make unrelated files look alike.
        centroid = np.mean(np.vstack(embedded), axis=0)
        norm = float(np.linalg.norm(centroid))
        if norm <= 1e-12:
            raise JobError(ErrorCode.NOT_EMBEDDED, f"{Path(real).name} has no usable vector")
        centroid = (centroid / norm).astype(np.float32)
        results = self._nearest_documents(centroid, doc_id, top_k, len(embedded))
        chunks = self.store.chunks.count(doc_id)
        note = None
        if len(embedded) < chunks:
            note = f"based on {len(embedded)} of {chunks} chunks: the rest are not embedded yet"
        return SimilarReply(results, note)

    def _nearest_documents(self, centroid: np.ndarray[Any, Any], doc_id: int, top_k: int, own: int) -> list[SearchHit]:
        total = len(self.vectors)
        depth = min(total, (top_k + 1) * 8 + own)
        visible = visibility.current()
        while True:
            ranked = self.vectors.search(centroid, depth)
            rows = self.store.chunks.hits([chunk_id for chunk_id, _ in ranked])
            best: dict[int, SearchHit] = {}
            for chunk_id, score in ranked:  # best first: a document's first chunk seen is its best
                row = rows.get(chunk_id)
                if row is None or row["doc_id"] == doc_id or row["doc_id"] in best:
                    continue
                if visible is not None and not visible.sees_document(row["folder_id"], row["doc_id"]):
                    continue  # outside the client key's scope
                best[row["doc_id"]] = hit_from_row(row, score, snippet(row["text"], ""))
                if len(best) == top_k:
                    return list(best.values())
            if depth >= total:
                return list(best.values())
            depth = min(total, depth * 2)

    # ---------------------------------------------------------------------------------------
    # doc.summary

    def summary(self, body: SummaryRequest) -> SummaryReply:
        real = self.resolve(body.path)  # the path it was analyzed at may not exist any more
        due = self.store.analyses.due_at(real)
        if due is not None:  # written since its last analysis, which the ingest thread makes once search is ready
            fields = analyze_stored(self.store, self.bm25, due)
            return SummaryReply(analyses.analysis_map(fields, due.written_at, due.path, due.language))
        analysis = self.store.analyses.get(real)
        state = self.store.documents.state(real)
        if analysis is None and state is not None and state[1] in ("failed", "skipped"):
            folder = self.store.folders.containing(real)
            raise JobError(
                ErrorCode.FILE_NOT_ANALYZED,
                f"{Path(real).name} could not be indexed, so it has no summary ({state[1]}: {state[2] or 'no reason'});"
                f" `foldermind folders show {folder.id if folder else 'FOLDER'} --{state[1]}` lists every such file",
            )
        if analysis is None:
            raise JobError(
                ErrorCode.FILE_NOT_ANALYZED, f"{Path(real).name} has not been analyzed yet; {NOT_ANALYZED_HINT}"
            )
        return SummaryReply(analysis)

    # ---------------------------------------------------------------------------------------
    # index.status

    def status(self, body: IndexStatusRequest) -> IndexStatusReply:
        limit = body.max_failures if _is_int(body.max_failures) else 20
        visible = visibility.current()
        sees = None if visible is None else visible.sees_folder
        folder_id = self.store.folders.find(body.folder, sees).id if body.folder else None
        if visible is not None and folder_id is not None and folder_id not in visible.folders:
            raise visibility.hidden_folder(body.folder)
        shown = [f for f in self.store.folders.all() if visible is None or f.id in visible.folders]
        infos = [self.folder_info(f) for f in shown]
        # The folders whose failures and unsupported files are listed; None: every one (an unscoped request).
        ids: list[str | None] = [folder_id] if folder_id is not None else [f.id for f in shown]
        if visible is None:
            totals = self.store.census.totals()
            # as folder_info counts them
            totals["chunks_embedded"] = self.store.embeddings.count(None, lambda: self.vectors.arriving)
            totals["files_unsupported"] = sum(self.store.folders.unsupported().values())
            ids = [folder_id]
        else:
            totals = _scoped_totals(infos)
            if visible.criteria:  # the criteria folders' documents beyond the key's path folders count too
                extra = self.store.census.totals_among(visible.docs, visible.folders, tuple(self.vectors.arriving))
                totals = {name: totals[name] + extra[name] for name in extra} | {
                    "files_unsupported": totals["files_unsupported"]
                }
        unsupported: dict[str, int] = {}
        for fid in ids:
            for suffix, n in self.store.folders.unsupported(fid).items():
                unsupported[suffix] = unsupported.get(suffix, 0) + n
        limit = max(0, min(limit, MAX_FAILURES))
        failures, indexing = (
            [
                FailureInfo(path=r["path"], folder_id=r["folder_id"], status=r["status"], error=r["error"])
                for r in self._failures(limit, ids, statuses, visible if folder_id is None else None)
            ][:limit]
            for statuses in (("failed", "skipped"), ("indexing",))
        )
        return IndexStatusReply(
            totals=totals,
            folders=infos,
            embedding=self._embedding(totals),
            recent_failures=failures,
            formats=[FormatInfo(format=f, suffixes=list(s), ocr=o) for f, s, o in formats.table()],
            ocr=_ocr_info(),
            unsupported=unsupported,
            unsupported_files=[p for fid in ids for p in self.store.folders.unsupported_files(fid)],
            indexing=indexing,
        )

    def _failures(
        self, limit: int, ids: list[str | None], statuses: tuple[str, ...], visible: visibility.Visible | None
    ) -> list[Any]:
        """The documents with ``statuses`` in folders ``ids``, and in a key's criteria folders (``visible``)."""
        rows = [r for fid in ids for r in self.store.census.recent_failures(limit, fid, statuses)]
        if visible is not None and visible.criteria:
            rows += self.store.census.failures_among(limit, visible.docs, visible.folders, statuses)
        return rows

    def _embedding(self, totals: dict[str, int]) -> EmbeddingInfo:
        error = self.embed_error()
        embedded, chunks = totals["chunks_embedded"], totals["chunks"]
        before = self.store.embeddings.reembedding()
        model, precision = self.store.embeddings.model()
        if error:
            state, note = "unavailable", error
        elif before:
            state = "reembedding"
            note = (
                f"embedding every chunk again with {model_files.vectors_key(model, precision)} (the index held"
                f" {before} vectors): {embedded} of {chunks} done; semantic search answers from keyword search"
                " until then"
            )
        elif embedded or len(self.vectors):
            state = "ready"
            note = f"{chunks - embedded} chunks waiting for vectors" if embedded < chunks else ""
        elif self.encoder.state == "ready":
            state, note = "ready", "nothing to embed yet" if not chunks else "vectors on their way"
        else:
            state, note = "loading", "no vector yet: the embedding model is loading or busy"
        return EmbeddingInfo(
            model=model or self.encoder.model_name or _configured_model(),
            precision=precision or self.encoder.precision or self.encoder.ingest.embed_quantize,
            dim=self.vectors.ndim,
            state=state,
            note=note,
            query_encoder=self.encoder.state,
            query_backend=self.encoder.backend,
            query_backend_note=self.encoder.backend_note or None,
        )


def _scoped_totals(infos: list[FolderInfo]) -> dict[str, int]:
    """The index's totals over the folders a scoped client key sees."""
    totals = {
        "files_total": sum(f["files_total"] for f in infos),
        "files_indexed": sum(f["files_indexed"] for f in infos),
        "files_failed": sum(f["files_failed"] for f in infos),
        "files_skipped": sum(f.get("files_skipped", 0) for f in infos),
        "files_unsupported": sum(f["files_unsupported"] for f in infos),
        "chunks": sum(f["chunks"] for f in infos),
        "chunks_embedded": sum(f["chunks_embedded"] for f in infos),
    }
    done = totals["files_indexed"] + totals["files_failed"] + totals["files_skipped"]
    totals["files_pending"] = max(0, totals["files_total"] - done)
    return totals


def _ocr_info() -> OcrInfo:
    from foldermind.protocol.runtime.config import ingest_from_env

    enabled, available = ingest_from_env().ocr, ocr.available()
    note = "" if enabled and available else (ocr.OCR_OFF if not enabled else ocr.OCR_MISSING)
    return OcrInfo(enabled=enabled, available=available, engine=ocr.ENGINE_MODULE, note=note)


def _configured_model() -> str:
    try:
        return model_files.model_name(model_files.model_dir())
    except model_files.ModelNotFound:
        return ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(path: str, limit: int = 200) -> str:
    return path if len(path) <= limit else path[: limit - 1] + "…"
