"""The Tantivy (BM25) side of the index.

Fields: ``chunk_id`` and ``doc_id`` (integers; a document's chunks are deleted by ``doc_id``),
``folder_id`` (raw, for scoping), ``text`` and ``heading`` (English stemming), and ``cjk``: the
Chinese/Japanese/Korean characters of the text as overlapping bigrams, since the stemmed field
splits CJK text into whole runs that a query never matches.

Queries never go through Tantivy's query parser: the query is cut into terms by the same analysis
the ``en_stem`` fields were indexed with, and the terms are combined as term queries. A user's
``AND``, quotes, ``field:``, ``*`` or brackets are therefore plain words or nothing, never syntax.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+", re.UNICODE)
HEADING_BOOST = 0.5
MAX_QUERY_TERMS = 64
TERM_SET = 1000
"""The most ids in one Tantivy term set of a search filter (see :meth:`KeywordIndex.build_query`)."""
"""Past this many terms a query gets no better, only slower (a 1000-character query is ~150 words)."""


def _analyzer() -> tantivy.TextAnalyzer:
    # Tantivy's built-in en_stem, rebuilt: simple tokenizer, words over 40 bytes dropped, lower case,
    # English stemmer. Query terms must come out exactly as the indexed ones did.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_EN_STEM = _analyzer()


@functools.lru_cache(maxsize=65536)
def stems(word: str) -> tuple[str, ...]:
    """The indexed terms of one word (usually one; none for an over-long word)."""
    return tuple(_EN_STEM.analyze(word))


def cjk_grams(text: str) -> list[str]:
    """Bigrams of every CJK run (a lone character stands for itself)."""
    grams: list[str] = []
    for run in _CJK_RUN.findall(text):
        grams.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return grams


def query_words(query: str) -> list[str]:
    """The query's words (letters and digits), lower-cased; everything else separates words."""
    return [w.lower() for w in _WORD.findall(query)]


def query_terms(query: str) -> list[str]:
    """The query's indexed terms, in order (a repeated word counts twice, as it would in BM25)."""
    terms = [term for word in query_words(query) for term in stems(word)]
    return terms[:MAX_QUERY_TERMS]


def text_terms(text: str) -> list[str]:
    """Every indexed term of ``text``, in order (the whole text: no cap, unlike a query)."""
    return list(_EN_STEM.analyze(text))


def has_searchable_text(query: str) -> bool:
    """Whether the query holds any word or CJK character: ``!!!`` or ``"*"`` do not."""
    return bool(_WORD.search(query) or _CJK_RUN.search(query))


def word_spans(text: str) -> Iterable[tuple[int, str]]:
    """(offset, word) of every word of ``text``, as the stemmed fields see words."""
    for m in _WORD.finditer(text):
        yield m.start(), m.group()


@dataclass(frozen=True, slots=True)
class KeywordHit:
    chunk_id: int
    score: float


class KeywordIndex:
    def __init__(self, path: Path, writer_heap: int = 64_000_000) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("chunk_id", stored=True, indexed=True, fast=True)
        builder.add_integer_field("doc_id", stored=False, indexed=True, fast=True)
        builder.add_text_field("folder_id", stored=False, tokenizer_name="raw")
        builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
        builder.add_text_field("heading", stored=False, tokenizer_name="en_stem")
        builder.add_text_field("cjk", stored=False, tokenizer_name="whitespace")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        self._writer_heap = writer_heap
        self._writer: Any = None

    @property
    def writer(self) -> Any:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=self._writer_heap, num_threads=1)
        return self._writer

    # ---------------------------------------------------------------------------------------
    # writing (the indexer's ingest thread only)

    def replace(self, doc_ids: Iterable[int], chunks: Iterable[Any]) -> None:
        """Delete every chunk of ``doc_ids``, then add ``chunks`` (rows: id, doc_id, text, heading,
        folder_id). Nothing is visible until :meth:`commit`."""
        writer = self.writer
        try:
            for doc_id in doc_ids:
                writer.delete_documents_by_term("doc_id", int(doc_id))
            for row in chunks:
                text = row["text"]
                writer.add_document(
                    tantivy.Document(
                        chunk_id=int(row["id"]),
                        doc_id=int(row["doc_id"]),
                        folder_id=row["folder_id"],
                        text=text,
                        heading=row["heading"] or "",
                        cjk=" ".join(cjk_grams(text)),
                    )
                )
        finally:
            # An exception's traceback keeps this frame: without this, a writer killed by an I/O error
            # would outlive discard() and hold the index's writer lock, so no fresh writer could start.
            del writer

    def commit(self) -> None:
        self.writer.commit()
        self.index.reload()

    def discard(self) -> None:
        """Drop the writer and whatever it had not committed (the caller replays it from the journal).

        After an I/O error (a full disk) Tantivy kills the writer for good: every later call on it fails,
        so the next write needs a fresh one. Files of the lost segment are collected by a later commit.
        """
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.rollback()

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(ValueError):  # a writer killed by an I/O error has nothing to wait for
                self._writer.wait_merging_threads()
            self._writer = None

    # ---------------------------------------------------------------------------------------
    # searching

    def build_query(
        self,
        query: str,
        folder_id: str | None,
        phrases: Iterable[tuple[str, ...]] = (),
        required: Iterable[str] = (),
        excluded: Iterable[str] = (),
        docs: tuple[list[int], bool] | None = None,
    ) -> tantivy.Query | None:
        """Any term matches (BM25 sums what matched); ``None`` when the query has no term.

        ``phrases``, ``required`` and ``excluded`` are indexed terms (:mod:`foldermind.workers.indexer.query`
        reads them from the query): each phrase must stand in the text or the heading, each required term
        in one of them, no excluded term in either. They only narrow: the score is the terms' BM25.
        ``docs``: a search filter's ``(doc ids, exclude)``, only those documents or all but those
        (:mod:`.filters`)."""
        parts: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for term in query_terms(query):
            parts.append((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "text", term)))
            heading = tantivy.Query.term_query(self.schema, "heading", term)
            parts.append((tantivy.Occur.Should, tantivy.Query.boost_query(heading, HEADING_BOOST)))
        for gram in dict.fromkeys(cjk_grams(query)):
            parts.append((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "cjk", gram)))
        if not parts:
            return None
        musts = [(tantivy.Occur.Must, tantivy.Query.boolean_query(parts))]
        musts += [(tantivy.Occur.Must, self._either(tantivy.Query.phrase_query, list(p))) for p in phrases]
        musts += [(tantivy.Occur.Must, self._either(tantivy.Query.term_query, t)) for t in required]
        for term in excluded:
            for field in ("text", "heading"):
                musts.append((tantivy.Occur.MustNot, tantivy.Query.term_query(self.schema, field, term)))
        if folder_id is not None:
            # Scoped inside the search, so the top ``limit`` are the folder's best, not the index's.
            musts.append((tantivy.Occur.Must, tantivy.Query.term_query(self.schema, "folder_id", folder_id)))
        if docs is not None and (docs[0] or not docs[1]):
            ids, exclude = docs
            # Term sets of at most TERM_SET ids, or'ed: measured on SciFact's index (5 segments), one set of
            # 2,000 ids took 16 ms and two of 1,000 2.7 ms. Scored 0: a filter selects, it adds nothing to BM25.
            sets = [
                (tantivy.Occur.Should, tantivy.Query.term_set_query(self.schema, "doc_id", ids[i : i + TERM_SET]))
                for i in range(0, max(len(ids), 1), TERM_SET)
            ]
            only = tantivy.Query.const_score_query(tantivy.Query.boolean_query(sets), 0.0)
            musts.append((tantivy.Occur.MustNot if exclude else tantivy.Occur.Must, only))
        return musts[0][1] if len(musts) == 1 else tantivy.Query.boolean_query(musts)

    def _either(self, make: Callable[..., tantivy.Query], value: Any) -> tantivy.Query:
        """``make`` on the text field or the heading field."""
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, make(self.schema, field, value)) for field in ("text", "heading")]
        )

    def holding_any(self, terms: Iterable[str]) -> tantivy.Query | None:
        """Chunks whose text or heading holds one of the indexed ``terms``; ``None`` for no term."""
        parts = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self.schema, field, term))
            for term in terms
            for field in ("text", "heading")
        ]
        return tantivy.Query.boolean_query(parts) if parts else None

    def documents_matching(self, q: tantivy.Query) -> set[int]:
        """The ``doc_id`` of every chunk ``q`` matches, unranked and uncut (a criteria Smart Folder's members).
        The ids come from the fast field, so no stored document is read."""
        searcher = self.index.searcher()
        total = int(getattr(searcher.search(q, 1, count=True), "count", 0) or 0)
        if not total:
            return set()
        hits = searcher.search(q, total, count=False).hits
        return {int(v) for v in searcher.fast_field_values("doc_id", [address for _, address in hits]) if v is not None}

    def search(
        self,
        query: str,
        limit: int,
        folder_id: str | None = None,
        phrases: Iterable[tuple[str, ...]] = (),
        required: Iterable[str] = (),
        excluded: Iterable[str] = (),
        docs: tuple[list[int], bool] | None = None,
    ) -> tuple[list[KeywordHit], int]:
        """Top ``limit`` chunks and the total number of matches (see :meth:`build_query`)."""
        q = self.build_query(query, folder_id, phrases, required, excluded, docs)
        if q is None:
            return [], 0
        searcher = self.index.searcher()
        result = searcher.search(q, limit, count=True)
        hits = []
        for score, address in result.hits:
            doc = searcher.doc(address)
            hits.append(KeywordHit(int(doc["chunk_id"][0]), float(score)))
        return hits, int(getattr(result, "count", 0) or 0)

    @property
    def num_docs(self) -> int:
        return int(self.index.searcher().num_docs)

    def term_stats(self) -> tuple[Callable[[str], int], int]:
        """``(doc_freq, total)`` for IDF, from one snapshot of the committed index: ``doc_freq(word)`` is
        the number of chunks whose ``text`` holds the word's indexed term, ``total`` the number of chunks.

        Read-only and safe beside searches: like :meth:`search` it takes a searcher of its own, an
        immutable view that a concurrent commit or reload does not change. ``Searcher.doc_freq`` looks a
        term up as given, so the word goes through the index's analysis (lower case, English stem)
        first. It counts chunks deleted since the last merge too: a caller should cap it at ``total``.
        """
        searcher = self.index.searcher()

        def doc_freq(word: str) -> int:
            return max((int(searcher.doc_freq("text", term)) for term in stems(word)), default=0)

        return doc_freq, int(searcher.num_docs)
