"""What a quote takes in around the sentence chosen for it (:func:`quoted`): the term a description describes, the
figure a neighbour states for a figure question, the lines a sentence ending with a colon introduces (and, for an
item of a list, the line that introduces it), the rest of a list item, the sentence a back-reference points to, and
for the best sentence the one after it, when that one scores close to it (:data:`NEXT_SHARE`).

A sentence is chosen by its score (:mod:`.evidence`); what a reader needs of it is sometimes on the lines next to
it: "--enable-gapcmon" over "This option enables building the GTK GUI front-end.", "By default, this is set to
200." after "Set list_max_show_all to ...", the command after "... to set an account to expire in 180 days:".
A quote stands on its own: "For this reason the old English dictionary will no longer work." says nothing without
"The dictionary option strip-accents has been removed.", nor "If no arguments are given, Asymptote runs in
interactive mode." without "In this case, the default output file is out.eps." (:func:`_linked`).
"""

from __future__ import annotations

import re
import textwrap

from foldermind.protocol.messages import EvidenceSpan, SearchHit
from foldermind.workers.indexer.evidence import sentences
from foldermind.workers.indexer.evidence.sentences import Sentence

FOLLOW_ON = 2
"""How far after a figure question's sentence its figure may be ("Set list_max_show_all to ..." / "The admin
will display ..." / "By default, this is set to 200.")."""
LIST_CHARS = 300
"""How much a sentence ending with a colon brings of the lines it introduces (:func:`_introduced`)."""
NEXT_SHARE = 0.6
"""The best sentence's quote takes in the sentence after it (:func:`goes_on`) when that one scores at least this share
of it: the sentence closest to a question often says what it is about, the next one what it asks ("The check is done
when accessing request.body ..." / "You can set this to None to disable the check."). Measured:
docs/benchmarks/answer-relevance.md."""


_BACK_REFERENCE = re.compile(
    r"^\W*(?:this|these|that|those|it|they|such|thus|hence|therefore|consequently|"
    r"in\s+(?:this|that|such|either|each|both)\s+cases?|for\s+(?:this|that|these|those)\s+reasons?|"
    r"because\s+of\s+(?:this|that)|as\s+a\s+(?:result|consequence))\b",
    re.IGNORECASE,
)
"""A sentence opening with a word or phrase that points to the sentence before it: its subject is there."""


def quoted(
    siblings: list[Sentence], at: int, titles: frozenset[str], figure: bool, text: str = "", then: bool = False
) -> tuple[int, int]:
    """The sentences quoted for ``siblings[at]`` (first, last): :func:`_around`, after it what its last sentence
    introduces (:func:`_introduced`) or the rest of the list item it opens (:func:`_item_rest`, in the chunk's
    ``text``), the sentences a back-reference links to it (:func:`_linked`), and, ``then``, the sentence after it."""
    first, last = _around(siblings, at, titles, figure, text)
    last = _item_rest(siblings, _introduced(siblings, last, titles, text), text)
    if first > 0 and _linked(siblings, first, titles):
        first -= 1
    if last + 1 < len(siblings) and _linked(siblings, last + 1, titles):
        last += 1
    return first, max(last, at + 1) if then else last


def goes_on(siblings: list[Sentence], at: int, titles: frozenset[str]) -> bool:
    """Whether the sentence after ``siblings[at]`` goes on from it: a finished sentence of its paragraph (on the line
    it ends or the next), not a heading."""
    if at + 1 >= len(siblings):
        return False
    after = siblings[at + 1]
    near = after.line_start - siblings[at].line_end <= 1
    return near and sentences.finished(after.text) and after.text.lower() not in titles


def joined(siblings: list[Sentence], first: int, last: int, titles: frozenset[str], text: str) -> str:
    """The quote of ``siblings[first..last]`` in the chunk's ``text``: its characters, white space collapsed, and a term
    taken in over its description (:func:`_described`) set off by a colon, "games: Many games are sgid ...": the
    line break between them read as a space glued the term to the quote ("games Many games ..."), a typo to a reader.
    """
    start = siblings[first].start
    if first < last and _described(siblings, first + 1, titles, text):
        term = sentences.quote(text[siblings[first].start : siblings[first].end])
        return f"{term}: {sentences.quote(text[siblings[first + 1].start : siblings[last].end])}"
    return _with_literal(text[start : siblings[last].end])


_LITERAL = re.compile(r"::[ \t]*\n")
"""The end of a reST paragraph that introduces a literal block: the lines indented under it, after a blank line."""
_CODE = r"\.\.[ \t]+(?:code-block|code|sourcecode|parsed-literal|doctest|testcode|testoutput)::"
"""A reST (Sphinx) directive whose content is code, shown as a literal block (``.. code-block:: console``); the
others (``.. note::``) hold prose."""
_DIRECTIVE = re.compile(rf"^[ \t]*{_CODE}[^\n]*\n", re.MULTILINE)
_OPTIONS = re.compile(r"\A(?:[ \t]*:[\w-]+:[^\n]*\n)+")
"""A directive's option lines, under it before its content (``:caption: hello.py``): not content."""


def _with_literal(raw: str) -> str:
    """``raw`` as a quote, a reST literal block in it kept line by line ("Here are a couple of example settings:" /
    "ALLOWED_HOSTS = [...]" / "DEBUG = False"): its lines run together read as one sentence of prose. The "::" reads
    as reST renders it: ":" after a word, nothing after a space or alone. A code directive's content is such a
    block, and the directive's own line (and options) is left out, as reST shows it."""
    literal, directive = _LITERAL.search(raw), _DIRECTIVE.search(raw)
    if directive is not None and (literal is None or directive.start() <= literal.start()):
        head, rest, indent = raw[: directive.start()], raw[directive.end() :], _indent(raw, directive.end() - 1)
        rest = _OPTIONS.sub("", rest, count=1)
        said = sentences.quote(head)
    elif literal is not None:
        head, rest, indent = raw[: literal.start()], raw[literal.end() :], _indent(raw, literal.start())
        said = sentences.quote(head) + (":" if head.strip() and not head[-1:].isspace() else "")
    else:
        return sentences.quote(raw)
    block: list[str] = []
    for line in rest.splitlines(keepends=True):
        if line.strip() and len(line) - len(line.lstrip(" \t")) <= indent:
            break
        block.append(line)
    lines = [line.rstrip() for line in textwrap.dedent("".join(block)).splitlines() if line.strip()]
    if not lines:
        return sentences.quote(raw)
    after = _with_literal(rest[len("".join(block)) :])
    return "\n".join(part for part in (said, *lines, after) if part)


def _linked(siblings: list[Sentence], at: int, titles: frozenset[str]) -> bool:
    """Whether ``siblings[at]`` opens with a back-reference to the sentence just before it ("For this reason
    ...", "In this case ...", "These ..."), both being sentences of one paragraph (on adjacent lines, neither a
    heading nor unfinished): one is not understood without the other, so a quote of either takes in both."""
    before, this = siblings[at - 1], siblings[at]
    if _BACK_REFERENCE.match(this.text) is None or this.line_start - before.line_end > 1:
        return False
    whole = sentences.finished(before.text) and sentences.finished(this.text)
    return whole and before.text.lower() not in titles


def _introduced(siblings: list[Sentence], last: int, titles: frozenset[str], text: str = "") -> int:
    """The last sibling a quote ending at ``last`` takes in: a sentence ending with a colon brings the lines it
    introduces (the command of "... to expire in 180 days:", the items of "exits with the following values:"),
    the first whatever it is, then each item of its list (:func:`_listed`) with the rest of an item
    (:func:`_item_rest`: "1." / "Create the new database tables:" is one item, and the command under it an item
    too), up to :data:`LIST_CHARS` in all; a reST "::" brings the lines of its literal block (indented under it), and
    a colon the content of the code directive after it; a definition list's term brings its description
    (:func:`_describes`)."""
    said = siblings[last].text
    # A reST literal block, or a code directive's content: every line indented under it (code, not a list).
    if (said.endswith("::") or re.match(_CODE, said)) and text and (end := _block(siblings, last, text)) > last:
        return end
    code = last + 1 < len(siblings) and re.match(_CODE, siblings[last + 1].text) is not None
    if said.endswith(":") and text and code and (end := _block(siblings, last + 1, text)) > last + 1:
        return end  # "... to:" / ".. code-block:: console" / its lines
    if said.endswith(":"):
        k, size, rest = last + 1, 0, last
        while k < len(siblings) and size + len(siblings[k].text) <= LIST_CHARS:
            if k > last + 1 and k > rest and not _listed(siblings[k], titles):
                break
            if siblings[k].item:
                rest = _item_rest(siblings, k, text)
            size += len(siblings[k].text)
            k += 1
        return k - 1
    if last + 1 < len(siblings) and _describes(siblings, last + 1, titles, text):
        return last + 1
    return last


def _block(siblings: list[Sentence], at: int, text: str) -> int:
    """The last of the sentences after ``siblings[at]`` indented deeper than its line (a literal block's, or a
    directive's content), up to :data:`LIST_CHARS` in all; ``at`` when none is."""
    indent, k, size = _indent(text, siblings[at].start), at + 1, 0
    while k < len(siblings) and size + len(siblings[k].text) <= LIST_CHARS:
        if _indent(text, siblings[k].start) <= indent:
            break
        size += len(siblings[k].text)
        k += 1
    return k - 1


def _item_rest(siblings: list[Sentence], last: int, text: str) -> int:
    """The last sibling of the list item ``siblings[last]`` opens (else ``last``): each next sentence that is no item
    itself and goes on from the line the one before ends, or from the next line indented deeper than the item's
    bullet, while they fit in :data:`LIST_CHARS`. A bullet is one unit: "removed the "disabled" attribute in test
    classes.  Use the skipping and pytestmark mechanism ..."; "fix #1334: Add captured stdout ..." / "Thanks Georgy
    Dyuldin for the PR." (docs/benchmarks/answer-relevance.md)."""
    if not text or not siblings[last].item:
        return last
    indent = _indent(text, siblings[last].start)
    k, size = last, 0
    while k + 1 < len(siblings) and not siblings[k + 1].item:
        after, before = siblings[k + 1], siblings[k]
        same_line = after.line_start == before.line_end
        if not same_line and (after.line_start != before.line_end + 1 or _indent(text, after.start) <= indent):
            break
        size += len(after.text)
        if size > LIST_CHARS:
            break
        k += 1
    return k


def _indent(text: str, at: int) -> int:
    """How far the line holding offset ``at`` of ``text`` is indented."""
    line = text[text.rfind("\n", 0, at) + 1 :]
    return len(line) - len(line.lstrip(" \t"))


def _listed(s: Sentence, titles: frozenset[str]) -> bool:
    """Whether ``s`` is an item of a list: a bullet's line ("* The content body is less than 200 bytes long."), or a
    line that does not end like a sentence (a command, "Portability fixes"), not a heading of its section."""
    return (s.item or not sentences.finished(s.text)) and s.text.lower() not in titles


def _introducer(siblings: list[Sentence], at: int, titles: frozenset[str]) -> int | None:
    """The sentence ending with a colon that introduces the list ``siblings[at]`` is an item of: the one just before
    it, or one further back over the items between ("News in 4ti2 version 1.4, compared to 1.3.2:" / "* Portability
    fixes" / "* New abstract C and C++ API ...") when those fit in :data:`LIST_CHARS`; else None."""
    if not _listed(siblings[at], titles):
        return None
    between = 0
    for k in range(at - 1, -1, -1):
        if siblings[k].text.endswith(":"):
            return k
        between += len(siblings[k].text)
        if between > LIST_CHARS or not _listed(siblings[k], titles):
            return None
    return None


def _around(siblings: list[Sentence], at: int, titles: frozenset[str], figure: bool, text: str) -> tuple[int, int]:
    """The sentences around ``siblings[at]`` (first, last): from the sentence ending with a colon that introduces
    the list this line is an item of (a command, a list item: :func:`_introducer`); the term before it when it describes
    one (:func:`.sentences.is_term`: "--enable-gapcmon" / "This option enables building the GTK GUI
    front-end.", "normal" / "This is the default mode ..."; the description is what names the question, the
    term is the answer; never a heading:
    :func:`_described`), else itself, and for a figure question whose sentence states none, up to the first of
    the next :data:`FOLLOW_ON` that does, else the one before when that one does. Only a sentence's own figure
    earns the figure bonus: with the neighbours' too (for "The age of session cookies, in seconds." after
    "Default: 1209600 (2 weeks, ...)"), nearly every sentence of an abstract earned it, and fewer questions were
    answered (docs/tuning.md#answer-evidence)."""
    if _described(siblings, at, titles, text):
        return at - 1, at  # a definition list's term and its description, quoted together
    introducer = _introducer(siblings, at, titles)
    if introducer is not None:
        return introducer, at  # a command or list item, with the sentence that introduces its list
    if not figure or sentences.has_figure(siblings[at].text):
        return at, at
    ahead = range(at + 1, min(at + 1 + FOLLOW_ON, len(siblings)))
    stated = next((k for k in ahead if sentences.has_figure(siblings[k].text)), None)
    if stated is not None:
        return at, stated
    if at > 0 and sentences.has_figure(siblings[at - 1].text):
        return at - 1, at
    return at, at


def _described(siblings: list[Sentence], at: int, titles: frozenset[str], text: str) -> bool:
    """Whether ``c`` describes the term on the line just before it: a short unfinished line
    (:func:`.sentences.is_term`) that is not a heading, i.e. neither a heading of its section (a parsed DOCX or
    Markdown heading is a line of its chunk, and the chunk's heading path names it) nor a paragraph of its own
    (a blank line or a title's underline after it). Either way, a title glued on ("Budget The budget for ...")
    was quoted as if the document said it in one breath; the 180 tuning questions answer the same. A list item
    that is only a term is one too when the paragraph after it (a blank line between or not) is indented deeper
    than its bullet: "- celery.contrib" / "    Additional public code that doesn't fit into any other
    name-space." (:func:`_bullet_term`)."""
    return _describes(siblings, at, titles, text)


def _describes(siblings: list[Sentence], at: int, titles: frozenset[str], text: str = "") -> bool:
    """Whether ``siblings[at]`` describes the term on the line just before it (see :func:`_described`)."""
    if at == 0 or sentences.is_term(siblings[at].text) or siblings[at].item:
        return False
    before = siblings[at - 1]
    if before.item:
        return _bullet_term(siblings, at, titles, text)  # else a list's items are items ("* Portability fixes")
    adjacent = siblings[at].line_start - before.line_end <= 1
    return adjacent and sentences.is_term(before.text) and before.text.lower() not in titles


def _bullet_term(siblings: list[Sentence], at: int, titles: frozenset[str], text: str) -> bool:
    """Whether the list item ``siblings[at - 1]`` is a term that ``siblings[at]`` describes: the item is a short
    unfinished line of its own, and the description starts on the next line or after one blank line, indented
    deeper than the item's bullet (a reST or Markdown definition written as a bullet list)."""
    term, this = siblings[at - 1], siblings[at]
    if not text or not sentences.is_term(term.text) or term.text.lower() in titles:
        return False
    near = term.line_end < this.line_start <= term.line_end + 2
    return near and _indent(text, this.start) > _indent(text, term.start)


def repeats(hits: list[SearchHit], spans: list[EvidenceSpan], span: EvidenceSpan) -> int | None:
    """The index of the span of ``spans`` that ``span``'s quote says again in the same file (it holds that quote, or
    that quote holds it), or None: two sentences whose quotes take in each other (a term and its description, a
    back-reference and the sentence it points to) reach the same lines, and an answer would cite them twice."""
    path, text = hits[span["passage"]]["file_path"], span["text"].lower()
    for k, s in enumerate(spans):
        if hits[s["passage"]]["file_path"] == path and (text in s["text"].lower() or s["text"].lower() in text):
            return k
    return None
