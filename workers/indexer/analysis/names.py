"""The suggested file name: ``<date>-<slug><extension>``."""

from __future__ import annotations

import os
import re
import unicodedata

from foldermind.workers.indexer.analysis.text import SLUG_CHARS, WORD, collapse

JUNK_TITLE = re.compile(r"^(?:untitled|document\d*|microsoft \w+ - .*)$|\.\w{2,5}$", re.IGNORECASE)


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
    return first if WORD.search(first) else None


def suggested_name(day: str | None, title: str | None, words: list[str], path: str) -> str:
    """``<date>-<slug><extension>``: the slug from the title, else the top keywords, else the file name."""
    title = collapse(title or "")
    usable_title = title if title and not JUNK_TITLE.search(title) else ""
    base = slug(usable_title) or slug(" ".join(words[:3])) or slug(os.path.splitext(os.path.basename(path))[0])
    if day:
        base = base.removeprefix(day).strip("-")  # a title that starts with the date already
    ext = os.path.splitext(path)[1].lower()
    if not re.fullmatch(r"\.[a-z0-9]{1,10}", ext):
        ext = ""
    return f"{day or 'undated'}-{base or 'document'}{ext}"
