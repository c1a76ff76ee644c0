"""``search.request``: keyword (Tantivy BM25), semantic (usearch, or exact within a folder) and
hybrid (the two fused, :mod:`foldermind.workers.indexer.search.fusion`), each scoped to a folder and filtered
(:mod:`.filters`) inside the search itself. A criteria Smart Folder's id scopes a search by its documents
(:mod:`.criteria_scope`), applied as a filter.

Every hit is read back from SQLite, which is ahead of Tantivy and usearch: a chunk that is gone,
or whose document is not ``indexed`` at that moment, is never returned. The cuts a request can ask for
are made on those rows, in rank order, until ``top_k`` are kept: a phrase or an excluded word
(:mod:`foldermind.workers.indexer.search.query`; the keyword side already applied them inside Tantivy, the
semantic side cannot), ``min_score`` and ``group_by_file`` (a file's best chunk only).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import Location, SearchHit, SearchReply, SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.criteria import CriteriaTable
from foldermind.workers.indexer.search import filters, fusion, fusion_evidence, visibility
from foldermind.workers.indexer.search import query as operators
from foldermind.workers.indexer.search.criteria_scope import CriteriaScopes
from foldermind.workers.indexer.search.encoder import QueryEncoder
from foldermind.workers.indexer.search.scoped import ScopedVectors
from foldermind.workers.indexer.search.snippets import snippet
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.keyword.languages import stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import has_searchable_text, idf, query_tokens, stem, text_terms
from foldermind.workers.indexer.storage.store import Store
from foldermind.workers.indexer.storage.vectors import VectorIndex

MAX_QUERY_CHARS = 1000
MAX_TOP_K = 200
"""The MCP tool allows 50; bus callers (the retrieval bench's Recall@100) may ask for more."""
MODES = ("hybrid", "semantic", "keyword")
CUT_DEPTH = 2
"""How much deeper each side fetches when ``group_by_file`` or a phrase or exclusion will drop candidates."""
STAGES = ("embed", "keyword", "vector", "fuse", "rows")
Ranking = fusion.Ranking
Rows = dict[int, Any]
"""Chunk rows (:meth:`Chunks.hits`) by chunk id."""


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
        self.rules = fusion.BlendRules.of(policy)
        self.evidence = fusion_evidence.EvidenceWeights.of(policy)
        # For a caller that picks each file's passages itself (the evidence for an answer): the repeat penalty,
        # which spreads one page of results over more files, pushed a best file's second and third passages
        # out of its pick, and fewer extractive answers held the gold answer (docs/tuning.md#blend).
        self.unspread = dataclasses.replace(self.rules, repeat_penalty=0.0)
        self.scoped = ScopedVectors(store, vectors)
        self.filters = filters.FilterIndex(store)
        self.criteria = CriteriaTable(store)
        self.criteria_scopes = CriteriaScopes(store, bm25, self.filters)

    def search(self, body: SearchRequest, spread: bool = True) -> SearchReply:
        """``body``'s search; ``spread=False`` (callers inside the indexer only) fuses without the repeat
        penalty."""
        t0 = time.perf_counter()
        query, mode, fuse, top_k = self._validate(body)
        scope, saved = self._scope(body.folder_id)
        visible = visibility.current()
        scoped = visible is not None and scope is None and saved is None  # a client key's scope to apply
        if scoped and visible is not None and visible.one_folder is not None:
            scope, scoped = visible.one_folder, False  # one path folder's documents: searched as folder_id does
        timings = dict.fromkeys(STAGES, 0.0)
        rows: Rows = {}  # chunk rows read for this request: the fusion's rescoring reads the first ones
        wanted = filters.parse(body.file_types, body.path_glob, body.modified_after, body.modified_before, self._roots)
        only = self.filters.admitted(wanted, scope) if wanted.active else None
        if saved is not None:  # a criteria folder: its documents now, a filter over every folder like ``only``'s
            only = saved if only is None else filters.intersect(only, saved.docs)
        if only is not None and only.docs and not only.others:
            only = None  # it admits every document of the scope: the search without it is the same, and cheaper
        if scoped:  # the documents of a client key's folders (after the line above: never dropped)
            only = visibility.limit(only)
        parsed = operators.parse(query)
        query = parsed.text
        if not has_searchable_text(query) or (only is not None and not only.docs):
            # Only punctuation or operators: nothing to look for; or the filter admits no document.
            return SearchReply([], 0, _ms(t0), mode, None, timings)
        depth = max(top_k * 4, self.policy.depth_min)
        if body.group_by_file or parsed.filters:
            depth *= CUT_DEPTH  # the cuts drop candidates: fetch deeper so that top_k survive them
        note: str | None = None
        keyword: Ranking = []
        semantic: Ranking = []
        total = 0
        if mode in ("keyword", "hybrid"):
            with _timed(timings, "keyword"):
                keyword, total = self._keyword(parsed, depth, scope, only)
        if mode in ("semantic", "hybrid"):
            with _timed(timings, "embed"):
                vector, why = self._query_vector(query, scope, only)
            if vector is None:
                note = f"semantic search unavailable ({why}): answered from keyword search"
                if mode == "semantic":
                    with _timed(timings, "keyword"):
                        keyword, total = self._keyword(parsed, depth, scope, only)
                mode = "keyword"
            else:
                with _timed(timings, "vector"):
                    semantic = self._semantic(vector, depth, scope, only)
        with _timed(timings, "fuse"):
            if mode == "hybrid":
                ranked = self.fused(keyword, semantic, query, fuse, spread, rows)
                total = max(total, len(ranked))
            elif mode == "semantic":
                ranked, total = semantic, len(semantic)
            else:
                ranked = keyword
        with _timed(timings, "rows"):
            # Tantivy applied the phrases and exclusions to the keyword side already: only the others are checked.
            cuts = Cuts(parsed, body.min_score, bool(body.group_by_file), {c for c, _ in keyword})
            results = self._hits(ranked, query, scope, top_k, bool(body.with_text), cuts, only, rows)
        return SearchReply(results, total, _ms(t0), mode, note, {k: round(v, 3) for k, v in timings.items()})

    def fused(
        self, keyword: Ranking, semantic: Ranking, query: str, fuse: str, spread: bool = True, rows: Rows | None = None
    ) -> Ranking:
        """The two sides merged by ``fuse`` (one of :data:`.fusion.FUSIONS`); ``spread=False`` leaves the repeat
        penalty (blend's and evidence's) out. ``rows`` keeps the chunk rows it reads, for the caller."""
        if fuse == "weighted":
            return fusion.weighted(keyword, semantic, self.policy.keyword_weight)
        if fuse == "rrf":
            return fusion.rrf([keyword, semantic], self.policy.rrf_k)
        if fuse == "evidence":
            coverage = partial(self._coverage, query, {} if rows is None else rows)
            ranked = fusion_evidence.evidence(keyword, semantic, coverage, self.evidence)
            penalty = self.policy.evidence_repeat_penalty if spread else 0.0
            return fusion.spread(ranked, self._documents(keyword, semantic), penalty) if penalty > 0 else ranked
        rules = self.rules if spread else self.unspread
        # Evidence and the repeat penalty need each candidate's document: one SQLite read of <= 2 * depth rows.
        by_document = rules.evidence > 0 or rules.repeat_penalty > 0
        documents = self._documents(keyword, semantic) if by_document else None
        question, lookup = fusion.is_question(query), fusion.is_lookup(query)
        return fusion.blend(keyword, semantic, rules, question, documents, self._same_file, lookup)

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
        if body.min_score is not None and (
            isinstance(body.min_score, bool)
            or not isinstance(body.min_score, int | float)
            or body.min_score != body.min_score
        ):
            raise JobError(ErrorCode.INVALID_QUERY, "min_score must be a number")
        return query, body.mode, fuse, max(1, min(body.top_k, MAX_TOP_K))

    def _scope(self, folder: str | None) -> tuple[str | None, filters.Admitted | None]:
        """(the path folder to search, or the documents of the criteria folder to search) for ``folder_id``."""
        if folder is None:
            return None, None
        visible = visibility.current()
        try:
            # an id, the folder's path or its name
            found = self.store.folders.find(str(folder), None if visible is None else visible.sees_folder).id
            if visible is not None and not visible.sees_folder(found):
                raise visibility.hidden_folder(str(folder))  # as a folder that does not exist
            return found, None
        except JobError as exc:
            saved = self.criteria.find(str(folder))
            if saved is None or (visible is not None and not visible.sees_folder(saved.id)):
                raise JobError(ErrorCode.INVALID_SMART_FOLDER, exc.message) from exc
            return None, self.criteria_scopes.admitted(saved)

    def _roots(self) -> list[str]:
        """The folders an absolute path_glob may name: those the request's client key sees."""
        visible = visibility.current()
        return [f.path for f in self.store.folders.all() if visible is None or f.id in visible.folders]

    def _keyword(
        self, q: operators.Query, depth: int, scope: str | None, only: filters.Admitted | None
    ) -> tuple[Ranking, int]:
        where = only.where if only is not None else None
        docs = only.keyword_clause() if only is not None and where is None else None
        hits, total = self.bm25.search(q.text, depth, scope, q.phrases, q.required, q.excluded, docs, where)
        return [(h.chunk_id, h.score) for h in hits], total

    def _coverage(self, query: str, rows: Rows, chunks: Sequence[int]) -> dict[int, float]:
        """The share of the query's IDF mass each of ``chunks`` holds in its text or heading (``evidence``
        fusion): one SQLite read of their rows (kept in ``rows``: their language, and whether they are still
        searchable), then which query terms each holds, asked of the keyword index, which analysed the same text
        and heading at ingest (a chunk not committed there yet is analysed here)."""
        found = self._rows(rows, chunks)
        tokens = list(dict.fromkeys(query_tokens(query)))
        by_language: dict[str, list[int]] = {}
        for cid, row in found.items():
            by_language.setdefault(stemmed_as(row["language"]), []).append(cid)
        out = {}
        for language, ids in by_language.items():
            doc_freq, total = self.bm25.term_stats(language)
            idfs = [idf(doc_freq(t), total) for t in tokens]
            terms = [stem(t, language) for t in tokens]
            held = self.bm25.held(ids, terms)
            for cid in ids:
                if cid not in held:
                    row = found[cid]
                    analysed = set(text_terms(f"{row['heading'] or ''}\n{row['text']}", language))
                    held[cid] = [term in analysed for term in terms]
                out[cid] = fusion_evidence.idf_share(idfs, held[cid])
        return out

    def _rows(self, rows: Rows, chunks: Sequence[int]) -> Rows:
        """The rows of ``chunks`` that exist, in their order: those ``rows`` lacks read from SQLite (and kept there)."""
        missing = [c for c in chunks if c not in rows]
        if missing:
            rows.update(self.store.chunks.hits(missing))
        return {c: rows[c] for c in chunks if c in rows}

    def _same_file(self, a: int, b: int) -> bool:
        """Whether two chunks are of one document (blend's same-file rule; asked only when the blend's first hit
        is not BM25's: one SQLite read of two rows)."""
        found = self.store.chunks.documents_of([a, b])
        return a in found and found.get(a) == found.get(b)

    def _documents(self, keyword: Ranking, semantic: Ranking) -> dict[int, int]:
        """Each candidate chunk's document, for the per-document evidence of :func:`.fusion.blend`."""
        return self.store.chunks.documents_of(list({cid for cid, _ in keyword} | {cid for cid, _ in semantic}))

    def _semantic(
        self, vector: NDArray[np.float32], depth: int, scope: str | None, only: filters.Admitted | None
    ) -> Ranking:
        if only is not None:  # the filter's documents lie in the scope already
            return self.scoped.search_keys(only.name, self.filters.keys(only), vector, depth)
        if scope is None:
            # The vectors of chunks deleted since the file's last save (a folder just removed) are still in it: look
            # past them, so that they do not fill the depth and leave the live chunks unfound until that save.
            dead = set(self.store.embeddings.dead())
            if not dead:
                return self.vectors.search(vector, depth)
            return [hit for hit in self.vectors.search(vector, depth + len(dead)) if hit[0] not in dead][:depth]
        return self.scoped.search(scope, vector, depth)

    def _query_vector(
        self, query: str, scope: str | None, only: filters.Admitted | None = None
    ) -> tuple[NDArray[np.float32] | None, str]:
        before = self.store.embeddings.reembedding()
        model, precision = self.store.embeddings.model()
        if before:  # checked first: right after the change no vector is left either
            return None, (
                f"the index is being embedded again with {model_files.vectors_key(model, precision)}"
                f" (it held {before} vectors); keyword results until it is done"
            )
        if len(self.vectors) == 0:
            return None, "no document is embedded yet"
        if only is not None and len(self.filters.keys(only)) == 0:
            return None, "no document the filters admit is embedded yet"
        if only is None and scope is not None and self.scoped.count(scope) == 0:
            return None, "no document of this folder is embedded yet"
        return self.encoder.encode(
            query, self.vectors.ndim, model_files.vectors_key(model, precision) if model else None
        )

    def _hits(
        self,
        ranked: Ranking,
        query: str,
        scope: str | None,
        top_k: int,
        with_text: bool,
        cuts: Cuts,
        only: filters.Admitted | None = None,
        read: Rows | None = None,
    ) -> list[SearchHit]:
        results: list[SearchHit] = []
        files: set[str] = set()
        window = top_k * 2 + 8  # a little more than asked: some may be gone since the last index commit
        for start in range(0, len(ranked), window):
            part = ranked[start : start + window]
            rows = self._rows({} if read is None else read, [chunk_id for chunk_id, _ in part])
            for chunk_id, score in part:
                row = rows.get(chunk_id)
                if row is None or (scope and row["folder_id"] != scope):
                    continue  # deleted after the last index commit, or moved out of the asked folder
                if only is not None and row["doc_id"] not in only.docs:
                    continue  # written again since the filter was resolved (a new mtime, say)
                if cuts.min_score is not None and score < cuts.min_score:
                    return results  # ranked best first: nothing further scores more
                language = stemmed_as(row["language"])
                if chunk_id not in cuts.matched and not operators.admits(
                    cuts.query, row["text"], row["heading"] or "", language
                ):
                    continue  # a semantic neighbour without the phrase, or with an excluded word
                if cuts.group_by_file:
                    if row["path"] in files:
                        continue
                    files.add(row["path"])
                hit = hit_from_row(row, score, snippet(row["text"], query, language=language))
                if with_text:
                    hit["text"] = row["text"]
                results.append(hit)
                if len(results) == top_k:
                    return results
        return results


@dataclass(frozen=True, slots=True)
class Cuts:
    """What a request keeps of the ranked chunks besides its folder: see the module's docstring."""

    query: operators.Query
    min_score: float | None = None
    group_by_file: bool = False
    matched: set[int] = field(default_factory=set)
    """Chunks the keyword side returned: Tantivy already held them to the phrases and exclusions."""


def hit_from_row(row: Any, score: float, text: str) -> SearchHit:
    return SearchHit(
        chunk_id=int(row["id"]),
        chunk_index=int(row["ordinal"]),
        file_path=row["path"],
        file_name=os.path.basename(row["path"]),
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
