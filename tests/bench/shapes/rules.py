"""The rules that write the known-item queries (shapes a-e) from a corpus's documents, and the split rule.

Fixed on 2026-12-06 before any search was run on a query of these sets (``data/README.md`` states them
in words; this module is their one implementation). A document is ``(path, text)``, the text as the
project's parser extracts it (what the index holds). Every draw is seeded: the same corpus gives the same
queries. :func:`tokens` is the word rule every shape uses; :data:`COMMON` the common English words a person
keeps when remembering a page (a list of its own, not the indexer's stop words).

- (a) ``fragment``: 5-8 consecutive words of one clean sentence (10-40 words), as a person pastes or
  remembers a phrase; kept only if that word sequence occurs in this one document of the corpus.
- (b) ``scramble``: 8-10 distinct words drawn at random positions of 25-40 consecutive words of clean
  sentences, lower case, shuffled; common words stay at their natural rate (at least 2, at least 4 others).
- (c) ``keywords``: 3-5 of the document's 12 highest tf-idf words (4+ letters, not common, in 2+ documents).
- (d) ``heading``: one title or heading of the document (reST underlined titles, HTML h1-h4, SciFact's title
  line), 2-12 words, whose text is a heading of no other document.
- (e) ``command``: a shell command line (``$ ...``), an error message (``NameError: ...``) or a long flag
  (``--flag`` / ``--flag=value``) of the document, found in no other document of the corpus.

Split: a query id is ``held_out`` when the first 8 hex digits of its SHA-256 are 0 modulo 3, else ``tune``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence

SEED = 38
SHAPES = ("fragment", "scramble", "keywords", "heading", "command")
COMMON = frozenset(
    """a about above after again all also an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    him his how i if in into is it its itself just may me might more most must my no nor not now of off on once
    only or other our out over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while who whom why will
    with would you your""".split()  # noqa: SIM905 (a paragraph of words reads better than 117 quoted strings)
)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*[A-Za-z0-9]|[A-Za-z]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
RST_UNDERLINE = re.compile(r"""^([=\-~^"'*+#`:.])\1{2,}\s*$""")
HTML_HEADING = re.compile(r"<h([1-4])\b[^>]*>(.*?)</h\1>", re.IGNORECASE | re.DOTALL)
COMMAND = re.compile(r"(?m)^\s*\$ (\S[^\n]*)$")
ERROR = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Warning): [^\n]+)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]{2,}(?:=[^\s,;)`'\"]+)?)")


def tokens(text: str) -> list[str]:
    """The words of ``text`` (markup and punctuation dropped), as written."""
    return WORD.findall(text)


def split_of(query_id: str) -> str:
    """``held_out`` for about a third of the ids, by a hash of the id alone (stable across runs and sets)."""
    return "held_out" if int(hashlib.sha256(query_id.encode("utf-8")).hexdigest()[:8], 16) % 3 == 0 else "tune"


def rng_for(corpus: str, shape: str) -> random.Random:
    return random.Random(f"{SEED}:{corpus}:{shape}")


def squash(text: str) -> str:
    return " ".join(text.split())


def clean_sentences(text: str) -> list[list[str]]:
    """The word lists of the sentences of 10-40 words whose whitespace pieces are mostly plain words (at
    least 80% are one word with at most trailing punctuation): prose, not code, tables or markup."""
    out = []
    for sentence in SENTENCE_END.split(squash(text)):
        pieces = sentence.split()
        plain = sum(1 for p in pieces if re.fullmatch(r"[A-Za-z][A-Za-z'-]*[.,;:!?)]?", p))
        words = tokens(sentence)
        if 10 <= len(words) <= 40 and plain >= 0.8 * len(pieces):
            out.append(words)
    return out


def word_string(text: str) -> str:
    """Lower-case words joined by single spaces, with a space at each end: what phrase matching searches."""
    return " " + " ".join(tokens(text)).lower() + " "


def fragment(text: str, rng: random.Random) -> str | None:
    sentences = clean_sentences(text)
    if not sentences:
        return None
    words = rng.choice(sentences)
    n = rng.randint(5, 8)
    start = rng.randint(0, len(words) - n)
    return " ".join(words[start : start + n])


def scramble(text: str, rng: random.Random, tries: int = 20) -> str | None:
    sentences = clean_sentences(text)
    for _ in range(tries if sentences else 0):
        i = rng.randrange(len(sentences))
        window: list[str] = []
        while i < len(sentences) and len(window) < 25:
            window += sentences[i]
            i += 1
        window = [w.lower() for w in window[:40]]
        n = rng.randint(8, 10)
        picked = list(dict.fromkeys(window[p] for p in sorted(rng.sample(range(len(window)), min(n, len(window))))))
        common = sum(1 for w in picked if w in COMMON)
        if len(picked) >= 8 and common >= 2 and len(picked) - common >= 4:
            rng.shuffle(picked)
            return " ".join(picked)
    return None


def content_words(text: str) -> list[str]:
    return [w for w in (t.lower() for t in tokens(text)) if len(w) >= 4 and w not in COMMON]


def document_frequency(texts: Iterable[str]) -> tuple[Counter[str], int]:
    df: Counter[str] = Counter()
    n = 0
    for text in texts:
        df.update(set(content_words(text)))
        n += 1
    return df, n


def keywords(text: str, rng: random.Random, df: Counter[str], n_docs: int) -> str | None:
    tf = Counter(content_words(text))
    ranked = sorted(
        ((count * math.log(n_docs / df[w]), w) for w, count in tf.items() if df[w] >= 2), key=lambda x: (-x[0], x[1])
    )
    top = [w for _, w in ranked[:12]]
    if len(top) < 5:
        return None
    return " ".join(rng.sample(top, rng.randint(3, 5)))


def headings(raw: str, text: str, kind: str) -> list[str]:
    """The titles and headings of a document: ``kind`` is ``rst`` (underlined lines of the raw text), ``html``
    (h1-h4 of the raw markup), ``title`` (the text's first line) or anything else (none)."""
    found: list[str] = []
    if kind == "rst":
        lines = raw.splitlines()
        for above, line in itertools.pairwise(lines):
            title = above.strip()
            if title and RST_UNDERLINE.match(line) and len(line.strip()) >= len(title) and tokens(title):
                found.append(title)
    elif kind == "html":
        found = [squash(re.sub(r"<[^>]+>", " ", m.group(2))) for m in HTML_HEADING.finditer(raw)]
    elif kind == "title":
        found = [text.strip().splitlines()[0].strip()] if text.strip() else []
    return [h for h in (re.sub(r"^[\d.]+\s+|[¶#]+$", "", h).strip() for h in found) if 2 <= len(tokens(h)) <= 12]


def commands(text: str) -> list[str]:
    """Shell command lines, error messages and long flags of a document, each at most 12 words."""
    found = [m.group(1) for m in COMMAND.finditer(text)]
    found += [m.group(1) for m in ERROR.finditer(text)]
    found += [m.group(1) for m in FLAG.finditer(text)]
    out = []
    for item in found:
        cut = " ".join(item.split()[:12]).rstrip(".,;:")
        if len(cut) >= 6 and cut not in out:
            out.append(cut)
    return out


def unique_in(needle: str, haystacks: Sequence[str], own: int) -> bool:
    """Whether ``needle`` (lower case) occurs in ``haystacks[own]`` and in no other one."""
    return needle in haystacks[own] and not any(needle in h for i, h in enumerate(haystacks) if i != own)
