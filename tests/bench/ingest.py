"""Ingestion benchmark on SciFact: the whole pipeline against the bare model, in one run.

``python -m tests.bench.ingest [--no-write]`` from the repository root. The 5,183 SciFact abstracts
(``../shared/eval/scifact/corpus.jsonl``, or ``$FOLDERMIND_SCIFACT``) are written out as one ``.txt``
file each (title, blank line, text), then:

1. a real kernel (default process map) indexes and embeds the folder: time to keyword-indexed and to
   fully embedded, files/s, chunks/s, peak RSS of every worker, CPU of every process;
2. with no kernel running, the exact chunk texts the pipeline stored are encoded in-process with
   ``SentenceTransformer.encode`` (the bare floor), with the embedder's thread count;
3. a second kernel without an embedder indexes the folder again (keyword-only rate);
4. that kernel's watcher is restarted: its no-change reconcile of every file is timed;
5. 20 new files, each with a unique word, are timed from the write until a keyword search finds them;
6. usearch recall@100 against exact search over the vectors of run 1, at expansion_search 64 and 256.

A small reference encode in this process (the first 96 abstracts) is timed before run 1, before and
after the bare encode, because the pipeline and the bare floor cannot run at the same moment and a
small VM's speed wanders. The report is printed and written to ``docs/benchmarks-ingest.md``.
``FOLDERMIND_BENCH_LIMIT=300`` uses only the first 300 abstracts (for development).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from numpy.typing import NDArray

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError
from foldermind.protocol.messages import (
    RestartReply,
    RestartRequest,
    SearchReply,
    SearchRequest,
)
from foldermind.protocol.runtime.config import IngestPolicy
from tests.bench import machine
from tests.bench.cpu import cpu_seconds
from tests.bench.formats import kept_section
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.machine import wait_for_quiet
from tests.bench.scifact import scifact_dir, scifact_queries, write_corpus
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks-ingest.md"
LIMIT_ENV = "FOLDERMIND_BENCH_LIMIT"

RATIO_TARGET = 0.90
PEER_RATIO = 0.75  # docsonar, same measurement
RESCAN_TARGET_S = 2.0
LATENCY_TARGET_S = 2.0
RECALL_LOSS_TARGET = 0.01
LATENCY_PROBES = 20
RECALL_K = 100
RANDOM_QUERIES = 200
SAMPLE_S = 0.5  # StatusRequest to the kernel (RSS, jobs in flight)
PROGRESS_S = 0.25  # FolderListRequest to the indexer until every file is indexed
PROGRESS_EMBED_S = 1.0  # then, until every chunk is embedded
INGEST_TIMEOUT_S = 3600.0
BARE_BATCH = 32
NO_EMBEDDER = "[workers.embedder]\nenabled = false\n"
SCAN_LINE = re.compile(r"folder (\S+): (\d+) files scanned in ([0-9.]+) s \((\d+) new, (\d+) changed, (\d+) deleted\)")


def usable_cpus() -> int:
    """What the embedder uses for torch's thread count (workers/embedder.py: _usable_cpus)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def embed_lookahead() -> int:
    """How many ``embed_batch``es the indexer fetches at once and sends longest-first (1: by chunk id)."""
    from foldermind.workers.indexer.pipeline import Pipeline

    return int(getattr(Pipeline, "EMBED_LOOKAHEAD", 1))


# --------------------------------------------------------------------------------------------
# machine


def machine_facts() -> dict[str, str]:
    """The bus benchmark's machine table, with the model stack in place of the bus libraries."""
    facts = machine.facts(REPO)
    for bus_only in ("pyzmq / libzmq", "msgpack"):
        facts.pop(bus_only, None)
    facts["torch / sentence-transformers / usearch"] = (
        f"{machine.version('torch')} / {machine.version('sentence-transformers')} / {machine.version('usearch')}"
    )
    return facts


class CpuWindow:
    """CPU the whole machine used over a window, in cores: everyone else's (all busy time minus what
    the caller counts as ours) and the hypervisor's steal."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.busy0, self.steal0 = self._busy()

    @staticmethod
    def _busy() -> tuple[float, float]:
        t = psutil.cpu_times()
        busy = sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq"))
        return busy, getattr(t, "steal", 0.0)

    def other_cores(self, ours_cpu_s: float) -> float:
        wall = time.monotonic() - self.t0
        busy, _ = self._busy()
        return max(busy - self.busy0 - ours_cpu_s, 0.0) / wall if wall > 0 else 0.0

    def steal_cores(self) -> float:
        wall = time.monotonic() - self.t0
        _, steal = self._busy()
        return max(steal - self.steal0, 0.0) / wall if wall > 0 else 0.0


def cpu_delta(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]) -> dict[str, float]:
    """CPU seconds per worker between two snapshots (a restarted worker counts from zero)."""
    out: dict[str, float] = {}
    for name, (pid, cpu) in after.items():
        prev = before.get(name)
        out[name] = cpu - prev[1] if prev and prev[0] == pid else cpu
    return out


class Sampler(threading.Thread):
    """StatusRequest to the kernel every ``SAMPLE_S``: peak RSS and how often each worker had a job."""

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.kernel = kernel
        self.stop_event = threading.Event()
        self.peak_rss: dict[str, int] = {}
        self.samples: list[tuple[float, dict[str, int]]] = []  # (monotonic, worker -> in_flight)
        self.errors = 0

    def run(self) -> None:
        with self.kernel.client("bench-sampler") as client:
            while not self.stop_event.is_set():
                try:
                    st = self.kernel.status(client)
                except BusError:
                    self.errors += 1
                    self.stop_event.wait(SAMPLE_S)
                    continue
                now = time.monotonic()
                rss = {"kernel": int(st.kernel["rss_bytes"] or 0)}
                rss.update({w["name"]: int(w["rss_bytes"] or 0) for w in st.workers})
                for name, value in rss.items():
                    self.peak_rss[name] = max(self.peak_rss.get(name, 0), value)
                self.samples.append((now, {w["name"]: int(w["in_flight"]) for w in st.workers}))
                self.kernel.pids.update(w["pid"] for w in st.workers if w["pid"])
                self.stop_event.wait(SAMPLE_S)

    def busy_share(self, worker: str, t0: float, t1: float) -> float | None:
        window = [flights.get(worker, 0) for t, flights in self.samples if t0 <= t <= t1]
        return sum(1 for n in window if n > 0) / len(window) if window else None

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=15)


# --------------------------------------------------------------------------------------------
# 1 and 3: indexing a folder


@dataclass(slots=True)
class IngestRun:
    label: str
    files: int
    policy: IngestPolicy
    lookahead: int = 1
    files_indexed: int = 0
    files_failed: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    keyword_s: float = 0.0
    embedded_s: float | None = None
    add_cli_s: float = 0.0
    embedded_at_keyword: int = 0
    progress: list[tuple[float, int, int]] = field(default_factory=list)  # (s since add, files done, embedded)
    peak_rss: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    bench_cpu_s: float = 0.0
    other_cores: float = 0.0
    steal_cores: float = 0.0
    embedder_busy: float | None = None
    embedder_details: dict[str, Any] = field(default_factory=dict)
    model_load_s: float | None = None

    @property
    def files_per_s(self) -> float:
        return self.files_indexed / self.keyword_s if self.keyword_s else 0.0

    @property
    def chunks_per_s_keyword(self) -> float:
        return self.chunks / self.keyword_s if self.keyword_s else 0.0

    @property
    def chunks_per_s_embedded(self) -> float:
        return self.chunks / self.embedded_s if self.embedded_s else 0.0


def wait_embedder_ready(kernel: Kernel, client: BusClient, timeout: float = 180.0) -> dict[str, Any]:
    give_up = time.monotonic() + timeout
    while True:
        details = kernel.describe(client, "embedder")
        if details.get("state") == "ready":
            return details
        if details.get("state") == "failed":
            raise BenchFailure(f"the embedder cannot load its model: {details.get('error')}")
        if time.monotonic() > give_up:
            raise BenchFailure(f"the embedder's model did not load within {timeout:g} s")
        time.sleep(0.5)


def index_folder(kernel: Kernel, folder: Path, files: int, embed: bool) -> IngestRun:
    """``folders add`` (no --wait), then poll the indexer until every file is indexed (and embedded)."""
    run = IngestRun(kernel.label, files, kernel.policy, embed_lookahead())
    with kernel.client("bench-progress") as client:
        if embed:
            # The model loads in the background at start; the bare floor excludes the load too.
            details = wait_embedder_ready(kernel, client)
            run.model_load_s = details.get("load_s")
        sampler = Sampler(kernel)
        sampler.start()
        me = psutil.Process()
        bench0 = cpu_seconds(me)
        cpu0 = kernel.cpu_by_worker(client)
        window = CpuWindow()
        t0 = time.monotonic()
        out = kernel.cli("folders", "add", str(folder))
        run.add_cli_s = time.monotonic() - t0
        if out.returncode != 0:
            sampler.finish()
            raise BenchFailure(f"{kernel.label}: folders add exited {out.returncode}: {out.stdout}{out.stderr}")
        give_up = t0 + INGEST_TIMEOUT_S
        last_say = 0.0
        try:
            while True:
                f = kernel.folder(client)
                now = time.monotonic() - t0
                if f is not None:
                    done = f["files_indexed"] + f["files_failed"]
                    run.progress.append((now, done, f["chunks_embedded"]))
                    if not run.keyword_s and f["files_total"] >= files and done >= files and f["state"] == "ready":
                        run.keyword_s = now
                        run.embedded_at_keyword = f["chunks_embedded"]
                        say(f"  keyword-indexed: {done} files, {f['chunks']} chunks in {now:.1f} s")
                    if run.keyword_s and (not embed or (f["chunks"] and f["chunks_embedded"] >= f["chunks"])):
                        if embed:
                            run.embedded_s = now
                            say(f"  fully embedded: {f['chunks_embedded']} chunks in {now:.1f} s")
                        run.files_indexed, run.files_failed = f["files_indexed"], f["files_failed"]
                        run.chunks, run.chunks_embedded = f["chunks"], f["chunks_embedded"]
                        break
                    if now - last_say >= 15:
                        last_say = now
                        say(
                            f"  {now:5.0f} s: {done}/{f['files_total']} files, "
                            f"{f['chunks_embedded']}/{f['chunks']} chunks embedded"
                        )
                if time.monotonic() > give_up:
                    raise BenchFailure(f"{kernel.label}: not done after {INGEST_TIMEOUT_S:g} s: {f}")
                # Fine-grained while files land; once only vectors are coming, poll less so the progress
                # query (a COUNT over every chunk) takes as little as possible from the indexer.
                time.sleep(PROGRESS_S if not run.keyword_s else PROGRESS_EMBED_S)
            t1 = time.monotonic()
            run.cpu_s = cpu_delta(cpu0, kernel.cpu_by_worker(client))
            run.bench_cpu_s = cpu_seconds(me) - bench0
            run.other_cores = window.other_cores(sum(run.cpu_s.values()) + run.bench_cpu_s)
            run.steal_cores = window.steal_cores()
            run.embedder_busy = sampler.busy_share("embedder", t0, t1) if embed else None
        finally:
            sampler.finish()
        run.peak_rss = dict(sampler.peak_rss)
        if embed:
            run.embedder_details = kernel.describe(client, "embedder")
    return run


# --------------------------------------------------------------------------------------------
# 2: the bare floor, and what the pipeline's batching costs


@dataclass(slots=True)
class Bare:
    chunks: int
    threads: int
    load_s: float
    encode_s: float
    max_seq_length: int
    other_cores: float = 0.0
    steal_cores: float = 0.0
    vs_pipeline_min_cos: float | None = None
    vs_pipeline_mean_cos: float | None = None
    tokens: int = 0
    padding: list[tuple[str, int]] = field(default_factory=list)  # (requests of, token positions run)
    cpu_s: float = 0.0  # this process's CPU during the encode
    check_chunks: int = 0  # the batching check: one call vs the indexer's requests, on a subset
    check: list[tuple[str, float]] = field(default_factory=list)  # (how, seconds over all rounds)
    check_rounds: int = 0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.encode_s if self.encode_s else 0.0


def chunk_rows(db_path: Path) -> tuple[list[int], list[str], list[bytes | None]]:
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT id, text, vector FROM chunks ORDER BY id").fetchall()
    return [int(r[0]) for r in rows], [str(r[1]) for r in rows], [r[2] for r in rows]


def load_model(threads: int) -> tuple[Any, float]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    t0 = time.perf_counter()
    import torch
    from sentence_transformers import SentenceTransformer

    from foldermind.workers.model_files import model_dir

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    model.eval()
    return model, time.perf_counter() - t0


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def encode(model: Any, texts: list[str], batch_size: int = BARE_BATCH) -> NDArray[np.float32]:
    """What the embedder does with one request (workers/embedder.py: _encode)."""
    import torch

    with torch.inference_mode():
        raw = model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    return np.ascontiguousarray(raw, dtype=np.float32)


class SpeedProbe:
    """The same small encode, timed now and then: a small VM's speed wanders by tens of percent over
    minutes, and the pipeline and the bare floor cannot run at the same moment."""

    def __init__(self, model: Any, texts: list[str]) -> None:
        self.model, self.texts = model, texts
        self.rows: list[tuple[str, float]] = []

    def measure(self, label: str) -> float:
        t0 = time.perf_counter()
        encode(self.model, self.texts)
        rate = len(self.texts) / (time.perf_counter() - t0)
        self.rows.append((label, rate))
        return rate


def padded_tokens(lengths: list[int], chars: list[int], pool: int, batch: int) -> int:
    """Token positions the model runs, padding included, when the texts are taken ``pool`` at a time
    (in chunk-id order), each pool sorted by character length and cut into batches of ``batch``: what
    ``SentenceTransformer.encode`` does with one call, and what the indexer does with its lookahead of
    ``embed_batch`` x ``EMBED_LOOKAHEAD`` chunks sent longest-first."""
    total = 0
    for start in range(0, len(lengths), pool):
        part = sorted(range(start, min(start + pool, len(lengths))), key=lambda i: -chars[i])
        for b in range(0, len(part), batch):
            group = part[b : b + batch]
            total += max(lengths[i] for i in group) * len(group)
    return total


def bare_floor(model: Any, load_s: float, db_path: Path, threads: int, pool: int) -> Bare:
    _, texts, blobs = chunk_rows(db_path)
    if not texts:
        raise BenchFailure("the pipeline stored no chunks")
    set_threads(threads)
    say(f"  encoding {len(texts)} chunks with {threads} threads")
    window = CpuWindow()
    me = psutil.Process()
    cpu0 = cpu_seconds(me)
    t0 = time.perf_counter()
    vectors = encode(model, texts)
    encode_s = time.perf_counter() - t0
    bare = Bare(len(texts), threads, load_s, encode_s, int(model.max_seq_length))
    bare.cpu_s = cpu_seconds(me) - cpu0
    bare.other_cores = window.other_cores(bare.cpu_s)
    bare.steal_cores = window.steal_cores()
    stored = [(i, np.frombuffer(b, dtype=np.float32)) for i, b in enumerate(blobs) if b is not None]
    if stored and len(stored[0][1]) == vectors.shape[1]:
        cos = np.array([float(vectors[i] @ v) for i, v in stored])
        bare.vs_pipeline_min_cos, bare.vs_pipeline_mean_cos = float(cos.min()), float(cos.mean())
    # Padding: encode() sorts each call's texts by length, so one call over everything pads less
    # than the indexer's requests, sorted only within its lookahead pool.
    enc = model.tokenizer(texts, truncation=True, max_length=bare.max_seq_length)
    lengths = [len(x) for x in enc["input_ids"]]
    chars = [len(t) for t in texts]
    bare.tokens = sum(lengths)
    sizes = sorted({pool, 32, 64, 128, 256, 512, 1024})
    for n in sizes:
        if n < len(texts):
            name = f"{n}{' (the indexer)' if n == pool else ''}"
            bare.padding.append((name, padded_tokens(lengths, chars, n, BARE_BATCH)))
    bare.padding.append(("all (the bare run)", padded_tokens(lengths, chars, len(texts), BARE_BATCH)))
    return bare


def as_requests(texts: list[str], request: int, pool: int) -> list[list[str]]:
    """The calls the indexer makes: ``pool`` chunks at a time in id order, longest first, cut into
    requests of ``request`` (workers/indexer/pipeline.py: _fill_embeds)."""
    calls: list[list[str]] = []
    for start in range(0, len(texts), pool):
        ordered = sorted(texts[start : start + pool], key=len, reverse=True)
        calls += [ordered[i : i + request] for i in range(0, len(ordered), request)]
    return calls


def batching_check(
    model: Any, texts: list[str], request: int, lookahead: int, bare: Bare, limit: int = 1024, rounds: int = 2
) -> None:
    """In-process, on the first ``limit`` chunks, in turns: one call, the indexer's requests, and
    requests of 256 with the same lookahead. What the batching costs without bus, SQLite or parsers."""
    subset = texts[:limit]
    ways = [("one call", [subset])]
    ways.append(
        (
            f"the indexer's: requests of {request}, pools of {request * lookahead}",
            as_requests(subset, request, request * lookahead),
        )
    )
    if request != 256:
        ways.append((f"requests of 256, pools of {256 * lookahead}", as_requests(subset, 256, 256 * lookahead)))
    spent = [0.0] * len(ways)
    for _ in range(rounds):
        for i, (_, calls) in enumerate(ways):
            t0 = time.perf_counter()
            for call in calls:
                encode(model, call)
            spent[i] += time.perf_counter() - t0
    bare.check_chunks, bare.check_rounds = len(subset), rounds
    bare.check = [(name, seconds) for (name, _), seconds in zip(ways, spent, strict=True)]


# --------------------------------------------------------------------------------------------
# 4: no-change rescan


@dataclass(slots=True)
class Rescan:
    files: int
    scan_s: float
    wall_s: float
    new: int
    changed: int
    deleted: int


def rescan(kernel: Kernel, timeout: float = 120.0) -> Rescan:
    log_file = kernel.home.log_file("watcher")
    offset = log_file.stat().st_size if log_file.exists() else 0
    with kernel.client("bench-restart") as client:
        t0 = time.monotonic()
        # What `foldermind restart watcher` sends (without the CLI's own interpreter start-up).
        client.request("kernel", RestartRequest("watcher"), RestartReply, timeout=30)
    give_up = t0 + timeout
    while time.monotonic() < give_up:
        with contextlib.suppress(FileNotFoundError), open(log_file, "rb") as fh:
            fh.seek(offset)
            found = SCAN_LINE.search(fh.read().decode("utf-8", "replace"))
            if found:
                wall = time.monotonic() - t0
                _, files, scan_s, new, changed, deleted = found.groups()
                return Rescan(int(files), float(scan_s), wall, int(new), int(changed), int(deleted))
        time.sleep(0.02)
    raise BenchFailure(f"no 'files scanned' line in {log_file} within {timeout:g} s of the restart")


# --------------------------------------------------------------------------------------------
# 5: save-to-searchable


def nonsense_word(rng: random.Random) -> str:
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    return "q" + "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(5)) + "x"


def save_to_searchable(kernel: Kernel, folder: Path, probes: int, timeout: float = 30.0) -> list[float]:
    rng = random.Random(20240611)
    out: list[float] = []
    with kernel.client("bench-latency") as client:
        for i in range(probes):
            word = nonsense_word(rng)
            path = folder / f"zz-latency-{i:02d}.txt"
            t0 = time.monotonic()
            path.write_text(f"Latency probe {i}\n\nThis note mentions {word} exactly once.\n", encoding="utf-8")
            while True:
                reply = client.request("indexer", SearchRequest(word, "keyword", 1), SearchReply, timeout=5).body
                if any(hit["file_name"] == path.name for hit in reply.results):
                    out.append(time.monotonic() - t0)
                    break
                if time.monotonic() - t0 > timeout:
                    raise BenchFailure(f"{path.name} ({word}) not searchable after {timeout:g} s")
                time.sleep(0.02)
            time.sleep(0.2)  # let the indexer settle before the next probe
    return out


# --------------------------------------------------------------------------------------------
# 6: usearch recall


@dataclass(slots=True)
class RecallRow:
    index: str
    queries: str
    expansion: int
    recall: float
    ms_per_query: float


def exact_top(matrix: NDArray[np.float32], queries: NDArray[np.float32], k: int) -> list[set[int]]:
    sims = queries @ matrix.T
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    return [set(row.tolist()) for row in top]


def usearch_recall(db_path: Path, live_file: Path, query_vectors: NDArray[np.float32] | None) -> list[RecallRow]:
    from usearch.index import Index

    from foldermind.workers.indexer.vectors import EXPANSION_SEARCH

    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL ORDER BY id").fetchall()
    if len(rows) <= RECALL_K:
        return []
    keys = np.array([int(r[0]) for r in rows], dtype=np.uint64)
    matrix = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
    ndim = matrix.shape[1]

    def fresh() -> Any:
        return Index(ndim=ndim, metric="cos", dtype="f32", expansion_add=128, expansion_search=EXPANSION_SEARCH)

    built = fresh()
    for start in range(0, len(keys), 32):  # as the ingest thread adds them: one reply at a time
        built.add(keys[start : start + 32], matrix[start : start + 32])
    indexes = [("rebuilt like vectors.py (added 32 at a time)", built)]
    if live_file.exists():
        live = fresh()
        live.load(str(live_file))
        indexes.append(("the pipeline's own vectors.usearch", live))

    rng = np.random.default_rng(7)
    n = min(RANDOM_QUERIES, len(matrix))  # fewer with a small FOLDERMIND_BENCH_LIMIT
    query_sets = [(f"{n} random stored vectors", matrix[rng.choice(len(matrix), n, replace=False)])]
    if query_vectors is not None and len(query_vectors):
        query_sets.append((f"{len(query_vectors)} SciFact queries", query_vectors))
    position = {int(k): i for i, k in enumerate(keys)}
    out: list[RecallRow] = []
    for qname, queries in query_sets:
        exact = exact_top(matrix, queries, RECALL_K)
        for iname, index in indexes:
            for expansion in (64, EXPANSION_SEARCH):
                index.expansion_search = expansion
                t0 = time.perf_counter()
                found = [index.search(np.array(q, dtype=np.float32), RECALL_K) for q in queries]
                ms = (time.perf_counter() - t0) * 1000 / len(queries)
                hits = [
                    len({position[int(k)] for k in m.keys} & truth) / RECALL_K
                    for m, truth in zip(found, exact, strict=True)
                ]
                out.append(RecallRow(iname, qname, expansion, float(np.mean(hits)), ms))
    return out


# --------------------------------------------------------------------------------------------
# report


def _mib(n: int | None) -> str:
    return "-" if not n else f"{n / 2**20:,.0f} MiB"


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("**PASS**" if ok else "**MISS**")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    files: int
    limited: bool
    full: IngestRun | None = None
    bare: Bare | None = None
    keyword: IngestRun | None = None
    rescan: Rescan | None = None
    latencies: list[float] = field(default_factory=list)
    recall: list[RecallRow] = field(default_factory=list)
    probes: list[tuple[str, float]] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.full and self.bare and self.full.embedded_s and self.bare.chunks_per_s:
            return self.full.chunks_per_s_embedded / self.bare.chunks_per_s
        return None


def _targets(r: Results) -> list[str]:
    lines = ["| target | measured | verdict |", "|---|---|:---:|"]
    if r.ratio is not None and r.full and r.bare:
        lines.append(
            f"| pipeline chunks/s with embeddings ≥ {RATIO_TARGET:.2f} x bare `encode()` (peer docsonar: "
            f"{PEER_RATIO:.2f}) | {r.ratio:.2f} ({r.full.chunks_per_s_embedded:.1f} vs "
            f"{r.bare.chunks_per_s:.1f} chunks/s) | {_verdict(r.ratio >= RATIO_TARGET)} |"
        )
    else:
        lines.append(f"| pipeline ≥ {RATIO_TARGET:.2f} x bare encode | not measured | — |")
    if r.rescan:
        lines.append(
            f"| no-change rescan of {r.rescan.files:,} files < {RESCAN_TARGET_S:g} s (watcher's figure) | "
            f"{r.rescan.scan_s:.2f} s ({r.rescan.wall_s:.2f} s from the restart request) | "
            f"{_verdict(r.rescan.scan_s < RESCAN_TARGET_S)} |"
        )
    else:
        lines.append(f"| no-change rescan < {RESCAN_TARGET_S:g} s | not measured | — |")
    if r.latencies:
        med = statistics.median(r.latencies)
        lines.append(
            f"| save-to-searchable median < {LATENCY_TARGET_S:g} s (debounce 0.5 s included) | median "
            f"{med:.2f} s, p90 {_pct(r.latencies, 0.9):.2f} s | {_verdict(med < LATENCY_TARGET_S)} |"
        )
    else:
        lines.append(f"| save-to-searchable median < {LATENCY_TARGET_S:g} s | not measured | — |")
    at256 = [x for x in r.recall if x.expansion == 256]
    if at256:
        worst = min(at256, key=lambda x: x.recall)
        lines.append(
            f"| usearch recall@{RECALL_K} loss < {RECALL_LOSS_TARGET:.0%} at expansion_search 256 | worst "
            f"{worst.recall:.4f} ({worst.queries}, {worst.index}) | "
            f"{_verdict(1 - worst.recall < RECALL_LOSS_TARGET)} |"
        )
    else:
        lines.append(f"| usearch recall@{RECALL_K} loss < 1% at 256 | not measured | — |")
    return lines


def _ingest_table(run: IngestRun, embed: bool) -> list[str]:
    lines = ["|  |  |", "|---|---|"]
    lines.append(
        f"| files | {run.files_indexed:,} indexed, {run.files_failed} failed (of {run.files:,}) |"
        if run.keyword_s
        else "| files | not finished |"
    )
    lines.append(f"| chunks | {run.chunks:,} ({run.chunks / max(run.files_indexed, 1):.2f} per file) |")
    lines.append(f"| `folders add` (CLI process, start-up included) | {run.add_cli_s:.2f} s |")
    lines.append(
        f"| to keyword-indexed (every file indexed) | {run.keyword_s:.1f} s: **{run.files_per_s:.1f} files/s**, "
        f"{run.chunks_per_s_keyword:.1f} chunks/s |"
    )
    if embed and run.embedded_s:
        after = run.embedded_s - run.keyword_s
        lines.append(
            f"| to fully embedded | {run.embedded_s:.1f} s: **{run.chunks_per_s_embedded:.1f} chunks/s**, "
            f"{run.files / run.embedded_s:.1f} files/s |"
        )
        lines.append(
            f"| embedding while parsing (0 to {run.keyword_s:.0f} s) | {run.embedded_at_keyword:,} chunks, "
            f"{run.embedded_at_keyword / run.keyword_s if run.keyword_s else 0:.1f} chunks/s |"
        )
        if after > 0:
            lines.append(
                f"| embedding after parsing ({run.keyword_s:.0f} to {run.embedded_s:.0f} s) | "
                f"{run.chunks - run.embedded_at_keyword:,} chunks, "
                f"{(run.chunks - run.embedded_at_keyword) / after:.1f} chunks/s |"
            )
        if run.model_load_s is not None:
            lines.append(f"| embedder model load (before `folders add`, not counted) | {run.model_load_s:.1f} s |")
        if run.embedder_busy is not None:
            lines.append(
                f"| embedder with a job in flight (StatusRequest every {SAMPLE_S:g} s) | {run.embedder_busy:.0%} "
                "of samples |"
            )
    p = run.policy
    lines.append(
        f"| `[ingest]` | parse_window {p.parse_window}, embed_batch {p.embed_batch}, embed_window "
        f"{p.embed_window}, chunk_max_tokens {p.chunk_max_tokens}, overlap {p.chunk_overlap_tokens}; "
        f"`Pipeline.EMBED_LOOKAHEAD` {run.lookahead} |"
    )
    if run.embedder_details:
        d = run.embedder_details
        lines.append(
            f"| embedder | {d.get('model')}, {d.get('threads')} torch threads, encode batch "
            f"{d.get('batch_size')}, {d.get('texts_embedded'):,} texts embedded |"
        )
    lines.append(
        f"| other load on the machine meanwhile | {run.other_cores:.2f} cores busy elsewhere, "
        f"{run.steal_cores:.2f} cores stolen by the hypervisor |"
    )
    return lines


def _process_table(run: IngestRun, wall: float) -> list[str]:
    lines = ["| process | peak RSS | CPU s | cores busy (avg) |", "|---|---:|---:|---:|"]
    names = sorted(set(run.peak_rss) | set(run.cpu_s), key=lambda n: (n != "kernel", n))
    for name in names:
        cpu = run.cpu_s.get(name)
        lines.append(
            f"| {name} | {_mib(run.peak_rss.get(name))} | {'-' if cpu is None else f'{cpu:.1f}'} | "
            f"{'-' if cpu is None or not wall else f'{cpu / wall:.2f}'} |"
        )
    lines.append(f"| this benchmark (polling) | — | {run.bench_cpu_s:.1f} | {run.bench_cpu_s / wall:.2f} |")
    return lines


def _notes(r: Results) -> list[str]:
    notes: list[str] = []
    full, bare = r.full, r.bare
    if r.probes and len(r.probes) > 1:
        rates = [x for _, x in r.probes]
        spread = max(rates) / min(rates) - 1
        notes.append(
            f"- **Machine speed**: the reference encode ran at {min(rates):.1f} to {max(rates):.1f} texts/s over "
            f"the run ({spread:.0%} apart; table in section 2). "
            + (
                "The ratio is only as good as that: pipeline and bare floor cannot run at the same moment."
                if spread > 0.05
                else "Steady enough for the ratio to mean what it says."
            )
        )
    if r.ratio is not None and full and bare and full.embedded_s and bare.chunks_per_s:
        wall = full.embedded_s
        emb_cpu = full.cpu_s.get("embedder", 0.0)
        parse_cpu = sum(v for k, v in full.cpu_s.items() if k.startswith("parser"))
        rest_cpu = sum(v for k, v in full.cpu_s.items() if k != "embedder" and not k.startswith("parser"))
        notes.append(
            f"- **CPU over the {wall:.0f} s to fully embedded**: embedder {emb_cpu:.0f} s "
            f"({emb_cpu / wall:.2f} of {bare.threads} cores), parsers {parse_cpu:.0f} s, indexer + kernel + "
            f"watcher + idle workers {rest_cpu:.0f} s, this benchmark's polling {full.bench_cpu_s:.0f} s, other "
            f"programs {full.other_cores * wall:.0f} s, hypervisor steal {full.steal_cores * wall:.0f} s. Every "
            f"CPU-second not spent in the embedder is taken from the {bare.threads} cores the bare run had to itself."
            + (
                f" The bare encode used {bare.cpu_s:.0f} CPU-s for the same chunks, so the embedder spent "
                f"{emb_cpu / bare.cpu_s - 1:+.0%} CPU on them."
                if bare.cpu_s
                else ""
            )
        )
        ideal = full.chunks / bare.chunks_per_s
        if full.keyword_s and full.embedded_s > full.keyword_s:
            during = full.embedded_at_keyword / full.keyword_s
            after_chunks = full.chunks - full.embedded_at_keyword
            after_s = full.embedded_s - full.keyword_s
            lost_during = full.keyword_s - full.embedded_at_keyword / bare.chunks_per_s
            lost_after = after_s - after_chunks / bare.chunks_per_s
            notes.append(
                f"- **Where the {wall - ideal:.0f} s over the bare time ({ideal:.0f} s) go**: "
                f"{lost_during:.0f} s while the parsers ran (the first {full.keyword_s:.0f} s, embedding at "
                f"{during:.1f} chunks/s = {during / bare.chunks_per_s:.2f} x bare), {lost_after:.0f} s afterwards "
                f"({after_chunks / after_s:.1f} chunks/s = {after_chunks / after_s / bare.chunks_per_s:.2f} x bare, "
                "the embedder alone with the indexer)."
            )
        if bare.tokens and bare.padding:
            pool = full.policy.embed_batch * full.lookahead
            whole = bare.padding[-1][1]
            mine = next((n for name, n in bare.padding if name.endswith("(the indexer)")), None)
            if mine is not None:
                how = (
                    f"pools of {pool} chunks ({full.lookahead} x embed_batch {full.policy.embed_batch}) sent "
                    "longest-first"
                    if full.lookahead > 1
                    else f"requests of {pool} consecutive chunks, each sorted on its own"
                )
                notes.append(
                    f"- **Padding**: the chunks hold {bare.tokens:,} tokens. One `encode()` over all of them (sorted "
                    f"by length, batches of {BARE_BATCH}) runs {whole:,} token positions "
                    f"({whole / bare.tokens - 1:+.1%} padding); the indexer's {how} run {mine:,} "
                    f"({mine / bare.tokens - 1:+.1%}), {mine / whole - 1:+.1%} more work (table in section 2)."
                )
        if len(bare.check) > 1:
            one = bare.check[0][1]
            notes.append(
                f"- **Batching in-process** (the first {bare.check_chunks:,} chunks, no bus, no SQLite, no parsers, "
                f"{bare.check_rounds} rounds in turns): "
                + "; ".join(f"{name} {seconds / one - 1:+.1%} time" for name, seconds in bare.check[1:])
                + " against one call."
            )
    if r.latencies and statistics.median(r.latencies) >= LATENCY_TARGET_S:
        notes.append(
            "- **Save-to-searchable**: the watcher's debounce (0.5 s), then the indexer's wake, the parse, the "
            "SQLite write and the Tantivy commit; see the watcher and indexer logs of a rerun."
        )
    if r.rescan and r.rescan.scan_s >= RESCAN_TARGET_S:
        notes.append(
            f"- **Rescan**: the watcher's figure covers the scan (stat of {r.rescan.files:,} files) and the "
            "reconcile request to the indexer (one SQLite pass over the folder's documents)."
        )
    return notes


def render(r: Results) -> str:
    out = [
        "# foldermind ingestion benchmark (SciFact)",
        "",
        f"Generated by `python -m tests.bench.ingest`; the whole run took {r.elapsed_s:.0f} s. Corpus: "
        f"{r.files:,} SciFact abstracts{' (a subset: ' + LIMIT_ENV + ')' if r.limited else ''}, one `.txt` "
        "file each (title, blank line, text), in a temporary folder.",
        "",
        "## Machine",
        "",
        "|  |  |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in r.machine.items()),
        "",
        "## Targets",
        "",
        *_targets(r),
        "",
    ]
    if r.errors:
        out += ["## Errors", "", *(f"- {e}" for e in r.errors), ""]
    if r.full:
        out += [
            "## 1. Full pipeline with embeddings",
            "",
            "A real kernel (`foldermind start`, default process map) in a fresh home; the clock starts when "
            "`foldermind folders add DIR` (no `--wait`) is launched, after the embedder reported its model "
            f"loaded, and the indexer is polled (`folders.list.request`) every {PROGRESS_S:g} s until every file "
            f"is indexed, then every {PROGRESS_EMBED_S:g} s.",
            "",
            *_ingest_table(r.full, embed=True),
            "",
            f"Per process, from `folders add` to fully embedded (peak RSS from `ctl.status.request` every "
            f"{SAMPLE_S:g} s; CPU from psutil):",
            "",
            *_process_table(r.full, r.full.embedded_s or r.full.keyword_s),
            "",
        ]
    if r.bare:
        b = r.bare
        out += [
            "## 2. Bare floor: `SentenceTransformer.encode` in-process",
            "",
            "After run 1's kernel stopped (nothing else of ours running): the exact chunk texts run 1 stored "
            f"(`chunks.text`), `encode(texts, batch_size={BARE_BATCH}, normalize_embeddings=True)` under "
            "`torch.inference_mode()`, model load excluded.",
            "",
            "|  |  |",
            "|---|---|",
            f"| chunks | {b.chunks:,} |",
            f"| torch threads | {b.threads} (as the embedder: the usable CPUs) |",
            f"| model load (not counted) | {b.load_s:.1f} s |",
            f"| encode | {b.encode_s:.1f} s: **{b.chunks_per_s:.1f} chunks/s** |",
        ]
        if r.ratio is not None:
            out.append(f"| pipeline ÷ bare | **{r.ratio:.2f}** (target ≥ {RATIO_TARGET:.2f}; docsonar {PEER_RATIO}) |")
        if b.vs_pipeline_min_cos is not None:
            out.append(
                f"| same vectors as the pipeline's? | cosine with `chunks.vector`: mean {b.vs_pipeline_mean_cos:.6f}, "
                f"min {b.vs_pipeline_min_cos:.6f} |"
            )
        if b.cpu_s:
            out.append(f"| CPU of the encode | {b.cpu_s:.0f} s ({b.cpu_s / b.encode_s:.2f} cores) |")
        out.append(
            f"| other load on the machine meanwhile | {b.other_cores:.2f} cores busy elsewhere, "
            f"{b.steal_cores:.2f} cores stolen by the hypervisor |"
        )
        out.append("")
        if b.padding and b.tokens:
            out += [
                f"Padding: token positions the model runs (batches of {BARE_BATCH}) when the {b.chunks:,} chunks "
                f"({b.tokens:,} tokens) are taken N at a time in chunk-id order and each pool is sorted by character "
                "length (as `encode()` sorts one call; the indexer sorts `embed_batch` x `EMBED_LOOKAHEAD`):",
                "",
                "| pools of N | token positions | padding | vs one call |",
                "|---|---:|---:|---:|",
                *(
                    f"| {name} | {n:,} | {n / b.tokens - 1:+.1%} | {n / b.padding[-1][1] - 1:+.1%} |"
                    for name, n in b.padding
                ),
                "",
            ]
        if b.check:
            out += [
                f"Batching, in-process: the first {b.check_chunks:,} chunks encoded in these ways, "
                f"{b.check_rounds} rounds taken in turns (no bus, no SQLite, no parsers):",
                "",
                "| calls | chunks/s | time vs one call |",
                "|---|---:|---:|",
                *(
                    f"| {name} | {b.check_chunks * b.check_rounds / seconds:.1f} | {seconds / b.check[0][1] - 1:+.1%} |"
                    for name, seconds in b.check
                ),
                "",
            ]
    if r.probes:
        out += [
            "Machine speed: the first 96 abstracts encoded in-process (one call), at these moments:",
            "",
            "| when | texts/s |",
            "|---|---:|",
            *(f"| {label} | {rate:.1f} |" for label, rate in r.probes),
            "",
        ]
    if r.keyword:
        out += [
            "## 3. Keyword-only indexing",
            "",
            "A second kernel in a fresh home with `[workers.embedder] enabled = false`, same folder: parse, SQLite, "
            "Tantivy only.",
            "",
            *_ingest_table(r.keyword, embed=False),
            "",
            "Per process, from `folders add` to every file indexed:",
            "",
            *_process_table(r.keyword, r.keyword.keyword_s),
            "",
        ]
    if r.rescan:
        s = r.rescan
        out += [
            "## 4. No-change rescan",
            "",
            "The second kernel's watcher restarted (`ctl.restart.request`, what `foldermind restart watcher` "
            "sends); its initial sync lists the folder and sends the reconcile to the indexer. Watcher's log line: "
            f"`{s.files} files scanned in {s.scan_s:.2f} s ({s.new} new, {s.changed} changed, {s.deleted} deleted)`.",
            "",
            "|  |  |",
            "|---|---|",
            f"| scan + reconcile (watcher's figure) | **{s.scan_s:.2f} s** ({s.files / s.scan_s:,.0f} files/s) |"
            if s.scan_s
            else f"| scan + reconcile (watcher's figure) | **{s.scan_s:.2f} s** |",
            f"| restart request → that log line (process start, imports, folder list included) | {s.wall_s:.2f} s |",
            "",
        ]
    if r.latencies:
        lat = r.latencies
        out += [
            "## 5. Save-to-searchable",
            "",
            f"{len(lat)} times, with the second kernel: a new `.txt` holding a unique made-up word is written into "
            "the folder, then `search.request` (keyword, top_k 1) goes to the indexer every 20 ms until the file "
            "is the hit. The watcher's debounce (`debounce_s` 0.5) is included.",
            "",
            "| median | p90 | min | max |",
            "|---:|---:|---:|---:|",
            f"| **{statistics.median(lat):.2f} s** | {_pct(lat, 0.9):.2f} s | {min(lat):.2f} s | {max(lat):.2f} s |",
            "",
            "All probes (s): " + ", ".join(f"{x:.2f}" for x in lat),
            "",
        ]
    if r.recall:
        out += [
            f"## 6. usearch recall@{RECALL_K}",
            "",
            f"Run 1's vectors (`chunks.vector`), top-{RECALL_K} of a usearch index (cosine, f32, expansion_add 128) "
            "against exact search (numpy dot products of the normalised vectors).",
            "",
            "| index | queries | expansion_search | recall@100 | loss | ms / query |",
            "|---|---|---:|---:|---:|---:|",
            *(
                f"| {x.index} | {x.queries} | {x.expansion} | {x.recall:.4f} | {1 - x.recall:.2%} | "
                f"{x.ms_per_query:.2f} |"
                for x in r.recall
            ),
            "",
        ]
    notes = _notes(r)
    if notes:
        out += ["## Where the time goes", "", *notes, ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def step(results: Results, name: str) -> Iterator[None]:
    """Record a failed step and go on with the rest (what was measured is still reported)."""
    try:
        yield
    except Exception as exc:
        traceback.print_exc()
        results.errors.append(f"{name}: {exc}")


def probe_texts(n: int = 96) -> list[str]:
    out: list[str] = []
    with open(scifact_dir() / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and len(out) < n:
                doc = json.loads(line)
                out.append(f"{doc.get('title', '')}\n\n{doc.get('text', '')}")
    return out


def run_all(results: Results, corpus: Path, files: int, progress: Callable[[str], None]) -> None:
    threads = usable_cpus()
    progress(f"loading the model in this process ({threads} torch threads) for the bare floor and speed probes")
    model, load_s = load_model(threads)
    probe = SpeedProbe(model, probe_texts())
    probe.measure("warm-up")
    probe.rows.clear()
    results.probes = probe.rows
    progress(f"  speed probe: {probe.measure('before run 1'):.1f} texts/s")
    full = Kernel("full pipeline")
    lookahead = embed_lookahead()
    try:
        with step(results, "run 1 (full pipeline)"):
            progress("1/6 full pipeline with embeddings: starting a kernel")
            full.start()
            progress(f"  home {full.root}")
            results.full = index_folder(full, corpus, files, embed=True)
            threads = int(results.full.embedder_details.get("threads") or threads)
        full.stop()
        if results.full and results.full.embedded_s:
            with step(results, "run 2 (bare encode)"):
                progress("2/6 bare encode of the same chunk texts, no kernel running")
                set_threads(threads)
                progress(f"  speed probe: {probe.measure('after run 1, before the bare encode'):.1f} texts/s")
                pool = full.policy.embed_batch * lookahead
                bare = bare_floor(model, load_s, full.db_path, threads, pool)
                results.bare = bare
                progress(f"  {bare.chunks} chunks in {bare.encode_s:.1f} s: {bare.chunks_per_s:.1f} chunks/s")
                progress(f"  speed probe: {probe.measure('after the bare encode'):.1f} texts/s")
                if results.ratio is not None:
                    progress(f"  pipeline / bare = {results.ratio:.2f}")
                if results.ratio is not None and results.ratio < RATIO_TARGET:
                    progress("  below target: timing the indexer's batching in-process")
                    _, texts, _ = chunk_rows(full.db_path)
                    batching_check(model, texts, full.policy.embed_batch, lookahead, bare)
            with step(results, "run 6 (usearch recall)"):
                progress("6/6 usearch recall (done now: it needs run 1's vectors and the loaded model)")
                queries = scifact_queries()
                qvec = encode(model, queries) if queries else None
                results.recall = usearch_recall(full.db_path, full.home.data_dir / "vectors.usearch", qvec)
                for row in results.recall:
                    progress(f"  {row.index} / {row.queries} / {row.expansion}: {row.recall:.4f}")
    finally:
        full.stop()
        full.keep = full.keep or bool(results.errors)
        full.cleanup()
    del model, probe

    keyword = Kernel("keyword only", NO_EMBEDDER)
    try:
        with step(results, "run 3 (keyword only)"):
            progress("3/6 keyword-only indexing: a second kernel without an embedder")
            keyword.start()
            progress(f"  home {keyword.root}")
            results.keyword = index_folder(keyword, corpus, files, embed=False)
        if results.keyword and results.keyword.keyword_s:
            with step(results, "run 4 (rescan)"):
                progress("4/6 no-change rescan: restarting the watcher")
                time.sleep(1.0)  # let the last commit settle
                results.rescan = rescan(keyword)
                s = results.rescan
                progress(
                    f"  {s.files} files in {s.scan_s:.2f} s ({s.new}/{s.changed}/{s.deleted}); wall {s.wall_s:.2f}"
                )
            with step(results, "run 5 (save-to-searchable)"):
                progress(f"5/6 save-to-searchable, {LATENCY_PROBES} probes")
                results.latencies = save_to_searchable(keyword, corpus, LATENCY_PROBES)
                progress(
                    f"  median {statistics.median(results.latencies):.2f} s, p90 {_pct(results.latencies, 0.9):.2f} s"
                )
    finally:
        keyword.stop()
        keyword.keep = keyword.keep or bool(results.errors)
        keyword.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ingest", description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {REPORT}")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the workers inherit it: nothing is downloaded
    raw_limit = os.environ.get(LIMIT_ENV, "").strip()
    limit = int(raw_limit) if raw_limit else None

    t0 = time.monotonic()
    say("waiting for the machine to be quiet (under 10% CPU, at most 60 s)")
    quiet, waited = wait_for_quiet()
    machine = machine_facts()
    machine["CPU in use when the run began"] = f"{quiet:.0f}% of all cores (after waiting {waited:.0f} s)"
    corpus = Path(tempfile.mkdtemp(prefix="fmc-"))
    try:
        files = write_corpus(corpus, limit)
        say(f"wrote {files} files into {corpus}")
        results = Results(machine, files, limited=limit is not None)
        try:
            run_all(results, corpus, files, say)
        except BaseException as exc:  # Ctrl-C or a bug: report what was measured
            results.errors.append(f"aborted: {exc!r}")
            traceback.print_exc()
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
    results.elapsed_s = time.monotonic() - t0
    text = render(results)
    print(text)
    if not args.no_write:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text + kept_section(REPORT), encoding="utf-8")  # tests.bench.formats's section stays
        say(f"wrote {REPORT.relative_to(REPO)}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
