"""Citation markers of a generated answer, checked after generation.

The prompt numbers its sources 1..n. The model may cite them out of order, cite a number that was never
given, group several (``[1, 3]``, ``[1][3]``) or cite nothing. :func:`resolve` rewrites the answer so that
every marker names a returned citation and the citations are numbered in the order they are first used;
markers naming no source are removed, sources never cited are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MARKER = re.compile(r"(?<!\\)\[\s*(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\s*\]")
"""A citation marker: ``[1]``, ``[1, 3]``, ``[2; 4]``; not one escaped as ``\\[1\\]`` (:func:`escape_markers`)."""
_SPACES = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([.,;:!?])")


def escape_markers(text: str) -> str:
    """Document text with every bracket that reads as a marker escaped (``[0; 3]`` -> ``\\[0; 3\\]``, as
    Markdown escapes it): a quote or a passage shown to the model carries the document's own references
    ("as reported [12]", "days [0; 3]"), and only the answer's markers may name its citations."""
    return MARKER.sub(lambda m: "\\" + m.group(0)[:-1] + "\\]", text)


FENCE = "-----"
"""The line above and below a numbered source's text: :func:`fence` keeps the text from forging it."""


def fence(index: int, label: str, text: str, label_chars: int = 200) -> str:
    """A numbered source as a model is shown it (the local model's chat prompt, and the MCP prompts for the
    client's model): ``[index] label`` on a line of its own, then the text between :data:`FENCE` lines, as
    data. Runs of dashes in the text are shortened, so it cannot close the fence and write a source of its
    own below it; its bracketed numbers are escaped (:func:`escape_markers`), so a forged ``[1] contract.md``
    reads as the document's own text, not as a source the answer could cite. The label's white space is
    collapsed: a file name cannot break the line either."""
    name = " ".join(label.split())[:label_chars]
    body = escape_markers(re.sub(r"-{4,}", "---", text).strip())
    return f"[{index}] {name}\n{FENCE}\n{body}\n{FENCE}"


def resolve(answer: str, n_sources: int) -> tuple[str, list[int]]:
    """(answer with renumbered markers, cited sources as 0-based prompt indexes in first-use order)."""
    order: list[int] = []

    def renumber(m: re.Match[str]) -> str:
        out = []
        for raw in re.split(r"[,;]", m.group(1)):
            k = int(raw)
            if not 1 <= k <= n_sources:
                continue  # a source that was never given: the claim stays, the false marker goes
            if k - 1 not in order:
                order.append(k - 1)
            marker = f"[{order.index(k - 1) + 1}]"
            if marker not in out:
                out.append(marker)
        return "".join(out)

    text = MARKER.sub(renumber, answer)
    return (_tidy(text) if text != answer else text).strip(), order


def strip_markers(text: str) -> str:
    """The answer without markers: what a session remembers (old numbers mean nothing in the next prompt)."""
    return _tidy(MARKER.sub("", text)).strip()


def _tidy(text: str) -> str:
    """Spaces a removed or rewritten marker left behind: runs of them, and before punctuation."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", text))


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset(
    " ".join(
        (
            "the and for are was were with that this from have has had not but its their they them which what",
            "when where who how why there here than then into onto about also been being can could would should",
            "will shall may might does did done such these those other some any each very more most much many one",
            "two answer source sources document documents question according",
        )
    ).split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if (len(w) >= 3 or w.isdigit()) and w not in _STOP}


def attribute(answer: str, passages: list[str], min_overlap: float = 0.6, min_words: int = 3) -> tuple[str, int]:
    """Add a marker to each sentence that cites nothing but whose content words mostly (``min_overlap``)
    appear in one passage: the passage that holds the most of them. Small models often state what a
    source says without citing it; this points the reader at the evidence. Sentences with markers of
    their own keep them; a sentence found in no passage stays uncited. Returns the answer and how many
    sentences got a marker this way."""
    if not passages:
        return answer, 0
    added = 0
    vocab = [_content_words(p) for p in passages]
    out: list[str] = []
    pos = 0
    for m in _SENTENCE.finditer(answer):
        sentence = m.group(0)
        out.append(answer[pos : m.start()])
        pos = m.end()
        if MARKER.search(sentence) or len(words := _content_words(sentence)) < min_words:
            out.append(sentence)
            continue
        best = max(range(len(vocab)), key=lambda i: len(words & vocab[i]))
        numbers = {w for w in words if w.isdigit()}
        # A figure the passage does not hold is the model's own: never lend it a source.
        if len(words & vocab[best]) / len(words) < min_overlap or not numbers <= vocab[best]:
            out.append(sentence)
            continue
        body = sentence.rstrip()
        trail = sentence[len(body) :]
        stem = body.rstrip(".!?")
        out.append(f"{stem} [{best + 1}]{body[len(stem) :]}{trail}")
        added += 1
    out.append(answer[pos:])
    return "".join(out), added


def strip_controls(text: str, controls: Iterable[str]) -> str:
    """The answer without control-token text (``<|im_start|>``): copied from a document, it could make the
    answer look like the start of a new turn to the client's own model."""
    for token in sorted(controls, key=len, reverse=True):
        if len(token) > 2:
            text = text.replace(token, "")
    return text
