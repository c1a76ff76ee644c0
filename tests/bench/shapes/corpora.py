"""The six real corpora of the shape bench, as folders of files a kernel indexes, built by the bench itself.

- ``scifact``: SciFact's public half (``../shared/eval/scifact`` or ``$FOLDERMIND_SCIFACT``): every judged abstract
  and the first :data:`SCIFACT_DISTRACTORS` others, one ``<id>.txt`` file each, as the lookup bench indexes it
  (:func:`tests.bench.lookup.write_scifact`; all 5,183 take ~4 times as long to embed on the shared machine), and
  the gold abstracts of the factoid sets reused as shapes;
- ``manuals``: the six pinned Debian documentation packages of :mod:`tests.bench.manuals` (PDF and HTML);
- ``django-docs``: the ``.txt`` (reST) docs of the pinned Django 4.2.16 sdist
  (:func:`tests.bench.factoids.django_corpus`);
- ``pytest-docs``: the fourth corpus, pytest 8.3.4's documentation as its sdist on PyPI ships it: every ``.rst``
  file under ``doc/en/`` (folders starting with ``_`` left out; the how-tos, reference, examples, changelog and
  release announcements), 247 files. ``pip download --no-deps --no-binary :all: --require-hashes`` fetches the
  sdist (sha256 pinned) into the bench cache (``$FOLDERMIND_BENCH_CACHE``, default ``~/.cache/foldermind-bench``)
  once; a different sdist is refused. Licence: MIT (the sdist's ``LICENSE``); nothing of it is shipped.
- ``celery-docs``: the fifth corpus, Celery 5.4.0's documentation as its sdist on PyPI ships it: every ``.rst``
  file under ``docs/`` (folders starting with ``_`` or ``.`` left out) but the pure autodoc stubs
  (:func:`autodoc_stub`: a title and ``.. auto*::`` directives, whose text Sphinx pulls from the code at build
  time), 82 of 223 files; fetched and refused like pytest's. Licence: BSD 3-clause (the sdist's ``LICENSE``);
  nothing of it is shipped.
- ``flask-docs``: the sixth corpus, Flask 3.1.0's documentation as its sdist on PyPI ships it: every ``.rst`` file
  under ``docs/`` (the same rule as Celery's; none is a stub), 75 files; fetched and refused like pytest's. Licence:
  BSD 3-clause (the sdist's ``LICENSE.txt``); nothing of it is shipped.

A bench runs all six unless told which (:data:`ALL_CORPORA`); :data:`CORPORA`, the four the earlier sets were drawn
over, is what those sets' generators run.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tests.bench import factoids, manuals
from tests.bench.kernels import BenchFailure, say
from tests.bench.lookup import write_scifact
from tests.bench.scifact import SCIFACT_DOCS, _lines, file_name, judged_queries, write_corpus

SCIFACT = "scifact"
MANUALS = "manuals"
DJANGO = "django-docs"
PYTEST = "pytest-docs"
CELERY = "celery-docs"
FLASK = "flask-docs"
CORPORA = (SCIFACT, MANUALS, DJANGO, PYTEST)
"""The four corpora ``known.jsonl`` and the keyword-list batches were drawn over."""
ALL_CORPORA = (*CORPORA, CELERY, FLASK)
"""The corpora a bench runs unless told otherwise."""

SCIFACT_DISTRACTORS = 1000
PYTEST_VERSION = "8.3.4"
PYTEST_SDIST_SHA256 = "965370d062bce11e73868e0335abac31b4d3de0e82f4007408d242b4f8610761"
PYTEST_DOC_FILES = 247
CELERY_VERSION = "5.4.0"
CELERY_SDIST_SHA256 = "504a19140e8d3029d5acad88330c541d4c3f64c789d85f94756762d8bca7e706"
CELERY_DOC_FILES = 82
FLASK_VERSION = "3.1.0"
FLASK_SDIST_SHA256 = "5f873c5184c897c8d9d1b05df1e3d01b14910ce69607a117bd3277098a5836ac"
FLASK_DOC_FILES = 75
MARKER = ".shapes-corpus"  # a hidden file: the watcher skips it


@dataclass(frozen=True, slots=True)
class Corpus:
    name: str
    folder: Path  # registered as a Smart Folder
    files: int


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pinned_sdist(name: str, version: str, sha256: str) -> Path:
    """``<name>-<version>.tar.gz`` from the bench cache, or downloaded there with pip, hash-checked."""
    cache = manuals.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{name}-{version}.tar.gz"
    if path.is_file() and _sha256(path) == sha256:
        return path
    say(f"pip download {name}=={version} (sdist) into {cache} (once)")
    with tempfile.TemporaryDirectory(prefix="fm-sdist-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{name}=={version} --hash=sha256:{sha256}\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--require-hashes"]
        try:
            out = subprocess.run(
                [*cmd, "-r", str(req), "-d", str(cache)],
                capture_output=True,
                text=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchFailure(f"pip download {name}=={version} failed: {exc}") from exc
    if out.returncode != 0 or not path.is_file() or _sha256(path) != sha256:
        raise BenchFailure(f"no {path.name} with sha256 {sha256} after pip download:\n{out.stderr[-1500:]}")
    return path


@dataclass(frozen=True, slots=True)
class SdistDocs:
    """The documentation of a pinned sdist: its ``.rst`` files under ``under`` that ``keep`` (raw text) accepts."""

    corpus: str
    package: str
    version: str
    sha256: str
    under: tuple[str, ...]
    files: int
    keep: Callable[[str], bool] = lambda raw: True


ADORNMENT = re.compile(r"""^([=\-~^"'*+#`:.])\1{2,}$""")


def autodoc_stub(raw: str) -> bool:
    """Whether a reST file is a pure autodoc stub: an ``.. auto*::`` directive, and no line but titles, their
    adornments, explicit markup (``..``) and field options (``:members:``)."""
    if not re.search(r"(?m)^\s*\.\. auto\w+::", raw):
        return False
    lines = [line.strip() for line in raw.splitlines()]
    for i, line in enumerate(lines):
        title = i + 1 < len(lines) and ADORNMENT.match(lines[i + 1]) is not None
        if line and not (title or ADORNMENT.match(line) or line.startswith("..") or re.match(r":[\w-]+:", line)):
            return False
    return True


def prose(raw: str) -> bool:
    return not autodoc_stub(raw)


PYTEST_DOCS = SdistDocs(PYTEST, "pytest", PYTEST_VERSION, PYTEST_SDIST_SHA256, ("doc", "en"), PYTEST_DOC_FILES)
CELERY_DOCS = SdistDocs(CELERY, "celery", CELERY_VERSION, CELERY_SDIST_SHA256, ("docs",), CELERY_DOC_FILES, prose)
FLASK_DOCS = SdistDocs(FLASK, "flask", FLASK_VERSION, FLASK_SDIST_SHA256, ("docs",), FLASK_DOC_FILES, prose)


def extract_docs(sdist: Path, docs: SdistDocs, folder: Path) -> int:
    """Writes ``docs``' files of ``sdist`` into ``folder``; refuses an sdist other than the pinned one (its sha256) or
    one whose kept files are not the count the sets were written on."""
    if _sha256(sdist) != docs.sha256:
        raise BenchFailure(f"{sdist.name} is not the pinned {docs.package} {docs.version} (sha256 {docs.sha256})")
    n = 0
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            depth = 1 + len(docs.under)
            if not member.isfile() or parts[1:depth] != docs.under or not member.name.endswith(".rst"):
                continue
            rel = PurePosixPath(*parts[depth:])
            if any(p.startswith(("_", ".")) or p == ".." for p in rel.parts):
                continue
            fh = tar.extractfile(member)
            data = fh.read() if fh is not None else None
            if data is not None and docs.keep(data.decode("utf-8", "replace")):
                factoids._write_if_changed(folder.joinpath(*rel.parts), data)
                n += 1
    if n != docs.files:
        raise BenchFailure(f"{sdist.name} has {n} doc files, not the {docs.files} the queries were written on")
    return n


def sdist_corpus(root: Path, docs: SdistDocs) -> Corpus:
    """``docs`` as ``root/<corpus>-<version>/``: extracted once (a hidden marker says so), then reused."""
    folder = root / f"{docs.corpus}-{docs.version}"
    marker = folder / MARKER
    if marker.is_file() and json.loads(marker.read_text("utf-8")).get("sha256") == docs.sha256:
        return Corpus(docs.corpus, folder, docs.files)
    n = extract_docs(pinned_sdist(docs.package, docs.version, docs.sha256), docs, folder)
    marker.write_text(json.dumps({"sha256": docs.sha256, "files": n}), encoding="utf-8")
    return Corpus(docs.corpus, folder, n)


def pytest_corpus(root: Path) -> Corpus:
    """pytest's docs as ``root/pytest-docs-<version>/``."""
    return sdist_corpus(root, PYTEST_DOCS)


def asked(named: list[str] | None, rows: list[str] | None = None) -> list[str]:
    """The corpora a bench runs: those ``named``, else all (``rows``, the corpora of the rows asked, no longer
    matter: kept so that the callers need not change)."""
    return list(named) if named else list(ALL_CORPORA)


def lookup_abstracts() -> set[str]:
    """The file names of the abstracts the lookup bench indexes: every judged one and the first distractors."""
    names = {file_name(d) for q in judged_queries() for d in q.relevant}
    for i, doc in enumerate(_lines("corpus.jsonl")):
        if i >= SCIFACT_DISTRACTORS:
            break
        names.add(file_name(doc["_id"]))
    return names


def _factoid_abstracts(folder: Path) -> int:
    """Writes the gold abstracts of the factoid sets (reused as shapes) that are not in ``folder`` yet; returns
    how many of them were not among the abstracts :func:`tests.bench.lookup.write_scifact` writes."""
    judged = {file_name(d) for q in judged_queries() for d in q.relevant}
    wanted = {q.gold_file for q in factoids.load_questions(corpus=SCIFACT)} - judged
    n = 0
    for i, doc in enumerate(_lines("corpus.jsonl")):
        name = file_name(doc["_id"])
        if name in wanted and i >= SCIFACT_DISTRACTORS:
            factoids._write_if_changed(
                folder / name, f"{doc.get('title', '').strip()}\n\n{doc.get('text', '').strip()}\n".encode()
            )
            n += 1
    return n


def build(name: str, root: Path, scifact_all: bool = False) -> Corpus:
    """The corpus ``name`` under ``root`` (built once, then reused as it is); ``scifact_all``: all 5,183 abstracts
    of SciFact's public half (the folder the MCP bench measures), not the lookup bench's 1,128 and the 84."""
    if name == SCIFACT and scifact_all:
        folder = root / f"scifact-{SCIFACT_DOCS}"
        return Corpus(SCIFACT, folder, write_corpus(folder))
    if name == SCIFACT:
        folder = root / f"scifact-gold-{SCIFACT_DISTRACTORS}"
        n = write_scifact(folder, SCIFACT_DISTRACTORS)[0]
        return Corpus(SCIFACT, folder, n + _factoid_abstracts(folder))
    if name == MANUALS:
        return Corpus(MANUALS, manuals.build(root), manuals.FILES)
    if name == DJANGO:
        c = factoids.django_corpus(root)
        return Corpus(DJANGO, c.folder, c.files)
    if name == PYTEST:
        return pytest_corpus(root)
    if name == CELERY:
        return sdist_corpus(root, CELERY_DOCS)
    if name == FLASK:
        return sdist_corpus(root, FLASK_DOCS)
    raise ValueError(f"corpus must be one of {', '.join(ALL_CORPORA)}, not {name!r}")
