"""Key entities: names and acronyms that recur."""

from __future__ import annotations

import re
from collections import Counter

from foldermind.workers.indexer.analysis.keywords import STOPWORDS, surface_form
from foldermind.workers.indexer.analysis.text import APOSTROPHES, MAX_ENTITIES

_UPPER = "A-ZÀ-ÖØ-Þ"
_NAME = re.compile(rf"(?<![\w{APOSTROPHES}-])[{_UPPER}][\w&{APOSTROPHES}-]*(?: [{_UPPER}][\w&{APOSTROPHES}-]*)+")
_ACRONYM = re.compile(rf"(?<![\w{APOSTROPHES}-])[{_UPPER}][{_UPPER}0-9&]{{1,6}}(?![\w{APOSTROPHES}-])")
_ROMAN = re.compile(r"^[IVXLCDM]+$")
MAX_NAME_WORDS = 5


_CAPITAL = re.compile(f"[{_UPPER}]")
_SMALL = re.compile(r"[a-zß-öø-ÿ]")


def _shouting(line: str) -> bool:
    """A line written in capitals (a heading), where every word looks like an acronym."""
    capitals = len(_CAPITAL.findall(line))
    return capitals >= 12 and capitals > 0.7 * (capitals + len(_SMALL.findall(line)))


def key_entities(text: str, limit: int = MAX_ENTITIES) -> list[str]:
    """Capitalised multi-word names and acronyms seen at least twice, most frequent first."""
    counts: Counter[str] = Counter()
    # Matches are counted in C; Python looks at each distinct one once.
    for match, n in Counter(_NAME.findall(text)).items():
        words = match.split(" ")
        # Sentence starts and title case capitalise common words too ("The", "In", "Our").
        while words and surface_form(words[0]) in STOPWORDS:
            words.pop(0)
        while words and surface_form(words[-1]) in STOPWORDS:
            words.pop()
        if words:
            words[-1] = re.sub(f"[{APOSTROPHES}]s$", "", words[-1])
        if 2 <= len(words) <= MAX_NAME_WORDS and not all(w.isupper() for w in words):
            counts[" ".join(words)] += n
    calm = "\n".join(line for line in text.split("\n") if not _shouting(line))
    for word, n in Counter(_ACRONYM.findall(calm)).items():
        if sum(c.isalpha() for c in word) >= 2 and not _ROMAN.match(word) and word.lower() not in STOPWORDS:
            counts[word] += n
    repeated = sorted((name for name, n in counts.items() if n >= 2), key=lambda name: -counts[name])
    if len(repeated) > limit:
        cutoff = counts[repeated[limit - 1]]
        repeated = [name for name in repeated if counts[name] >= cutoff]
    # Equally frequent: the one the document names first (found only for these few).
    repeated.sort(key=lambda name: (-counts[name], text.find(name)))
    return repeated[:limit]
