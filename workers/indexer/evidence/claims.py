"""``evidence.check.request``: whether each sentence a model wrote is backed by a passage it was shown.

Checking a claim (a sentence a model wrote): it must state something the question does not (a content word or a
fact: "This is the answer to the question ..." answers nothing), state no figure or name its source lacks (a name
written as code too: an invented ``-mono-font`` is one; a figure with digits even when the question holds it: a
date from 2.0.10's notes is not 2.2.10's), share most of its content words with the source (words of the question
count as given), and have a sentence in the source (not the label line a window starts with) whose vector is close
to its own and that negates what it negates (:func:`negations`: "ORDER BY does not sort rows when neither ASC nor
DESC is given" shares every word with the sentence saying it sorts them ascending, and says the opposite). A claim
that cites sources is tried against those only: a sentence credited to a file that does not hold it is refused,
even when another source does (the model mixed up its sources, or a document forged another's number). A claim
that cites none is tried against every source, and the first that passes supports it. Without a local model the
vector test is skipped and the reply says so in its checks' ``similarity`` (-1).

Backed is not enough: a claim must also be about what the question asks (``about``): it states a thing of the kind
the question asks for that the question lacks and the text backing it states too (a figure, a name:
:func:`_asked_thing`), and the claim's own terms that its source holds, with the term or label lines just before the
sentence that backs it (a definition list's "-E, --expiredate EXPIRE_DATE", a window's section name), hold
:data:`ABOUT_SHARE` of the question's terms, each weighted by its idf over the sources' sentences: the rare terms are
the question's subject ("-E" in "What does chage -E do?"), the common ones its topic ("chage", in every source). "The
chage command changes the number of days between password changes" is backed and about chage, not about -E, even by
a sentence that names -E (the backing lends the claim none of its words; a word the claim only echoes lends nothing
where its source lacks it).
A question asking two things is judged part by part too (:class:`Asked`, :func:`~foldermind.workers.questions.parts`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from foldermind.protocol.messages import CheckReply, CheckRequest, ClaimCheck
from foldermind.workers import questions
from foldermind.workers.indexer.evidence import sentences
from foldermind.workers.indexer.storage.keyword.terms import idf

CLAIM_COVERAGE = 0.6
CLAIM_SIMILARITY = 0.5
ABOUT_SHARE = 0.5
"""The idf-weighted share of the question's terms a claim (with its backing's term lines) must hold to be about it."""
LEAD_CHARS = 80
"""A line before the backing sentence this short that does not end a sentence, or ends with a colon, names what
the sentence is about (a definition list's term, a section's name)."""

_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|nothing|nobody|nowhere|without|cannot|can't|won't)\b|n't\b", re.IGNORECASE
)
_SAME_NEGATION = {"cannot": "not", "can't": "not", "won't": "not", "n't": "not"}

Vectors = Callable[[list[str]], tuple[NDArray[np.float32] | None, str, int]]
"""Sentence vectors for texts: (vectors or None, why none, how many were made now); the evidence service's,
whose cache holds the sentences a question was just answered from."""


class ClaimChecker:
    def __init__(self, vectors: Vectors) -> None:
        self.vectors = vectors

    def check(self, body: CheckRequest) -> CheckReply:
        asked = Asked(body.question, body.sources)
        given = asked.given
        given_forms = sentences.fact_forms(body.question)
        split_sources = asked.groups
        source_terms = [sentences.content_terms(src) for src in body.sources]
        source_forms = [sentences.fact_forms(src) for src in body.sources]
        claim_texts = [str(c["text"]) for c in body.claims]
        flat = [s for group in split_sources for s in group]
        vectors, _why, _made = self.vectors(claim_texts + flat) if claim_texts else (None, "", 0)
        checks: list[ClaimCheck] = []
        for i, claim in enumerate(body.claims):
            text = claim_texts[i]
            cited = [k for k in claim.get("sources", []) if isinstance(k, int) and 0 <= k < len(body.sources)]
            order = cited or list(range(len(body.sources)))
            terms = sentences.content_terms(text)
            own = terms - given
            facts = sentences.facts(text)
            names = {n for n in sentences.code_names(text) if not sentences.holds_name(body.question, n)}
            adds = bool(own) or bool(facts - given_forms)  # it states something the question does not
            best: ClaimCheck | None = None
            for k in order:
                # A figure with digits must be its source's even when the question gives it: a date from another
                # release's notes is not the asked release's.
                missing = sorted(f for f in facts if f not in source_forms[k] and (_digits(f) or f not in given_forms))
                missing += sorted(n for n in names if not sentences.holds_name(body.sources[k], n))
                coverage = len(own & source_terms[k]) / len(own) if own else 1.0
                at, similarity = self._closest(vectors, i, len(claim_texts), split_sources, k, terms)
                quote = split_sources[k][at]
                same_sense = negations(text) == negations(quote)
                ok = adds and not missing and coverage >= CLAIM_COVERAGE and same_sense
                ok = ok and (vectors is None or similarity >= CLAIM_SIMILARITY)
                about = asked.about_at(text, k, at)
                result = ClaimCheck(
                    supported=ok, source=k, quote=quote, similarity=round(similarity, 4), missing=missing, about=about
                )
                if ok:
                    best = result
                    break
                if best is None or (len(missing), -similarity) < (len(best["missing"]), -best["similarity"]):
                    best = result
            if best is None:
                best = ClaimCheck(
                    supported=False, source=-1, quote="", similarity=0.0, missing=sorted(facts | names), about=False
                )
            elif not best["supported"]:
                best["source"], best["quote"] = -1, ""
            checks.append(best)
        kept = " ".join(text for text, c in zip(claim_texts, checks, strict=True) if c["supported"] and c["about"])
        wanted = sentences.facts(body.reference) - given_forms
        carries = bool(wanted & sentences.fact_forms(kept)) if kept else False
        return CheckReply(checks, carries)

    @staticmethod
    def _closest(
        vectors: NDArray[np.float32] | None, claim: int, n_claims: int, groups: list[list[str]], k: int, terms: set[str]
    ) -> tuple[int, float]:
        """The place of the sentence of source ``k`` nearest the claim, and its cosine (-1 without vectors: then
        the sentence sharing most of the claim's ``terms``)."""
        first = int(_labelled(groups[k]))  # the window's label names it and states nothing: never the backing
        if vectors is None:
            at = max(range(first, len(groups[k])), key=lambda j: len(terms & sentences.content_terms(groups[k][j])))
            return at, -1.0
        start = n_claims + sum(len(g) for g in groups[:k])
        sims = vectors[start + first : start + len(groups[k])] @ vectors[claim]
        j = int(np.argmax(sims))
        return j + first, float(sims[j])


class Asked:
    """What a question asks, for the relevance test (``asks``): its terms, each weighted by its idf over the sentences
    of the sources (``groups``), and the kind of thing it asks for (:func:`_asked_thing`); the same for each of its
    parts when it asks two things or more, each part holding a term the sources hold."""

    def __init__(self, question: str, sources: list[str]) -> None:
        self.given = sentences.content_terms(question)
        self.groups = [[s.text for s in sentences.split(src)] or [src] for src in sources]
        weights = _weights(self.given, [s for group in self.groups for s in group])
        self.asks = [(weights, _asked_thing(question))]
        parts = questions.parts(question)
        cut = [{t: weights[t] for t in sentences.content_terms(p) if t in weights} for p in parts]
        if len(parts) > 1 and all(cut):
            self.asks += [(w, _asked_thing(p)) for w, p in zip(cut, parts, strict=True)]
        self.held = [sentences.content_terms(src) for src in sources]

    def about_at(self, text: str, k: int, at: int) -> bool:
        """Whether claim ``text``, backed by sentence ``at`` of source ``k``, is about the question (or one part of
        a question that asks two things: :func:`~foldermind.workers.questions.parts`): by its own terms that source
        ``k`` holds and the term or label lines before that sentence, never the sentence's own words."""
        lines = _lead(self.groups[k], at)
        lead = {t for line in lines for t in sentences.content_terms(line)}
        said = sentences.content_terms(text) & self.held[k]
        new = lead - self.given
        backing = " ".join([*lines, self.groups[k][at]])
        return any(_share(w, said | lead) >= ABOUT_SHARE and thing(text, backing, new) for w, thing in self.asks)

    def about(self, text: str, k: int, quote: str) -> bool:
        """:meth:`about_at` for the backing sentence ``quote`` of source ``k`` (a kept check's)."""
        return self.about_at(text, k, self.groups[k].index(quote))


_WHICH = re.compile(r"\b(?:which|who|whom|whose)\b", re.IGNORECASE)
"""An entity question that picks a named thing ("Which transcription factor ...", "Who ..."), not one asking what
something does ("What does chage -E do?"), whose answer is a description."""


def _asked_thing(question: str) -> Callable[[str, str, set[str]], bool]:
    """Whether a claim states the kind of thing ``question`` asks for, one the question lacks and the text that backs
    the claim states too (the tests the evidence scoring uses): a figure; a name as code, or a term its backing's term
    line names (a name question); a name (an entity question asked with "which" or "who"). Any claim will do for other
    questions. Called with the claim, its backing (the sentence that backs it with the term or label lines before it)
    and the terms of those lines that the question lacks. A thing of the kind asked that the backing lacks is not what
    the backing answers: "E2F1-3 Switch from Activators ..." (a title) backed by "... E2f1-3 function in a complex
    with Rb as repressors ...", or "1." backed by a label line that counts nothing."""
    given = sentences.fact_forms(question)
    if sentences.asks_for_figure(question):
        return lambda text, backing, _new: any(
            _is_figure(f) for f in (sentences.facts(text) - given) & sentences.fact_forms(backing)
        )
    if sentences.asks_for_name(question):
        return lambda text, backing, new: (
            any(sentences.holds_name(backing, n) for n in sentences.new_names(text, question, code_only=True))
            or bool(sentences.content_terms(text) & new)
        )
    if sentences.asks_for_entity(question) and _WHICH.search(question):
        return lambda text, backing, _new: any(
            sentences.holds_name(backing, n) for n in sentences.new_names(text, question)
        )
    return lambda _text, _backing, _new: True


def _digits(fact: str) -> bool:
    return any(ch.isdigit() for ch in fact)


def _is_figure(fact: str) -> bool:
    return _digits(fact) or fact in sentences.NUMBER_WORDS or fact in sentences.MONTHS


def negations(text: str) -> set[str]:
    """The negating words of ``text`` ("not", "n't" and "cannot" as one): two sentences that share their words
    state the same only when they negate with the same words."""
    return {_SAME_NEGATION.get(m.group(0).lower(), m.group(0).lower()) for m in _NEGATION.finditer(text)}


def _weights(terms: set[str], texts: list[str]) -> dict[str, float]:
    """Each of ``terms`` that some of ``texts`` holds, with its idf over them."""
    held = [sentences.content_terms(t) for t in texts]
    n = len(held)
    counts = {t: sum(t in h for h in held) for t in terms}
    return {t: idf(k, n) for t, k in counts.items() if k}


def _share(weights: dict[str, float], held: set[str]) -> float:
    """The weighted share of ``weights``' terms in ``held``; 1 when the sources hold none of the question's terms
    (nothing to judge by: the support check alone decides)."""
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in held) / total if total else 1.0


def _labelled(group: list[str]) -> bool:
    """Whether a source's first sentence is a label (short, ending with a colon: the section's name the answer
    engine puts before a window) with sentences after it."""
    return len(group) > 1 and len(group[0]) <= LEAD_CHARS and group[0].endswith(":")


def _lead(group: list[str], at: int) -> list[str]:
    """The lines right before the backing sentence ``group[at]`` that name its subject (a term, a section's name:
    short, and unfinished or ending with a colon), in order."""
    k = at
    while (
        k > 0
        and len(group[k - 1]) <= LEAD_CHARS
        and (not sentences.finished(group[k - 1]) or group[k - 1].endswith(":"))
    ):
        k -= 1
    return group[k:at]
