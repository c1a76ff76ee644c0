"""Which documents a criteria Smart Folder (:mod:`.criteria`) holds now, as a search filter's document set.

A criteria folder resolves exactly as a search filter does (:class:`.filters.FilterIndex`, read at this
moment: a relative window counts back from now, so documents age out of it without any event), intersected
with the documents its ``query`` matches. The result is an :class:`.filters.Admitted`, the shape the keyword
and vector searches already take inside the search: searching with a criteria folder's id is searching with
that filter, and its ``file_count`` is the number of documents in the set.

What ``query`` means. A document belongs when one of its chunks holds ANY of the query's words, after the
index's own analysis (lower case, English stems: "invoices" is "invoice"; CJK bigrams), with the search's two
operators: a ``"quoted phrase"`` (or a quoted single word) every such chunk must hold, and ``-word``, which
keeps out every document holding the word anywhere. Any word rather than all of them, because a folder's query
names the kinds of document it collects: "receipt invoice" is a user's receipts and invoices, and requiring
both words would leave out nearly every receipt (a user who needs both quotes each one). And no score cut:
BM25 scores move whenever unrelated files are added (IDF), so a cut would make a document drop in and out of
the folder while its own text stays the same; a yes/no match keeps membership a property of the document.

The keyword match is read from Tantivy (every matching chunk's ``doc_id``, a fast field: no stored document
is read) and cached until the next commit (:meth:`.store.Store.change_token`, which a Tantivy commit moves
too, since it is followed by the journal's SQLite commit). Tantivy lags SQLite by up to one commit: a
document just written joins the folder when the keyword index has it, as it becomes searchable.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from foldermind.protocol.messages import CriteriaInfo
from foldermind.workers.indexer.criteria import Criteria
from foldermind.workers.indexer.search import filters
from foldermind.workers.indexer.search import query as operators
from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
from foldermind.workers.indexer.storage.store import Store

CACHED_QUERIES = 16


class CriteriaScopes:
    """Resolves criteria folders for the indexer's searches, side by side: one lock keeps the caches whole."""

    def __init__(self, store: Store, bm25: KeywordIndex, resolver: filters.FilterIndex) -> None:
        self.store, self.bm25, self.resolver = store, bm25, resolver
        self._matches: OrderedDict[str, tuple[int, frozenset[int]]] = OrderedDict()
        self._sets: OrderedDict[str, tuple[tuple[str, str], filters.Admitted]] = OrderedDict()
        self._lock = threading.RLock()  # admitted() asks matching()

    def admitted(self, c: Criteria) -> filters.Admitted:
        """The indexed documents ``c`` holds now (and every other document, for Tantivy's must-not)."""
        with self._lock:
            return self._admitted_locked(c)

    def _admitted_locked(self, c: Criteria) -> filters.Admitted:
        base = self.resolver.admitted(c.filters(), None)
        if not c.query:
            return base
        words = self.matching(c.query)
        key = (base.name, f"{len(words)}:{hash(words):x}")
        cached = self._sets.get(c.id)
        if cached is not None and cached[0] == key:
            self._sets.move_to_end(c.id)
            return cached[1]  # the same instance: its vector keys, once read, are kept
        admitted = filters.intersect(base, words)
        self._sets[c.id] = (key, admitted)
        self._sets.move_to_end(c.id)
        while len(self._sets) > CACHED_QUERIES:
            self._sets.popitem(last=False)
        return admitted

    def info(self, c: Criteria) -> CriteriaInfo:
        return CriteriaInfo(
            id=c.id,
            name=c.name,
            description=c.description,
            query=c.query,
            file_types=list(c.file_types),
            modified_after=c.modified_after,
            modified_before=c.modified_before,
            within=c.within,
            added_at=c.added_at,
            file_count=len(self.admitted(c).docs),
        )

    def matching(self, query: str) -> frozenset[int]:
        """The documents with a chunk that matches ``query`` (see the module's docstring), from Tantivy."""
        with self._lock:
            return self._matching_locked(query)

    def _matching_locked(self, query: str) -> frozenset[int]:
        token = self.store.change_token()
        cached = self._matches.get(query)
        if cached is not None and cached[0] == token:
            self._matches.move_to_end(query)
            return cached[1]
        parsed = operators.parse(query)
        q = self.bm25.build_query(parsed.text, None, parsed.phrases, parsed.required)
        found = self.bm25.documents_matching(q) if q is not None else set()
        if parsed.excluded:
            banned = self.bm25.holding_any(parsed.excluded)
            found -= self.bm25.documents_matching(banned) if banned is not None else set()
        docs = frozenset(found)
        self._matches[query] = (token, docs)
        self._matches.move_to_end(query)
        while len(self._matches) > CACHED_QUERIES:
            self._matches.popitem(last=False)
        return docs
