"""``evidence.request``: the sentences that answer a question.

Choosing evidence: a hybrid search picks the best chunks of the best files (:func:`.passages.pick`); each is
read on to the end of the paragraph its chunk boundary cuts (:func:`.passages.continuation`) and split into sentences
(:mod:`.sentences`, which keeps every sentence's lines). A sentence's score is

    SEMANTIC * cosine(question, sentence) + LEXICAL * coverage + PRIOR * 1 / (1 + chunk rank)
        + PASSAGE * coverage of its whole passage

where coverage is the idf-weighted share of the question's content terms the sentence holds (idf over the
candidate sentences, so a word every sentence has counts for little; a term only its heading path holds counts
:data:`SECTION_WEIGHT` of its idf). Encoding every sentence would cost ~9 ms each on one thread (MiniLM on ONNX
Runtime, measured here), so only the :data:`ENCODE_AT_MOST` best by coverage and rank are encoded, and sentence
vectors are kept (:data:`CACHE_SIZE`, in the query encoder's :class:`~.encoder.VectorCache`, keyed by model and
text): a question asked again, or a claim checked against a sentence already scored, costs no encode.

A sentence holds the terms its abbreviations stand for (:func:`.sentences.abbreviations`). On top of that score,
bonuses for what the question asks (a figure, a default, a name as code, a name it lacks) and for what a sentence
says beyond it (:data:`NOVELTY`), a penalty for a fragment; a quote may take in a neighbour (:mod:`.reach`).

Checking a generated sentence against the passages is :mod:`.claims`, with the sentence vectors kept here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    EvidenceReply,
    EvidenceRequest,
    EvidenceSpan,
    SearchHit,
    SearchRequest,
)
from foldermind.workers.embedding import model_files
from foldermind.workers.indexer.evidence import floor, passages, reach, sentences
from foldermind.workers.indexer.evidence.sentences import Sentence
from foldermind.workers.indexer.search.encoder import QueryEncoder, VectorCache
from foldermind.workers.indexer.search.search import MAX_QUERY_CHARS, SearchService
from foldermind.workers.indexer.storage.keyword import terms as index_terms
from foldermind.workers.indexer.storage.keyword.languages import ENGLISH

SEMANTIC = 0.55
LEXICAL = 0.35
PRIOR = 0.10
PASSAGE = 0.3
"""Weight of how much of the question the sentence's whole passage holds (its sentences and heading, idf over
the passages): an answer sentence often names little of the question ("A total of 9020 patients were
included."), and a sentence of another passage that names as little but states the same kind of figure ("132
patients" of another trial) must not beat it. Measured: docs/tuning.md#answer-evidence."""
ENCODE_AT_MOST = 20
"""Sentences encoded per question: 20 take ~180 ms on one thread, well inside the 300 ms budget; more answered no
more questions (more sentences near the question compete: docs/tuning.md#answer-evidence)."""
CACHE_SIZE = 4096
"""Sentence vectors kept (384 floats each: ~6 MiB)."""
FIGURE_BONUS = 0.15
"""Added to a sentence that states a figure when the question asks for one ("how many", "what year",
"what dose", "at most", "by default"): such an answer is a number, and the sentence that holds it often
names less of the question's topic than the sentences around it."""
COUNTED_BONUS = 0.2
"""Added, on top of FIGURE_BONUS, to a sentence whose figure comes with the thing the question counts
("How many patients were pooled ...?" / "A total of 9020 patients were included."; :func:`.sentences.counts`:
the figure stands before it, not merely in the same sentence as "patients ... was 2.56%"). With the figure
follow-on from the sentence before (:meth:`EvidenceService._span`). Measured: docs/tuning.md#answer-evidence."""
DEFAULT_BONUS = 0.1
"""Added to a sentence that names a default when the question asks for one (:func:`.sentences.asks_for_default`:
"by default", "when none is named"): a manual states it in so many words ("The default transaction behavior is
DEFERRED."), often in a sentence that names little else of the question."""
CODE_BONUS = 0.15
"""Added to a sentence holding a name written as code (:func:`.sentences.names_code`: ``--enable-usb``,
``.kbd``, ``widthratio``) that the question does not hold, or standing under a heading that is such a name
(:func:`.sentences.heading_name`: a reference page's "apnumber", "chage(1)"), when the question asks for such a
name ("Which configure flag ...", "What file extension ..."). Chosen together with DEFAULT_BONUS (measured:
docs/tuning.md#answer-evidence; the heading name: docs/benchmarks/answer-relevance.md)."""
ENTITY_BONUS = 0.1
"""Added to a sentence holding a name the question does not (:func:`.sentences.names_new`: "Golgi", "RUNX1",
"HoxD") when the question asks for a thing by name ("With which part of the cell ...", "Which transcription
factor ..."; :func:`.sentences.asks_for_entity`): the sentences closest to such a question often restate it
and name nothing new. Measured: docs/tuning.md#answer-evidence."""
NOVELTY = 0.05
"""Added times the share of a sentence's terms the question lacks (:func:`novelty`): the sentences closest to a question
often restate it, the answer says more (a figure, a name, a step). Every shape: docs/benchmarks/answer-relevance.md."""
FRAGMENT_PENALTY = 0.05
"""Taken from a "sentence" that does not end like one (a title, a heading, a table row): those restate a
topic; they rarely hold the answer."""
SECTION_WEIGHT = 0.5
"""How much a question's term counts when only the sentence's heading path holds it: a sentence is about its
section ("Default: 1209600 (2 weeks, in seconds)" under SESSION_COOKIE_AGE, "*February 26, 2013*" under
"Django 1.5 release notes"), though less surely than about its own words."""
CONTEXT_WEIGHT = 0.3
"""How much a follow-up's previous question counts when its sentences and passages are scored (retrieval searches
both joined, and the follow-up alone): enough to find "it", not so much that the previous answer's sentence wins
again."""
WINDOW_CHARS = 700
MAX_FILES = 20
MAX_SPANS = 12


@dataclass(slots=True)
class _Candidate:
    passage: int
    siblings: list[Sentence]
    """Every sentence of its chunk, in order."""
    at: int
    """Its place among them."""
    terms: set[str]
    section: set[str]
    """Terms of its heading path that it does not hold itself."""
    titles: frozenset[str] = frozenset()
    """The headings of its heading path, lower-cased: a line that is one of them is a heading, not a term."""
    path: str = ""
    """Its heading path, as the passage's location has it."""
    stands_for: frozenset[str] = frozenset()
    """Terms its abbreviations stand for, as its passage defines them (:func:`.sentences.abbreviations`)."""
    coverage: float = 0.0
    semantic: float = 0.0
    score: float = 0.0

    @property
    def sentence(self) -> Sentence:
        return self.siblings[self.at]


def novelty(terms: set[str], asked: set[str]) -> float:
    """The share of a sentence's content ``terms`` the question's (``asked``) lack; 0 for a sentence without any."""
    return len(terms - asked) / len(terms) if terms else 0.0


def _each_file_first(hits: list[SearchHit], ranked: list[_Candidate]) -> list[_Candidate]:
    """``ranked`` with each file's best sentence first (in score order), then the rest in score order: the
    spans of a yes-no question (:func:`.sentences.asks_whether`). Its answer is not a fact one sentence states
    but what the documents say about a statement, and the sentences closest to it are mostly the best file's
    restating one another, so an answer quoted one file three times and missed the relevant one
    (docs/tuning.md#answer-evidence)."""
    firsts: list[_Candidate] = []
    files: set[str] = set()
    for c in ranked:
        path = hits[c.passage]["file_path"]
        if path not in files:
            files.add(path)
            firsts.append(c)
    chosen = {id(c) for c in firsts}
    return firsts + [c for c in ranked if id(c) not in chosen]


def _is_title(hit: SearchHit, c: _Candidate) -> bool:
    """Whether ``c`` is its document's title: the first sentence of its first chunk, on one line, with a blank line
    or an underline after it. A title names the document's topic in the question's words ("The Impact of Location
    of Progressive Visual Field Loss on ... Glaucoma.") and states no figure or name of its own: for a question
    asking for one it is scored (the floor's measures count it) but never quoted."""
    if c.at != 0 or int(hit["chunk_index"]) != 0 or len(c.siblings) < 2:
        return False
    title, after = c.siblings[0], c.siblings[1]
    return title.line_start == title.line_end and after.line_start - title.line_end > 1


class EvidenceService:
    def __init__(self, searches: SearchService, encoder: QueryEncoder) -> None:
        self.searches, self.encoder = searches, encoder
        self.cache = VectorCache(CACHE_SIZE)

    # choosing evidence ----------------------------------------------------------------------------

    def select(self, body: EvidenceRequest) -> EvidenceReply:
        t0 = time.perf_counter()
        question = body.question.strip() if isinstance(body.question, str) else ""
        if not question:
            raise JobError(ErrorCode.INVALID_QUERY, "the question is empty")
        query = f"{body.context.strip()} {question}".strip()[-MAX_QUERY_CHARS:]
        max_files = max(1, min(body.max_files, MAX_FILES))
        per_file = max(1, min(body.per_file, 10))
        depth = min(50, max(10, max_files * per_file * 3))
        found = self.searches.search(
            SearchRequest(query=query, mode="hybrid", top_k=depth, folder_id=body.folder_id, with_text=True),
            spread=False,  # passages.pick takes each file's best passages itself
        )
        results = found.results
        if query != question:  # a follow-up: the joined words find its subject, its own words what it asks of it
            alone = SearchRequest(query=question, mode="hybrid", top_k=depth, folder_id=body.folder_id, with_text=True)
            results = passages.interleaved(results, self.searches.search(alone, spread=False).results)
        hits = passages.pick(results, max_files, per_file)
        for hit in hits:
            hit["text"] = hit.get("text", "") + passages.continuation(self.searches.store, hit)
        t_search = time.perf_counter()
        candidates = self._candidates(hits)
        self._cover(question, body.context, candidates)
        t_split = time.perf_counter()
        encoded, vectors_why = self._semantic(question, query, candidates)
        t_encode = time.perf_counter()
        figure = sentences.asks_for_figure(question)
        asks_a_thing = self._score(question, candidates, self._about(question, body.context, candidates), figure)
        ranked = sorted(candidates, key=lambda c: c.score, reverse=True)
        spread = sentences.asks_whether(question)
        if spread:
            ranked = _each_file_first(hits, ranked)
        spans = self._spans(hits, ranked, asks_a_thing, figure, max(1, min(body.max_spans, MAX_SPANS)))
        doc_freq, total = self.searches.bm25.term_stats(ENGLISH)
        rare = floor.rare_weights(question, body.context, CONTEXT_WEIGHT, doc_freq, total)
        support = self._support(ranked, rare, with_vectors=not vectors_why)
        names = sentences.name_terms(question)
        named = {t: w for t, w in rare.items() if t in names}
        support["unheld_name"] = round(floor.unheld(named, self._held(ranked).values(), floor.rare_most(total)), 4)
        if floor.needs_clauses(support) and not vectors_why:
            support["clause"], made = self._clause_cosine(question, query, ranked)
            encoded += made
        supported = sentences.asks_anything(question, body.context) and floor.answers_at_all(support)
        note = found.note
        if vectors_why and candidates:
            note = f"sentences scored by their words only ({vectors_why})"
        for hit in hits:
            hit.pop("text", None)
        done = time.perf_counter()
        return EvidenceReply(
            passages=hits,
            spans=spans,
            supported=supported,
            support=support,
            mode_used=found.mode_used,
            note=note,
            timings={
                "search": _ms(t0, t_search),
                "split": _ms(t_search, t_split),
                "encode": _ms(t_split, t_encode),
                "score": _ms(t_encode, done),
            },
            encoded=encoded,
            spread=spread,
        )

    @staticmethod
    def _score(question: str, candidates: list[_Candidate], about: dict[int, float], figure: bool) -> bool:
        """Scores the candidates (module docstring; ``about`` by passage; ``figure``: the question asks for one,
        :func:`.sentences.asks_for_figure`); whether the question asks for a thing."""
        counted = sentences.counted(question)
        default, name = sentences.asks_for_default(question), sentences.asks_for_name(question)
        entity, asked = sentences.asks_for_entity(question), sentences.content_terms(question)
        for c in candidates:
            c.score = SEMANTIC * c.semantic + LEXICAL * c.coverage + PRIOR / (1 + c.passage)
            c.score += PASSAGE * about[c.passage] + NOVELTY * novelty(c.terms, asked)
            if figure and sentences.has_figure(c.sentence.text):
                c.score += FIGURE_BONUS + (COUNTED_BONUS if sentences.counts(c.sentence.text, counted) else 0.0)
            if default and sentences.states_default(c.sentence.text):
                c.score += DEFAULT_BONUS
            if name and (sentences.names_code(c.sentence.text, question) or sentences.heading_name(c.path, question)):
                c.score += CODE_BONUS
            if entity and sentences.names_new(c.sentence.text, question):
                c.score += ENTITY_BONUS
            if not sentences.finished(c.sentence.text):
                c.score -= FRAGMENT_PENALTY
        return figure or default or name or entity

    @staticmethod
    def _support(ranked: list[_Candidate], rare: dict[str, float], with_vectors: bool) -> dict[str, float]:
        """How strong the best evidence is (:mod:`.floor`): the best cosine and the best coverage of a sentence of
        the passages of the best :data:`.floor.SUPPORT_FROM` (``ranked`` is every candidate, best first), and the
        best share of the question's ``rare`` terms one of those passages holds with its heading."""
        held = EvidenceService._held(ranked)
        leading = [c for c in ranked if c.passage in held]
        semantic = max((c.semantic for c in leading), default=0.0) if with_vectors else 0.0
        return {
            "semantic": round(semantic, 4),
            "lexical": round(max((c.coverage for c in leading), default=0.0), 4),
            "rare": round(floor.rare_share(rare, held.values()), 4),
        }

    def _clause_cosine(self, question: str, query: str, ranked: list[_Candidate]) -> tuple[float, int]:
        """The best cosine of the question with a clause (:func:`.floor.clauses`) of an encoded sentence of a leading
        passage; (cosine, vectors made now). Asked only when the sentences alone would not answer."""
        held = self._held(ranked)
        parts = [p for c in ranked if c.passage in held and c.semantic for p in floor.clauses(c.sentence.text)]
        if not parts:
            return 0.0, 0
        ndim, model = self._model()
        qvec, _why = self.encoder.encode(question, ndim, model or None)
        if query != question:
            joined, _why = self.encoder.encode(query, ndim, model or None)
            qvec = None if qvec is None or joined is None else (1 - CONTEXT_WEIGHT) * qvec + CONTEXT_WEIGHT * joined
        vectors, _why, made = self.vectors(parts)
        if qvec is None or vectors is None:
            return 0.0, made
        return round(float(np.max(vectors @ qvec)), 4), made

    @staticmethod
    def _held(ranked: list[_Candidate]) -> dict[int, set[str]]:
        """The terms each passage of the best :data:`.floor.SUPPORT_FROM` sentences holds, with its heading."""
        passages = {c.passage for c in ranked[: floor.SUPPORT_FROM]}
        held: dict[int, set[str]] = {}
        for c in ranked:
            if c.passage in passages:
                held.setdefault(c.passage, set()).update(c.terms | c.section)
        return held

    @staticmethod
    def _candidates(hits: list[SearchHit]) -> list[_Candidate]:
        out: list[_Candidate] = []
        for i, hit in enumerate(hits):
            text = hit.get("text", "")
            found = sentences.split(text, int(hit["location"]["line_start"]))
            path = hit["location"].get("heading") or ""
            heading = sentences.content_terms(path.replace(" > ", "\n"))
            titles = frozenset(t.strip().lower() for t in path.split(" > ") if t.strip())
            defined = sentences.abbreviations(text)
            for j, s in enumerate(found):
                own = sentences.content_terms(s.text)
                short = frozenset(sentences.stands_for(s.text, defined) - own) if defined else frozenset()
                out.append(_Candidate(i, found, j, own, heading - own, titles, path, short))
        return out

    @staticmethod
    def _cover(question: str, context: str, candidates: list[_Candidate]) -> None:
        """Each candidate's share of the question's terms, idf-weighted; a previous question's terms (a
        follow-up's subject) count for :data:`CONTEXT_WEIGHT` of their idf. A sentence holds the terms its
        abbreviations stand for ("community-onset SSTI" holds "soft tissue infections")."""
        terms = sentences.content_terms(question)
        weight = dict.fromkeys(sentences.content_terms(context) - terms, CONTEXT_WEIGHT) | dict.fromkeys(terms, 1.0)
        if not weight or not candidates:
            return
        n = len(candidates)
        held = {t: sum(t in c.terms or t in c.stands_for for c in candidates) for t in weight}
        idf = {t: weight[t] * index_terms.idf(k, n) for t, k in held.items()}
        total = sum(idf.values())
        for c in candidates:
            held_here = sum(w for t, w in idf.items() if t in c.terms or t in c.stands_for)
            c.coverage = (held_here + SECTION_WEIGHT * sum(w for t, w in idf.items() if t in c.section)) / total

    @staticmethod
    def _about(question: str, context: str, candidates: list[_Candidate]) -> dict[int, float]:
        """Each passage's idf-weighted share of the question's terms, over all its sentences and its heading; a
        previous question's terms count :data:`CONTEXT_WEIGHT` of their idf (a follow-up's subject: "and what does
        --inactive do?" after "What does passwd -l do?" is about passwd's page, not chage's)."""
        terms = sentences.content_terms(question)
        weight = dict.fromkeys(sentences.content_terms(context) - terms, CONTEXT_WEIGHT) | dict.fromkeys(terms, 1.0)
        held: dict[int, set[str]] = {}
        for c in candidates:
            held.setdefault(c.passage, set()).update(c.terms | c.section)
        if not terms or not held:
            return dict.fromkeys(held, 0.0)
        n = len(held)
        idf = {t: w * index_terms.idf(k, n) for t, w in weight.items() for k in [sum(t in h for h in held.values())]}
        total = sum(idf.values()) or 1.0
        return {p: sum(w for t, w in idf.items() if t in h) / total for p, h in held.items()}

    def _semantic(self, question: str, query: str, candidates: list[_Candidate]) -> tuple[int, str]:
        """Cosines of the most promising candidates with the question (and, for a follow-up, the question
        joined to the previous one, weighted :data:`CONTEXT_WEIGHT`); (sentences encoded now, why none could
        be)."""
        if not candidates:
            return 0, ""
        ndim, model = self._model()
        qvec, why = self.encoder.encode(question, ndim, model or None)
        if qvec is None:
            return 0, why
        if query != question:
            joined, why = self.encoder.encode(query, ndim, model or None)
            if joined is None:
                return 0, why
            qvec = (1 - CONTEXT_WEIGHT) * qvec + CONTEXT_WEIGHT * joined
        pre = sorted(candidates, key=lambda c: c.coverage + 0.25 / (1 + c.passage), reverse=True)[:ENCODE_AT_MOST]
        vectors, why, made = self.vectors([c.sentence.text for c in pre])
        if vectors is None:
            return 0, why
        for c, v in zip(pre, vectors, strict=True):
            c.semantic = float(np.dot(v, qvec))
        return made, ""

    def vectors(self, texts: list[str]) -> tuple[NDArray[np.float32] | None, str, int]:
        """Vectors of ``texts`` from the cache or made now; (vectors, why none, how many were made)."""
        ndim, model = self._model()
        key = model or self.encoder.vectors_key or ""
        rows: list[NDArray[np.float32] | None] = [self.cache.get(key, t) for t in texts]
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            made, why = self.encoder.encode_sentences([texts[i] for i in todo], ndim, model or None)
            if made is None:
                return None, why, 0
            for i, v in zip(todo, made, strict=True):
                rows[i] = v
                self.cache.put(key, texts[i], v)
        out = np.zeros((len(texts), ndim), dtype=np.float32)
        for i, r in enumerate(rows):
            out[i] = r
        return out, "", len(todo)

    def _model(self) -> tuple[int, str]:
        """The index's vector size and what its vectors are (model and precision; empty before any)."""
        model, precision = self.searches.store.embeddings.model()
        return self.searches.vectors.ndim, model_files.vectors_key(model, precision) if model else ""

    @staticmethod
    def _spans(
        hits: list[SearchHit], ranked: list[_Candidate], thing: bool, figure: bool, most: int
    ) -> list[EvidenceSpan]:
        """The spans of the ``most`` best sentences of ``ranked``, each once: not one a better sentence's span holds
        already, nor one whose quote holds or is held by an earlier one of its file (:func:`.reach.repeats`), nor a
        title when the question asks for a ``thing``; the first takes in the sentence after it when that one goes on
        from it and scores :data:`.reach.NEXT_SHARE` of it (:func:`.reach.goes_on`)."""
        scores = {(c.passage, c.at): c.score for c in ranked}
        spans: list[EvidenceSpan] = []
        seen: set[str] = set()
        for c in ranked:
            if c.sentence.text.lower() in seen or (thing and _is_title(hits[c.passage], c)):
                continue
            if any(s["passage"] == c.passage and c.sentence.text in s["text"] for s in spans):
                continue
            seen.add(c.sentence.text.lower())
            after = scores.get((c.passage, c.at + 1), 0.0)
            then = not spans and after >= reach.NEXT_SHARE * c.score and reach.goes_on(c.siblings, c.at, c.titles)
            span = EvidenceService._span(hits, c, figure, then)
            if reach.repeats(hits, spans, span) is None:  # else the answer would quote the same lines twice
                spans.append(span)
            if len(spans) >= most:
                break
        return spans

    @staticmethod
    def _span(hits: list[SearchHit], c: _Candidate, figure: bool, then: bool = False) -> EvidenceSpan:
        """The span quoted for ``c``: its sentence, and its neighbours too when the question asks for a figure
        that the sentence lacks and a neighbour states: up to the first of the next :data:`.reach.FOLLOW_ON` that
        does ("Set list_max_show_all to ..." / "By default, this is set to 200."), else the one before (a
        settings entry's "Default: 259200" / "The number of seconds a password reset link is valid for."); its
        window is the sentence before and the one after that, line by line (an option's line stays its own)."""
        text = hits[c.passage].get("text", "")
        first, last = reach.quoted(c.siblings, c.at, c.titles, figure, text, then)
        quoted = reach.joined(c.siblings, first, last, c.titles, text)
        before, after = c.siblings[max(0, first - 1)], c.siblings[min(len(c.siblings) - 1, last + 1)]
        window = "\n".join(line for line in map(sentences.quote, text[before.start : after.end].splitlines()) if line)
        w_first, w_last = before.line_start, after.line_end
        if len(window) > WINDOW_CHARS:
            window, w_first, w_last = quoted, c.siblings[first].line_start, c.siblings[last].line_end
        return EvidenceSpan(
            passage=c.passage,
            text=quoted,
            line_start=c.siblings[first].line_start,
            line_end=c.siblings[last].line_end,
            score=round(c.score, 4),
            semantic=round(c.semantic, 4),
            lexical=round(c.coverage, 4),
            window=window,
            window_line_start=w_first,
            window_line_end=w_last,
        )


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 3)
