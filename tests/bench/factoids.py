"""Factoid questions for the answer bench: short answers found in one document of a corpus nobody on the
project wrote, and the three corpora as folders of files ready to be indexed.

``python -m tests.bench.factoids --check [--root DIR]`` builds (or finds) the corpora under DIR (default
a temporary folder) and checks every question against them; ``tests.bench.answers`` is the bench that
asks them.

How the questions were made, set by set (the first set and its ``tune`` / ``held_out`` split, then ``fresh``
to ``fresh7``, each written before a round of tuning by an engineer who had not seen the engine's answers), and
the drafts the check replaced: ``factoid_data/README.md``. :func:`load_questions` reads every set; :func:`check`
verifies each question mechanically: the gold file is in its corpus, the sentence is in the gold text, the answer
matches the sentence, every key matches the gold text, and exactly one document of the corpus matches all the keys
and the answer (for SciFact over all 5,183 abstracts; for the manuals over the text the project's parser extracts).

The corpora
-----------

- ``scifact``: SciFact abstracts (``../shared/eval/scifact/corpus.jsonl`` or ``$FOLDERMIND_SCIFACT``; BEIR format),
  written one file per abstract by :func:`tests.bench.scifact.write_corpus` (title, blank line, text). 36 questions
  over abstracts spread across the whole corpus (one from each stretch of 143 abstracts), 18 fresh ones over 18
  other abstracts, 18 ``fresh2`` ones over 18 more, 18 ``fresh3`` ones over 18 more again, 18 ``fresh4`` ones over
  18 more, 12 ``fresh5`` ones over 12 more, 8 ``fresh6`` ones over 8 more and 8 ``fresh7`` ones over 8 more. The
  indexed folder holds the first :data:`SCIFACT_DISTRACTORS` abstracts plus every gold abstract, so retrieval has
  distractors, and a question's abstract is there even when it lies past them. Licence: SciFact (Wadden et al.,
  2020) is CC BY-NC 2.0: evaluation only, never shipped; the fresh sets are under the same terms. With ``fresh7``
  the folder holds 1,595 abstracts.
- ``django-docs``: the reference manual, topic guides, how-tos, internals and all release notes of Django 4.2.16:
  every ``.txt`` file (reStructuredText, the form the docs are written in) under ``docs/`` of the pinned sdist from
  PyPI (``Django-4.2.16.tar.gz``, sha256 below), folders starting with ``_`` (theme and Sphinx extensions) left out:
  587 files, 5.8 MB. The runner gets it by itself on a fresh machine: ``python -m pip download --no-deps --no-binary
  :all: --require-hashes`` into a cache folder (``$FOLDERMIND_BENCH_CACHE``, default ``~/.cache/foldermind-bench``)
  once, then extracts the docs. 36 questions over 35 files from every part of the docs (FAQ, tutorials, reference,
  topics, how-tos, internals, release notes), 12 ``fresh5`` ones over 12 more, 8 ``fresh6`` ones over 7 more and 8
  ``fresh7`` ones over 8 more. Licence: Django and its documentation are BSD-3-Clause (the sdist's ``LICENSE``).
- ``manuals``: the lookup bench's corpus, built by :func:`tests.bench.manuals.build` (six Debian 12 documentation
  packages pinned by version and sha256, fetched with ``apt-get download`` into the same cache folder, unpacked with
  ``dpkg-deb``): the gnuplot 5.4, Asymptote 2.85 and 4ti2 1.6.9 PDF manuals, Asymptote's ``CAD.pdf`` and
  ``asy-latex.pdf``, and the Aspell 0.60.8, apcupsd 3.14.14 and SQLite 3.40 HTML pages: 109 files, indexed whole. 18
  fresh, 18 ``fresh2``, 18 ``fresh3``, 18 ``fresh4``, 12 ``fresh5``, 8 ``fresh6`` and 8 ``fresh7`` questions.
  Licences, as each package's ``usr/share/doc/<package>/copyright`` states: gnuplot-doc, gnuplot's own licence (use,
  copy and distribute freely; modifications only as patches); asymptote-doc GPL-3+ (``asy-latex`` GPL-2+); 4ti2-doc
  GPL-2+; aspell-doc, the manual GFDL-1.2+ (the rest LGPL-2.1+); apcupsd-doc GPL-2+; sqlite3-doc public domain. The
  bench reads them where they are unpacked; nothing of them is shipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from foldermind.workers.parser.formats import ParseError, document_text
from tests.bench import manuals
from tests.bench.kernels import BenchFailure, say
from tests.bench.markdown import table
from tests.bench.scifact import _lines, file_name, write_corpus

DATA = Path(__file__).with_name("factoid_data")
QUESTIONS = DATA / "questions.jsonl"
FRESH = DATA / "fresh.jsonl"
FRESH2 = DATA / "fresh2.jsonl"
FRESH3 = DATA / "fresh3.jsonl"
FRESH4 = DATA / "fresh4.jsonl"
FRESH5 = DATA / "fresh5.jsonl"
FRESH6 = DATA / "fresh6.jsonl"
FRESH7 = DATA / "fresh7.jsonl"
WHO1 = DATA / "who1.jsonl"
WHO2 = DATA / "who2.jsonl"
WHO3 = DATA / "who3.jsonl"
WHO4 = DATA / "who4.jsonl"
QUESTION_FILES = (QUESTIONS, FRESH, FRESH2, FRESH3, FRESH4, FRESH5, FRESH6, FRESH7)
CHECKED_FILES = (*QUESTION_FILES, WHO1, WHO2, WHO3, WHO4)  # who1..who4: checked here, asked by the floor bench alone

SCIFACT = "scifact"
DJANGO = "django-docs"
MANUALS = "manuals"
CORPORA = (SCIFACT, DJANGO, MANUALS)
SPLITS = (
    "tune",
    "held_out",
    "fresh",
    "fresh2",
    "fresh3",
    "fresh4",
    "fresh5",
    "fresh6",
    "fresh7",
    "who1",
    "who2",
    "who3",
    "who4",
)

SCIFACT_DISTRACTORS = 1500
"""The first N abstracts are indexed beside the gold ones."""

DJANGO_VERSION = "4.2.16"
DJANGO_SDIST_SHA256 = "6f1616c2786c408ce86ab7e10f792b8f15742f7b7b7460243929cb371e7f1dad"
DJANGO_DOC_FILES = 587
CACHE_ENV = "FOLDERMIND_BENCH_CACHE"
MARKER = ".factoid-corpus"  # a hidden file: the watcher skips it
PIP_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    corpus: str  # one of CORPORA
    split: str  # one of SPLITS
    question: str
    answer: str  # a case-insensitive regular expression for the short answer
    gold_file: str  # as indexed: "<abstract id>.txt", or the path under the Django docs or manuals folder
    doc_id: str  # the SciFact abstract id; the path, for the other corpora
    sentence: str  # where the answer is found
    keys: tuple[str, ...]  # regular expressions for the terms that identify the document

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.answer, re.IGNORECASE)

    def answered_by(self, text: str) -> bool:
        """Whether ``text`` contains the gold answer."""
        return self.pattern.search(text) is not None

    def is_gold(self, path: str) -> bool:
        """Whether a citation's path (absolute, or relative to its Smart Folder) names the gold file."""
        posix = PurePosixPath(path.replace("\\", "/"))
        gold = PurePosixPath(self.gold_file)
        return posix.parts[-len(gold.parts) :] == gold.parts


def load_questions(
    split: str = "all", corpus: str | None = None, paths: Sequence[Path] = QUESTION_FILES
) -> list[Question]:
    """The questions of every file of ``paths`` in order of writing; ``split``: all or one of SPLITS;
    ``corpus``: one of CORPORA."""
    if split not in ("all", *SPLITS):
        raise ValueError(f"split must be all or one of {', '.join(SPLITS)}, not {split!r}")
    out: list[Question] = []
    for path in paths:
        out += _read_questions(path, split, corpus)
    return out


def _read_questions(path: Path, split: str, corpus: str | None) -> list[Question]:
    out: list[Question] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            q = Question(
                id=str(row["id"]),
                corpus=str(row["corpus"]),
                split=str(row["split"]),
                question=str(row["question"]),
                answer=str(row["answer"]),
                gold_file=str(row["gold_file"]),
                doc_id=str(row["doc_id"]),
                sentence=str(row["sentence"]),
                keys=tuple(str(k) for k in row["keys"]),
            )
            if q.corpus not in CORPORA or q.split not in SPLITS:
                raise ValueError(f"{path}: {q.id}: corpus {q.corpus!r} / split {q.split!r}")
            if (split == "all" or q.split == split) and (corpus is None or q.corpus == corpus):
                out.append(q)
    return out


# --------------------------------------------------------------------------------------------
# the corpora as folders


@dataclass(frozen=True, slots=True)
class Corpus:
    name: str
    folder: Path  # registered as a Smart Folder
    files: int


def _write_if_changed(path: Path, data: bytes) -> None:
    """Leave a file that already holds ``data`` alone, so a kept home's index stays valid."""
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def scifact_corpus(root: Path, questions: Iterable[Question], distractors: int = SCIFACT_DISTRACTORS) -> Corpus:
    """The first ``distractors`` abstracts and every gold abstract of ``questions``, as
    :func:`tests.bench.scifact.write_corpus` writes them, in ``root/scifact-factoids``. All abstracts are
    written to ``root/scifact-all`` first (not indexed) and the chosen ones copied over."""
    gold = {q.doc_id for q in questions if q.corpus == SCIFACT}
    staging = root / "scifact-all"
    write_corpus(staging)
    wanted: list[str] = []
    for n, doc in enumerate(_lines("corpus.jsonl")):
        doc_id = str(doc["_id"])
        if n < distractors or doc_id in gold:
            wanted.append(file_name(doc_id))
        gold.discard(doc_id)
    if gold:
        raise BenchFailure(f"gold abstracts missing from SciFact's corpus.jsonl: {sorted(gold)}")
    folder = root / "scifact-factoids"
    folder.mkdir(parents=True, exist_ok=True)
    keep = set(wanted)
    for stale in folder.glob("*.txt"):
        if stale.name not in keep:
            stale.unlink()
    for name in wanted:
        _write_if_changed(folder / name, (staging / name).read_bytes())
    return Corpus(SCIFACT, folder, len(wanted))


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "foldermind-bench")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def django_sdist() -> Path:
    """The pinned Django sdist: from the cache folder, or downloaded there with pip (hash-checked)."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)

    def cached() -> Path | None:
        for path in cache.iterdir():
            if path.name.lower() == f"django-{DJANGO_VERSION}.tar.gz" and _sha256(path) == DJANGO_SDIST_SHA256:
                return path
        return None

    if found := cached():
        return found
    say(f"downloading the Django {DJANGO_VERSION} sdist from PyPI into {cache} (once)")
    with tempfile.TemporaryDirectory(prefix="fm-django-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"django=={DJANGO_VERSION} --hash=sha256:{DJANGO_SDIST_SHA256}\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += ["--require-hashes", "-r", str(req), "-d", str(cache)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchFailure(f"pip download of Django {DJANGO_VERSION} failed: {exc}") from exc
        if out.returncode != 0:
            raise BenchFailure(
                f"pip download of Django {DJANGO_VERSION} exited {out.returncode} (PyPI reachable? or put"
                f" Django-{DJANGO_VERSION}.tar.gz with sha256 {DJANGO_SDIST_SHA256} into {cache}, or set"
                f" {CACHE_ENV}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
            )
    if found := cached():
        return found
    raise BenchFailure(f"pip reported success but no Django-{DJANGO_VERSION}.tar.gz with the pinned hash is in {cache}")


def _doc_members(sdist: Path) -> Iterable[tuple[PurePosixPath, bytes]]:
    """(path under docs/, content) of every .txt file of the sdist's docs, ``_*`` folders left out."""
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            parts = PurePosixPath(member.name).parts
            if len(parts) < 3 or parts[1] != "docs" or not parts[-1].endswith(".txt"):
                continue
            rel = PurePosixPath(*parts[2:])
            if any(p.startswith(("_", ".")) or p == ".." for p in rel.parts):
                continue
            fh = tar.extractfile(member)
            if fh is not None:
                yield rel, fh.read()


def django_corpus(root: Path) -> Corpus:
    """Django's docs as ``root/django-docs-<version>/``: extracted once (a hidden marker says so), then
    reused as they are."""
    folder = root / f"{DJANGO}-{DJANGO_VERSION}"
    marker = folder / MARKER
    if marker.is_file():
        info = json.loads(marker.read_text("utf-8"))
        if info.get("sha256") == DJANGO_SDIST_SHA256 and info.get("files") == DJANGO_DOC_FILES:
            return Corpus(DJANGO, folder, DJANGO_DOC_FILES)
    sdist = django_sdist()
    if folder.exists():
        shutil.rmtree(folder)
    n = 0
    for rel, data in _doc_members(sdist):
        _write_if_changed(folder.joinpath(*rel.parts), data)
        n += 1
    if n != DJANGO_DOC_FILES:
        raise BenchFailure(f"{sdist.name} has {n} doc files, not the {DJANGO_DOC_FILES} the questions were written on")
    marker.write_text(json.dumps({"sha256": DJANGO_SDIST_SHA256, "files": n}), encoding="utf-8")
    return Corpus(DJANGO, folder, n)


def manuals_corpus(root: Path) -> Corpus:
    """The lookup bench's Debian manuals as ``root/manuals/`` (:func:`tests.bench.manuals.build`)."""
    return Corpus(MANUALS, manuals.build(root), manuals.FILES)


def build_corpora(
    root: Path, questions: Iterable[Question] | None = None, names: Iterable[str] = CORPORA
) -> dict[str, Corpus]:
    """The corpora ``names`` (every one by default) under ``root``, ready to be registered as Smart Folders."""
    qs = list(questions) if questions is not None else load_questions()
    wanted = set(names)
    out: dict[str, Corpus] = {}
    if SCIFACT in wanted:
        out[SCIFACT] = scifact_corpus(root, qs)
    if DJANGO in wanted:
        out[DJANGO] = django_corpus(root)
    if MANUALS in wanted:
        out[MANUALS] = manuals_corpus(root)
    return out


# --------------------------------------------------------------------------------------------
# checking the questions against the corpora


def _squash(text: str) -> str:
    return " ".join(text.split())


PARSE_LIMIT = 1 << 30  # the check parses every manual whole, whatever the configured size limit


def _extracted(folder: Path) -> dict[str, str]:
    """Every file of a folder of PDF and HTML files as the project's parser extracts it (the text the
    index holds, and the text a question's sentence must be found in), by its path under ``folder``."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # BeautifulSoup's advice on XHTML pages, once per file
                out[path.relative_to(folder).as_posix()] = document_text(path, PARSE_LIMIT)
        except ParseError as exc:
            raise BenchFailure(f"the parser cannot read {path}: {exc}") from exc
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    question: Question
    problems: tuple[str, ...]
    identified: int  # documents matching every key and the answer (1: only the gold one)
    answer_anywhere: int  # documents the answer pattern alone matches


def check(root: Path, questions: list[Question] | None = None) -> list[Verdict]:
    """Check every question against the corpora under ``root`` (built there if needed)."""
    qs = questions if questions is not None else load_questions(paths=CHECKED_FILES)
    corpora = build_corpora(root, qs)
    texts: dict[str, dict[str, str]] = {
        # SciFact: every abstract (the uniqueness check covers more than the indexed ones)
        SCIFACT: {
            path.name: path.read_text("utf-8")
            for path in sorted((corpora[SCIFACT].folder.parent / "scifact-all").glob("*.txt"))
        },
        DJANGO: {
            path.relative_to(corpora[DJANGO].folder).as_posix(): path.read_text("utf-8")
            for path in sorted(corpora[DJANGO].folder.rglob("*.txt"))
        },
        MANUALS: _extracted(corpora[MANUALS].folder),
    }
    indexed = {p.name for p in corpora[SCIFACT].folder.glob("*.txt")}
    out: list[Verdict] = []
    for q in qs:
        problems: list[str] = []
        docs = texts[q.corpus]
        gold = docs.get(q.gold_file)
        if q.corpus == SCIFACT and q.gold_file not in indexed:
            problems.append("gold abstract not in the indexed folder")
        if gold is None:
            out.append(Verdict(q, ("gold file not in the corpus",), 0, 0))
            continue
        if _squash(q.sentence) not in _squash(gold):
            problems.append("sentence not in the gold text")
        if not q.answered_by(q.sentence):
            problems.append("answer does not match the sentence")
        if not q.answered_by(gold):
            problems.append("answer does not match the gold text")
        keys = [re.compile(k, re.IGNORECASE) for k in q.keys]
        if missing := [k.pattern for k in keys if not k.search(gold)]:
            problems.append(f"keys not in the gold text: {missing}")
        both = [name for name, text in docs.items() if all(k.search(text) for k in keys) and q.answered_by(text)]
        if both != [q.gold_file]:
            problems.append(f"keys + answer match {len(both)} documents: {both[:5]}")
        anywhere = sum(1 for text in docs.values() if q.answered_by(text))
        out.append(Verdict(q, tuple(problems), len(both), anywhere))
    return out


def render_check(verdicts: list[Verdict]) -> str:
    rows = [
        [
            v.question.id,
            v.question.split,
            f"`{v.question.gold_file}`",
            str(v.identified),
            str(v.answer_anywhere),
            "; ".join(v.problems) or "ok",
        ]
        for v in verdicts
    ]
    header = ["id", "split", "gold file", "docs matching keys + answer", "docs matching the answer", "check"]
    bad = sum(1 for v in verdicts if v.problems)
    return "\n".join([*table(header, rows, "lllrrl"), "", f"{len(verdicts) - bad} of {len(verdicts)} questions pass."])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.factoids", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check every question against the corpora")
    parser.add_argument("--root", default="", help="build the corpora here (default: a temporary folder)")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 0
    with tempfile.TemporaryDirectory(prefix="fm-factoids-") as tmp:
        root = Path(args.root) if args.root else Path(tmp)
        try:
            verdicts = check(root)
        except BenchFailure as exc:
            say(f"check failed: {exc}")
            return 1
    print(render_check(verdicts))
    return 1 if any(v.problems for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
