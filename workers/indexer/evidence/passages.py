"""The passages an answer draws on: the best chunks of the best files (:func:`pick`), each read on to the end of
the paragraph its chunk boundary cuts (:func:`continuation`); a follow-up's from two searches taken in turns
(:func:`interleaved`)."""

from __future__ import annotations

import itertools
import re

from foldermind.protocol.messages import SearchHit
from foldermind.workers.indexer.storage.store import Store

CONTINUE_CHARS = 600
"""How far a passage is read on into the next chunk, to the end of the paragraph the chunk boundary cuts: a
chunk ends where its tokens run out, and the answer is often the rest of that paragraph ("An exception to PEP
8 is our rules on line lengths." / "... We allow up to 88 characters ..."; "PostgreSQL's defaults are 35 and"
/ "15."). Measured with the short-line rule of :mod:`.sentences`: docs/tuning.md#answer-evidence."""


def interleaved(first: list[SearchHit], second: list[SearchHit]) -> list[SearchHit]:
    """Two rankings taken in turns, each chunk once: a follow-up's passages are those its words with the previous
    question's find ("and what does --inactive do?" after "What does chage -E do?": chage's page, its -E entry
    first) and those its own words find (every page's --inactive entry); the previous question's terms then
    choose among them (:data:`.evidence.CONTEXT_WEIGHT`)."""
    out: list[SearchHit] = []
    seen: set[int] = set()
    for hit in itertools.chain.from_iterable(itertools.zip_longest(first, second)):
        if hit is not None and hit["chunk_id"] not in seen:
            seen.add(hit["chunk_id"])
            out.append(hit)
    return out


def pick(hits: list[SearchHit], max_files: int, per_file: int) -> list[SearchHit]:
    """The best chunks of the ``max_files`` best files, at most ``per_file`` each, in rank order."""
    files: dict[str, int] = {}
    picked: list[SearchHit] = []
    for hit in hits:
        n = files.get(hit["file_path"])
        if n is None:
            if len(files) == max_files:
                continue
            n = 0
        if n < per_file:
            files[hit["file_path"]] = n + 1
            picked.append(hit)
    return picked


def continuation(store: Store, hit: SearchHit) -> str:
    """The text after ``hit``'s chunk to the end of its paragraph (at most :data:`CONTINUE_CHARS`, ending
    at a line or sentence end), when the next chunk carries on the same section (it overlaps this one;
    a new section starts a chunk of its own); else nothing."""
    doc = store.documents.get(hit["file_path"])
    if doc is None:
        return ""
    pair = list(itertools.islice(store.chunks.from_ordinal(doc.id, int(hit["chunk_index"])), 2))
    if len(pair) < 2 or pair[0].text != hit.get("text", ""):
        return ""  # the last chunk, or the document changed since the search
    this, after = pair
    end = this.char_start + len(this.text)
    if not this.char_start <= after.char_start < end:
        return ""
    rest = after.text[end - after.char_start :]
    paragraph = re.search(r"\n[ \t]*\n", rest)
    if paragraph is not None:
        rest = rest[: paragraph.start()]
    if len(rest) > CONTINUE_CHARS:
        window = rest[:CONTINUE_CHARS]
        stop = max(window.rfind(". "), window.rfind("\n"))
        rest = window[: stop + 1] if stop > 0 else ""
    return rest
