"""``search.request``: keyword (Tantivy BM25), semantic (usearch, or exact within a folder) and
hybrid (the two fused), each scoped to a folder inside the search itself.

Every hit is read back from SQLite, which is ahead of Tantivy and usearch: a chunk that is gone,
or whose document is not ``indexed`` at that moment, is never returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import Location, SearchHit, SearchReply, SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers import model_files
from foldermind.workers.indexer import fusion
from foldermind.workers.indexer.bm25 import KeywordIndex, has_searchable_text
from foldermind.workers.indexer.encoder import QueryEncoder
from foldermind.workers.indexer.scoped import ScopedVectors
from foldermind.workers.indexer.snippets import snippet
from foldermind.workers.indexer.store import Store
from foldermind.workers.indexer.vectors import VectorIndex

MAX_QUERY_CHARS = 1000
MAX_TOP_K = 200
"""The MCP tool allows 50; bus callers (the retrieval bench's Recall@100) may ask for more."""
MODES = ("hybrid", "semantic", "keyword")
STAGES = ("embed", "keyword", "vector", "fuse", "rows")
Ranking = fusion.Ranking


class SearchService:
    def __init__(
        self,
        store: Store,
        bm25: KeywordIndex,
        vectors: VectorIndex,
        encoder: QueryEncoder,
        policy: SearchPolicy,
    ) -> None:
        self.store, self.bm25, self.vectors, self.encoder, self.policy = store, bm25, vectors, encoder, policy
        self.scoped = ScopedVectors(store, vectors)

    def search(self, body: SearchRequest) -> SearchReply:
        t0 = time.perf_counter()
        query, mode, fuse, top_k = self._validate(body)
        scope: str | None = None
        if body.folder_id is not None:
            try:
                scope = self.store.find_folder(str(body.folder_id)).id  # an id or the folder's path
            except JobError as exc:
                raise JobError(ErrorCode.INVALID_SMART_FOLDER, exc.message) from exc
        timings = dict.fromkeys(STAGES, 0.0)
        if not has_searchable_text(query):  # only punctuation or operators: nothing to look for
            return SearchReply([], 0, _ms(t0), mode, None, timings)
        depth = max(top_k * 4, self.policy.depth_min)
        note: str | None = None
        keyword: Ranking = []
        semantic: Ranking = []
        total = 0
        if mode in ("keyword", "hybrid"):
            with _timed(timings, "keyword"):
                keyword, total = self._keyword(query, depth, scope)
        if mode in ("semantic", "hybrid"):
            with _timed(timings, "embed"):
                vector, why = self._query_vector(query, scope)
            if vector is None:
                note = f"semantic search unavailable ({why}): answered from keyword search"
                if mode == "semantic":
                    with _timed(timings, "keyword"):
                        keyword, total = self._keyword(query, depth, scope)
                mode = "keyword"
            else:
                with _timed(timings, "vector"):
                    semantic = self._semantic(vector, depth, scope)
        with _timed(timings, "fuse"):
            if mode == "hybrid":
                if fuse == "weighted":
                    ranked = fusion.weighted(keyword, semantic, self.policy.keyword_weight)
                else:
                    ranked = fusion.rrf([keyword, semantic], self.policy.rrf_k)
                total = max(total, len(ranked))
            elif mode == "semantic":
                ranked, total = semantic, len(semantic)
            else:
                ranked = keyword
        with _timed(timings, "rows"):
            results = self._hits(ranked, query, scope, top_k, bool(body.with_text))
        return SearchReply(results, total, _ms(t0), mode, note, {k: round(v, 3) for k, v in timings.items()})

    # ---------------------------------------------------------------------------------------

    def _validate(self, body: SearchRequest) -> tuple[str, str, str, int]:
        query = body.query.strip() if isinstance(body.query, str) else ""
        if not query or len(query) > MAX_QUERY_CHARS:
            raise JobError(ErrorCode.INVALID_QUERY, f"query must be 1..{MAX_QUERY_CHARS} characters")
        if body.mode not in MODES:
            raise JobError(ErrorCode.INVALID_QUERY, f"mode must be one of {', '.join(MODES)}")
        fuse = body.fusion or self.policy.fusion
        if fuse not in fusion.FUSIONS:
            raise JobError(ErrorCode.INVALID_QUERY, f"fusion must be one of {', '.join(fusion.FUSIONS)}")
        if isinstance(body.top_k, bool) or not isinstance(body.top_k, int):
            raise JobError(ErrorCode.INVALID_QUERY, "top_k must be an integer")
        return query, body.mode, fuse, max(1, min(body.top_k, MAX_TOP_K))

    def _keyword(self, query: str, depth: int, scope: str | None) -> tuple[Ranking, int]:
        hits, total = self.bm25.search(query, depth, scope)
        return [(h.chunk_id, h.score) for h in hits], total

    def _semantic(self, vector: NDArray[np.float32], depth: int, scope: str | None) -> Ranking:
        if scope is None:
            return self.vectors.search(vector, depth)
        return self.scoped.search(scope, vector, depth)

    def _query_vector(self, query: str, scope: str | None) -> tuple[NDArray[np.float32] | None, str]:
        before = self.store.reembedding()
        model, precision = self.store.embedded_with()
        if before:  # checked first: right after the change no vector is left either
            return None, (
                f"the index is being embedded again with {model_files.vectors_key(model, precision)}"
                f" (it held {before} vectors); keyword results until it is done"
            )
        if len(self.vectors) == 0:
            return None, "no document is embedded yet"
        if scope is not None and self.scoped.count(scope) == 0:
            return None, "no document of this folder is embedded yet"
        return self.encoder.encode(
            query, self.vectors.ndim, model_files.vectors_key(model, precision) if model else None
        )

    def _hits(self, ranked: Ranking, query: str, scope: str | None, top_k: int, with_text: bool) -> list[SearchHit]:
        results: list[SearchHit] = []
        window = top_k * 2 + 8  # a little more than asked: some may be gone since the last index commit
        for start in range(0, len(ranked), window):
            part = ranked[start : start + window]
            rows = self.store.hits([chunk_id for chunk_id, _ in part])
            for chunk_id, score in part:
                row = rows.get(chunk_id)
                if row is None or (scope and row["folder_id"] != scope):
                    continue  # deleted after the last index commit, or moved out of the asked folder
                hit = hit_from_row(row, score, snippet(row["text"], query))
                if with_text:
                    hit["text"] = row["text"]
                results.append(hit)
                if len(results) == top_k:
                    return results
        return results


def hit_from_row(row: Any, score: float, text: str) -> SearchHit:
    return SearchHit(
        chunk_id=int(row["id"]),
        chunk_index=int(row["ordinal"]),
        file_path=row["path"],
        file_name=Path(row["path"]).name,
        score=round(float(score), 6),
        snippet=text,
        smart_folder=row["folder_name"],
        folder_id=row["folder_id"],
        modified_at=row["mtime_ns"] / 1e9,
        location=location(row),
    )


def location(row: Any) -> Location:
    loc = Location(line_start=row["line_start"], line_end=row["line_end"])
    if row["page_start"] is not None:
        loc["page"] = row["page_start"]
        if row["page_end"] not in (None, row["page_start"]):
            loc["page_end"] = row["page_end"]
    if row["heading"]:
        loc["heading"] = row["heading"]
    if row["ocr_confidence"] is not None:
        loc["ocr"] = True
        loc["ocr_confidence"] = round(float(row["ocr_confidence"]), 3)
    return loc


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] += (time.perf_counter() - started) * 1000
