"""Sentences of a chunk with their exact place, and the words and facts a sentence states.

Evidence is chosen sentence by sentence (:mod:`.evidence`), so each sentence keeps its character span in
its chunk's text and the lines of the extracted text it covers (a chunk's text is exactly a slice of the
extracted text, so its lines are the chunk's first line plus the line breaks before it).

Splitting: a sentence ends at ``.``, ``!``, ``?`` or ``…`` followed by white space and what can start a
sentence (not after a known abbreviation such as ``e.g.`` or ``Fig.``), at a blank line, and at a single line
break when the line before it looks finished (ends in a stop or a colon, maybe inside closing quotes, or is
short, as headings and list items are) or the next line starts a list item; a line of one repeated punctuation
character (a title's underline) is a break of its own. Other line breaks are wrapping (PDF lines, hard-wrapped
text) and are read as spaces. A sentence longer than :data:`MAX_CHARS` is cut at a ``;`` or ``,`` or a space.

The kinds of question (``asks_*``, :func:`plain_heading`) are :mod:`foldermind.workers.questions`', shared with the
answer engine, which must not load the indexer to read a question; they are imported here for the indexer's use.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from foldermind.workers.indexer.storage.keyword.terms import stems
from foldermind.workers.questions import DEFAULT, FLAG, carries_content, small_talk
from foldermind.workers.questions import STOPWORDS as STOPWORDS
from foldermind.workers.questions import asks_for_default as asks_for_default
from foldermind.workers.questions import asks_for_entity as asks_for_entity
from foldermind.workers.questions import asks_for_figure as asks_for_figure
from foldermind.workers.questions import asks_for_name as asks_for_name
from foldermind.workers.questions import asks_whether as asks_whether
from foldermind.workers.questions import plain_heading as plain_heading

MAX_CHARS = 400
"""Past this a "sentence" is a table row or a run-on line: cut it, so a quote stays readable."""
SHORT_LINE = 48
"""A line this short that ends without a stop is a heading or a list item: it ends a sentence, unless the next
line goes on with a lower-case word or a figure (a chunk that starts mid-line makes its first line short:
"PostgreSQL's defaults are 35 and" / "15.")."""


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ABBREVIATIONS = _wordset(
    "e.g i.e etc al fig figs eq eqs ref refs no nos vol vs cf approx dr mr mrs ms prof st jr sr inc ltd co corp"
    " dept est min max sec resp ca ch pp p jan feb mar apr jun jul aug sep sept oct nov dec"
)
_END = re.compile(r"[.!?\u2026]+[\"')\]\u201d\u2019]*(?=\s)")
_STARTS = re.compile(r"\s+([\"'(\[\u201c\u2018]*)([A-Z0-9\u00c0-\u024f]|[^\x00-\x7f])")
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u2023\u25aa]|\d{1,3}[.)]|#{1,6})\s")
_ITEM = re.compile(r"(?:[-*\u2022\u2023\u25aa]|\d{1,3}[.)])\s")
"""A list item's bullet, where a sentence starts (a Markdown heading's ``#`` is not one)."""
_SPACE = re.compile(r"\s+")
_FINISHED = re.compile(r"[.!?:;\u2026][\"')\]\u201d\u2019]*$")
"""A line that ends in a stop, after it maybe a closing quote or bracket (``... the system."``): finished."""
_GOES_ON = re.compile(r"\s*[a-z0-9]")
_LEAD = re.compile(r"^(?:#{1,6}\s+|[-*\u2022\u2023\u25aa]\s+|>\s+)+")
_WORD = re.compile(r"[^\W_]+(?:[.,][0-9]+)*%?", re.UNICODE)
_RULE = re.compile(r"([!-/:-@\[-`{-~])\1{2,}")
"""A line of one punctuation character (a reST title's adornment, a rule): never part of a sentence."""

NUMBER_WORDS = _wordset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    billion trillion first second third fourth fifth sixth seventh eighth ninth tenth half quarter dozen
    once twice percent"""
)
MONTHS = _wordset("january february march april may june july august september october november december")


@dataclass(frozen=True, slots=True)
class Sentence:
    start: int
    """Offset of its first character in the chunk's text."""
    end: int
    """Offset just past its last character."""
    text: str
    """The sentence as quoted: the chunk's characters with runs of white space made one space, and a leading
    heading mark or list bullet left out. Never reworded."""
    line_start: int
    line_end: int
    item: bool = False
    """Its line opens with a list bullet ("* ", "- ", "1. "): an item of a list, finished sentence or not."""


def split(text: str, first_line: int = 1) -> list[Sentence]:
    """The sentences of ``text`` (a chunk whose first character is on line ``first_line``)."""
    out: list[Sentence] = []
    for a, b in _spans(text):
        for c, d in _cut_long(text, a, b):
            quoted = quote(text[c:d])
            if not quoted or not any(ch.isalnum() for ch in quoted):
                continue
            line_start = first_line + text.count("\n", 0, c)
            item = c == a and _ITEM.match(text, c) is not None
            out.append(Sentence(c, d, quoted, line_start, line_start + text.count("\n", c, d), item))
    return out


def quote(raw: str) -> str:
    """``raw`` as a quote: white space collapsed, a heading mark or bullet in front left out."""
    return _LEAD.sub("", _SPACE.sub(" ", raw).strip()).strip()


def _spans(text: str) -> list[tuple[int, int]]:
    cuts = {0, len(text)}
    for m in _END.finditer(text):
        if _abbreviation(text, m.start()):
            continue
        if _STARTS.match(text, m.end()):
            cuts.add(m.end())
    pos = 0
    for line in text.splitlines(keepends=True):
        end = pos + len(line)
        body = line.strip()
        nxt = text[end : text.find("\n", end) if text.find("\n", end) >= 0 else len(text)]
        if not body or _RULE.fullmatch(body):
            cuts.update((pos, end))
        elif end < len(text) and (
            _FINISHED.search(body)
            or (len(body) <= SHORT_LINE and not _GOES_ON.match(nxt))
            or _BULLET.match(nxt)
            or not nxt.strip()
        ):
            cuts.add(end)
        pos = end
    ordered = sorted(cuts)
    spans = []
    for a, b in itertools.pairwise(ordered):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            spans.append((a, b))
    return spans


def _abbreviation(text: str, dot: int) -> bool:
    """Whether the stop at ``dot`` ends an abbreviation (``e.g.``, ``Fig.``) or a lone initial (``J.``)."""
    if text[dot] != ".":
        return False
    start = dot
    while start > 0 and (text[start - 1].isalpha() or text[start - 1] == "."):
        start -= 1
    word = text[start:dot].lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and text[start].isupper())


def _cut_long(text: str, a: int, b: int) -> list[tuple[int, int]]:
    pieces = []
    while b - a > MAX_CHARS:
        window = text[a : a + MAX_CHARS]
        cut = max(window.rfind("; "), window.rfind(", "))
        if cut < MAX_CHARS // 3:
            cut = window.rfind(" ")
        if cut < MAX_CHARS // 3:
            cut = MAX_CHARS - 1
        pieces.append((a, a + cut + 1))
        a += cut + 1
        while a < b and text[a].isspace():
            a += 1
    if b > a:
        pieces.append((a, b))
    return pieces


# -------------------------------------------------------------------------------------------------
# What a sentence says: its content words, and the facts (numbers, dates, names) a claim must not invent


def words(text: str) -> list[str]:
    """The words of ``text`` in order (a number keeps its decimal point, thousands separators and ``%``)."""
    return _WORD.findall(text)


def asks_anything(question: str, context: str) -> bool:
    """Whether a turn asks the documents anything: a first question without a single content term ("hi", "thanks!",
    "who are you?") does not, however close a sentence of acknowledgements comes; a follow-up leans on the question
    before it (``context``), unless it is small talk (:func:`.questions.small_talk`: "hi" in a conversation)."""
    return bool(content_terms(question)) or (bool(context.strip()) and not small_talk(question))


def content_terms(text: str) -> set[str]:
    """Stemmed words that carry content: not stop words, not one letter; and one-letter options as written."""
    return set(term_words(text))


def term_words(text: str) -> dict[str, str]:
    """Each of :func:`content_terms` with the word it was stemmed from (its first, lower-cased): a term is looked up
    in the index by its word, as the index stems it ("otherwise"), never by its stem ("otherwis" stems again)."""
    out: dict[str, str] = {flag: flag for flag in FLAG.findall(text)}
    for w in words(text):
        low = w.lower()
        if not carries_content(low):
            continue
        for term in stems(low) or (low,):
            out.setdefault(term, low)
    return out


def number_key(word: str) -> str:
    """A figure as compared: ``40,000`` and ``40000`` are one; ``3.50`` and ``3.5`` too; ``%`` dropped."""
    w = word.lower().rstrip("%").replace(",", "")
    if "." in w:
        w = w.rstrip("0").rstrip(".")
    return w


def facts(text: str) -> set[str]:
    """The exact facts a sentence states, lower-cased: its figures (digits, number words, month names) and
    its names (capitalised words not at the sentence's start). A claim that holds one its passage does not
    is the model's own invention, however many other words it shares."""
    out: set[str] = set()
    seen_first = False
    for m in _WORD.finditer(text):
        w = m.group()
        low = w.lower()
        first = not seen_first
        seen_first = True
        if any(ch.isdigit() for ch in w):
            out.add(number_key(w))
        elif low in NUMBER_WORDS or low in MONTHS or (not first and _name(w)):
            out.add(low)
    return out


def _name(word: str) -> bool:
    return word[0].isupper() and len(word) > 1 and word.lower() not in STOPWORDS


def name_terms(question: str) -> set[str]:
    """The terms of the question's names: words past its first written as names (capitalised, all capitals) or as
    code, and one-letter options ("Brotli", "MongoDB", "SMS", "-E"), not its everyday words."""
    out = set(FLAG.findall(question))
    for w in words(question)[1:]:
        if _name(w) or _CODE.fullmatch(w):
            out.update(stems(w.lower()) or (w.lower(),))
    return out & content_terms(question)


_SHORT_FORM = re.compile(r"\(([A-Za-z0-9][\w-]{1,9})\)")


def abbreviations(text: str) -> dict[str, set[str]]:
    """What each abbreviation ``text`` defines stands for: "skin and soft tissue infections (SSTIs)" gives SSTI
    the content terms of "soft tissue infections" (Schwartz and Hearst's long form, 2003: the words before the
    parenthesis in which each character of the short form occurs in order, the first starting a word). A short
    form has two capitals or more, more than half its letters; its plural ``s`` is dropped. A sentence that
    names its subject by the short form ("the proportion of community-onset SSTI due to MRSA peaked ...") is
    about the long form's words."""
    out: dict[str, set[str]] = {}
    for m in _SHORT_FORM.finditer(text):
        short = m.group(1)
        if short.endswith("s") and short[-2:-1].isupper():
            short = short[:-1]
        capitals, letters = sum(ch.isupper() for ch in short), sum(ch.isalpha() for ch in short)
        if capitals < 2 or 2 * capitals <= letters or short in out:
            continue  # "(SQLite)", "(see below)": a name or words, not a short form
        before = text[: m.start()].split()[-min(len(short) + 5, 2 * len(short)) :]
        long_form = _long_form(short, " ".join(before))
        if long_form:
            out[short] = content_terms(long_form)
    return out


def _long_form(short: str, before: str) -> str:
    """The end of ``before`` that ``short`` abbreviates (Schwartz and Hearst's match), or ""."""
    s, k = len(short) - 1, len(before) - 1
    while s >= 0:
        ch = short[s].lower()
        if not ch.isalnum():
            s -= 1
            continue
        while k >= 0 and (before[k].lower() != ch or (s == 0 and k > 0 and before[k - 1].isalnum())):
            k -= 1
        if k < 0:
            return ""
        k -= 1
        s -= 1
    return before[before.rfind(" ", 0, k + 1) + 1 :]


def stands_for(text: str, defined: dict[str, set[str]]) -> set[str]:
    """The terms the abbreviations ``text`` holds stand for (``defined``: :func:`abbreviations` of its passage)."""
    out: set[str] = set()
    for w in words(text):
        found = defined.get(w) or (defined.get(w[:-1]) if w.endswith("s") else None)
        out |= found or set()
    return out


def fact_forms(text: str) -> set[str]:
    """Every word of ``text`` in the forms :func:`facts` compares (lower case, figures normalised)."""
    out: set[str] = set()
    for w in words(text):
        out.add(number_key(w) if any(ch.isdigit() for ch in w) else w.lower())
    return out


# -------------------------------------------------------------------------------------------------
# What a question asks for

_COUNTED = re.compile(
    r"\bhow\s+(?:many|much)\s+(?:of\s+)?(?:the\s+|these\s+|those\s+)?(?=[a-z])|"
    r"\bwhat\s+(?:dose|dosage|number|percentage|proportion|share|amount)\s+of\s+(?:the\s+)?(?=[a-z])",
    re.IGNORECASE,
)
COUNTED_WORDS = 6
"""How far a counted phrase may run: "how many of the wild-type EGFR lung adenocarcinoma *patients* with ..." """
_FIGURE = re.compile(
    r"(?<![\w.-])[$\u20ac\u00a3]?\d(?:[\d,.]*\d)?(?!\w)"  # 9,020  2.56  $40  32-character
    r"|(?<![\w.-])\d+(?=%|[a-z\u00b5\u03bc]{1,3}\b)"  # 2.56%  50g  4h
    r"|(?<![\w.])\.\d+(?:\.\d+)*(?![\w.])"  # Aspell .32
)
"""A number standing as one; not the digits of a name (``Ang-1``, ``HER2``, ``23S``, ``COVID-19``), which state
no figure: a figure question's bonus went to "the effects of Ang-1" over "1 μg of rhAng-1"."""
_CODE = re.compile(
    r"``[^`]+``|`[^`]+`|\u2018[^\u2019\n]{1,60}\u2019|(?<![\w-])--?[a-z][\w-]+|\b[a-z]+(?:_[a-z0-9]+)+\b|\b\w+(?:\.\w+)+\(|"
    r"(?<![\w.])\.[a-z]{2,4}\b|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z]\w*[a-z][A-Z]\w*\b"
)
"""A name as code is written: ``quoted`` (or in the single typographic quotes, U+2018 and U+2019, Texinfo's HTML puts
code in: "use \u2018aspell dump modes\u2019"), an option (``--enable-usb``, ``-d``), snake_case, a call, a file
extension (``.kbd``), CONSTANT_CASE, camelCase, CamelCase."""
_FINISHED = re.compile(r"[.!?:;\u2026][\"')\]\u201d\u2019]*$")


def code_names(text: str) -> set[str]:
    """The names ``text`` writes as code (:data:`_CODE`'s forms, not its quoted spans), lower-cased, an option
    without its leading dashes (a PDF prints ``--enable-x`` as ``\u2013enable-x``), a call without its parenthesis."""
    out: set[str] = set()
    for m in _CODE.finditer(text):
        name = m.group()
        if name[0] not in "`\u2018":
            out.add(name.lstrip("-").rstrip("(").lower())
    return out


def holds_name(text: str, name: str) -> bool:
    """Whether ``text`` holds the code name ``name`` (as :func:`code_names` gives it) as a whole token."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def states_default(text: str) -> bool:
    """Whether ``text`` says what a default is: it names one ("Default: ``1209600``", "BEFORE is the default
    when neither keyword is present", "keepAspect ... [default true]")."""
    return DEFAULT.search(text) is not None


def names_code(text: str, question: str) -> bool:
    """Whether ``text`` holds a name written as code that the question does not already hold."""
    return bool(new_names(text, question, code_only=True))


def heading_name(path: str, question: str) -> str:
    """The innermost heading of a heading path that is a name of one word the question does not hold ("apnumber",
    "chage(1)", "SESSION_COOKIE_AGE"), else "": what a section under it is about, as a name question asks."""
    for heading in reversed([h.strip() for h in path.split(" > ") if h.strip()]):
        if not plain_heading(heading):
            return heading if len(heading.split()) == 1 and heading.lower() not in question.lower() else ""
    return ""


def names_new(text: str, question: str) -> bool:
    """Whether ``text`` holds a name the question does not: a capitalised word past its first (``Golgi``,
    ``RUNX1``, ``Phoenix``) or a name written as code (:func:`names_code`). A sentence that only restates the
    question's names ("Some aspects of heart disease were well known among young African Americans.") may be
    close to it in every word and still not answer it."""
    return bool(new_names(text, question))


def new_names(text: str, question: str, code_only: bool = False) -> set[str]:
    """The names ``text`` holds that the question does not, lower-cased: its names written as code (without their
    quotes) and, unless ``code_only``, its capitalised words past its first (:func:`names_new`)."""
    asked = question.lower()
    out = {n for m in _CODE.finditer(text) if (n := m.group(0).strip("`\u2018\u2019").lower()) not in asked}
    if not code_only:
        forms = fact_forms(question)
        out |= {w.lower() for w in words(text)[1:] if _name(w) and w.lower() not in forms and not w.isdigit()}
    return out


TERM_WORDS = 3
TERM_CHARS = 40
"""A definition list's term is an option, a mode, a setting: a word or three on a line of their own. Longer
unfinished lines are headings and titles, which a quote's section label already names."""


def is_term(text: str) -> bool:
    """Whether ``text`` is the term of a definition list's entry: a line of at most :data:`TERM_WORDS` words
    that does not end like a sentence ("--enable-gapcmon", "normal"), with its description on the lines after
    it ("This option enables building the GTK GUI front-end.")."""
    return len(text) <= TERM_CHARS and len(text.split()) <= TERM_WORDS and not finished(text)


def counted(question: str) -> set[str]:
    """The stems of what a figure question counts ("how many *patients*", "what dose of *zopiclone*", "how many
    of the *wild-type EGFR lung adenocarcinoma patients* with ...": the words after it up to the first stop
    word), or nothing: the sentence that holds the figure names it ("741 patients") though it may name little
    else of the question."""
    m = _COUNTED.search(question)
    if m is None:
        return set()
    phrase: list[str] = []
    for w in words(question[m.end() :])[:COUNTED_WORDS]:
        if w.lower() in STOPWORDS:
            break
        phrase.append(w)
    return content_terms(" ".join(phrase))


COUNT_GAP = 2
"""Words a count may stand before the thing it counts: "9020 patients", "741 eligible patients", "42 of the
mice" (``of``, ``the`` and ``a`` are not counted); not "1 year to patients", a figure of something else."""
_COUNT_LINKS = frozenset({"of", "the", "a", "an"})


def counts(text: str, counted: set[str]) -> bool:
    """Whether ``text`` states a figure of the thing a question counts: a figure followed, within
    :data:`COUNT_GAP` content words, by one of ``counted`` ("A total of 9020 patients were included."); not a
    figure that merely shares a sentence with it ("The incidence ... in patients ... was 2.56%")."""
    if not counted:
        return False
    found = words(text)
    for i, w in enumerate(found):
        if not (_FIGURE.fullmatch(w) or w.lower() in _FIGURE_WORDS):
            continue
        gap = 0
        for after in found[i + 1 :]:
            low = after.lower()
            if low in _COUNT_LINKS:
                continue
            if counted & (set(stems(low)) or {low}):
                return True
            gap += 1
            if gap >= COUNT_GAP:
                break
    return False


_FIGURE_WORDS = (NUMBER_WORDS | MONTHS) - {"one", "first", "second", "once", "half", "may"}
"""Number words and month names that state a figure. Not the few that are mostly something else: "may" (the
verb), "one" ("at least one of", "one of the"), "first" and "second" (an order, a unit of time), "once",
"half": "each word must be in at least one of search_fields" took a figure question's bonus from "PostgreSQL's
defaults are 35 and 15."."""


def has_figure(text: str) -> bool:
    """Whether ``text`` states a figure: a number standing as one, or a number word or month name."""
    return bool(_FIGURE.search(text)) or any(w.lower() in _FIGURE_WORDS for w in words(text))


def finished(text: str) -> bool:
    """Whether ``text`` ends as a sentence does (a stop, a colon), unlike a title or a table row."""
    return _FINISHED.search(text) is not None
