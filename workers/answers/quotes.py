"""Answers built from evidence: quoted sentences (correct by construction), and a generated answer cut down
to the sentences a passage backs.

An :class:`Evidence` holds the indexer's ``evidence.reply``. :func:`extractive` quotes its best sentences,
verbatim, each followed by its ``[n]``; :func:`claims` splits a generated answer into sentences with the
sources they cite, and :func:`checked` keeps those the indexer's ``evidence.check`` found supported, cited to
the sentence that supports them. Citations are numbered in the order the answer first uses them, one per
quoted sentence, and carry that sentence as ``quote`` with its lines.

A quote is labelled with the section it sits in (``apnumber: “For numbers 1-9, returns the number spelled
out.” [1]``) when the quote does not name it: in a reference manual the term asked for is often only the
heading, and "For numbers 1-9, ..." alone does not say which filter does it. The model sees the same label
in front of each window, and a generated sentence is checked against the labelled window. A figure question's quote
is labelled with its page's title too when only that title states the figure (:meth:`Evidence.label`: "Django 4.1.6
release notes > CVE-2023-23969: ...").
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import get_args

from foldermind.protocol.messages import Claim, ClaimCheck, EvidenceReply, EvidenceSpan
from foldermind.protocol.runtime.config import LlmPolicy, QuestionShape
from foldermind.workers import questions
from foldermind.workers.answers import schemas
from foldermind.workers.llm.citations import MARKER, escape_markers

QUOTE_RATIO = 0.8
"""A further quote joins the first only when its score is at least this share of the best one's."""
NOT_FOUND = "The documents do not say: no indexed passage answers this question."
NOTHING_MATCHED = "The documents do not say: no indexed document matched this question."
SECTION_CHARS = 80
"""A longer innermost heading is a sentence set as a heading, not a name: no label."""

# A sentence ends at a stop followed by white space (so "2.2 angstroms" and "KOBAS 2.0" stay whole), or at
# a line break.
_CLAIM = re.compile(r"(?:[^.!?\n]|[.!?]+(?=[^\s.!?]))+(?:[.!?]+[\"')\u201d\u2019]*|$)|[.!?]+")
_MARKERS = re.compile(rf"\s*{MARKER.pattern}")
"""A citation marker with the space before it, as the quotes write it."""


@dataclass(slots=True)
class Composed:
    answer: str
    citations: list[schemas.Citation] = field(default_factory=list)
    carries: bool = False
    """For a checked answer: it states a fact of the best quote (see ``evidence.check.reply``)."""
    aside: int = 0
    """For a checked answer: the model's sentences a passage backs that were dropped as not about the question."""

    @property
    def grounded(self) -> bool:
        return bool(self.citations)


@dataclass(frozen=True, slots=True)
class Quoting:
    """How many sentences an answer quotes: ``[llm] max_quotes``, and for a yes-no question ``yes_no_files``
    and ``yes_no_ratio`` (measured: docs/tuning.md#answer-evidence)."""

    max_quotes: int
    yes_no_files: int
    yes_no_ratio: float

    @classmethod
    def of(cls, policy: LlmPolicy) -> Quoting:
        return cls(policy.max_quotes, policy.yes_no_files, policy.yes_no_ratio)


class Evidence:
    def __init__(self, reply: EvidenceReply, question: str = "") -> None:
        self.reply, self.question = reply, question
        self.asked_numbers = questions.numbers(question) if question and questions.asks_for_figure(question) else None
        """The numbers a figure question writes (an extractive label names its page: :meth:`label`); None when the
        question asks for no figure or is unknown ("")."""

    @property
    def spans(self) -> list[EvidenceSpan]:
        return self.reply.spans

    def sources(self, n: int) -> list[EvidenceSpan]:
        """The spans a model is shown (their windows), best first."""
        return self.spans[:n]

    def section(self, span: EvidenceSpan) -> str:
        """The heading over ``span`` that names what it is about, when the quote does not already hold its words,
        else "": the innermost, unless that is plain words any document could have as a heading ("Description",
        "SYNOPSIS": :func:`.questions.plain_heading`) and a heading above it names a thing ("chage(1)")."""
        heading = self.reply.passages[span["passage"]]["location"].get("heading") or ""
        path = [h.strip() for h in heading.split(" > ") if h.strip()]
        name = path[-1] if path else ""
        if questions.plain_heading(name):
            name = next((h for h in reversed(path[:-1]) if not questions.plain_heading(h)), name)
        if not name or len(name) > SECTION_CHARS or _words(name) <= _words(span["text"]):
            return ""
        return name

    def label(self, span: EvidenceSpan) -> str:
        """What a quote is labelled with: its :meth:`section`, after its page's title when the question asks for a
        figure that only that title states. A release page says its version in its title alone ("Django 4.1.6
        release notes > CVE-2023-23969: ...": the section's label did not say which release fixed it): a title, not
        already the label, with a number neither the question nor the quote writes."""
        name = self.section(span)
        if self.asked_numbers is None:
            return name
        heading = self.reply.passages[span["passage"]]["location"].get("heading") or ""
        title = next((h.strip() for h in heading.split(" > ") if h.strip()), "")
        if not title or title == name or " > " not in heading or len(title) > SECTION_CHARS:
            return name
        told = self.asked_numbers | questions.numbers(span["text"])
        if not questions.numbers(title) - told:
            return name
        return f"{title} > {name}" if name else title

    def window(self, span: EvidenceSpan) -> str:
        """The text a model is shown for ``span`` (and a generated sentence is checked against): its window,
        after its section's name on a line of its own (so a quote taken from the window is never the label)."""
        name = self.section(span)
        return f"{name}:\n{span['window']}" if name else span["window"]

    def citation(self, span: EvidenceSpan, quote: str, number: int) -> schemas.Citation:
        hit = self.reply.passages[span["passage"]]
        loc = hit["location"]
        own = quote == span["text"]
        return schemas.Citation(
            id=number,
            file_path=hit["file_path"],
            file_name=hit["file_name"],
            quote=quote,
            snippet=hit["snippet"],
            chunk_index=hit["chunk_index"],
            chunk_id=hit["chunk_id"],
            location=schemas.Location(
                page=loc.get("page"),
                heading=loc.get("heading"),
                line_start=span["line_start"] if own else span["window_line_start"],
                line_end=span["line_end"] if own else span["window_line_end"],
            ),
        )


def extractive(evidence: Evidence, quoting: Quoting) -> Composed:
    """The best sentences, quoted: the first always (when the evidence answers at all), the next ones while
    they score close to it."""
    if not evidence.reply.passages:
        return Composed(NOTHING_MATCHED)
    if not evidence.reply.supported or not evidence.spans:
        return Composed(NOT_FOUND)
    parts, citations = _quoted(evidence, _chosen(evidence, quoting), 1)
    return Composed(" ".join(parts), citations)


def after_quotes(quoted: Composed, generated: Composed) -> Composed:
    """The quotes of :func:`extractive` (``quoted``, as shown at once) followed by the checked generated
    answer, its citations numbered on from the quotes'; a sentence backed by a quoted sentence cites that
    quote's number. The quotes stay first and keep their numbers, so a client that showed them goes on
    showing the same text; and with the quotes in it, ``auto`` never holds less than the extractive answer (a
    135M model often restates only part of a quote: docs/tuning.md#answer-evidence)."""
    citations = list(quoted.citations)
    numbers: dict[int, int] = {}
    for c in generated.citations:
        quotes = (q for q in quoted.citations if q.file_path == c.file_path)
        same = next((q.id for q in quotes if c.quote in q.quote or q.quote in c.quote), None)
        if same is None:
            same = len(citations) + 1
            citations.append(c.model_copy(update={"id": same}))
        numbers[c.id] = same
    text = re.sub(r"\[(\d+)\]", lambda m: f"[{numbers.get(int(m.group(1)), int(m.group(1)))}]", generated.answer)
    return Composed(f"{quoted.answer}\n\n{text}", citations, generated.carries)


def _chosen(evidence: Evidence, quoting: Quoting) -> list[EvidenceSpan]:
    """The spans quoted: the first ``max_quotes`` that score within :data:`QUOTE_RATIO` of the best, then each further
    one as close from a passage not quoted yet (the first passage's sentences restate one another; another passage's
    is another section's statement: docs/benchmarks/answer-relevance.md); or, for
    spans that lead with each file's best sentence (``spread``: a yes-no question), those leads, one per file,
    at most ``yes_no_files``, each further one while it scores ``yes_no_ratio`` of the first. A yes-no answer is
    what each document says, and the best file's sentences score higher than another file's best (the rank of
    its passage counts in every score), so files are compared by their best sentence alone; the share keeps an
    answer with one clear source short (docs/tuning.md#answer-evidence)."""
    if evidence.reply.spread:
        leads: list[EvidenceSpan] = []
        files: set[str] = set()
        for span in evidence.spans:
            path = evidence.reply.passages[span["passage"]]["file_path"]
            if path in files or len(leads) == quoting.yes_no_files:
                break  # the leads are over: the rest are more sentences of the same files
            files.add(path)
            leads.append(span)
        if not leads:
            return []
        best = leads[0]["score"]
        return leads[:1] + [s for s in leads[1:] if s["score"] >= best * quoting.yes_no_ratio]
    best = evidence.spans[0]["score"]
    close = [s for s in evidence.spans if s["score"] >= best * QUOTE_RATIO]
    chosen = close[: quoting.max_quotes] or evidence.spans[:1]
    quoted = {s["passage"] for s in chosen}
    for span in close[quoting.max_quotes :]:  # another passage's sentence as close: another section's statement
        if span["passage"] not in quoted:
            quoted.add(span["passage"])
            chosen.append(span)
    return chosen


def evidence_text(answer: str) -> str:
    """An extractive answer as a model reads it: the quotes and their labels, without the citation markers."""
    return _MARKERS.sub("", answer).strip()


def _quote(name: str, span: EvidenceSpan, number: int) -> str:
    """``span`` quoted verbatim (its own bracketed numbers escaped: :func:`.citations.escape_markers`), after
    its label ``name`` ("": none), with its marker."""
    return f"{name + ': ' if name else ''}\u201c{escape_markers(span['text'])}\u201d [{number}]"


def _quoted(evidence: Evidence, spans: list[EvidenceSpan], first: int) -> tuple[list[str], list[schemas.Citation]]:
    """Each span quoted verbatim after its label (:meth:`Evidence.label`), numbered from ``first``. Quotes with the
    same label follow the first of them and the label is said once ("apnumber: “...” [1] “...” [2]"), not before
    each (three sentences of one section read as three sections)."""
    groups: dict[str, list[EvidenceSpan]] = {}
    for at, span in enumerate(spans):
        groups.setdefault(evidence.label(span) or f"\0{at}", []).append(span)  # an unlabelled quote stands alone
    parts: list[str] = []
    citations: list[schemas.Citation] = []
    for name, group in groups.items():
        for span in group:
            number = first + len(citations)
            citations.append(evidence.citation(span, span["text"], number))
            parts.append(_quote("" if name.startswith("\0") or span is not group[0] else name, span, number))
    return parts, citations


def claims(answer: str, cited: list[int]) -> list[Claim]:
    """The sentences of a generated ``answer`` whose markers ``[n]`` are 1-based into ``cited`` (the llm
    worker's first-use list of 0-based source indexes). Markers written after a sentence's stop belong to
    that sentence."""
    merged: list[str] = []
    for m in _CLAIM.finditer(answer):
        piece = m.group(0)
        lead = _leading_markers(piece)
        if lead and merged:  # "... dollars. [1] The next ..." : the [1] is the sentence before's
            merged[-1] += lead
            piece = piece[len(lead) :]
        if piece.strip():
            merged.append(piece)
    out: list[Claim] = []
    for piece in merged:
        sources: list[int] = []
        for m in MARKER.finditer(piece):
            for raw in re.split(r"[,;]", m.group(1)):
                k = int(raw)
                if 1 <= k <= len(cited) and cited[k - 1] not in sources:
                    sources.append(cited[k - 1])
        text = " ".join(MARKER.sub("", piece).split())
        text = re.sub(r"\s+([.,;:!?])", r"\1", text).strip()
        if text:
            out.append(Claim(text=text, sources=sources))
    return out


def credited_files(found: list[Claim], paths: list[str]) -> list[Claim]:
    """``found`` with each claim's cited sources widened to every source from the same files (``paths``: the
    file of each source shown): the checker backs a sentence only by a source it cites, and a sentence is
    credited to a file, not to one of its windows. A claim that cites nothing stays open to every source."""
    out: list[Claim] = []
    for claim in found:
        files = {paths[k] for k in claim["sources"] if 0 <= k < len(paths)}
        more = [k for k, path in enumerate(paths) if path in files and k not in claim["sources"]]
        out.append(Claim(text=claim["text"], sources=[*claim["sources"], *more]))
    return out


def checked(evidence: Evidence, found: list[Claim], checks: list[ClaimCheck], sources: int) -> tuple[Composed, int]:
    """The answer made of the claims that are supported and about the question, each cited to the sentence that
    supports it; and how many claims were dropped."""
    shown = evidence.sources(sources)
    parts: list[str] = []
    citations: list[schemas.Citation] = []
    by_quote: dict[tuple[int, str], int] = {}
    dropped = 0
    aside = 0
    for claim, check in zip(found, checks, strict=True):
        if not check["supported"] or not check["about"] or not 0 <= check["source"] < len(shown):
            dropped += 1
            aside += check["supported"] and not check["about"]
            continue
        span = shown[check["source"]]
        key = (span["passage"], check["quote"])
        number = by_quote.get(key)
        if number is None:
            number = by_quote[key] = len(citations) + 1
            citations.append(evidence.citation(span, check["quote"], number))
        parts.append(_with_marker(claim["text"], number))
    return Composed(" ".join(parts), citations, aside=aside), dropped


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _with_marker(text: str, number: int) -> str:
    body = text.rstrip(".!?")
    return f"{body} [{number}]{text[len(body) :]}"


def _leading_markers(piece: str) -> str:
    m = re.match(rf"^(?:\s*{MARKER.pattern})+", piece)
    return m.group(0) if m else ""


SHAPES: tuple[QuestionShape, ...] = get_args(QuestionShape)


def shape(question: str) -> QuestionShape:
    """What the question asks for, by the question kinds the indexer's evidence uses too (:mod:`.questions`), the
    first that fits."""
    if questions.asks_whether(question):
        return "yes-no"
    if questions.asks_for_default(question):
        return "default"
    if questions.asks_for_figure(question):
        return "figure"
    if questions.asks_for_name(question):
        return "name"
    return "entity" if questions.asks_for_entity(question) else "other"


def model_adds(question: str, shapes: Collection[QuestionShape]) -> bool:
    """Whether ``auto`` mode asks the model after the quotes: for the question shapes ``[llm] auto_model_shapes``
    names, those where its checked text was measured to survive (the answers bench, by shape)."""
    return shape(question) in shapes
