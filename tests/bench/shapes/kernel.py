"""One kept kernel home per corpus for the shape bench: ``HOME/kernels/<corpus>`` indexes
``HOME/corpora/...`` (built by :mod:`.corpora`) and nothing else, so a rerun reuses the index in seconds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.bench.kernels import Kernel, say
from tests.bench.mcpclient import kernel_config
from tests.bench.scifact import Index, index_corpus
from tests.bench.shapes.corpora import SCIFACT, Corpus, build

SLOW_PARSES = {"parse_timeout_s": "900"}
"""As in :mod:`tests.bench.lookup`: gnuplot's 311-page manual outlives the default parse deadline on a busy
machine; the bench measures search, not parse speed."""


def corpus_root(home: Path) -> Path:
    return home / "corpora"


@contextlib.contextmanager
def indexed(home: Path, name: str, scifact_all: bool = False) -> Iterator[tuple[Kernel, Corpus, Index]]:
    """A running kernel whose kept home has indexed and embedded the corpus ``name`` (all of SciFact: its own home)."""
    corpus = build(name, corpus_root(home), scifact_all)
    kernel_home = home / "kernels" / (f"{name}-all" if scifact_all and name == SCIFACT else name)
    kernel = Kernel(f"shapes-{name}", kernel_config(ingest=SLOW_PARSES), kernel_home)
    try:
        kernel.start()
        say(f"{name}: {corpus.files} files in {corpus.folder}: indexing, or checking the kept index")
        index = index_corpus(kernel, corpus.folder, corpus.files)
        how = "reused" if index.reused else f"indexed in {index.seconds:.0f} s"
        say(f"{name}: {index.files} files, {index.chunks} chunks, {how}")
        yield kernel, corpus, index
    finally:
        kernel.stop()
        kernel.cleanup()


def main() -> None:
    """``python -m tests.bench.shapes.kernel HOME [CORPUS ...] [--scifact-all]``: index only (no query is run)."""
    import sys

    from tests.bench.shapes.corpora import ALL_CORPORA

    home = Path(sys.argv[1]).resolve()
    names = [a for a in sys.argv[2:] if not a.startswith("--")]
    for name in names or ALL_CORPORA:
        with indexed(home, name, "--scifact-all" in sys.argv):
            pass


if __name__ == "__main__":
    main()
