"""SciFact for the benches: the corpus as files, the queries and their judgements, and a kernel that has
indexed it (in a throw-away home, or a kept one that later runs reuse).

The corpus is ``../shared/eval/scifact/`` (or ``$FOLDERMIND_SCIFACT``), in BEIR's format: ``corpus.jsonl``
(5,183 abstracts), ``queries.jsonl`` and ``qrels.tsv``. Each abstract becomes one ``<_id>.txt`` file (title,
blank line, text), so a search result's file name is its document id.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldermind.protocol.client import BusClient
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.transports import REPO
from tests.config import Config

SCIFACT_ENV = "FOLDERMIND_SCIFACT"
SCIFACT_DOCS = 5183
INDEX_TIMEOUT_S = 3600.0


def scifact_dir() -> Path:
    return Path(os.environ.get(SCIFACT_ENV) or REPO.parent / "shared" / "eval" / "scifact")


def _lines(name: str) -> Iterator[dict[str, Any]]:
    path = scifact_dir() / name
    if not path.is_file():
        raise BenchFailure(f"no SciFact {name} at {path} (set {SCIFACT_ENV})")
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def file_name(doc_id: object) -> str:
    return re.sub(r"[^\w.-]", "_", str(doc_id)) + ".txt"


def doc_id_of(path: str) -> str:
    """A search result's document id: :func:`write_corpus` names each file after its abstract."""
    return Path(path).stem


def write_corpus(dest: Path, limit: int | None = None, skip: int = 0) -> int:
    """The first ``limit`` abstracts (all by default), less the first ``skip``, as files in ``dest``; returns
    how many. A file that already holds the same text is left alone (a kept home's index stays valid)."""
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for i, doc in enumerate(_lines("corpus.jsonl")):
        if limit is not None and i >= limit:
            break
        if i < skip:
            continue
        path = dest / file_name(doc["_id"])
        text = f"{doc.get('title', '').strip()}\n\n{doc.get('text', '').strip()}\n"
        if not path.exists() or path.read_text("utf-8") != text:
            path.write_text(text, "utf-8")
        n += 1
    return n


def scifact_queries() -> list[str]:
    """Every query's text (judged or not), in file order; empty when the file is missing."""
    if not (scifact_dir() / "queries.jsonl").is_file():
        return []
    return [str(q["text"]) for q in _lines("queries.jsonl")]


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    text: str
    relevant: dict[str, int]  # doc id -> grade


def judged_queries(limit: int | None = None) -> list[Query]:
    """The queries with at least one relevant abstract in ``qrels.tsv``; with ``limit`` (a partial
    corpus), only those whose every relevant abstract is among the first ``limit``."""
    qrels: dict[str, dict[str, int]] = {}
    with open(scifact_dir() / "qrels.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = [Query(str(q["_id"]), q["text"], qrels[str(q["_id"])]) for q in _lines("queries.jsonl")]
    queries = [q for q in queries if q.relevant]
    if limit is not None:
        present: set[str] = set()
        for doc in _lines("corpus.jsonl"):
            if len(present) >= limit:
                break
            present.add(doc_id_of(file_name(doc["_id"])))
        queries = [q for q in queries if set(q.relevant) <= present]
    if not queries:
        raise BenchFailure(f"no SciFact queries with judgements under {scifact_dir()}")
    return queries


# --------------------------------------------------------------------------------------------
# an indexed SciFact


@dataclass(slots=True)
class Index:
    files: int = 0
    chunks: int = 0
    embedded: int = 0
    seconds: float = 0.0
    reused: bool = False
    encoder: dict[str, Any] = field(default_factory=dict)  # the indexer's query_encoder details


def index_corpus(kernel: Kernel, corpus: Path, files: int) -> Index:
    """Register ``corpus`` (unless this home already has it), wait until every file is embedded and the
    indexer's query model has loaded (its final backend, where it has several). The home must index
    nothing else: every search would see it."""
    out = Index()
    with kernel.client("bench-index") as client:
        folders = [Path(f["path"]) for f in kernel.folders(client)]
        if others := [str(p) for p in folders if p != corpus]:
            raise BenchFailure(f"{kernel.root} indexes other folders too ({others}): use another home")
        out.reused = corpus in folders
        t0 = time.monotonic()
        if not out.reused:
            added = kernel.cli("folders", "add", str(corpus))
            if added.returncode != 0:
                raise BenchFailure(f"folders add exited {added.returncode}: {added.stdout}{added.stderr}")
        last_say = 0.0
        while True:
            f = kernel.folder(client)
            now = time.monotonic() - t0
            if f is not None:
                done = f["files_indexed"] + f["files_failed"] + f.get("files_skipped", 0)
                if (
                    f["files_total"] >= files
                    and done >= files
                    and f["state"] == "ready"
                    and f["chunks"]
                    and f["chunks_embedded"] >= f["chunks"]
                ):
                    out.files, out.chunks, out.embedded = f["files_indexed"], f["chunks"], f["chunks_embedded"]
                    out.seconds = now
                    break
                if now - last_say >= 15:
                    last_say = now
                    embedded = f"{f['chunks_embedded']}/{f['chunks']} embedded"
                    say(f"  {now:5.0f} s: {done}/{f['files_total']} files, {embedded}")
            if now > INDEX_TIMEOUT_S:
                raise BenchFailure(f"not indexed after {INDEX_TIMEOUT_S:g} s: {f}")
            time.sleep(1.0)
        out.encoder = wait_query_model(kernel, client)
    return out


def wait_query_model(kernel: Kernel, client: BusClient, timeout: float = 180) -> dict[str, Any]:
    """The indexer's query encoder once it has settled (ready on its final backend, failed, or off)."""
    give_up = time.monotonic() + timeout
    while True:
        encoder = dict(kernel.describe(client, "indexer").get("query_encoder") or {})
        settling = "loading" in str(encoder.get("backend_note") or "")  # e.g. torch until ONNX is in
        if encoder.get("state") in ("ready", "failed", "off") and not settling:
            return encoder
        if time.monotonic() > give_up:
            raise BenchFailure(f"the indexer's query model is not ready: {encoder}")
        time.sleep(0.5)


@contextlib.contextmanager
def indexed_kernel(home: Path | None, docs: int, config: Config | None = None) -> Iterator[tuple[Kernel, Index]]:
    """A running kernel (default process map, ``config`` over it) that has indexed and embedded the first
    ``docs`` abstracts, in ``<home>/scifact-<docs>``. ``home``: kept, and reused as it is when it has
    indexed them already (a run then takes seconds, not the ~11 minutes of indexing); None: a throw-away
    home, kept only if something failed (set ``kernel.keep`` to keep it too)."""
    kernel = Kernel("scifact", config, home)
    try:
        corpus = kernel.root / f"scifact-{docs}"
        written = write_corpus(corpus, docs)
        say(f"corpus: {written} abstracts in {corpus}")
        kernel.start()
        say("indexing (all of SciFact: ~11 min on this 2-core machine) or checking the kept index")
        index = index_corpus(kernel, corpus, written)
        how = "reused" if index.reused else f"indexed and embedded in {index.seconds:.0f} s"
        say(f"  {index.files} files, {index.chunks} chunks, {how}; query model {index.encoder}")
        yield kernel, index
    except BaseException:
        kernel.keep = True  # its logs say what went wrong
        raise
    finally:
        kernel.stop()
        kernel.cleanup()


def bench_args(
    doc: str, queries: int, report: Path, argv: list[str] | None, options: dict[str, str] | None = None
) -> tuple[argparse.Namespace, Path | None, list[str]]:
    """A SciFact latency bench's command line (``--home``, ``--queries``, ``--warmup``, ``--report`` and the bench's
    own ``options``, name -> help, each a string or None): the parsed arguments, the kept home (None: a throw-away
    one) and the queries, warm-up ones first."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--home", default=None, help="keep (and reuse) the indexed SciFact home here")
    for name, what in (options or {}).items():
        parser.add_argument(f"--{name}", default=None, help=what)
    parser.add_argument("--queries", type=int, default=queries)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--report", default=str(report))
    args = parser.parse_args(argv)
    home = Path(args.home).resolve() if args.home else None
    return args, home, scifact_queries()[: args.warmup + args.queries]
