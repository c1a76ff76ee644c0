"""Whether quotes state a measure in the unit a question names: "How many seconds ...?", "... per square millimetre",
"... in kilobytes?".

The evidence floor and the model's reading judge whether quotes are about the question; a page on the subject that
never gives the measure asked passes both ("How many hours does the ferry take to cross the bay?" over a page on the
ferry that says where it sails and what it carries). A question that names a unit of time, data size, length (or
area), mass or volume asks for a figure in that dimension, so its quotes must hold a number with a unit of the same
dimension ("15 minutes" for "how many seconds", "3 kB", "twelve per square millimetre"); else the documents do not
say. No parameter: the units are the common names and symbols of each dimension. A yes-no question never asks for a
measure. Why, and the tune figures: docs/benchmarks/answer-relevance.md, "A figure in the unit asked".
"""

from __future__ import annotations

import re

from foldermind.workers import questions

NOTE = "the quotes state no figure in the unit the question asks for"
"""The answer's note when this check refused its quotes."""

_WORDS = {
    "time": r"(?:milli|micro|nano)?seconds?|minutes?|hours?|days?|weeks?|months?|years?",
    "data size": r"(?:kilo|mega|giga|tera)?bytes?|(?:kilo|mega|giga)?bits?",
    "length": r"(?:(?:square|cubic)\s+)?"
    r"(?:(?:milli|centi|micro|nano|kilo)?met(?:re|er)s?|inch(?:es)?|feet|foot|miles?)",
    "mass": r"(?:milli|micro|nano|kilo)?grams?|pounds?",
    "volume": r"(?:milli|micro)?lit(?:re|er)s?",
}
"""Each dimension's units as words (any case): what a question names and what a text may write after a number."""
_SYMBOLS = {
    "time": r"(?i:secs?|mins?|hrs?|yrs?)|ms|µs|us|ns|s|h|d",
    "data size": r"[kKMGT]i?B|kb|Mb|Gb",
    "length": r"(?:mm|cm|µm|um|nm|km|m)(?:2|²|3|³)?",
    "mass": r"(?i:lbs?)|mg|µg|ug|ng|kg|g",
    "volume": r"ml|mL|µl|µL|l|L",
}
"""Each dimension's symbols, case as written, counted only right after a number's digits ("5 ms", "3kB", "12 mm2")."""
_NUMBER = (
    r"(?:\d+(?:[.,]\d+)*|(?i:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|fifty|sixty|hundred|thousand|million|dozen)\b)"
)
_ASKED = {
    name: re.compile(
        rf"\bhow\s+(?:many|much)\s+(?:[\w-]+\s+){{0,3}}?(?:per\s+)?(?:{w})\b|\bper\s+(?:{w})\b|\bin\s+(?:{w})\s*[?,.]",
        re.IGNORECASE,
    )
    for name, w in _WORDS.items()
}
_STATED = {
    name: re.compile(
        rf"(?<![\w.]){_NUMBER}(?:\s*(?:[-\u2013]|to|and|or)\s*{_NUMBER})?"
        rf"\s+(?:[\w-]+\s+){{0,2}}?(?:per\s+)?(?i:{_WORDS[name]})\b"
        rf"|(?<![\w.]){_NUMBER}-(?i:{_WORDS[name]})\b"
        rf"|\d\s?(?:{symbols})\b"
    )
    for name, symbols in _SYMBOLS.items()
}
_QUOTED = re.compile(r"\u201c([^\u201d]*)\u201d")


def asked(question: str) -> frozenset[str]:
    """The dimensions ``question`` asks a figure in: a unit it names after "how many" / "how much" (a counted thing
    between: "how many rows per second"), after "per", or as its last words ("in kilobytes?"). None for a yes-no
    question."""
    if questions.asks_whether(question):
        return frozenset()
    return frozenset(name for name, pattern in _ASKED.items() if pattern.search(question))


def stated(text: str) -> frozenset[str]:
    """The dimensions ``text`` states a figure in: a number (digits or a number word, or a range) with a unit word at
    most two words after it or joined to it by a hyphen ("a 4-year follow-up"), or a unit symbol right after its
    digits."""
    return frozenset(name for name, pattern in _STATED.items() if pattern.search(text))


def quoted_text(answer: str) -> str:
    """The quotes' own text in an extractive answer (what stands between its quotation marks), not their labels."""
    return " ".join(_QUOTED.findall(answer)) or answer


def answers(question: str, answer: str) -> bool:
    """False only when ``question`` asks a figure in a unit and the quotes of ``answer`` state none in each
    dimension asked."""
    wanted = asked(question)
    return not wanted or wanted <= stated(quoted_text(answer))
