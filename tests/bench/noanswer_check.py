"""Checks the no-answer set (``factoid_data/noanswer.jsonl``) against the corpora, as its README's rules say.

``python -m tests.bench.noanswer_check CORPORA [FILE]`` (``CORPORA``: the folder holding the answers bench's
``django-docs-<version>`` and ``manuals`` folders, as :func:`tests.bench.factoids.build_corpora` writes them, and
pytest's ``pytest-docs-<version>``, as :func:`tests.bench.shapes.corpora.pytest_corpus` does; SciFact is read whole,
all 5,183 abstracts, from ``$FOLDERMIND_SCIFACT``; ``FILE``: the set, ``noanswer.jsonl`` by default). A row fails
when its ``absent`` matches a document of its corpus (``any``: of every corpus) that its ``present`` (when it has
one) matches too, when its ``present`` matches no document, or, for a row naming the document it was written from
(``drawn``), not that one. Exits 1 when a row fails.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.bench.factoids import DATA, DJANGO, DJANGO_VERSION, MANUALS, SCIFACT, _extracted
from tests.bench.scifact import _lines
from tests.bench.shapes.corpora import PYTEST, PYTEST_VERSION

NOANSWER = DATA / "noanswer.jsonl"


def documents(corpora: Path) -> dict[str, dict[str, str]]:
    """Every document's text by corpus: SciFact's abstracts (title and text), Django's ``.txt`` and pytest's ``.rst``
    files, the manuals as the project's parser extracts them."""
    django = corpora / f"{DJANGO}-{DJANGO_VERSION}"
    pytest = corpora / f"{PYTEST}-{PYTEST_VERSION}"
    return {
        SCIFACT: {str(d["_id"]): f"{d.get('title', '')}\n{d.get('text', '')}" for d in _lines("corpus.jsonl")},
        DJANGO: {p.relative_to(django).as_posix(): p.read_text("utf-8", "replace") for p in django.rglob("*.txt")},
        MANUALS: _extracted(corpora / MANUALS),
        PYTEST: {p.relative_to(pytest).as_posix(): p.read_text("utf-8", "replace") for p in pytest.rglob("*.rst")},
    }


def failures(rows: list[dict[str, str]], docs: dict[str, dict[str, str]]) -> list[str]:
    out: list[str] = []
    for r in rows:
        names = list(docs) if r["corpus"] == "any" else [r["corpus"]]
        texts = [t for name in names for t in docs[name].values()]
        present = r.get("present", "")
        if present and not any(re.search(present, t, re.I) for t in texts):
            out.append(f"{r['id']}: present {present!r} matches no document")
        drawn = r.get("drawn", "")
        if drawn and not (drawn in docs.get(r["corpus"], {}) and re.search(present, docs[r["corpus"]][drawn], re.I)):
            out.append(f"{r['id']}: present {present!r} does not match its drawn document {drawn}")
        if not r["absent"]:
            continue
        both = [t for t in texts if re.search(r["absent"], t, re.I) and (not present or re.search(present, t, re.I))]
        if both:
            shown = re.search(r["absent"], both[0], re.I)
            at = shown.start() if shown else 0
            out.append(f"{r['id']}: absent {r['absent']!r} in {len(both)} documents: ...{both[0][at - 40 : at + 40]!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = DATA / args[1] if len(args) > 1 else NOANSWER
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    bad = failures(rows, documents(Path(args[0])))
    print("\n".join(bad) or f"all {len(rows)} rows pass")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
