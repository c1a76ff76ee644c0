"""The deterministic half of document analysis: what ``get_document_summary`` serves before the LLM.

Every field is a pure function of the document's text, title, format, Smart Folder and mtime (plus,
for keywords, how common each word is across the index), so it runs on the indexer's ingest thread
right after a document is written, in the same transaction: an analysis never describes content other
than the indexed one. It costs milliseconds, reads at most :data:`MAX_CHARS` characters and never
raises. The LLM worker later replaces the extractive ``summary`` and fills ``entity``; the other
fields are the small, readable rules below.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from typing import Any

from foldermind.workers.indexer import sentences

MAX_CHARS = 200_000
"""Work is capped to the document's first this many characters: its head says what it is, and a
50 MB log must not hold up indexing."""
SUMMARY_CHARS = 300
MAX_KEYWORDS = 8
MAX_ENTITIES = 8
SLUG_CHARS = 60
IDF_CANDIDATES = 256
"""Only the most frequent stems are weighted by IDF (one index lookup each): a word seen once in a long
document does not become a keyword by being rare elsewhere."""
HEAD, TAIL = 20_000, 5_000
"""Type cues, and a date when the head has none, are looked for at a document's start (headers, openings)
and end (references, signatures): what a document is shows there, and the middle of a long one costs."""
DATE_HEAD = 50_000
SUMMARY_HEAD = 6_000

# ------------------------------------------------------------------------------------------------
# text


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_APOSTROPHES = "'\u2019"  # typewriter and typographic
_WORD = re.compile(rf"[^\W\d_]+(?:[{_APOSTROPHES}][^\W\d_]+)*")
"""A word: letters, with inner apostrophes (don't, company's)."""


def _prepare(texts: Iterable[object]) -> str:
    parts: list[str] = []
    room = MAX_CHARS
    for text in texts:
        if room <= 0:
            break
        if isinstance(text, str) and text:
            parts.append(text[:room])
            room -= len(parts[-1]) + 1
    joined = "\n".join(parts).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(" ", joined)


_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"@[\w-]+(?:\.[\w-]+)+")  # the domain: the local part may be a name worth keeping


def _without_addresses(text: str) -> str:
    """The text without web and mail addresses: "https", "www" and "com" are no keywords."""
    text = _URL.sub(" ", text)
    return _EMAIL.sub(" ", text) if "@" in text else text


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _norm(text: str) -> str:
    """Case, punctuation and spacing folded away: for comparing a line with a title."""
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


# ------------------------------------------------------------------------------------------------
# summary


def _is_prose(line: str) -> bool:
    """A line of running text, as opposed to a heading, a label or a page number."""
    words = line.split()
    return len(words) >= 4 or (len(words) >= 2 and words[-1][-1] in ".!?")


def summarize(text: str, title: str | None = None, limit: int = SUMMARY_CHARS) -> str:
    """The leading sentence(s) of the document's running text, at most ``limit`` characters, cut into
    sentences as evidence is (:mod:`.sentences`)."""
    lines = text[:SUMMARY_HEAD].split("\n")
    # First non-blank line; a title line repeating the document's title says nothing new.
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if title and start < len(lines) and _norm(lines[start]) == _norm(title):
        start += 1
    # Headings and labels before the first prose line are skipped, unless there is no prose at all.
    prose = next((i for i in range(start, min(len(lines), start + 40)) if _is_prose(lines[i])), None)
    if prose is not None:
        start = prose
    body: list[str] = []
    size = 0
    after_blank = False
    for line in lines[start:]:
        if not line.strip():
            if size >= limit:
                break
            after_blank = True
            continue
        if body and after_blank and not _is_prose(line):
            # A paragraph of its own that is no prose: the next section's heading. Enough of the opening
            # was taken, or the heading is left out. (A short line right under prose ends a wrapped
            # paragraph: it stays.)
            if size >= limit // 2:
                break
            after_blank = False
            continue
        after_blank = False
        body.append(line)
        size += len(line) + 1
        if size >= 4 * limit:
            break
    flat = _collapse(" ".join(body))
    if not any(len(m.group()) >= 2 for m in _WORD.finditer(flat[: 4 * limit])):
        return ""  # symbols or stray letters: nothing a reader could use
    if len(flat) <= limit:
        return flat
    out = ""
    for sentence in (s.text for s in sentences.split(flat)):
        candidate = f"{out} {sentence}" if out else sentence
        if len(candidate) > limit:
            break
        out = candidate
    if out:
        return out
    # One sentence longer than the limit: cut at the last word boundary, marked as cut.
    cut = flat.rfind(" ", 0, limit)
    head = flat[:cut] if cut > 0 else flat[: limit - 1]  # one token longer than the limit: nothing better
    return head.rstrip(" ,;:-\u2013\u2014") + "…"


# ------------------------------------------------------------------------------------------------
# dates
#
# Shapes read: ISO 2025-03-04 (also 2025/03/04 and 2025.03.04), "March 3, 2025" / "Mar 3rd 2025",
# "3 March 2025" / "3rd of March, 2025" / "3-Mar-2025", and numeric dd.mm.yyyy or nn/nn/yyyy.
# Numeric dates with slashes are ambiguous (US month/day, elsewhere day/month). The choice: one is read
# when its numbers decide (13/04/2025 is day-first, 04/13/2025 month-first, 04/04/2025 either way) or
# when another numeric date in the same document decides the convention; an ambiguous date in a document
# that never decides is not read at all, since a wrong date is worse than the file's mtime. Dotted
# dates (03.04.2025) are day-first: that is where the dotted style is written. Years 1900..2100, real
# calendar days only (2025-02-30 is no date). The first date that reads is the document's date: letters,
# invoices, minutes and papers put theirs at the top.

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MON = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" + (
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_ORD = r"(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"(?<![\w\-/.])(?:"
    # an ISO date may go on with a time (2025-03-04T10:00), never with more digits
    r"(?P<iy>\d{4})(?P<isep>[-/.])(?P<im>\d{1,2})(?P=isep)(?P<id>\d{1,2})(?![/.-]?\d)"
    rf"|(?P<mm>{_MON})\.?\s+(?P<md>\d{{1,2}}){_ORD},?\s+(?P<my>\d{{4}})(?![\w])"
    rf"|(?P<dd>\d{{1,2}}){_ORD}(?:\s+of\s+|\s+|-)(?P<dm>{_MON})\.?,?(?:\s+|-)(?P<dy>\d{{4}})(?![\w])"
    r"|(?P<na>\d{1,2})(?P<nsep>[/.])(?P<nb>\d{1,2})(?P=nsep)(?P<ny>\d{4})(?![/.-]?\d|[^\W\d_])"
    r")",
    re.IGNORECASE,
)
MAX_DATE_MATCHES = 500


def _valid(y: int, m: int, d: int) -> str | None:
    if not 1900 <= y <= 2100:
        return None
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


def find_date(text: str) -> str | None:
    """The first plausible date written in ``text``, as ``YYYY-MM-DD``, else None."""
    matches = []
    for i, m in enumerate(_DATE.finditer(text)):
        if i >= MAX_DATE_MATCHES:
            break
        matches.append(m)
    # The document's numeric convention, from its numeric dates whose numbers decide it.
    day_first = month_first = False
    for m in matches:
        if m["na"] and m["nsep"] == "/":
            a, b = int(m["na"]), int(m["nb"])
            day_first |= a > 12 >= b
            month_first |= b > 12 >= a
    convention_day_first = day_first and not month_first
    convention_month_first = month_first and not day_first
    for m in matches:
        found: str | None = None
        if m["iy"]:
            found = _valid(int(m["iy"]), int(m["im"]), int(m["id"]))
        elif m["mm"]:
            found = _valid(int(m["my"]), _MONTHS[m["mm"][:3].lower()], int(m["md"]))
        elif m["dd"]:
            found = _valid(int(m["dy"]), _MONTHS[m["dm"][:3].lower()], int(m["dd"]))
        else:
            a, b, y = int(m["na"]), int(m["nb"]), int(m["ny"])
            if m["nsep"] == "." or a > 12 or convention_day_first:
                found = _valid(y, b, a)
            elif b > 12 or a == b or convention_month_first:
                found = _valid(y, a, b)
        if found:
            return found
    return None


def _mtime_date(mtime: float) -> str | None:
    try:
        return datetime.fromtimestamp(mtime, UTC).date().isoformat()
    except (OverflowError, OSError, ValueError, TypeError):
        return None


# ------------------------------------------------------------------------------------------------
# document type
#
# One row per type: the cues (regular expressions, matched on lower-cased text) and how many distinct
# cues must show. The type with the most cues wins; ties go to the earlier row, so more specific types
# come first. Nothing matched: the type follows the format.
# A cue matches at the start of a word: _cue_in checks that, instead of a leading \b, because a pattern
# that opens with a literal is searched for ~20 times faster (re skips ahead to the literal); for the
# same reason each alternative of a cue is searched for alone (_alternatives).

TYPE_RULES: tuple[tuple[str, tuple[str, ...], int], ...] = (
    (
        "invoice",
        (
            r"invoice\b",
            r"invoice (?:no|number|#|date)",
            r"bill(?:ed)? to\b",
            r"amount due\b|balance due\b|total due\b",
            r"due date\b|payment due\b",
            r"subtotal\b",
            r"vat\b|sales tax\b",
            r"payment terms\b|net 30\b",
        ),
        3,
    ),
    (
        "receipt",
        (
            r"receipt\b",
            r"thank you for (?:your )?(?:purchase|order|shopping)\b",
            r"subtotal\b",
            r"paid\b|payment received\b",
            r"cash\b|visa\b|mastercard\b|card ending\b",
            r"change due\b|transaction\b",
            r"qty\b|quantity\b",
        ),
        3,
    ),
    (
        "contract",
        (
            r"agreement\b|contract\b",
            r"the parties\b|each party\b|party\b",
            r"whereas\b",
            r"hereby\b|hereinafter\b|hereto\b",
            r"governing law\b|jurisdiction\b",
            r"terminat(?:e|ion)\b",
            r"indemnif",
            r"in witness whereof\b|signature\b",
            r"shall\b",
        ),
        4,
    ),
    (
        "legal_document",
        (
            r"plaintiff\b|defendant\b",
            r"court\b",
            r"pursuant to\b",
            r"statute\b|regulation\b|section \d",
            r"attorney\b|counsel\b",
            r"hereby\b",
            r"liabilit",
        ),
        3,
    ),
    (
        "meeting_notes",
        (
            r"minutes\b",
            r"agenda\b",
            r"attendees\b|present:|participants\b",
            r"action items?\b|owner:",
            r"meeting\b",
            r"next steps\b|follow[- ]up\b",
            r"decisions?\b|decided\b",
        ),
        3,
    ),
    (
        "research_paper",
        (
            r"abstract\b",
            r"introduction\b",
            r"related work\b|literature review\b",
            r"methods?\b|methodology\b",
            r"results\b|evaluation\b",
            r"conclusions?\b|discussion\b",
            r"references\b|bibliography\b",
            r"et al\.",
            r"doi\b|arxiv\b",
        ),
        4,
    ),
    (
        "resume",
        (
            r"curriculum vitae\b|resume\b|résumé\b",
            r"work experience\b|professional experience\b|employment history\b",
            r"education\b",
            r"skills\b",
            r"certifications?\b",
            r"linkedin\.com",
            r"references available\b",
        ),
        3,
    ),
    (
        "email",
        (
            r"(?m)^from: ",
            r"(?m)^to: ",
            r"(?m)^subject: ",
            r"(?m)^(?:cc|bcc): ",
            r"(?m)^(?:sent|date): ",
            r"regards\b|thanks\b",
        ),
        3,
    ),
    (
        "letter",
        (
            r"(?m)^dear\b",
            r"sincerely\b|yours (?:truly|faithfully)\b|kind regards\b|best regards\b",
            r"(?m)^re: ",
            r"enclosed\b|enclosure\b",
        ),
        2,
    ),
    (
        "manual",
        (
            r"user (?:guide|manual)\b|manual\b|handbook\b",
            r"install(?:ation|ing)?\b",
            r"step \d\b|step-by-step\b",
            r"troubleshoot",
            r"configur",
            r"warning\b|caution\b",
            r"click\b|press\b|select\b",
        ),
        3,
    ),
    (
        "report",
        (
            r"report\b",
            r"executive summary\b",
            r"findings\b",
            r"recommendations?\b",
            r"analysis\b",
            r"quarterly\b|annual\b|q[1-4]\b|fiscal\b",
            r"conclusions?\b",
        ),
        3,
    ),
    (
        "presentation",
        (r"slide \d", r"presentation\b", r"speaker notes\b", r"q ?& ?a\b", r"agenda\b", r"thank you\b"),
        3,
    ),
    (
        "spreadsheet",
        (
            r"(?m)(?:^[^\n\t]*(?:\t[^\n\t]*){3,}\n){3}",  # three tab-separated rows
            r"(?m)(?:^[^\n,]*(?:,[^\n,]*){3,}\n){3}",  # three comma-separated rows
            r"(?m)(?:^\|?(?:[^\n|]*\|){3,}[^\n|]*\n){3}",  # three table rows
            r"worksheet\b|sheet\s?\d\b|spreadsheet\b",
            r"total\b",
        ),
        2,
    ),
    (
        "source_code",
        (
            r"(?m)^\s*def \w+\(",
            r"function \w*\s*\(|=>",
            r"(?m)^\s*(?:public |private )?class \w+",
            r"(?m)^\s*(?:import [\w.]+|from [\w.]+ import\b)",
            r"#include\s*[<\"]",
            r"(?m)[{};]\s*$",
            r"(?:const|let|var) \w+ =",
            r"(?m)^\s*return\b",
        ),
        3,
    ),
    (
        "notes",
        (
            r"todo\b|to-do\b",
            r"(?m)^\s*[-*] \[[ x]\]",
            r"notes?\b",
            r"ideas?\b",
            r"remember\b",
            r"(?m)^\s*[-*\u2022] ",
        ),
        2,
    ),
)


def _alternatives(cue: str) -> list[re.Pattern[str]]:
    """A cue's top-level alternatives (``a\\b|b\\b``), each compiled alone: a pattern that opens with a
    literal is searched for ~20 times faster than an alternation, which re tries at every position."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(cue):
        escaped = i > 0 and cue[i - 1] == "\\"
        if c in "([" and not escaped:
            depth += 1
        elif c in ")]" and not escaped:
            depth -= 1
        elif c == "|" and depth == 0 and not escaped:
            parts.append(cue[start:i])
            start = i + 1
    parts.append(cue[start:])
    flags = re.match(r"\(\?[a-z]+\)", cue)  # an inline flag such as (?m) applies to every alternative
    prefix = flags.group() if flags and len(parts) > 1 else ""
    return [re.compile(part if part.startswith(prefix) else prefix + part) for part in parts]


_TYPE_CUES = [(name, [_alternatives(cue) for cue in cues], need) for name, cues, need in TYPE_RULES]

FORMAT_TYPES = {
    "pdf": "pdf_document",
    "docx": "word_document",
    "doc": "word_document",
    "md": "markdown_document",
    "markdown": "markdown_document",
    "txt": "text_document",
    "text": "text_document",
    "html": "web_page",
    "htm": "web_page",
}


def format_type(fmt: str) -> str:
    known = FORMAT_TYPES.get(fmt.lower())
    if known:
        return known
    slug = re.sub(r"[^a-z0-9]+", "_", fmt.lower()).strip("_")[:20]
    return f"{slug}_document" if slug else "document"


def _cue_in(cue: re.Pattern[str], text: str) -> bool:
    for m in cue.finditer(text):
        start = m.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            return True
    return False


def infer_type(text: str, fmt: str, title: str | None = None, path: str = "") -> tuple[str, bool]:
    """(type, whether a content rule chose it rather than the format)."""
    stem = re.sub(r"[-_.]+", " ", os.path.splitext(os.path.basename(path))[0])
    head = text if len(text) <= HEAD + TAIL else text[:HEAD] + "\n" + text[-TAIL:]
    haystack = f"{title or ''}\n{stem}\n{head}".lower()
    best, best_hits = "", 0
    for name, cues, need in _TYPE_CUES:
        hits = sum(1 for alternatives in cues if any(_cue_in(cue, haystack) for cue in alternatives))
        if hits >= need and hits > best_hits:
            best, best_hits = name, hits
    return (best, True) if best else (format_type(fmt), False)


# ------------------------------------------------------------------------------------------------
# keywords

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


def _surface(word: str) -> str:
    w = word.lower().replace("\u2019", "'")
    return w[:-2] if w.endswith("'s") else w


def stem(word: str) -> str:
    """A grouping key, not a linguistic stem: plurals and -ing/-ed/-e endings folded (invoices, invoice)."""
    w = _surface(word).replace("'", "")
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
    for rank, (word, n) in enumerate(Counter(_WORD.findall(text.lower())).items()):
        surface = _surface(word)
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


# ------------------------------------------------------------------------------------------------
# key entities

_UPPER = "A-ZÀ-ÖØ-Þ"
_NAME = re.compile(rf"(?<![\w{_APOSTROPHES}-])[{_UPPER}][\w&{_APOSTROPHES}-]*(?: [{_UPPER}][\w&{_APOSTROPHES}-]*)+")
_ACRONYM = re.compile(rf"(?<![\w{_APOSTROPHES}-])[{_UPPER}][{_UPPER}0-9&]{{1,6}}(?![\w{_APOSTROPHES}-])")
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
        while words and _surface(words[0]) in STOPWORDS:
            words.pop(0)
        while words and _surface(words[-1]) in STOPWORDS:
            words.pop()
        if words:
            words[-1] = re.sub(f"[{_APOSTROPHES}]s$", "", words[-1])
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


# ------------------------------------------------------------------------------------------------
# suggested name

_JUNK_TITLE = re.compile(r"^(?:untitled|document\d*|microsoft \w+ - .*)$|\.\w{2,5}$", re.IGNORECASE)


def slug(text: str, limit: int = SLUG_CHARS) -> str:
    """Lower-case ASCII words joined by hyphens, at most ``limit`` characters, cut between words."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    out = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(out) > limit:
        cut = out.rfind("-", 0, limit + 1)
        out = out[:cut] if cut > 0 else out[:limit]
    return out.strip("-")


def leading_heading(text: str) -> str | None:
    """The document's first line when it reads as a heading (short, no sentence or label, more text
    below): the title of a file whose format carries none (plain text, many PDFs)."""
    lines = [line.strip() for line in text[:2_000].split("\n")]
    lines = [line for line in lines if line]
    if len(lines) < 2:
        return None
    first = lines[0]
    if len(first) > 80 or not 1 <= len(first.split()) <= 10 or first[-1] in ".!?,;:" or re.search(r"[:@|]", first):
        return None
    return first if _WORD.search(first) else None


def suggested_name(day: str | None, title: str | None, words: list[str], path: str) -> str:
    """``<date>-<slug><extension>``: the slug from the title, else the top keywords, else the file name."""
    title = _collapse(title or "")
    usable_title = title if title and not _JUNK_TITLE.search(title) else ""
    base = slug(usable_title) or slug(" ".join(words[:3])) or slug(os.path.splitext(os.path.basename(path))[0])
    if day:
        base = base.removeprefix(day).strip("-")  # a title that starts with the date already
    ext = os.path.splitext(path)[1].lower()
    if not re.fullmatch(r"\.[a-z0-9]{1,10}", ext):
        ext = ""
    return f"{day or 'undated'}-{base or 'document'}{ext}"


# ------------------------------------------------------------------------------------------------
# the whole analysis


def analyze(
    *,
    path: str,
    fmt: str,
    title: str | None,
    texts: list[str],
    folder_name: str,
    mtime: float,
    doc_freq: Callable[[str], int] | None = None,
    total_docs: int = 0,
) -> dict[str, Any]:
    """The deterministic analysis of one document (JSON-able fields; see the module's docstring).

    ``texts`` are the document's text in order, in pieces that do not overlap (overlapping chunks
    would count their shared words twice). ``doc_freq(word)`` is the number of index units (chunks)
    holding the word and ``total_docs`` their number, for IDF; without them keywords rank by term
    frequency alone. Odd input (binary junk, empty text, a bad mtime) gives a valid result.
    """
    title = (_collapse(title) or None) if isinstance(title, str) else None
    fmt = fmt if isinstance(fmt, str) else ""
    text = _prepare(texts)
    # Only as many words as the confidence formula can use (it stops growing at 600).
    words = sum(1 for m in _WORD.finditer(text, 0, 10_000) if len(m.group()) >= 2)
    summary = summarize(text, title)
    kind, by_rule = infer_type(text, fmt, title, path)
    # The first date of the head; a long document without one there may be dated at its end (a signature).
    text_date = find_date(text[:DATE_HEAD]) or (find_date(text[-TAIL:]) if len(text) > DATE_HEAD else None)
    plain = _without_addresses(text)
    day = text_date or _mtime_date(mtime)
    top = keywords(plain, doc_freq, total_docs)
    named = title if title and not _JUNK_TITLE.search(title) else leading_heading(text)
    # Confidence in the deterministic fields, 0..100: 10 for the category (always known) + up to 30 for
    # the amount of text (1 per 20 words) + 20 for a date written in the text (not the mtime) + 20 for a
    # type chosen by a content rule (not the format) + 2 per keyword up to 10 + 10 for a summary.
    confidence = (
        10
        + min(30, words // 20)
        + (20 if text_date else 0)
        + (20 if by_rule else 0)
        + min(10, 2 * len(top))
        + (10 if summary else 0)
    )
    return {
        "summary": summary,
        "category": folder_name,
        "entity": None,
        "type": kind,
        "date": day,
        "keywords": top,
        "key_entities": key_entities(plain),
        "suggested_name": suggested_name(day, named, top, path),
        "confidence": max(0, min(100, confidence)),
        "summary_model": None,
    }
