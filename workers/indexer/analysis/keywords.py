"""Keywords: stemmed, stopwords out, weighted by IDF across the index."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from foldermind.workers.indexer.analysis.text import IDF_CANDIDATES, MAX_KEYWORDS, WORD

_STOPWORD_TEXT = """
    a about above across after again against all almost along also although always am among an and another any
    anyone anything are around as at away back be became because become been before being below between both but by
    can cannot could did do does doing done down during each either else enough etc even ever every few for from
    further get gets getting given go goes going got had has have having he her here hers herself him himself his how
    however i if in into is it its itself just keep last least less let like made make makes many may me might more
    most much must my myself near need never new next no nor not now of off often on once one only onto or other
    others otherwise our ours ourselves out over own per perhaps please put quite rather really said same say says
    see seen several shall she should since so some something still such take than that the their theirs them
    themselves then there therefore these they thing things this those though through thus to together too toward
    towards under until up upon us use used using very via was way we well were what whatever when where whether which
    while who whom whose why will with within without would yet you your yours yourself yourselves
    don't doesn't didn't isn't aren't wasn't weren't won't can't couldn't shouldn't wouldn't haven't hasn't hadn't
    i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd we'll they're they've they'd
    they'll that's there's what's let's
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def surface_form(word: str) -> str:
    w = word.lower().replace("\u2019", "'")
    return w[:-2] if w.endswith("'s") else w


def stem(word: str) -> str:
    """A grouping key, not a linguistic stem: plurals and -ing/-ed/-e endings folded (invoices, invoice)."""
    w = surface_form(word).replace("'", "")
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed") and not w.endswith("eed"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


def keywords(
    text: str,
    doc_freq: Callable[[str], int] | None = None,
    total_docs: int = 0,
    limit: int = MAX_KEYWORDS,
) -> list[str]:
    """Up to ``limit`` keywords: term frequency here times ``log((1 + N) / (1 + df))`` when the index's
    document frequencies are given, else term frequency alone; each as its most frequent surface form."""
    counts: Counter[str] = Counter()
    forms: dict[str, dict[str, int]] = {}
    first: dict[str, int] = {}
    # Counted in C (one lower(), findall and Counter over the text); Python touches each distinct word once.
    # A Counter keeps first-seen order, so enumerate gives each word's rank of first appearance.
    for rank, (word, n) in enumerate(Counter(WORD.findall(text.lower())).items()):
        surface = surface_form(word)
        if len(surface) < 3 or len(surface) > 40 or surface in STOPWORDS:
            continue
        key = stem(surface)
        counts[key] += n
        spellings = forms.setdefault(key, {})
        spellings[surface] = spellings.get(surface, 0) + n
        first.setdefault(key, rank)
    if not counts:
        return []

    def form(key: str) -> str:
        # max keeps the first of equals, and dicts keep first-seen order: the earliest spelling wins a tie.
        spellings = forms[key]
        return max(spellings, key=spellings.__getitem__)

    scores = {key: float(n) for key, n in counts.items()}
    if doc_freq is not None and total_docs > 0:
        candidates = sorted(counts, key=lambda k: (-counts[k], first[k]))[:IDF_CANDIDATES]
        try:
            # Tantivy counts deleted chunks until a merge drops them: df may exceed N, never use more.
            scores = {
                k: counts[k] * math.log((1 + total_docs) / (1 + min(max(doc_freq(form(k)), 0), total_docs)))
                for k in candidates
            }
        except Exception:
            scores = {key: float(n) for key, n in counts.items()}  # no IDF: term frequency still ranks
    ranked = sorted(scores, key=lambda k: (-scores[k], -counts[k], first[k]))
    return [form(k) for k in ranked[:limit]]
