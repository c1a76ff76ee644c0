"""The Tantivy (BM25) side of the index.

Fields: ``chunk_id`` and ``doc_id`` (integers; a document's chunks are deleted by ``doc_id``),
``folder_id`` (raw, for scoping), ``text`` and ``heading`` (English stemming), and ``cjk``: the
Chinese/Japanese/Korean characters of the text as overlapping bigrams, since the stemmed field
splits CJK text into whole runs that a query never matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W{_CJK}]+", re.UNICODE)


def cjk_grams(text: str) -> list[str]:
    """Bigrams of every CJK run (a lone character stands for itself)."""
    grams: list[str] = []
    for run in _CJK_RUN.findall(text):
        grams.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return grams


def query_words(query: str) -> list[str]:
    """The query's words, lower-cased: operators, quotes, wildcards and brackets are dropped, so a
    user's ``AND``, ``"``, ``*`` or ``!!!`` can never make the query parser fail."""
    return [w.lower() for w in _WORD.findall(query)]


@dataclass(frozen=True, slots=True)
class KeywordHit:
    chunk_id: int
    score: float
    snippet: str


class KeywordIndex:
    def __init__(self, path: Path, writer_heap: int = 64_000_000) -> None:
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

    def commit(self) -> None:
        self.writer.commit()
        self.index.reload()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None

    # ---------------------------------------------------------------------------------------
    # searching

    def build_query(self, query: str, folder_id: str | None) -> Any | None:
        words = query_words(query)
        grams = cjk_grams(query)
        parts: list[tuple[Any, Any]] = []
        if words:
            parsed = self.index.parse_query(" ".join(words), ["text", "heading"], field_boosts={"heading": 0.5})
            parts.append((tantivy.Occur.Should, parsed))
        for gram in dict.fromkeys(grams):
            parts.append((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "cjk", gram)))
        if not parts:
            return None
        text_query = tantivy.Query.boolean_query(parts)
        if folder_id is None:
            return text_query
        scope = tantivy.Query.term_query(self.schema, "folder_id", folder_id)
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, text_query), (tantivy.Occur.Must, scope)])

    def search(self, query: str, limit: int, folder_id: str | None = None) -> tuple[list[KeywordHit], int]:
        """Top ``limit`` chunks and the total number of matches."""
        q = self.build_query(query, folder_id)
        if q is None:
            return [], 0
        searcher = self.index.searcher()
        result = searcher.search(q, limit, count=True)
        snippets = tantivy.SnippetGenerator.create(searcher, q, self.schema, "text")
        snippets.set_max_num_chars(240)
        hits = []
        for score, address in result.hits:
            doc = searcher.doc(address)
            snippet = snippets.snippet_from_doc(doc).fragment()
            hits.append(KeywordHit(int(doc["chunk_id"][0]), float(score), snippet))
        return hits, int(getattr(result, "count", 0) or 0)

    @property
    def num_docs(self) -> int:
        return int(self.index.searcher().num_docs)
