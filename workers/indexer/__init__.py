"""The indexer worker: the only writer of SQLite, Tantivy (and, next, usearch); it answers
folder requests, file changes from the watcher and searches.

Its serving thread handles requests; its ingest thread (:mod:`.pipeline`) parses and writes.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from foldermind.kernel.config import ingest_from_env
from foldermind.kernel.home import Home
from foldermind.protocol import frames
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import (
    ChangesReply,
    ChangesRequest,
    EmbedReply,
    EmbedRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderInfo,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    ReconcileReply,
    ReconcileRequest,
    SearchHit,
    SearchReply,
    SearchRequest,
)
from foldermind.workers.base import Handler, JobError, Request, Result, Worker, WorkerContext
from foldermind.workers.indexer.bm25 import KeywordIndex, cjk_grams
from foldermind.workers.indexer.pipeline import Pipeline
from foldermind.workers.indexer.store import Folder, Store, StoreError
from foldermind.workers.indexer.vectors import VectorIndex

log = logging.getLogger("foldermind.indexer")

MAX_QUERY_CHARS = 1000
MODES = ("hybrid", "semantic", "keyword")


class IndexerWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = ingest_from_env()
        self.data_dir = Home.resolve(ctx.home or None).data_dir
        self._client: BusClient | None = None

    def setup(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = Store(self.data_dir / "index.sqlite")
        self.bm25 = KeywordIndex(self.data_dir / "tantivy")
        self.vectors = VectorIndex(self.data_dir / "vectors.usearch", int(self.store.get_meta("vector_dim", "384")))
        self.pipeline = Pipeline(self.store, self.bm25, self.vectors, self.ctx.bus_endpoint, self.policy, self.ctx.name)
        self.pipeline.start()

    @property
    def client(self) -> BusClient:
        if self._client is None:
            self._client = BusClient(self.ctx.bus_endpoint, name=f"{self.ctx.name}.search")
        return self._client

    def teardown(self) -> None:
        self.pipeline.stop()
        self.pipeline.join(timeout=10)
        self.bm25.close()

    def handlers(self) -> dict[str, Handler]:
        return {
            **super().handlers(),
            FolderAddRequest.KIND: self.on_folder_add,
            FolderListRequest.KIND: self.on_folder_list,
            FolderRemoveRequest.KIND: self.on_folder_remove,
            ReconcileRequest.KIND: self.on_reconcile,
            ChangesRequest.KIND: self.on_changes,
            SearchRequest.KIND: self.on_search,
        }

    def details(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "chunks_in_bm25": self.bm25.num_docs,
            "vectors": len(self.vectors),
            "embedding": self.pipeline.embed_error or "ok",
        }

    # ---------------------------------------------------------------------------------------
    # folders

    def folder_info(self, folder: Folder) -> FolderInfo:
        p = self.store.progress(folder.id)
        state = "indexing" if p["files_pending"] else "ready"
        return FolderInfo(
            id=folder.id,
            name=folder.name,
            description=folder.description,
            path=folder.path,
            added_at=folder.added_at,
            last_organized_at=folder.last_organized_at,
            files_total=p["files_total"],
            files_indexed=p["files_indexed"],
            files_failed=p["files_failed"],
            chunks=p["chunks"],
            chunks_embedded=p["chunks_embedded"],
            state=state,
        )

    def on_folder_add(self, req: Request) -> Result:
        assert isinstance(req.body, FolderAddRequest)
        raw = req.body.path
        if not raw or "\x00" in raw or not os.path.isabs(raw):
            raise JobError("invalid_path", f"not an absolute path: {raw!r}")
        path = os.path.realpath(raw)
        if not os.path.isdir(path):
            raise JobError("invalid_path", f"not a folder: {raw}")
        try:
            folder = self.store.add_folder(path, req.body.name[:200], req.body.description[:2000])
        except StoreError as exc:
            raise JobError(exc.code, str(exc)) from exc
        log.info("Smart Folder %s registered", folder.id)
        return FolderAddReply(self.folder_info(folder))

    def on_folder_list(self, req: Request) -> Result:
        return FolderListReply([self.folder_info(f) for f in self.store.folders()])

    def on_folder_remove(self, req: Request) -> Result:
        assert isinstance(req.body, FolderRemoveRequest)
        try:
            folder = self.store.find_folder(req.body.folder)
        except StoreError as exc:
            raise JobError(exc.code, str(exc)) from exc
        info = self.folder_info(folder)
        purged = self.store.remove_folder(folder.id)
        self.pipeline.wake()
        log.info("Smart Folder %s removed (%d documents purged)", folder.id, len(purged))
        return FolderRemoveReply(info, len(purged))

    # ---------------------------------------------------------------------------------------
    # changes from the watcher

    def on_reconcile(self, req: Request) -> Result:
        assert isinstance(req.body, ReconcileRequest)
        body = req.body
        try:
            folder = self.store.find_folder(body.folder_id)
        except StoreError as exc:
            raise JobError(exc.code, str(exc)) from exc
        known = self.store.documents_in(folder.id)
        new = changed = unchanged = 0
        seen: set[str] = set()
        with self.store.tx() as db:
            for entry in body.files:
                path = entry["path"]
                seen.add(path)
                doc = known.get(path)
                if entry["size"] > self.policy.max_file_bytes:
                    reason = f"file too large ({entry['size']} bytes > {self.policy.max_file_bytes})"
                    self.store.mark_skipped(db, folder.id, path, reason)
                elif doc is None:
                    self.store.mark_pending(db, folder.id, path, entry["size"], entry["mtime_ns"])
                    new += 1
                elif (doc.size, doc.mtime_ns) != (entry["size"], entry["mtime_ns"]) or doc.status == "skipped":
                    self.store.mark_pending(db, folder.id, path, entry["size"], entry["mtime_ns"])
                    changed += 1
                else:
                    unchanged += 1
            for path, reason in body.skipped.items():
                seen.add(path)
                self.store.mark_skipped(db, folder.id, path, reason[:500])
            gone = [doc.id for path, doc in known.items() if path not in seen]
            self.store.delete_documents(db, gone)
        self.pipeline.wake()
        log.info(
            "reconciled folder %s: %d new, %d changed, %d unchanged, %d deleted",
            folder.id,
            new,
            changed,
            unchanged,
            len(gone),
        )
        return ReconcileReply(new=new, changed=changed, unchanged=unchanged, deleted=len(gone))

    def on_changes(self, req: Request) -> Result:
        assert isinstance(req.body, ChangesRequest)
        accepted = 0
        with self.store.tx() as db:
            for event in req.body.events:
                accepted += self._apply_event(db, event["kind"], event["path"], event.get("dest"))
        self.pipeline.wake()
        return ChangesReply(accepted)

    def _apply_event(self, db: Any, kind: str, path: str, dest: str | None) -> int:
        if kind == "moved" and dest:
            target = self.store.folder_for_path(dest)
            if target is None:  # moved out of every Smart Folder
                return self._apply_event(db, "deleted", path, None)
            if self.store.move_document(db, path, dest, target.id):
                return 1
            moved = 0
            prefix = path.rstrip("/") + "/"
            rows = db.execute("SELECT path FROM documents WHERE substr(path, 1, ?) = ?", (len(prefix), prefix))
            for (old,) in rows.fetchall():
                moved += self.store.move_document(db, old, dest.rstrip("/") + "/" + old[len(prefix) :], target.id)
            if moved:
                return moved
            return self._apply_event(db, "created", dest, None)
        if kind == "deleted":
            prefix = path.rstrip("/") + "/"
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM documents WHERE path = ? OR substr(path, 1, ?) = ?", (path, len(prefix), prefix)
                )
            ]
            self.store.delete_documents(db, ids)
            return len(ids)
        folder = self.store.folder_for_path(path)
        if folder is None:
            return 0
        try:
            st = os.stat(path)
        except OSError:
            return self._apply_event(db, "deleted", path, None)
        doc = self.store.document(path)
        if st.st_size > self.policy.max_file_bytes:
            self.store.mark_skipped(db, folder.id, path, f"file too large ({st.st_size} bytes)")
        elif doc is None or (doc.size, doc.mtime_ns) != (st.st_size, st.st_mtime_ns) or doc.status != "indexed":
            self.store.mark_pending(db, folder.id, path, st.st_size, st.st_mtime_ns)
        return 1

    # ---------------------------------------------------------------------------------------
    # search

    def on_search(self, req: Request) -> Result:
        assert isinstance(req.body, SearchRequest)
        body = req.body
        t0 = time.perf_counter()
        query = body.query.strip() if isinstance(body.query, str) else ""
        if not query or len(query) > MAX_QUERY_CHARS:
            raise JobError("invalid_query", f"query must be 1..{MAX_QUERY_CHARS} characters")
        if body.mode not in MODES:
            raise JobError("invalid_query", f"mode must be one of {', '.join(MODES)}")
        top_k = max(1, min(int(body.top_k), 50))
        scope: str | None = None
        if body.folder_id is not None:
            try:
                scope = self.store.find_folder(body.folder_id).id  # an id or the folder's path
            except StoreError as exc:
                raise JobError("invalid_smart_folder", str(exc)) from exc
        note = None
        mode = body.mode
        depth = max(top_k * 4, 40)
        keyword: list[tuple[int, float]] = []
        snippets: dict[int, str] = {}
        total = 0
        if mode in ("keyword", "hybrid"):
            hits, total = self.bm25.search(query, depth, scope)
            keyword = [(h.chunk_id, h.score) for h in hits]
            snippets = {h.chunk_id: h.snippet for h in hits}
        semantic: list[tuple[int, float]] = []
        if mode in ("semantic", "hybrid"):
            vector, why = self._query_vector(query)
            if vector is None:
                note = f"semantic search unavailable ({why}): answered from keyword search"
                if mode == "semantic":
                    hits, total = self.bm25.search(query, depth, scope)
                    keyword = [(h.chunk_id, h.score) for h in hits]
                    snippets = {h.chunk_id: h.snippet for h in hits}
                mode = "keyword"
            else:
                oversample = depth * (4 if scope else 1)
                semantic = self.vectors.search(vector, oversample)
        if mode == "hybrid":
            ranked = _rrf([keyword, semantic])
            total = max(total, len(ranked))
        elif mode == "semantic":
            ranked, total = semantic, len(semantic)
        else:
            ranked = keyword
        rows = self.store.hits([chunk_id for chunk_id, _ in ranked])
        results: list[SearchHit] = []
        for chunk_id, score in ranked:
            row = rows.get(chunk_id)
            if row is None or (scope and row["folder_id"] != scope):
                continue  # deleted after the last index commit, or outside the asked folder
            results.append(
                SearchHit(
                    chunk_id=chunk_id,
                    file_path=row["path"],
                    file_name=Path(row["path"]).name,
                    score=round(score, 6),
                    snippet=snippets.get(chunk_id) or _excerpt(row["text"], query),
                    smart_folder=row["folder_name"],
                    modified_at=row["mtime_ns"] / 1e9,
                    location=_location(row),
                )
            )
            if len(results) == top_k:
                break
        ms = (time.perf_counter() - t0) * 1000
        return SearchReply(results, total, round(ms, 3), mode, note)

    def _query_vector(self, query: str) -> tuple[NDArray[np.float32] | None, str]:
        if len(self.vectors) == 0:
            return None, "no document is embedded yet"
        try:
            # Bounded: behind a bulk embedding batch this waits; past it, keyword search answers.
            reply = self.client.request("embedder", EmbedRequest([query]), EmbedReply, timeout=3)
        except BusError as exc:
            return None, str(exc)
        if not reply.buffers or reply.body.dim != self.vectors.ndim:
            return None, "the embedder answered no usable vector"
        return np.frombuffer(frames.buffer_bytes(reply.buffers[0]), dtype=np.float32)[: reply.body.dim], ""


def _rrf(rankings: list[list[tuple[int, float]]], k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: each list adds 1 / (k + rank) to a chunk's score."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, 1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: item[1], reverse=True)


def _location(row: Any) -> dict[str, Any]:
    loc: dict[str, Any] = {"line_start": row["line_start"], "line_end": row["line_end"]}
    if row["page_start"] is not None:
        loc["page"] = row["page_start"]
        if row["page_end"] not in (None, row["page_start"]):
            loc["page_end"] = row["page_end"]
    if row["heading"]:
        loc["heading"] = row["heading"]
    return loc


def _excerpt(text: str, query: str, width: int = 240) -> str:
    """A window of ``text`` around the first query character run it contains (CJK matches)."""
    at = 0
    for gram in cjk_grams(query):
        found = text.find(gram)
        if found >= 0:
            at = found
            break
    start = max(0, at - width // 4)
    return text[start : start + width].strip()


WORKER = IndexerWorker
