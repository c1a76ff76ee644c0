"""The Tantivy (BM25) side of the index.

Fields: ``chunk_id`` and ``doc_id`` (integers; a document's chunks are deleted by ``doc_id``), ``folder_id`` (raw,
for scoping), ``text`` and ``heading`` (stemmed terms), ``title`` (the document's title, in every chunk of it),
``name`` (its file name's stem cut into words: ``lang_createTable.html`` is "lang create table"; boosts and word
cutting: :mod:`.fields`), ``cjk`` (the text's Chinese/Japanese/Korean characters as overlapping bigrams, which the
stemmed fields never match), ``lang`` (raw: the chunk's stemming language), and the two a search filter reads
inside the query (:class:`Where`): ``ext`` (the file name's suffix, lower case) and ``mtime`` (ns, a fast field).

Terms (:mod:`.terms`, one rule for documents and queries) and languages (:mod:`.languages`): a chunk is stemmed
with its document's language, and the terms of every language go into one ``text`` and one ``heading`` field, so
BM25 weighs every document against the same average length and count. A query's words are stemmed for every
language the index holds and each word's stems are or'ed, rather than the query's language detected (two or three
words are too short to detect); an index of English documents ranks as with Tantivy's own ``en_stem``.
Measured: docs/tuning.md#keyword-index.

Queries never go through Tantivy's query parser: the query is cut into words by our own rule, each word stemmed
as its field was, and the terms combined as term queries, so a user's ``AND``, quotes, ``field:`` or ``*`` are
plain words, never syntax. Two content words in a row (:data:`.languages.STOP_WORDS` left out, the gap kept)
also score as a phrase in ``text``, at ``[search] keyword_proximity`` of its BM25.

A change to these fields bumps :data:`SCHEMA_VERSION`: the index is rebuilt from SQLite (``rebuild_keyword_index``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.protocol.runtime.home import fsync_path
from foldermind.workers.indexer.storage.keyword.fields import BOOSTS, Boosts, name_words
from foldermind.workers.indexer.storage.keyword.languages import ENGLISH, STOP_WORDS, stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import (
    OTHER_LANGUAGES,
    cjk_grams,
    query_tokens,
    stem,
    stems,
    text_terms,
)

TERM_SET = 1000
"""The most ids in one Tantivy term set of a search filter (see :meth:`KeywordIndex.build_query`)."""
MASK_TERMS = 24
"""Terms per search of :meth:`KeywordIndex.held` (a float32 score holds a sum of distinct powers of 2 below 2**24)."""
SCHEMA_VERSION = 4
"""The Tantivy fields' version: 1 English-stemmed by Tantivy, 2 stemmed here in each document's language, 3 with
the ``title`` and ``name`` fields, 4 with ``ext`` and ``mtime``."""


def _column(row: Any, name: str) -> Any:
    """A row's column, ``None`` without it (a ``sqlite3.Row`` raises IndexError, a dict KeyError)."""
    try:
        return row[name]
    except (IndexError, KeyError):
        return None


@dataclass(frozen=True, slots=True)
class Where:
    """A search filter that Tantivy applies with its own fields (:mod:`.filters` decides when): the file's
    extension among ``types`` (without the dot, lower case; empty: any), its modification time at or after
    ``after_ns`` and before ``before_ns``."""

    types: frozenset[str] = frozenset()
    after_ns: int | None = None
    before_ns: int | None = None


def extension(path: str) -> str:
    """The ``ext`` field of a file: its suffix without the dot, lower case ('' for none)."""
    return os.path.splitext(path)[1][1:].lower()


@dataclass(frozen=True, slots=True)
class KeywordHit:
    chunk_id: int
    score: float


PROXIMITY: float = SearchPolicy.model_fields["keyword_proximity"].default
"""The proximity bonus's share (``[search] keyword_proximity``; measured: docs/tuning.md#proximity)."""


class KeywordIndex:
    def __init__(
        self, path: Path, writer_heap: int = 64_000_000, boosts: Boosts = BOOSTS, proximity: float = PROXIMITY
    ) -> None:
        self.path = path
        self.boosts = boosts
        self.proximity = proximity
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("chunk_id", stored=True, indexed=True, fast=True)
        builder.add_integer_field("doc_id", stored=False, indexed=True, fast=True)
        builder.add_text_field("folder_id", stored=False, tokenizer_name="raw")
        # Stemmed terms, whitespace-separated (stemmed here, so Tantivy only splits them). Not stored: only
        # ``chunk_id`` is read back from a hit, and the text is in SQLite.
        builder.add_text_field("text", stored=False, tokenizer_name="whitespace")
        builder.add_text_field("heading", stored=False, tokenizer_name="whitespace")
        builder.add_text_field("title", stored=False, tokenizer_name="whitespace")
        builder.add_text_field("name", stored=False, tokenizer_name="whitespace")
        builder.add_text_field("cjk", stored=False, tokenizer_name="whitespace")
        builder.add_text_field("lang", stored=False, tokenizer_name="raw")
        builder.add_text_field("ext", stored=False, tokenizer_name="raw")
        builder.add_integer_field("mtime", stored=False, indexed=True, fast=True)
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
        folder_id, and if the row has them the document's detected language (English without), ``path``,
        ``title`` and ``mtime_ns``).
        Nothing is visible until :meth:`commit`."""
        writer = self.writer
        try:
            for doc_id in doc_ids:
                writer.delete_documents_by_term("doc_id", int(doc_id))
            for row in chunks:
                text = row["text"]
                language = stemmed_as(_column(row, "language"))
                path = _column(row, "path")
                writer.add_document(
                    tantivy.Document(
                        chunk_id=int(row["id"]),
                        doc_id=int(row["doc_id"]),
                        folder_id=row["folder_id"],
                        text=" ".join(text_terms(text, language)),
                        heading=" ".join(text_terms(row["heading"] or "", language)),
                        title=" ".join(text_terms(_column(row, "title") or "", language)),
                        name=" ".join(text_terms(name_words(path), language)) if path else "",
                        cjk=" ".join(cjk_grams(text)),
                        lang=language,
                        ext=extension(path) if path else "",
                        mtime=int(_column(row, "mtime_ns") or 0),
                    )
                )
        finally:
            # An exception's traceback keeps this frame: without this, a writer killed by an I/O error
            # would outlive discard() and hold the index's writer lock, so no fresh writer could start.
            del writer

    def commit(self) -> None:
        self.writer.commit()
        # Tantivy syncs the folder before it renames meta.json into place, not after: until the folder is synced
        # a power cut takes the commit back, behind a journal already marked applied (tests/powerloss.py).
        fsync_path(self.path)
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

    def languages(self, searcher: Any) -> list[str]:
        """English and every other language some chunk of ``searcher``'s snapshot is stemmed in (one term
        lookup each; a deleted chunk's language counts until a merge drops it, which costs only lookups)."""
        return [ENGLISH, *(code for code in OTHER_LANGUAGES if searcher.doc_freq("lang", code) > 0)]

    def build_query(
        self,
        query: str,
        folder_id: str | None,
        phrases: Iterable[Sequence[str]] = (),
        required: Iterable[str] = (),
        excluded: Iterable[str] = (),
        docs: tuple[list[int], bool] | None = None,
        languages: Sequence[str] = (ENGLISH,),
        where: Where | None = None,
    ) -> tantivy.Query | None:
        """Any term matches, in ``text`` or a boosted field (:attr:`boosts`; BM25 sums what matched); ``None``
        when the query has no term.

        Each word is looked for in every stem ``languages`` give it (its distinct stems or'ed: a word whose
        stems agree counts once). ``phrases``, ``required`` and ``excluded`` are tokens of :func:`query_tokens`
        (:mod:`foldermind.workers.indexer.search.query` reads them from the query): each phrase must stand in the text
        or the heading, each required token in one of them, no excluded token in either, in one language's stems.
        They only narrow: the score is the terms' BM25. ``docs``: a search filter's ``(doc ids, exclude)``, only
        those documents or all but those; ``where``: one Tantivy applies by its ``ext`` and ``mtime`` fields
        (:mod:`.filters`)."""
        parts: list[tuple[tantivy.Occur, tantivy.Query]] = []
        fields = self.boosts.fields()
        tokens = query_tokens(query)
        for token in tokens:
            for term in dict.fromkeys(stem(token, language) for language in languages):
                for name, boost in fields:
                    q = tantivy.Query.term_query(self.schema, name, term)
                    parts.append((tantivy.Occur.Should, q if boost == 1.0 else tantivy.Query.boost_query(q, boost)))
        if self.proximity > 0:
            parts += self._pairs(tokens, languages)
        for gram in dict.fromkeys(cjk_grams(query)):
            parts.append((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "cjk", gram)))
        if not parts:
            return None
        musts = [(tantivy.Occur.Must, tantivy.Query.boolean_query(parts))]
        for phrase in phrases:
            musts.append((tantivy.Occur.Must, self._anywhere(phrase, languages)))
        for token in required:
            musts.append((tantivy.Occur.Must, self._anywhere([token], languages)))
        for token in excluded:
            for term in dict.fromkeys(stem(token, language) for language in languages):
                for name in ("text", "heading"):
                    musts.append((tantivy.Occur.MustNot, tantivy.Query.term_query(self.schema, name, term)))
        if folder_id is not None:
            # Scoped inside the search, so the top ``limit`` are the folder's best, not the index's.
            musts.append((tantivy.Occur.Must, tantivy.Query.term_query(self.schema, "folder_id", folder_id)))
        if docs is not None and (docs[0] or not docs[1]):
            ids, exclude = docs
            # Term sets of at most TERM_SET ids, or'ed: one big set is far slower (docs/tuning.md#keyword-index).
            # Scored 0: a filter selects, it adds nothing to BM25.
            sets = [
                (tantivy.Occur.Should, tantivy.Query.term_set_query(self.schema, "doc_id", ids[i : i + TERM_SET]))
                for i in range(0, max(len(ids), 1), TERM_SET)
            ]
            only = tantivy.Query.const_score_query(tantivy.Query.boolean_query(sets), 0.0)
            musts.append((tantivy.Occur.MustNot if exclude else tantivy.Occur.Must, only))
        if where is not None:
            musts += [(tantivy.Occur.Must, tantivy.Query.const_score_query(q, 0.0)) for q in self._where(where)]
        return musts[0][1] if len(musts) == 1 else tantivy.Query.boolean_query(musts)

    def _pairs(self, tokens: Sequence[str], languages: Sequence[str]) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """The proximity bonus (``[search] keyword_proximity``): each two content words next to each other in
        the query once its stop words are left out, as a phrase in ``text`` with the query's gap between them
        ("rate of decline": "rate", then "decline" two places on), scored at :attr:`proximity` of its BM25. The
        words also score alone, so the bonus only reorders chunks that hold both."""
        content = [(i, token) for i, token in enumerate(tokens) if token not in STOP_WORDS]
        pairs = dict.fromkeys((a, b, j - i) for (i, a), (j, b) in itertools.pairwise(content))
        out = []
        for a, b, gap in pairs:
            for first, second in dict.fromkeys((stem(a, language), stem(b, language)) for language in languages):
                words: list[str | tuple[int, str]] = [(0, first), (gap, second)]
                q = tantivy.Query.phrase_query(self.schema, "text", words)
                out.append((tantivy.Occur.Should, tantivy.Query.boost_query(q, self.proximity)))
        return out

    def _where(self, where: Where) -> list[tantivy.Query]:
        """The clauses of a field filter: an extension among the types; a range on the fast ``mtime`` field
        (after inclusive, before exclusive, as :mod:`.filters` defines them)."""
        out = []
        if where.types:
            terms = [
                (tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "ext", t)) for t in sorted(where.types)
            ]
            out.append(tantivy.Query.boolean_query(terms))
        if where.after_ns is not None or where.before_ns is not None:
            out.append(
                tantivy.Query.range_query(
                    self.schema,
                    "mtime",
                    tantivy.FieldType.Integer,
                    where.after_ns,
                    where.before_ns,
                    include_lower=True,
                    include_upper=where.before_ns is None,
                )
            )
        return out

    def _anywhere(self, tokens: Sequence[str], languages: Sequence[str]) -> tantivy.Query:
        """The tokens (one: a term; more: a phrase), stemmed for any of ``languages``, in the text or the
        heading."""
        clauses = []
        for stems_ in dict.fromkeys(tuple(stem(token, language) for token in tokens) for language in languages):
            terms: list[str | tuple[int, str]] = list(stems_)
            for name in ("text", "heading"):
                if len(terms) == 1:
                    q = tantivy.Query.term_query(self.schema, name, terms[0])
                else:
                    q = tantivy.Query.phrase_query(self.schema, name, terms)
                clauses.append((tantivy.Occur.Should, q))
        return tantivy.Query.boolean_query(clauses)

    def holding_any(self, terms: Iterable[str]) -> tantivy.Query | None:
        """Chunks whose text or heading holds one of the indexed ``terms``; ``None`` for no term."""
        parts = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self.schema, field, term))
            for term in terms
            for field in ("text", "heading")
        ]
        return tantivy.Query.boolean_query(parts) if parts else None

    def held(self, chunk_ids: Sequence[int], terms: Sequence[str]) -> dict[int, list[bool]]:
        """Whether each of ``chunk_ids``' text or heading holds each indexed term of ``terms``, read from the
        committed index (a chunk it lacks is left out), not by analysing the text again: one search per
        :data:`MASK_TERMS` terms, where the ``i``-th term's clause scores ``2**i`` when it matches, so a hit's
        score is the mask of the terms it holds."""
        if not chunk_ids:
            return {}
        searcher = self.index.searcher()
        # Or'ed term queries, not a term set: for a few ids a term set costs several times as much
        # (docs/benchmarks/search-path.md, s51).
        ids = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "chunk_id", int(c))) for c in chunk_ids]
        only = (tantivy.Occur.Must, tantivy.Query.const_score_query(tantivy.Query.boolean_query(ids), 0.0))
        masks: dict[int, int] = {}
        for at in range(0, max(len(terms), 1), MASK_TERMS):
            clauses = [only]
            for i, term in enumerate(terms[at : at + MASK_TERMS]):
                holds = self.holding_any([term])
                assert holds is not None  # a term gives a query
                mask = tantivy.Query.const_score_query(holds, float(1 << i))
                clauses.append((tantivy.Occur.Should, mask))
            hits = searcher.search(tantivy.Query.boolean_query(clauses), len(chunk_ids), count=False).hits
            found = searcher.fast_field_values("chunk_id", [address for _, address in hits])
            for (score, _), cid in zip(hits, found, strict=True):
                if cid is not None:
                    masks[int(cid)] = masks.get(int(cid), 0) | int(score) << at
        return {cid: [bool(mask >> i & 1) for i in range(len(terms))] for cid, mask in masks.items()}

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
        phrases: Iterable[Sequence[str]] = (),
        required: Iterable[str] = (),
        excluded: Iterable[str] = (),
        docs: tuple[list[int], bool] | None = None,
        where: Where | None = None,
    ) -> tuple[list[KeywordHit], int]:
        """Top ``limit`` chunks and the total number of matches (see :meth:`build_query`), in every language
        the index holds."""
        searcher = self.index.searcher()
        languages = self.languages(searcher)
        q = self.build_query(query, folder_id, phrases, required, excluded, docs, languages, where)
        if q is None:
            return [], 0
        result = searcher.search(q, limit, count=True)
        hits = []
        for score, address in result.hits:
            doc = searcher.doc(address)
            hits.append(KeywordHit(int(doc["chunk_id"][0]), float(score)))
        return hits, int(getattr(result, "count", 0) or 0)

    @property
    def num_docs(self) -> int:
        return int(self.index.searcher().num_docs)

    def census(self, except_docs: Sequence[int]) -> tuple[int, int]:
        """(count, sum of the ``chunk_id`` fast field) of the chunks of every document but ``except_docs``, from
        one committed snapshot: what :meth:`.Journal.keyword_census` says it must hold. Reads every segment's
        ids, so a missing or damaged file fails here."""
        searcher = self.index.searcher()
        q = tantivy.Query.all_query()
        if except_docs:
            ids = list(except_docs)
            sets = [
                (tantivy.Occur.Should, tantivy.Query.term_set_query(self.schema, "doc_id", ids[i : i + TERM_SET]))
                for i in range(0, len(ids), TERM_SET)
            ]
            q = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, q), (tantivy.Occur.MustNot, tantivy.Query.boolean_query(sets))]
            )
        count = int(getattr(searcher.search(q, 1, count=True), "count", 0) or 0)
        total = searcher.aggregate(q, {"ids": {"sum": {"field": "chunk_id"}}})["ids"]["value"]
        return count, int(total or 0)

    def term_stats(self, language: str = ENGLISH) -> tuple[Callable[[str], int], int]:
        """``(doc_freq, total)`` for IDF, from one snapshot of the committed index: ``doc_freq(word)`` is
        the number of chunks whose ``text`` holds the word's term as a document in ``language`` indexes it,
        ``total`` the number of chunks.

        Read-only and safe beside searches: like :meth:`search` it takes a searcher of its own, an
        immutable view that a concurrent commit or reload does not change. ``Searcher.doc_freq`` looks a
        term up as given, so the word goes through the language's analysis (lower case, its stem) first. It
        counts chunks deleted since the last merge too: a caller should cap it at ``total``.
        """
        searcher = self.index.searcher()
        language = stemmed_as(language)

        def doc_freq(word: str) -> int:
            return max((int(searcher.doc_freq("text", term)) for term in stems(word, language)), default=0)

        return doc_freq, int(searcher.num_docs)
