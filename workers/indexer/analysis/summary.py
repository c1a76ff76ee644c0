"""The extractive summary: the document's first prose sentences."""

from __future__ import annotations

from foldermind.workers.indexer.analysis.text import SUMMARY_CHARS, SUMMARY_HEAD, WORD, collapse, norm
from foldermind.workers.indexer.evidence import sentences


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
    if title and start < len(lines) and norm(lines[start]) == norm(title):
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
    flat = collapse(" ".join(body))
    if not any(len(m.group()) >= 2 for m in WORD.finditer(flat[: 4 * limit])):
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
