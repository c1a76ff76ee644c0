"""The document type: a table of cues per type (data, not code), else the format's type."""

from __future__ import annotations

import os
import re

from foldermind.workers.indexer.analysis.text import HEAD, TAIL

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


CODE_TYPE = "source_code"
PLAIN_TEXT = frozenset({"txt", "text", ""})
"""Formats a code file is read in: plain text. Every other format is a page made for reading (HTML, Markdown,
PDF, Word, ...), as is reStructuredText (:data:`MARKUP_SUFFIXES`), which the plain-text parser reads."""
MARKUP_SUFFIXES = frozenset({".rst"})
PROSE_LINES = 2
"""A page for reading that holds this many lines of prose is a document whatever code it shows (a how-to, an
API manual): the code cues then name what it shows, not what it is."""
_PLAIN = re.compile(r"[(\"'\u2018\u201c]?[A-Za-z][a-z]*(?:['\u2019][a-z]+)?[,.;:!?)\"'\u2019\u201d]*")
_COMMENT = re.compile(r"\s*(?:[#*;%]|//|/\*|--|<!--)")


def _prose(line: str) -> bool:
    """A line of prose: at the margin (code indents its comments and docstrings), not a code comment, six words
    or more, four in five plain words."""
    words = line.split()
    if len(words) < 6 or line[:1].isspace() or _COMMENT.match(line):
        return False
    return sum(1 for w in words if _PLAIN.fullmatch(w)) * 5 >= len(words) * 4


def reads_as_document(head: str, fmt: str, path: str = "") -> bool:
    """Whether a text is a page made for reading (not plain text, or a markup such as reStructuredText) that
    holds prose (:data:`PROSE_LINES`): such a page is never typed as code."""
    if fmt.lower() in PLAIN_TEXT and os.path.splitext(path)[1].lower() not in MARKUP_SUFFIXES:
        return False
    found = 0
    for line in head.splitlines():
        found += _prose(line)
        if found >= PROSE_LINES:
            return True
    return False


def infer_type(text: str, fmt: str, title: str | None = None, path: str = "") -> tuple[str, bool]:
    """(type, whether a content rule chose it rather than the format). Code is a type of plain text only:
    a page for reading with prose takes the next type its cues show (:func:`reads_as_document`)."""
    stem = re.sub(r"[-_.]+", " ", os.path.splitext(os.path.basename(path))[0])
    head = text if len(text) <= HEAD + TAIL else text[:HEAD] + "\n" + text[-TAIL:]
    haystack = f"{title or ''}\n{stem}\n{head}".lower()
    found: list[tuple[int, str]] = []
    for name, cues, need in _TYPE_CUES:
        hits = sum(1 for alternatives in cues if any(_cue_in(cue, haystack) for cue in alternatives))
        if hits >= need:
            found.append((hits, name))
    if any(name == CODE_TYPE for _, name in found) and reads_as_document(head, fmt, path):
        found = [(hits, name) for hits, name in found if name != CODE_TYPE]
    # The most cues win; ties go to the earlier row (max keeps the first of equals).
    best = max(found, key=lambda f: f[0], default=None)
    return (best[1], True) if best else (format_type(fmt), False)
