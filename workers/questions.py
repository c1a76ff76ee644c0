"""What a question asks for, which of its words name nothing, which headings name nothing: pure text rules, shared by
the indexer's evidence (:mod:`foldermind.workers.indexer.evidence.sentences`,
:mod:`~foldermind.workers.indexer.evidence.evidence`) and the answer engine (:mod:`foldermind.workers.answers`), which
reads a question's kind without loading the indexer (numpy, Tantivy, usearch) into the console or the front door.
"""

from __future__ import annotations

import re

_FIGURE_QUESTION = re.compile(
    r"\b(?:how\s+(?:many|much|long|old|large|big|far|often|tall|high|wide|deep|heavy|fast)|"
    r"which\s+(?:[\w.-]+\s+){0,2}?(?:release|version)s?\b|"
    r"(?:what\s+(?:[\w-]+\s+){0,2}?|which\s+(?:[\w-]+\s+)?)(?:year|dose|dosage|percentage|proportion|share|size|number|amount|length|age|date|month|"
    r"day|time|limit|rate|duration|value|version|temperature)s?\b|when\b|at\s+most|up\s+to|"
    r"maximum|minimum|oldest|earliest|newest|by\s+default|default\s+(?:value|size|length|limit|timeout))",
    re.IGNORECASE,
)
"""A question whose answer is a figure. "which" too, over at most one word ("Since which Aspell version",
"Which version of glpk"; reference manuals are asked for versions, "which filter turns numbers" asks for a name),
and over two for a version or a release ("Which Django 2.2 release", "In which Django security release": a release
is a version), and "oldest", "earliest", "newest" (a version or a date), with a bare dotted version (".32") stating a
figure (docs/tuning.md#answer-evidence, docs/benchmarks/answer-relevance.md)."""
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
DEFAULT = re.compile(r"\bdefault(?:s|ed)?\b", re.IGNORECASE)
"""The word "default" in its forms (a text that states a default holds it too: :mod:`.indexer.sentences`)."""
_DEFAULT_QUESTION = re.compile(
    DEFAULT.pattern + r"|\b(?:when|if)\s+(?:none|neither|nothing|no\s+[\w-]+(?:\s+[\w-]+)?)\b[^?]*?\b(?:is|are)\s+"
    r"(?:set|given|named|specified|chosen|present|supplied)\b"
    r"|\b(?:when|if)\s+(?:it\s+is\s+|they\s+are\s+)?(?:omitted|left\s+out|not\s+(?:set|given|specified))\b",
    re.IGNORECASE,
)
"""A question about what holds when the user sets nothing: "by default", "the default of", and the ways of
saying it without the word ("when none is named", "if neither BEFORE nor AFTER is given", "when omitted")."""
_NAME_QUESTION = re.compile(
    r"\b(?:which|what)\s+(?:[\w-]+\s+){0,3}?(?:command|option|flag|filter|tag|setting|variable|class|function|"
    r"method|module|extension|directory|folder|file|macro|keyword|parameter|argument|switch|field|attribute|"
    r"package|program|check)s?\b|\bwhat\s+is\s+(?:the\s+)?name\b|\bname\s+of\b|\bcalled\b",
    re.IGNORECASE,
)
"""A question whose answer is a name as a manual writes it: a command, an option, a setting, a file."""


def asks_for_figure(question: str) -> bool:
    """Whether the question's answer is a figure: a count, an amount, a date, a default value."""
    return _FIGURE_QUESTION.search(question) is not None


def numbers(text: str) -> set[str]:
    """The numbers ``text`` writes, as written ("4.1.6", "2023"): a version is one number, not three."""
    return set(_NUMBER.findall(text))


def asks_for_default(question: str) -> bool:
    """Whether the question asks what holds when nothing is set (see :data:`_DEFAULT_QUESTION`)."""
    return _DEFAULT_QUESTION.search(question) is not None


def asks_for_name(question: str) -> bool:
    """Whether the question asks for a name as code writes it (see :data:`_NAME_QUESTION`)."""
    return _NAME_QUESTION.search(question) is not None


_WHETHER_QUESTION = re.compile(
    r"^\W*(?:and\s+|but\s+|so\s+)?(?:do|does|did|is|are|was|were|can|could|will|would|should|shall|has|have|had|"
    r"may|might|must)(?:n't|\s+not)?\b",
    re.IGNORECASE,
)


def asks_whether(question: str) -> bool:
    """Whether the question asks if something holds ("Does X cause Y?", "Is X linked to Y?", "Can ...?"): a
    yes-no question, answered by what the documents say about the statement, not by a name or a figure."""
    return _WHETHER_QUESTION.match(question) is not None


_ENTITY_QUESTION = re.compile(r"\b(?:which|what|who|whom|whose|where)\b", re.IGNORECASE)


def asks_for_entity(question: str) -> bool:
    """Whether the question asks for a thing by its name ("Which transcription factor ...", "In which city
    ...", "With which part of the cell ...") rather than for a figure: its answer is a name the question does
    not hold."""
    return _ENTITY_QUESTION.search(question) is not None and not asks_for_figure(question)


_PLAIN_WORD = re.compile(r"[A-Z]?[a-z]+(?:-[a-z]+)*|[A-Z]+")


def plain_heading(heading: str) -> bool:
    """Whether a heading is plain words that could head a section of any document ("Description", "SYNOPSIS",
    "Return value"): it starts with a capital and every word is lower case, capitalised or all capitals, no figure,
    no code. Such a heading names no thing; "chage", "apnumber", "SESSION_COOKIE_AGE", "SQLite" do."""
    found = heading.split()
    return bool(found) and heading[0].isupper() and all(_PLAIN_WORD.fullmatch(w.strip(",:;()")) for w in found)


_PART_CUT = re.compile(
    r"(?:[,;]?\s+(?:and|but)\s+|[?;]\s+)(?=(?:what|how|which|who|whom|whose|when|where|why)\b)", re.IGNORECASE
)
_ASKS = re.compile(
    r"^\W*(?:what|how|which|who|whom|whose|when|where|why|is|are|was|were|do|does|did|can|could|will|would|should|"
    r"has|have|had)\b",
    re.IGNORECASE,
)


def parts(question: str) -> list[str]:
    """The questions a question asks, cut where "and", "but" or a "?" is followed by a question word ("What is the
    budget, and how much did cargo grow?"); the question whole when a piece does not start as a question does (a
    statement before it: "The port is no longer maintained; what is now the best way ...?")."""
    found = [p.strip() for p in _PART_CUT.split(question) if p.strip()]
    return found if len(found) > 1 and all(_ASKS.match(p) for p in found) else [question]


GREETINGS = frozenset(
    ["hi", "hello", "hey", "hiya", "thanks", "thank", "thx", "cheers", "bye", "goodbye", "ok", "okay"]
)
"""Greetings, thanks and acknowledgements: they ask nothing, alone (:func:`small_talk`) or in a question."""
STOPWORDS = GREETINGS | frozenset(
    re.findall(
        r"\S+",
        """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    shall may might must us upon whether within without via per among amongst across along around toward towards
    tell say says said please know find according document documents source sources answer question""",
    )
)
"""Words that carry no content in a question to the documents: grammar, the talk around a request ("please tell
me", "according to the documents") and the :data:`GREETINGS`."""


FLAG = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
"""A one-letter option (``-E``, ``-l``): its letter alone is no term, but the option is the subject of "What does
chage -E do?" and the line that defines it. Kept with its case (``-l`` is not ``-L``)."""


def carries_content(word: str) -> bool:
    """Whether a lower-cased word carries content in a question: not a stop word, not a lone letter (a digit is)."""
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def words_of_its_own(question: str) -> bool:
    """Whether a turn names anything itself: a word that carries content or a one-letter option ("why?", "and is
    that so?" name nothing; such a follow-up is about its conversation's subject only)."""
    found = re.findall(r"[^\W_]+", question.lower())
    return FLAG.search(question) is not None or any(carries_content(w) for w in found)


_TALK_TOO = frozenset(
    ["you", "very", "much", "so", "a", "lot", "there", "again", "all", "great", "good", "nice", "cool"]
)


def small_talk(question: str) -> bool:
    """Whether a turn is only a greeting, thanks or an acknowledgement ("hi", "thank you so much!", "ok, great"): it
    asks the documents nothing, even in a conversation, where a turn without a word of its own ("why?", "and the
    other one?") leans on the question before it. Any other word makes it a question ("ok, and why?")."""
    found = re.findall(r"[a-z]+", question.lower())
    return any(w in GREETINGS for w in found) and all(w in GREETINGS or w in _TALK_TOO for w in found)
