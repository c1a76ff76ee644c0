"""The indexer worker: the only writer of SQLite, Tantivy and usearch; it answers folder
requests, file changes from the watcher, searches (:mod:`.search`), the evidence for answers
(:mod:`.evidence`) and the per-document and
whole-index questions behind the MCP tools (:mod:`.documents`).

Its serving thread handles requests; its ingest thread (:mod:`.ingest`) parses and writes; a
background thread loads the query model (:mod:`.encoder`) without holding up READY.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, cast

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    EXTRACTION,
    ChangesReply,
    ChangesRequest,
    CheckRequest,
    CriteriaAddReply,
    CriteriaAddRequest,
    DocumentEntry,
    EvidenceRequest,
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
    IndexStatusRequest,
    ReadDocumentRequest,
    ReconcileReply,
    ReconcileRequest,
    SearchRequest,
    SimilarRequest,
    StorageInfo,
    SummaryRequest,
    storage_ok,
)
from foldermind.protocol.runtime.config import ingest_from_env, search_from_env
from foldermind.protocol.runtime.home import Home
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route
from foldermind.workers.indexer import criteria
from foldermind.workers.indexer.documents import DocumentService
from foldermind.workers.indexer.evidence.claims import ClaimChecker
from foldermind.workers.indexer.evidence.evidence import EvidenceService
from foldermind.workers.indexer.ingest import changes
from foldermind.workers.indexer.ingest.pipeline import Pipeline, hold_at
from foldermind.workers.indexer.search import snippets, visibility
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.search import SearchService
from foldermind.workers.indexer.search.visibility import Visibility
from foldermind.workers.indexer.storage.folders import Folder
from foldermind.workers.indexer.storage.integrity import (
    Damage,
    is_database_damage,
    open_keyword_index,
    outdated_keyword_index,
)
from foldermind.workers.indexer.storage.persistent import PersistentFault, named_fault, with_fix
from foldermind.workers.indexer.storage.reserved import own_folders, refusal
from foldermind.workers.indexer.storage.storage import classify, disk_bytes
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

log = logging.getLogger("foldermind.indexer")

MAX_DOCUMENT_PAGE = 500
MAX_UNSUPPORTED_LISTED = 200


class IndexerWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.policy = ingest_from_env()
        self.search_policy = search_from_env()
        # Searches run side by side ([search] search_threads); the job thread keeps the rest.
        self.side_by_side = frozenset({SearchRequest.KIND})
        self.side_threads = self.search_policy.search_threads
        self.capacity = 1 + self.side_threads
        home = Home.resolve(ctx.home or None)
        self.data_dir = home.data_dir
        self._refusal = partial(refusal, own=own_folders(home, self.policy.model_cache_dir))
        # A request's write the data folder refuses (read-only, ...): shown in status until one goes through.
        self.request_fault = PersistentFault(self.data_dir, log)
        self.damage = Damage(self.data_dir / "index.sqlite")

    def setup(self) -> None:
        """Open the database and the indexes; a damaged one leaves only its error served (:mod:`.integrity`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except Exception as exc:
            if not is_database_damage(exc):
                raise
            self.damage.found(exc, "nothing is served until it is repaired")

    def _open(self) -> None:
        self.store = Store(self.data_dir / "index.sqlite")
        self._reparse_if_outdated()
        outdated = outdated_keyword_index(self.store, self.data_dir / "tantivy")
        self.bm25, rebuild = open_keyword_index(self.data_dir / "tantivy", self.store, self.search_policy)
        self.vectors = VectorIndex(
            self.data_dir / "vectors.usearch",
            int(self.store.get_meta("vector_dim", "384")),
            self.search_policy.expansion_search,
            self.search_policy.exact_search_vectors,
        )
        self.unscanned: set[str] = set()
        """Folders added since this start whose first scan the watcher has not sent yet: they read as indexing."""
        self.pipeline = Pipeline(self.store, self.bm25, self.vectors, self.ctx.bus_endpoint, self.policy, self.ctx.name)
        self.pipeline.damage = self.damage
        self.pipeline.refilling(rebuild or ("keyword index of older fields" if outdated else None))
        self.pipeline.start()
        self.encoder = QueryEncoder(self.search_policy, self.policy, self.ctx.bus_endpoint, self.ctx.name)
        self.encoder.start()
        self.searches = SearchService(self.store, self.bm25, self.vectors, self.encoder, self.search_policy)
        self.evidence = EvidenceService(self.searches, self.encoder)
        self.claims = ClaimChecker(self.evidence.vectors)
        self.visibility = Visibility(
            self.store, self.searches.filters, self.searches.criteria, self.searches.criteria_scopes
        )
        self.documents = DocumentService(
            self.store, self.bm25, self.vectors, self.encoder, self.folder_info, lambda: self.pipeline.embed_error
        )

    def _reparse_if_outdated(self) -> None:
        """Documents parsed by parsers that read files differently (an older :data:`EXTRACTION`) are parsed
        again."""
        if self.store.get_meta("extraction") == str(EXTRACTION):
            return
        with self.store.tx() as db:
            n = self.store.documents.reparse_all(db)
            self.store.set_meta(db, "extraction", str(EXTRACTION))
        if n:
            log.info("%d documents will be parsed again: this version's parsers read files differently", n)

    def teardown(self) -> None:
        if not hasattr(self, "pipeline"):
            return  # a damaged database: nothing was opened
        self.pipeline.stop()
        self.pipeline.join(timeout=10)
        self.bm25.close()
        self.encoder.close()

    def handlers(self) -> dict[str, Handler]:
        own: list[tuple[str, Handler]] = [
            route(FolderAddRequest, self.on_folder_add),
            route(FolderListRequest, self.on_folder_list),
            route(FolderRemoveRequest, self.on_folder_remove),
            route(FolderRetryRequest, self.on_folder_retry),
            route(CriteriaAddRequest, self.on_criteria_add),
            route(FolderDocumentsRequest, self.on_folder_documents),
            route(ReconcileRequest, self.on_reconcile),
            route(ChangesRequest, self.on_changes),
            route(SearchRequest, self.on_search),
            route(EvidenceRequest, self.on_evidence),
            route(CheckRequest, self.on_check),
            route(ReadDocumentRequest, self.on_read),
            route(SimilarRequest, self.on_similar),
            route(SummaryRequest, self.on_summary),
            route(IndexStatusRequest, self.on_index_status),
        ]
        return {**super().handlers(), **{kind: self.damage.guard(self._scoped(handler)) for kind, handler in own}}

    def _scoped(self, handler: Handler) -> Handler:
        """``handler`` with its request's client-key scope in force (:mod:`.visibility`)."""
        return lambda req: self.visibility.scoped(handler)(req)

    @property
    def status_note(self) -> str:
        """A damaged database, a full disk under the index while it lasts, then a fault that holds indexing (with
        its fix), an index being rebuilt from the database, else what answers queries (the heartbeat carries it to
        ``status``)."""
        if self.damage.line is not None:
            return self.damage.line[:300]
        pipeline: Pipeline | None = getattr(self, "pipeline", None)
        full = pipeline.disk_full if pipeline is not None else None
        if full is not None:
            return with_fix(str(full), "; fix: free space on that disk (indexing resumes by itself)")
        held = (pipeline.fault.note if pipeline is not None else "") or self.request_fault.note
        if held:  # a failure that repeats, with its fix
            return held[:300]
        rebuilding = pipeline.rebuild_note() if pipeline is not None else None
        if rebuilding is not None:
            return rebuilding[:300]
        encoder: QueryEncoder | None = getattr(self, "encoder", None)
        return encoder.summary()[:300] if encoder is not None else ""

    @status_note.setter
    def status_note(self, value: str) -> None:
        raise AttributeError("the indexer's note follows its state")

    def storage(self) -> StorageInfo:
        full = self.pipeline.disk_full
        if full is None:
            return storage_ok()
        return StorageInfo(
            state="disk_full",
            message=str(full),
            what=full.what,
            path=str(full.path),
            free_bytes=full.free_bytes,
            since=full.since,
        )

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """A request's write that finds the disk full answers a typed, retryable ``disk_full``, one the data
        folder refuses (read-only, ...) ``index_unwritable`` with the fix, which status shows too (the watcher
        re-sends its changes until they are taken)."""
        try:
            yield
            self.request_fault.worked()
        except Exception as exc:
            full = classify(exc, what, self.store.path, self.data_dir)
            if full is not None:
                raise JobError(ErrorCode.DISK_FULL, str(full)) from exc
            if isinstance(exc, JobError) or not named_fault(exc, self.data_dir):
                raise
            fault = self.request_fault.failed(exc, what)
            raise JobError(ErrorCode.INDEX_UNWRITABLE, f"{fault.what}; fix: {fault.fix}") from exc

    def details(self) -> dict[str, Any]:
        if not hasattr(self, "pipeline"):
            return {"data_dir": str(self.data_dir), "database": self.damage.line}
        return {
            "data_dir": str(self.data_dir),
            "disk_bytes": disk_bytes(self.data_dir),
            "chunks_in_bm25": self.bm25.num_docs,
            "vectors": len(self.vectors.keys()),  # chunks with vectors; each has one per unit (units.py)
            "unit_vectors": len(self.vectors),
            # "draft" while every search is exact and the graph is built cheaply, "full" once searches walk it
            "vector_graph": "draft" if self.vectors.draft else "full",
            "embedding": self.pipeline.embed_error or "ok",
            "embedder_probe": self.pipeline.probe,
            "ingest_nice": self.pipeline.nice,
            "storage": str(self.pipeline.disk_full or "ok"),
            "query_encoder": self.encoder.describe(),
            "search": self.search_policy.model_dump(),
        }

    # ---------------------------------------------------------------------------------------
    # folders

    def folder_info(self, folder: Folder) -> FolderInfo:
        p = self.store.folders.progress(folder.id)
        # A batch committed to SQLite but not yet in usearch is not embedded yet.
        p["chunks"], p["chunks_embedded"] = self.store.embeddings.chunk_counts(folder.id, lambda: self.vectors.arriving)
        # "ready" promises that a keyword search finds every indexed file: not before Tantivy's commit.
        busy = p["files_pending"] or p["files_not_yet_searchable"] or folder.id in self.unscanned
        state = "indexing" if busy else "ready"
        unsupported = self.store.folders.unsupported(folder.id)
        if busy and self.pipeline.disk_full is not None:
            state = "disk_full"
        elif not busy and p["chunks_embedded"] < p["chunks"] and self.pipeline.embed_error is None:
            # Searchable by keyword, not yet by meaning. (While embedding is unavailable it is "ready" for
            # keyword search: the counts and the embedding status say the rest.)
            state = "embedding"
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
            files_skipped=p["files_skipped"],
            files_unsupported=sum(unsupported.values()),
            unsupported=unsupported,
            chunks=p["chunks"],
            chunks_embedded=p["chunks_embedded"],
            state=state,
            changed_at=self.store.folders.changed_at(folder.id),
        )

    def on_folder_add(self, req: Request[FolderAddRequest]) -> Result:
        raw = req.body.path
        if not raw or "\x00" in raw or not os.path.isabs(raw):
            raise JobError(ErrorCode.INVALID_PATH, f"not an absolute path: {raw!r}")
        path = os.path.realpath(raw)
        if not os.path.isdir(path):
            raise JobError(ErrorCode.INVALID_PATH, f"not a folder: {raw}")
        with self._writing("registering a Smart Folder"):
            folder = self.store.folders.add(path, req.body.name[:200], req.body.description[:2000], self._refusal)
        log.info("Smart Folder %s registered", folder.id)
        self.unscanned.add(folder.id)
        self.pipeline.tell_watcher()
        return FolderAddReply(self.folder_info(folder))

    def on_folder_list(self, req: Request[FolderListRequest]) -> Result:
        scopes, visible = self.searches.criteria_scopes, visibility.current()
        return FolderListReply(
            [self.folder_info(f) for f in self.store.folders.all() if visible is None or visible.sees_folder(f.id)],
            [scopes.info(c) for c in self.searches.criteria.all() if visible is None or visible.sees_folder(c.id)]
            if req.body.with_criteria
            else [],
        )

    def on_folder_remove(self, req: Request[FolderRemoveRequest]) -> Result:
        table, scopes = self.searches.criteria, self.searches.criteria_scopes
        try:
            folder = self.store.folders.find(req.body.folder)
        except JobError:
            saved = table.find(req.body.folder)
            if saved is None:
                raise
            gone = scopes.info(saved)
            table.remove([saved.id])
            log.info("criteria Smart Folder %s removed", saved.id)
            return FolderRemoveReply(None, 0, [gone])
        info = self.folder_info(folder)
        inside = table.within(folder.path)  # they would hold nothing once the folder's documents are gone
        removed = [scopes.info(c) for c in inside]
        # First: after a crash between the two, the folder is still registered and removing it again finishes.
        table.remove([c.id for c in inside])
        purged = self.store.folders.remove(folder.id)
        self.pipeline.tell_watcher()
        log.info(
            "Smart Folder %s removed (%d documents purged, %d criteria folders)", folder.id, len(purged), len(inside)
        )
        return FolderRemoveReply(info, len(purged), removed)

    def on_folder_retry(self, req: Request[FolderRetryRequest]) -> Result:
        folder = self.store.folders.find(req.body.folder) if req.body.folder else None
        with self._writing("trying failed files again"), self.store.tx(durable=True) as db:
            retried = self.store.documents.retry_failed(db, folder.id if folder is not None else None)
        self.pipeline.wake()
        log.info("%d failed documents to be parsed again (%s)", retried, folder.id if folder else "every folder")
        return FolderRetryReply(retried, self.folder_info(folder) if folder is not None else None)

    def on_criteria_add(self, req: Request[CriteriaAddRequest]) -> Result:
        saved = criteria.validate(req.body, self._folder_of)
        with self._writing("saving a criteria Smart Folder"):
            self.searches.criteria.add(saved)
        log.info("criteria Smart Folder %s saved", saved.id)
        return CriteriaAddReply(self.searches.criteria_scopes.info(saved))

    def _folder_of(self, path: str) -> str | None:
        folder = self.store.folders.containing(path)
        return folder.id if folder is not None else None

    def on_folder_documents(self, req: Request[FolderDocumentsRequest]) -> Result:
        body, visible = req.body, visibility.current()
        sees = None if visible is None else visible.sees_folder
        folder_id = self.store.folders.find(body.folder, sees).id if body.folder else None
        if visible is not None and folder_id is not None and not visible.sees_folder(folder_id):
            raise visibility.hidden_folder(body.folder)
        limit = max(1, min(int(body.limit), MAX_DOCUMENT_PAGE))
        statuses = ["indexed"] if body.indexed_only else [str(s) for s in body.statuses]
        after = max(0, int(body.after))
        documents: list[DocumentEntry] = []
        while True:  # a scoped key's pages leave the others' documents out: read on until one is full
            rows = self.store.documents.page(folder_id, after, limit + 1, statuses)
            for r in rows:
                if visible is None or visible.sees_document(r["folder_id"], r["id"]):
                    documents.append(cast(DocumentEntry, dict(r)))  # the SELECT names its keys
            if len(documents) > limit or len(rows) <= limit:
                break
            after = rows[-1]["id"]
        more = len(documents) > limit
        documents = documents[:limit]
        return FolderDocumentsReply(documents, documents[-1]["id"] if more else None)

    # ---------------------------------------------------------------------------------------
    # changes from the watcher

    def on_reconcile(self, req: Request[ReconcileRequest]) -> Result:
        body = req.body
        folder = self.store.folders.find(body.folder_id)
        known = self.store.documents.in_folder(folder.id)
        new = changed = unchanged = 0
        seen: set[str] = set()
        with self._writing("recording a folder scan"), self.store.tx() as db:
            for entry in body.files:
                path = entry["path"]
                seen.add(path)
                doc = known.get(path)
                if entry["size"] > self.policy.max_file_bytes:
                    reason = f"file too large ({entry['size']} bytes > {self.policy.max_file_bytes})"
                    self.store.documents.mark_skipped(db, folder.id, path, reason)
                elif doc is None:
                    self.store.documents.mark_pending(db, folder.id, path, entry["size"], entry["mtime_ns"])
                    new += 1
                elif (doc.size, doc.mtime_ns) != (entry["size"], entry["mtime_ns"]) or doc.status == "skipped":
                    self.store.documents.mark_pending(db, folder.id, path, entry["size"], entry["mtime_ns"])
                    changed += 1
                else:
                    unchanged += 1
            for path, reason in body.skipped.items():
                seen.add(path)
                self.store.documents.mark_skipped(db, folder.id, path, reason[:500])
            self.store.folders.set_unsupported(
                db, folder.id, body.unsupported, body.unsupported_files[:MAX_UNSUPPORTED_LISTED]
            )
            gone = [doc.id for path, doc in known.items() if path not in seen]
            self.store.documents.delete(db, gone)
        self.unscanned.discard(folder.id)
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

    def on_changes(self, req: Request[ChangesRequest]) -> Result:
        accepted = 0
        with self._writing("recording file changes"), self.store.tx() as db:
            for event in req.body.events:
                accepted += changes.apply(
                    self.store, db, event["kind"], event["path"], event.get("dest"), self.policy.max_file_bytes
                )
        self.pipeline.wake()
        return ChangesReply(accepted)

    # ---------------------------------------------------------------------------------------
    # search and documents (the data behind the MCP tools)

    def on_search(self, req: Request[SearchRequest]) -> Result:
        if hold := hold_at("search"):
            hold()
        reply = self.searches.search(req.body)
        if req.body.with_marks:  # the console's: where each snippet holds the query's words, as this index stems them
            snippets.mark(reply.results, req.body.query, self.store)
        return reply

    def on_evidence(self, req: Request[EvidenceRequest]) -> Result:
        return self.evidence.select(req.body)

    def on_check(self, req: Request[CheckRequest]) -> Result:
        return self.claims.check(req.body)

    def on_read(self, req: Request[ReadDocumentRequest]) -> Result:
        return self.documents.read(req.body)

    def on_similar(self, req: Request[SimilarRequest]) -> Result:
        return self.documents.similar(req.body)

    def on_summary(self, req: Request[SummaryRequest]) -> Result:
        return self.documents.summary(req.body)

    def on_index_status(self, req: Request[IndexStatusRequest]) -> Result:
        reply = self.documents.status(req.body)
        reply.storage = self.storage()
        return reply


WORKER = IndexerWorker
