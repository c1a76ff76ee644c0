"""The shape bench's pinned-sdist corpora (tests/bench/shapes/corpora.py): a documentation sdist other than the
pinned one is refused, in the cache and after pip (real pip, offline: it is pointed at a local folder holding the
wrong file), and so is one whose kept files are not the count the sets were written on; the pure autodoc stubs and
the folders starting with ``_`` are left out; a bench runs all six corpora unless told which. The sdists here are
built by the tests (real tar.gz files); nothing is downloaded."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from tests.bench.kernels import BenchFailure
from tests.bench.shapes import corpora
from tests.bench.shapes.corpora import (
    CELERY,
    CORPORA,
    DJANGO,
    FLASK,
    MANUALS,
    PYTEST,
    SCIFACT,
    SdistDocs,
    asked,
    autodoc_stub,
    extract_docs,
)

STUB = """==========================================
 ``celery.backends.redis``
==========================================

.. contents::
    :local:
.. currentmodule:: celery.backends.redis

.. automodule:: celery.backends.redis
    :members:
    :undoc-members:
"""
DOCUMENTED = """.. currentmodule:: celery.app.amqp

.. automodule:: celery.app.amqp

    AMQP
    ----

    .. autoclass:: AMQP

        .. attribute:: Connection

            Broker connection class used. Default is :class:`kombu.Connection`.
"""
GUIDE = """Workers Guide
=============

Starting the worker
-------------------

You can start the worker in the foreground by executing the command::

    $ celery -A proj worker -l INFO
"""


def sdist(path: Path, files: dict[str, str]) -> str:
    """A real ``.tar.gz`` holding ``files`` under ``celery-5.4.0/``; returns its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"celery-5.4.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


FILES = {
    "docs/userguide/workers.rst": GUIDE,
    "docs/reference/celery.app.amqp.rst": DOCUMENTED,
    "docs/internals/reference/celery.backends.redis.rst": STUB,
    "docs/_ext/notes.rst": GUIDE,
    "docs/conf.py": "project = 'Celery'\n",
    "README.rst": GUIDE,
}


def test_a_pure_autodoc_stub_is_told_from_a_page_with_text_of_its_own() -> None:
    assert autodoc_stub(STUB)
    assert not autodoc_stub(DOCUMENTED)  # an automodule page whose attributes are described in the file
    assert not autodoc_stub(GUIDE)
    assert not autodoc_stub("Tutorials\n=========\n\n.. toctree::\n    :maxdepth: 2\n\n    task-cookbook\n")


def test_the_pinned_sdist_gives_its_documents_but_stubs_underscored_folders_and_other_files(tmp_path: Path) -> None:
    sha = sdist(tmp_path / "celery-5.4.0.tar.gz", FILES)
    docs = SdistDocs(CELERY, "celery", "5.4.0", sha, ("docs",), 2, corpora.CELERY_DOCS.keep)
    folder = tmp_path / "out"
    assert extract_docs(tmp_path / "celery-5.4.0.tar.gz", docs, folder) == 2
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert got == ["reference/celery.app.amqp.rst", "userguide/workers.rst"]
    assert (folder / "userguide" / "workers.rst").read_text() == GUIDE


def test_an_sdist_other_than_the_pinned_one_or_with_other_files_is_refused(tmp_path: Path) -> None:
    sha = sdist(tmp_path / "celery-5.4.0.tar.gz", FILES)
    other = SdistDocs(CELERY, "celery", "5.4.0", corpora.CELERY_SDIST_SHA256, ("docs",), 2, corpora.CELERY_DOCS.keep)
    with pytest.raises(BenchFailure, match=r"is not the pinned celery 5\.4\.0"):
        extract_docs(tmp_path / "celery-5.4.0.tar.gz", other, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written from the wrong sdist
    counted = SdistDocs(CELERY, "celery", "5.4.0", sha, ("docs",), 3, corpora.CELERY_DOCS.keep)
    with pytest.raises(BenchFailure, match="has 2 doc files, not the 3"):
        extract_docs(tmp_path / "celery-5.4.0.tar.gz", counted, tmp_path / "out")


def test_a_wrong_sdist_in_the_cache_is_not_used_and_pip_refuses_one_with_another_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, links = tmp_path / "cache", tmp_path / "links"
    cache.mkdir()
    links.mkdir()
    sdist(cache / "celery-5.4.0.tar.gz", FILES)
    sdist(links / "celery-5.4.0.tar.gz", FILES)
    monkeypatch.setenv("FOLDERMIND_BENCH_CACHE", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds only the wrong sdist in ``links``: offline
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    with pytest.raises(BenchFailure, match=r"no celery-5\.4\.0\.tar\.gz with sha256 504a1914"):
        corpora.pinned_sdist("celery", "5.4.0", corpora.CELERY_SDIST_SHA256)
    with pytest.raises(BenchFailure):
        corpora.build(CELERY, tmp_path / "corpora")
    assert not list((tmp_path / "corpora").rglob("*.rst"))


def test_a_bench_runs_all_six_corpora_unless_told_which() -> None:
    assert CELERY not in CORPORA and FLASK not in CORPORA
    assert corpora.ALL_CORPORA == (SCIFACT, MANUALS, DJANGO, PYTEST, CELERY, FLASK)
    assert asked(None) == asked(None, ["django-docs"]) == [*CORPORA, CELERY, FLASK]
    assert asked([FLASK]) == [FLASK]


def test_flasks_docs_are_pinned_and_kept_by_celerys_rule(tmp_path: Path) -> None:
    docs = corpora.FLASK_DOCS
    assert (docs.corpus, docs.package, docs.version, docs.under, docs.files) == (FLASK, "flask", "3.1.0", ("docs",), 75)
    assert docs.keep is corpora.CELERY_DOCS.keep
    sdist(tmp_path / "flask-3.1.0.tar.gz", FILES)  # another sdist under Flask's name
    with pytest.raises(BenchFailure, match=r"is not the pinned flask 3\.1\.0"):
        extract_docs(tmp_path / "flask-3.1.0.tar.gz", docs, tmp_path / "out")
    assert not (tmp_path / "out").exists()
