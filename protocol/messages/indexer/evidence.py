"""Evidence for answers: the sentences that answer a question (``evidence``), and whether each sentence of a
generated answer is backed by its sources (``evidence.check``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message
from foldermind.protocol.messages.indexer.search import SearchHit


class EvidenceSpan(TypedDict):
    passage: int
    """Index into the reply's ``passages``."""
    text: str
    """The sentence as quoted: verbatim, white space collapsed."""
    line_start: int
    line_end: int
    score: float
    semantic: float
    """Cosine of the sentence's vector and the question's (0 when no vector was made)."""
    lexical: float
    """The share of the question's terms (idf-weighted) that the sentence holds."""
    window: str
    """The sentence with its neighbours in the chunk: what a model is shown as the source."""
    window_line_start: int
    window_line_end: int


@message("evidence.request")
@dataclass(slots=True)
class EvidenceRequest(Message):
    """-> indexer: the sentences that answer ``question``. A hybrid search for ``question`` (with
    ``context``, the previous question of a conversation, in front of it; and then alone, the two rankings taken
    in turns) picks the best chunks of the ``max_files`` best files (``per_file`` each); their sentences are
    scored against the question (its vector against theirs, its terms in them, their chunk's rank) and the best
    ``max_spans`` come back, best first. Errors as ``search.request``."""

    question: str
    """The question (the front door cuts it to 1000 characters)."""
    context: str = ""
    """The previous question of the conversation: put in front of the question for a search (the question is searched
    alone too), and counted at 0.3 of its weight when sentences and passages are scored, so a follow-up keeps its
    subject."""
    max_files: int = 5
    """Files the passages come from (1..20)."""
    per_file: int = 1
    """Chunks taken from each file (1..10)."""
    max_spans: int = 4
    """Sentences returned at most (1..12)."""
    folder_id: str | None = None
    """Only this Smart Folder's documents, as `search.request`'s `folder_id` (`chat_with_documents`'
    `smart_folder_id`, `foldermind ask --folder`)."""
    scope: list[str] | None = None
    """The Smart Folder ids (path or criteria) the asking MCP client's key sees, which the front door sets on every
    request it makes for a scoped key; `null`: every folder. A document outside is answered for as one outside
    every folder is."""


@message("evidence.reply")
@dataclass(slots=True)
class EvidenceReply(Message):
    """``passages``: the chunks searched (search hits, rank order, without text); ``spans``: the chosen
    sentences, best first; ``supported``: whether the best of them answers the question at all (else
    the documents do not say); ``mode_used`` and ``note`` of the search (keyword-only when vectors are
    unavailable, and then sentences are scored by their terms alone); ``timings`` in ms (``search``,
    ``split``, ``encode``, ``score``) and ``encoded``: sentence vectors made (not from the cache)."""

    passages: list[SearchHit]
    """The chunks searched, as `SearchHit`s (see `search.reply`), rank order, without `text`."""
    spans: list[EvidenceSpan]
    """The chosen sentences, best first (below)."""
    supported: bool
    """Whether the best evidence answers the question at all: a sentence of the leading passages is close enough to
    it or holds enough of its terms (idf-weighted; the floor is the indexer's). False: the documents do not say."""
    mode_used: str
    """The search's mode (`keyword` when no vectors exist yet)."""
    note: str | None = None
    """The search's note, or `sentences scored by their words only (REASON)` when no sentence vector could be made."""
    timings: dict[str, float] = field(default_factory=dict)
    """Milliseconds: `search`, `split`, `encode`, `score`."""
    encoded: int = 0
    """Sentence vectors made for this request (the rest came from the cache)."""
    spread: bool = False
    """The spans lead with each file's best sentence (a yes-no question: what each document says about the
    statement); an answer quotes the first few that score close to the first (``[llm] yes_no_files``,
    ``yes_no_ratio``)."""
    support: dict[str, float] = field(default_factory=dict)
    """What `supported` was judged on: `semantic`, the best cosine, and `lexical`, the best share of the question's
    terms, over the sentences of the leading passages; beside them `rare`, measured and not judged: the best share of
    the question's rare terms (idf over the index) one leading passage holds."""


class Claim(TypedDict):
    text: str
    sources: list[int]
    """The sources (0-based into the request's ``sources``) the sentence cites; empty: none."""


class ClaimCheck(TypedDict):
    supported: bool
    source: int
    """The source that supports it (one the claim cites; any, for a claim that cites none); -1: none."""
    quote: str
    """The sentence of that source closest to the claim (its exact words), else empty."""
    similarity: float
    missing: list[str]
    """Facts (figures, names) the claim states that the best source does not hold."""
    about: bool
    """Whether the claim, with the sentence that backs it, is about what the question asks: it holds at least half
    the question's terms, weighted by how few of the sources' sentences hold each (its subject, not only its
    topic: "chage -E", not "chage")."""


@message("evidence.check.request")
@dataclass(slots=True)
class CheckRequest(Message):
    """-> indexer: is each generated sentence of ``claims`` backed by a source, and about the question? A claim is
    supported by a source that holds every figure and name it states, most of its content words (the question's
    words count as given), and a sentence whose vector is close to the claim's."""

    question: str
    """The question the answer was written for."""
    claims: list[Claim]
    """The answer's sentences, each `{text, sources}` (`Claim`): the sentence without markers, and the 0-based indexes
    into `sources` that it cites."""
    sources: list[str]
    """The texts the model was shown (the spans' windows)."""
    reference: str = ""
    """An answer the claims are compared with (the best quote): see the reply's ``carries``."""


@message("evidence.check.reply")
@dataclass(slots=True)
class CheckReply(Message):
    """One check per claim, in order; ``carries`` is whether the supported claims state at least one fact
    (a figure, a name) of ``reference`` that the question does not: an answer that does, answers; one that
    does not only talks around the question."""

    checks: list[ClaimCheck]
    """One `ClaimCheck` per claim, in order: `{supported, source, quote, similarity, missing, about}`: the supporting
    source's index (-1: none), its sentence nearest the claim (its exact words; empty when unsupported), that cosine
    (-1 without vectors), the facts of the claim the best source lacks, and whether it is about the question."""
    carries: bool = False
    """Whether the supported claims state at least one fact (a figure, a name) of the request's ``reference``
    that the question does not."""
