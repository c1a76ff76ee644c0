"""Ingestion benchmark on SciFact: the whole pipeline against the bare model, in one run.

``python -m tests.bench.ingest [--no-write]`` from the repository root. The 5,183 SciFact abstracts
(``../shared/eval/scifact/corpus.jsonl``, or ``$FOLDERMIND_SCIFACT``) are written out as one ``.txt``
file each (title, blank line, text), then:

1. a real kernel (default process map) indexes and embeds the folder: time to keyword-indexed and to
   fully embedded, files/s, chunks/s, peak RSS of every worker and of the whole process tree (the sum at
   each sample, the largest sum), CPU of every process, and the embedder's backend and precision;
2. with no kernel running, the exact chunk texts the pipeline stored are encoded in-process twice: with
   ``SentenceTransformer.encode`` (the bare torch floor, the reference the targets were set against) and
   with the embedder's own ONNX code (the bare ONNX floor: the checked export from the machine's shared
   model cache, opened by ``onnx_int8.open_precision`` at the embedder's precision, its streams and batch
   size, one ``OnnxEncoder.encode_longest_first`` call), and once more one batch of :data:`ONE_PASS_BATCH`
   at a time on all the threads (the embedder before 2026-12-05): the ONNX ratio is taken against the
   faster of the two;
3. a second kernel without an embedder indexes the folder again (keyword-only rate);
4. that kernel's watcher is restarted: its no-change reconcile of every file is timed;
5. 20 new files, each with a unique word, are timed from the write until a keyword search finds them;
6. usearch recall@100 against exact search over the vectors of run 1, at expansion_search 64 and the indexer's
   (``[search] expansion_search``), of the full graph as the indexer rebuilds it and of the pipeline's own file;
   a chunk's units under its id, recall counted by chunk.

A small reference encode in this process (the first 96 abstracts, torch and ONNX) is timed before run 1,
before and between the bare encodes and after them, because the pipeline and the bare floors cannot run
at the same moment and a small VM's speed wanders. The report is printed and written to ``docs/benchmarks/ingest.md``;
the file's other sections (other benches', and those measured by hand) stay where they were
(:func:`~tests.bench.markdown.merged`).
``FOLDERMIND_BENCH_LIMIT=300`` uses only the first 300 abstracts (for development).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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
from foldermind.workers.indexer.ingest import units
from foldermind.workers.indexer.storage import embeddings
from tests.bench import machine
from tests.bench.cpu import cpu_seconds
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.machine import wait_for_quiet
from tests.bench.markdown import merged
from tests.bench.scifact import scifact_dir, scifact_queries, write_corpus
from tests.bench.transports import REPO
from tests.config import Config

REPORT = REPO / "docs" / "benchmarks" / "ingest.md"
LIMIT_ENV = "FOLDERMIND_BENCH_LIMIT"

TORCH_RATIO_TARGET = 1.8  # pipeline (ONNX embedder) over the bare torch encode
TORCH_RATIO_BEFORE = 0.93  # the same ratio with the torch embedder, 2026-11-29
RATIO_TARGET = 0.90  # pipeline over the bare encode of its own backend
PEER_RATIO = 0.75  # docsonar, same measurement
WHOLE_FOLDER_TARGET_S = 185.0  # SciFact's 5,183 files, `folders add` to fully embedded
PEER_WHOLE_FOLDER_S = 202.0  # docsonar on this machine, same folder
TREE_RSS_TARGET = 1_000_000_000  # bytes (1.0 GB): the whole process tree while it indexes SciFact
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
NO_EMBEDDER: Config = {"workers": {"embedder": {"enabled": False}}}
# The watcher's line goes on with more counts (skipped, unsupported) after the three read here.
SCAN_LINE = re.compile(r"folder (\S+): (\d+) files scanned in ([0-9.]+) s \((\d+) new, (\d+) changed, (\d+) deleted\b")


def usable_cpus() -> int:
    """What the embedder uses for torch's thread count (workers/embedder.py: _usable_cpus)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def embed_lookahead() -> int:
    """How many ``embed_batch``es the indexer fetches at once and sends longest-first (1: by chunk id)."""
    try:
        from foldermind.workers.indexer.ingest.embeds import EmbedWindow
    except ImportError:  # a commit before the ingest thread was split into parts
        from foldermind.workers.indexer.pipeline import Pipeline as EmbedWindow  # type: ignore[no-redef]

        return int(getattr(EmbedWindow, "EMBED_LOOKAHEAD", 1))
    return EmbedWindow.LOOKAHEAD


# --------------------------------------------------------------------------------------------
# machine


def machine_facts() -> dict[str, str]:
    """The bus benchmark's machine table, with the model stack in place of the bus libraries."""
    facts = machine.facts(REPO)
    for bus_only in ("pyzmq / libzmq", "msgpack"):
        facts.pop(bus_only, None)
    machine.versions(facts, "torch", "sentence-transformers", "onnxruntime", "tokenizers", "usearch")
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


def with_exited(
    after: dict[str, tuple[int, float]], last_seen: dict[str, tuple[int, float]]
) -> dict[str, tuple[int, float]]:
    """The final snapshot, with each worker whose process exited before it (not in it, or another pid now)
    counted at its last sample instead."""
    out = dict(after)
    for name, (pid, cpu) in last_seen.items():
        if name not in after:
            out[name] = (pid, cpu)
    return out


def cpu_delta(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]) -> dict[str, float]:
    """CPU seconds per worker between two snapshots (a restarted worker counts from zero)."""
    out: dict[str, float] = {}
    for name, (pid, cpu) in after.items():
        prev = before.get(name)
        out[name] = cpu - prev[1] if prev and prev[0] == pid else cpu
    return out


@dataclass(slots=True)
class TreePeak:
    """The largest RSS of the whole process tree over the samples: the kernel's own figure (itself and
    every process under it, workers' children included) and the sum over the processes ``status`` lists,
    each with what every listed process held at that sample."""

    tree: int = 0
    listed: int = 0
    at_listed: dict[str, int] = field(default_factory=dict)

    def add(self, tree: int, rss: dict[str, int]) -> None:
        self.tree = max(self.tree, tree)
        total = sum(rss.values())
        if total > self.listed:
            self.listed, self.at_listed = total, dict(rss)

    def biggest(self) -> tuple[str, int] | None:
        """The process that held the most at the listed sum's peak."""
        return max(self.at_listed.items(), key=lambda kv: kv[1]) if self.at_listed else None


class Sampler(threading.Thread):
    """StatusRequest to the kernel every ``SAMPLE_S``: peak RSS of each process and of the whole tree, how
    often each worker had a job, and the embedder's latest status note (backend and precision)."""

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.kernel = kernel
        self.stop_event = threading.Event()
        self.peak_rss: dict[str, int] = {}
        self.tree = TreePeak()
        self.embedder_note = ""
        self.samples: list[tuple[float, dict[str, int]]] = []  # (monotonic, worker -> in_flight)
        self.errors = 0
        # Each worker's CPU at its last sample: an on-demand worker released at the hand-over (the embedder, once
        # every chunk is embedded) has exited before the final snapshot, and would otherwise count as load
        # from elsewhere.
        self.last_cpu: dict[str, tuple[int, float]] = {}

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
                self.tree.add(int(st.kernel.get("tree_rss_bytes") or 0), rss)
                note = next((w["note"] for w in st.workers if w["name"] == "embedder"), None)
                self.embedder_note = str(note) if note else self.embedder_note
                self.samples.append((now, {w["name"]: int(w["in_flight"]) for w in st.workers}))
                self.kernel.pids.update(w["pid"] for w in st.workers if w["pid"])
                for w in st.workers:
                    with contextlib.suppress(psutil.Error):
                        if w["pid"]:
                            self.last_cpu[w["name"]] = (w["pid"], cpu_seconds(psutil.Process(w["pid"])))
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
    tree: TreePeak = field(default_factory=TreePeak)
    embedder_note: str = ""
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
    details: dict[str, Any] = {}
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
                    done = f["files_indexed"] + f["files_failed"] + f.get("files_skipped", 0)
                    run.progress.append((now, done, f["chunks_embedded"]))
                    # Every file found by keyword: "ready", or "embedding" while vectors are still coming (read as
                    # "ready" alone, run 1's keyword time was its embedded time, polled at PROGRESS_S throughout).
                    searchable = f["state"] in ("ready", "embedding")
                    if not run.keyword_s and f["files_total"] >= files and done >= files and searchable:
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
            run.cpu_s = cpu_delta(cpu0, with_exited(kernel.cpu_by_worker(client), sampler.last_cpu))
            run.bench_cpu_s = cpu_seconds(me) - bench0
            run.other_cores = window.other_cores(sum(run.cpu_s.values()) + run.bench_cpu_s)
            run.steal_cores = window.steal_cores()
            run.embedder_busy = sampler.busy_share("embedder", t0, t1) if embed else None
        finally:
            sampler.finish()
        run.peak_rss = dict(sampler.peak_rss)
        run.tree, run.embedder_note = sampler.tree, sampler.embedder_note
        if embed:
            # Only a running embedder is asked: one the indexer has just released would be started again by the
            # request and load its model beside the llm's (a tree of 1,018 MiB in memory_budget's part 1).
            workers = kernel.status(client).workers
            running = any(w["name"] == "embedder" and w["state"] == "RUNNING" for w in workers)
            after = kernel.describe(client, "embedder") if running else {}
            if after.get("texts_embedded") or not details:
                run.embedder_details = after
            else:  # released at the hand-over and gone: what it described when ready, and what it embedded
                run.embedder_details = {**details, "texts_embedded": run.chunks_embedded}
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
    texts: int = 0  # the chunks' units, what was encoded
    other_cores: float = 0.0
    steal_cores: float = 0.0
    vs_pipeline_min_cos: float | None = None
    vs_pipeline_mean_cos: float | None = None
    tokens: int = 0
    # (pools of, token positions run in torch's batches, in the ONNX embedder's)
    padding: list[tuple[str, int, int]] = field(default_factory=list)
    onnx_batch: int = 0
    cpu_s: float = 0.0  # this process's CPU during the encode
    check_chunks: int = 0  # the batching check: one call vs the indexer's requests, on a subset
    check: list[tuple[str, float]] = field(default_factory=list)  # (how, seconds over all rounds)
    check_rounds: int = 0
    check_backend: str = "torch"
    vectors: NDArray[np.float32] | None = None  # kept for the ONNX floor's comparison, not reported

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.encode_s if self.encode_s else 0.0


@dataclass(slots=True)
class OnnxBare:
    """The bare ONNX floor: the embedder's ONNX code on the chunk texts of run 1, in this process."""

    file: str
    precision: str
    threads: int
    batch: int
    load_s: float
    streams: int = 1
    """Batches encoded at once (``encode_longest_first``'s ``streams``), each on ``threads`` intra-op threads."""
    chunks: int = 0
    texts: int = 0  # the chunks' units, what was encoded
    encode_s: float = 0.0
    cpu_s: float = 0.0
    other_cores: float = 0.0
    steal_cores: float = 0.0
    vs_pipeline_min_cos: float | None = None
    vs_pipeline_mean_cos: float | None = None
    vs_torch_min_cos: float | None = None
    vs_torch_mean_cos: float | None = None

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.encode_s if self.encode_s else 0.0


def cosines(a: NDArray[np.float32], b: NDArray[np.float32]) -> tuple[float, float] | None:
    """Least and mean cosine of the rows of two sets of normalised vectors (None when the shapes differ)."""
    if a.shape != b.shape or not len(a):
        return None
    cos = np.sum(a * b, axis=1)
    return float(cos.min()), float(cos.mean())


def chunk_rows(db_path: Path) -> tuple[int, list[str], list[bytes | None]]:
    """What the pipeline embedded for the chunks of run 1: how many chunks, the texts it sent the embedder for
    them (each chunk's units, :mod:`foldermind.workers.indexer.ingest.units`, in chunk order) and each text's stored
    vector (``None`` for a chunk without vectors)."""
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT c.text, c.vector, d.title, (SELECT substr(f.text, 1, 1000) FROM chunks f WHERE f.doc_id = c.doc_id"
            " ORDER BY f.ordinal LIMIT 1) FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.id"
        ).fetchall()
    texts: list[str] = []
    blobs: list[bytes | None] = []
    for text, blob, title, first in rows:
        made = units.units(str(text), units.title_of(title, first or ""))
        texts += made
        width = len(blob) // len(made) if blob and len(blob) % (4 * len(made)) == 0 else 0
        blobs += [blob[i * width : (i + 1) * width] if width else None for i in range(len(made))]
    return len(rows), texts, blobs


def load_model(threads: int) -> tuple[Any, float]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    t0 = time.perf_counter()
    import torch
    from sentence_transformers import SentenceTransformer

    from foldermind.workers.embedding.model_files import model_dir

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    model.eval()
    return model, time.perf_counter() - t0


def load_onnx(policy: IngestPolicy, threads: int) -> tuple[Any, float]:
    """The embedder's ONNX encoder, opened as it opens it (workers/embedder.py: _load_onnx): the checked
    export in the machine's shared model cache at the configured precision, ``threads`` intra-op threads.
    Returns the ``onnx_export.Loaded`` (encoder, file, check) and the seconds the open took."""
    from foldermind.protocol.runtime.home import model_cache_dir
    from foldermind.workers.embedding import model_files, onnx_int8, onnx_model

    unsafe = onnx_model.onnxruntime_unsafe()
    if unsafe:
        raise BenchFailure(f"onnxruntime cannot be loaded in this process: {unsafe}")
    t0 = time.perf_counter()
    path = model_files.model_dir()
    loaded = onnx_int8.open_precision(
        path, model_files.model_name(path), model_cache_dir(policy.model_cache_dir), threads, policy.embed_quantize
    )
    return loaded, time.perf_counter() - t0


ONE_PASS_BATCH = 4
"""The embedder's batch size while it encoded one batch at a time on all its threads (before 2026-12-05)."""


def embedder_settings() -> tuple[int, int]:
    """The ONNX embedder's intra-op threads and batch size, as it reads them from this environment (its
    workers inherit the benchmark's): checked against its ``describe`` after run 1."""
    from foldermind.workers import embedder

    return (
        embedder._positive_int_env(embedder.THREADS_ENV, usable_cpus()),
        embedder._positive_int_env(embedder.BATCH_ENV, embedder.DEFAULT_ONNX_BATCH),
    )


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
    """The same small encode by each backend, timed now and then: a small VM's speed wanders by tens of
    percent over minutes, and the pipeline and the bare floors cannot run at the same moment."""

    def __init__(self, encoders: dict[str, Callable[[list[str]], object]], texts: list[str]) -> None:
        self.encoders, self.texts = encoders, texts
        self.rows: list[tuple[str, dict[str, float]]] = []  # (when, backend -> texts/s)

    def measure(self, label: str) -> str:
        rates: dict[str, float] = {}
        for name, encode_with in self.encoders.items():
            t0 = time.perf_counter()
            encode_with(self.texts)
            rates[name] = len(self.texts) / (time.perf_counter() - t0)
        self.rows.append((label, rates))
        return ", ".join(f"{name} {rate:.1f}" for name, rate in rates.items()) + " texts/s"


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


def bare_floor(model: Any, load_s: float, db_path: Path, threads: int, pool: int, onnx_batch: int) -> Bare:
    chunks, texts, blobs = chunk_rows(db_path)
    if not texts:
        raise BenchFailure("the pipeline stored no chunks")
    set_threads(threads)
    say(f"  encoding the {len(texts)} texts of {chunks} chunks with {threads} threads")
    window = CpuWindow()
    me = psutil.Process()
    cpu0 = cpu_seconds(me)
    t0 = time.perf_counter()
    vectors = encode(model, texts)
    encode_s = time.perf_counter() - t0
    bare = Bare(chunks, threads, load_s, encode_s, int(model.max_seq_length), texts=len(texts))
    bare.cpu_s = cpu_seconds(me) - cpu0
    bare.other_cores = window.other_cores(bare.cpu_s)
    bare.steal_cores = window.steal_cores()
    bare.vectors = vectors
    vs = vs_stored(vectors, blobs)
    if vs is not None:
        bare.vs_pipeline_min_cos, bare.vs_pipeline_mean_cos = vs
    # Padding: encode() sorts each call's texts by length, so one call over everything pads less
    # than the indexer's requests, sorted only within its lookahead pool.
    enc = model.tokenizer(texts, truncation=True, max_length=bare.max_seq_length)
    lengths = [len(x) for x in enc["input_ids"]]
    chars = [len(t) for t in texts]
    bare.tokens = sum(lengths)
    bare.onnx_batch = onnx_batch
    sizes = sorted({pool, 32, 64, 128, 256, 512, 1024})
    for n in sizes:
        if n < len(texts):
            name = f"{n}{' (the indexer)' if n == pool else ''}"
            bare.padding.append(
                (name, padded_tokens(lengths, chars, n, BARE_BATCH), padded_tokens(lengths, chars, n, onnx_batch))
            )
    everything = len(texts)
    bare.padding.append(
        (
            "all (the bare runs)",
            padded_tokens(lengths, chars, everything, BARE_BATCH),
            padded_tokens(lengths, chars, everything, onnx_batch),
        )
    )
    return bare


def vs_stored(vectors: NDArray[np.float32], blobs: list[bytes | None]) -> tuple[float, float] | None:
    """Least and mean cosine between ``vectors`` and the pipeline's stored ``chunks.vector`` rows."""
    stored = [(i, np.frombuffer(b, dtype=np.float32)) for i, b in enumerate(blobs) if b is not None]
    if not stored or len(stored[0][1]) != vectors.shape[1]:
        return None
    return cosines(vectors[[i for i, _ in stored]], np.vstack([v for _, v in stored]))


def onnx_floor(onnx: OnnxBare, encoder: Any, db_path: Path, torch_vectors: NDArray[np.float32] | None) -> None:
    """The exact chunk texts of run 1 in one ``encode_longest_first`` call (sorted by token count, batches
    of the embedder's size, ``onnx.streams`` at once): the least that way of encoding takes for them here."""
    chunks, texts, blobs = chunk_rows(db_path)
    if not texts:
        raise BenchFailure("the pipeline stored no chunks")
    say(
        f"  encoding the {len(texts)} texts of {chunks} chunks with ONNX ({onnx.streams} x {onnx.threads} threads,"
        f" batches of {onnx.batch})"
    )
    window = CpuWindow()
    me = psutil.Process()
    cpu0 = cpu_seconds(me)
    t0 = time.perf_counter()
    vectors = encoder.encode_longest_first(texts, onnx.batch, streams=onnx.streams)
    onnx.encode_s = time.perf_counter() - t0
    onnx.chunks, onnx.texts = chunks, len(texts)
    onnx.cpu_s = cpu_seconds(me) - cpu0
    onnx.other_cores = window.other_cores(onnx.cpu_s)
    onnx.steal_cores = window.steal_cores()
    vs = vs_stored(vectors, blobs)
    if vs is not None:
        onnx.vs_pipeline_min_cos, onnx.vs_pipeline_mean_cos = vs
    vs = cosines(vectors, torch_vectors) if torch_vectors is not None else None
    if vs is not None:
        onnx.vs_torch_min_cos, onnx.vs_torch_mean_cos = vs


def as_requests(texts: list[str], request: int, pool: int) -> list[list[str]]:
    """The calls the indexer makes: ``pool`` chunks at a time in id order, longest first, cut into
    requests of ``request`` (workers/indexer/ingest/embeds.py: EmbedWindow.fill)."""
    calls: list[list[str]] = []
    for start in range(0, len(texts), pool):
        ordered = sorted(texts[start : start + pool], key=len, reverse=True)
        calls += [ordered[i : i + request] for i in range(0, len(ordered), request)]
    return calls


def batching_check(
    encode_with: Callable[[list[str]], object],
    backend: str,
    texts: list[str],
    request: int,
    lookahead: int,
    bare: Bare,
    limit: int = 1024,
    rounds: int = 2,
) -> None:
    """In-process, on the first ``limit`` chunks, in turns: one call, the indexer's requests, and
    requests of 256 with the same lookahead, each call encoded as the embedder encodes one request
    (``encode_with``). What the batching costs without bus, SQLite or parsers."""
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
                encode_with(call)
            spent[i] += time.perf_counter() - t0
    bare.check_chunks, bare.check_rounds, bare.check_backend = len(subset), rounds, backend
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
    walked: bool = True
    """Whether the indexer's searches walk this graph (a draft's are exact)."""


def exact_top(matrix: NDArray[np.float32], queries: NDArray[np.float32], k: int) -> list[set[int]]:
    sims = queries @ matrix.T
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    return [set(row.tolist()) for row in top]


def usearch_recall(db_path: Path, live_file: Path, query_vectors: NDArray[np.float32] | None) -> list[RecallRow]:
    from usearch.index import Index

    from foldermind.workers.indexer.storage.vectors import (
        DRAFT_MARKER,
        EXPANSION_ADD,
        EXPANSION_SEARCH,
        VectorIndex,
        insert_order,
    )

    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL ORDER BY id").fetchall()
        dim = db.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()
    if len(rows) <= RECALL_K:
        return []
    # Every unit vector under its chunk's id, as vectors.py keeps them; recall is of the chunks of the top
    # RECALL_K units (exact against usearch's).
    unit_keys, matrix = embeddings.stack([(int(r[0]), r[1]) for r in rows], int(dim[0]) if dim else 384)
    keys = np.asarray(unit_keys, dtype=np.uint64)
    ndim = matrix.shape[1]

    def fresh() -> Any:
        return Index(
            ndim=ndim,
            metric="cos",
            dtype="f16",
            multi=True,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    # The full graph as the ingest thread builds it once a draft outgrows exact search (Pipeline._full_graph):
    # chunks in a shuffled order, through VectorIndex.rebuilt.
    with tempfile.TemporaryDirectory() as tmp:
        full = VectorIndex(Path(tmp) / "full.usearch", ndim)
    order = insert_order(np.unique(keys))
    t0 = time.perf_counter()
    full.rebuilt(_shuffled_batches(order, keys, matrix))
    took = time.perf_counter() - t0
    indexes = [(f"full, as the indexer rebuilds it ({len(matrix):,} vectors in {took:.1f} s)", full.index, True)]
    if live_file.exists():
        live = fresh()
        live.load(str(live_file))
        draft = Path(f"{live_file}{DRAFT_MARKER}").exists()
        kind = "a draft, which searches do not walk" if draft else "full"
        indexes.append((f"the pipeline's own vectors.usearch ({kind})", live, not draft))

    rng = np.random.default_rng(7)
    n = min(RANDOM_QUERIES, len(matrix))  # fewer with a small FOLDERMIND_BENCH_LIMIT
    query_sets = [(f"{n} random stored vectors", matrix[rng.choice(len(matrix), n, replace=False)])]
    if query_vectors is not None and len(query_vectors):
        query_sets.append((f"{len(query_vectors)} SciFact queries", query_vectors))
    out: list[RecallRow] = []
    for qname, queries in query_sets:
        exact = [{int(keys[i]) for i in top} for top in exact_top(matrix, queries, RECALL_K)]
        for iname, index, walked in indexes:
            for expansion in (64, EXPANSION_SEARCH):
                index.expansion_search = expansion  # type: ignore[misc]  # settable at run time
                t0 = time.perf_counter()
                found = [index.search(np.array(q, dtype=np.float32), RECALL_K) for q in queries]
                ms = (time.perf_counter() - t0) * 1000 / len(queries)
                pairs = zip(found, exact, strict=True)
                hits = [len({int(k) for k in m.keys} & truth) / len(truth) for m, truth in pairs]
                out.append(RecallRow(iname, qname, expansion, float(np.mean(hits)), ms, walked))
    return out


def _shuffled_batches(
    order: NDArray[np.uint64], keys: NDArray[np.uint64], matrix: NDArray[np.float32]
) -> Iterator[tuple[list[int], NDArray[np.float32]]]:
    """The units of ``order``'s chunks, as many chunks a batch as the ingest thread reads from SQLite at once
    (``keys`` ascending, a chunk's units side by side)."""
    from foldermind.workers.indexer.ingest.upkeep import STORED_BATCH

    first, last = np.searchsorted(keys, order, "left"), np.searchsorted(keys, order, "right")
    spans = list(zip(first.tolist(), last.tolist(), strict=True))
    for start in range(0, len(spans), STORED_BATCH):
        rows = np.concatenate([np.arange(a, b) for a, b in spans[start : start + STORED_BATCH]])
        yield [int(k) for k in keys[rows]], matrix[rows]


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
    onnx: OnnxBare | None = None
    onnx_one_pass: OnnxBare | None = None
    """The same ONNX encode one batch at a time on all the threads (the embedder before 2026-12-05)."""
    keyword: IngestRun | None = None
    rescan: Rescan | None = None
    latencies: list[float] = field(default_factory=list)
    recall: list[RecallRow] = field(default_factory=list)
    probes: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """Pipeline chunks/s over the bare torch encode's."""
        if self.full and self.bare and self.full.embedded_s and self.bare.chunks_per_s:
            return self.full.chunks_per_s_embedded / self.bare.chunks_per_s
        return None

    @property
    def onnx_best(self) -> OnnxBare | None:
        """The bare ONNX floor: the faster of the embedder's way and one pass at a time, so a change of the
        embedder's way cannot flatter the ratio."""
        measured = [o for o in (self.onnx, self.onnx_one_pass) if o and o.chunks_per_s]
        return max(measured, key=lambda o: o.chunks_per_s) if measured else None

    @property
    def onnx_rate(self) -> float:
        """The bare ONNX floor's chunks/s (0 when not measured)."""
        return self.onnx_best.chunks_per_s if self.onnx_best else 0.0

    @property
    def onnx_ratio(self) -> float | None:
        """Pipeline chunks/s over the bare ONNX floor's."""
        if self.full and self.full.embedded_s and self.onnx_rate:
            return self.full.chunks_per_s_embedded / self.onnx_rate
        return None

    @property
    def floor(self) -> tuple[str, float] | None:
        """The bare floor of the backend the embedder ran (name, chunks/s): what the pipeline's losses are
        counted against."""
        backend = (self.full.embedder_details.get("backend") if self.full else None) or "onnx"
        if backend == "onnx" and self.onnx_rate:
            return "ONNX", self.onnx_rate
        if self.bare and self.bare.chunks_per_s:
            return "torch", self.bare.chunks_per_s
        return None


def _targets(r: Results) -> list[str]:
    lines = ["| target | measured | verdict |", "|---|---|:---:|"]
    if r.ratio is not None and r.full and r.bare:
        lines.append(
            f"| pipeline chunks/s with embeddings ≥ {TORCH_RATIO_TARGET:.1f} x bare torch `encode()` "
            f"({TORCH_RATIO_BEFORE:.2f} with the torch embedder, 2026-11-29) | {r.ratio:.2f} "
            f"({r.full.chunks_per_s_embedded:.1f} vs {r.bare.chunks_per_s:.1f} chunks/s) | "
            f"{_verdict(r.ratio >= TORCH_RATIO_TARGET)} |"
        )
    else:
        lines.append(f"| pipeline ≥ {TORCH_RATIO_TARGET:.1f} x bare torch encode | not measured | — |")
    if r.onnx_ratio is not None and r.full:
        lines.append(
            f"| pipeline chunks/s with embeddings ≥ {RATIO_TARGET:.2f} x bare ONNX encode (the embedder's code, "
            f"the faster of its two ways; peer docsonar: {PEER_RATIO:.2f} of its own bare encode) | {r.onnx_ratio:.2f} "
            f"({r.full.chunks_per_s_embedded:.1f} vs {r.onnx_rate:.1f} chunks/s) | "
            f"{_verdict(r.onnx_ratio >= RATIO_TARGET)} |"
        )
    else:
        lines.append(f"| pipeline ≥ {RATIO_TARGET:.2f} x bare ONNX encode | not measured | — |")
    if r.full and r.full.embedded_s:
        whole = r.full.embedded_s
        lines.append(
            f"| the whole SciFact folder, `folders add` to fully embedded ≤ {WHOLE_FOLDER_TARGET_S:g} s (docsonar "
            f"{PEER_WHOLE_FOLDER_S:g} s here) | {whole:.1f} s for {r.files:,} files | "
            + (f"{_verdict(whole <= WHOLE_FOLDER_TARGET_S)} |" if not r.limited else "— (a subset) |")
        )
    if r.full and r.full.tree.tree:
        t = r.full.tree
        top = t.biggest()
        lines.append(
            f"| peak RSS of the whole process tree while indexing ≤ {TREE_RSS_TARGET / 1e9:.1f} GB | "
            f"{t.tree / 1e9:.2f} GB ({_mib(t.tree)})"
            + (f"; biggest process {top[0]} {_mib(top[1])}" if top else "")
            + f" | {_verdict(t.tree <= TREE_RSS_TARGET)} |"
        )
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
    from foldermind.workers.indexer.storage.vectors import EXPANSION_SEARCH

    served = [x for x in r.recall if x.expansion == EXPANSION_SEARCH and x.walked]
    if served:
        worst = min(served, key=lambda x: x.recall)
        lines.append(
            f"| usearch recall@{RECALL_K} loss < {RECALL_LOSS_TARGET:.0%} at expansion_search {EXPANSION_SEARCH} (the"
            f" indexer's) | worst {worst.recall:.4f} ({worst.queries}, {worst.index}) | "
            f"{_verdict(1 - worst.recall < RECALL_LOSS_TARGET)} |"
        )
    else:
        lines.append(
            f"| usearch recall@{RECALL_K} loss < 1% at expansion_search {EXPANSION_SEARCH} | not measured | — |"
        )
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
        f"`EmbedWindow.LOOKAHEAD` {run.lookahead} |"
    )
    if run.embedder_details:
        d = run.embedder_details
        onnx_file = f", `{Path(str(d['onnx_file'])).name}`" if d.get("backend") == "onnx" and d.get("onnx_file") else ""
        lines.append(
            f"| embedder | {d.get('model')}, backend {d.get('backend')}{onnx_file}, precision {d.get('precision')}, "
            f"{d.get('threads')} threads, encode batch {d.get('batch_size')}, {d.get('texts_embedded') or 0:,} texts "
            f"embedded; torch imported: {'yes' if d.get('torch_loaded') else 'no'} |"
        )
    if run.embedder_note:
        lines.append(f"| embedder's status note | {run.embedder_note} |")
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
    if run.tree.tree or run.tree.listed:
        top = run.tree.biggest()
        lines.append(
            f"| **whole tree** (the kernel's `tree_rss_bytes`: it and every process under it, largest sample) | "
            f"**{_mib(run.tree.tree)}** | | |"
        )
        lines.append(
            f"| the processes above summed at one sample (largest sum) | {_mib(run.tree.listed)}"
            + (f" (biggest then: {top[0]} {_mib(top[1])})" if top else "")
            + " | | |"
        )
    return lines


def _notes(r: Results) -> list[str]:
    notes: list[str] = []
    full, bare, floor = r.full, r.bare, r.floor
    spreads: list[str] = []
    worst = 0.0
    for backend in dict.fromkeys(name for _, rates in r.probes for name in rates):
        seen = [rates[backend] for _, rates in r.probes if backend in rates]
        if len(seen) > 1:
            worst = max(worst, max(seen) / min(seen) - 1)
            spreads.append(
                f"{backend} {min(seen):.1f} to {max(seen):.1f} texts/s ({max(seen) / min(seen) - 1:.0%} apart)"
            )
    if spreads:
        notes.append(
            f"- **Machine speed**: the reference encode ran at {'; '.join(spreads)} over the run (table in "
            "section 2). "
            + (
                "The ratios are only as good as that: pipeline and bare floors cannot run at the same moment."
                if worst > 0.05
                else "Steady enough for the ratios to mean what they say."
            )
        )
    if floor is not None and full and bare and full.embedded_s:
        name, rate = floor
        floor_cpu = r.onnx_best.cpu_s if name == "ONNX" and r.onnx_best else bare.cpu_s
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
                f" The bare {name} encode used {floor_cpu:.0f} CPU-s for the same chunks, so the embedder spent "
                f"{emb_cpu / floor_cpu - 1:+.0%} CPU on them."
                if floor_cpu
                else ""
            )
        )
        ideal = full.chunks / rate
        if full.keyword_s and full.embedded_s > full.keyword_s:
            during = full.embedded_at_keyword / full.keyword_s
            after_chunks = full.chunks - full.embedded_at_keyword
            after_s = full.embedded_s - full.keyword_s
            lost_during = full.keyword_s - full.embedded_at_keyword / rate
            lost_after = after_s - after_chunks / rate
            head = (
                f"Where the {wall - ideal:.0f} s over the bare {name} time ({ideal:.0f} s) go"
                if wall >= ideal
                else f"The pipeline took {ideal - wall:.0f} s less than the bare {name} time ({ideal:.0f} s): the "
                "machine was not as fast during the bare encode as during run 1 (the speed probes above), so read "
                "the parts as rates"
            )
            notes.append(
                f"- **{head}**: "
                f"{lost_during:.0f} s while the parsers ran (the first {full.keyword_s:.0f} s, embedding at "
                f"{during:.1f} chunks/s = {during / rate:.2f} x bare), {lost_after:.0f} s afterwards "
                f"({after_chunks / after_s:.1f} chunks/s = {after_chunks / after_s / rate:.2f} x bare, "
                "the embedder alone with the indexer)."
            )
        if bare.tokens and bare.padding:
            pool = full.policy.embed_batch * full.lookahead
            whole = bare.padding[-1][1]
            whole_onnx = bare.padding[-1][2]
            mine_onnx = next((n for label, _, n in bare.padding if label.endswith("(the indexer)")), None)
            mine = next((n for label, n, _ in bare.padding if label.endswith("(the indexer)")), None)
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
                    + (
                        f" In the ONNX embedder's batches of {bare.onnx_batch}: {whole_onnx:,} "
                        f"({whole_onnx / bare.tokens - 1:+.1%}) in one call, {mine_onnx:,} "
                        f"({mine_onnx / bare.tokens - 1:+.1%}) in the indexer's pools."
                        if bare.onnx_batch and mine_onnx is not None
                        else ""
                    )
                )
        if len(bare.check) > 1:
            one = bare.check[0][1]
            notes.append(
                f"- **Batching in-process** ({bare.check_backend}, the first {bare.check_chunks:,} chunks, no bus, "
                f"no SQLite, no parsers, {bare.check_rounds} rounds in turns): "
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


def _bare_section(r: Results) -> list[str]:
    b, o, p = r.bare, r.onnx, r.onnx_one_pass
    if not b and not o:
        return []
    streams = f"{o.streams} at once on {o.threads} intra-op thread{'s' if o.threads > 1 else ''} each" if o else ""
    out = [
        "## 2. Bare floors: torch and ONNX in-process",
        "",
        "After run 1's kernel stopped (nothing else of ours running): the exact chunk texts run 1 stored "
        f"(`chunks.text`), encoded in this process, load excluded. **torch**: `encode(texts, batch_size={BARE_BATCH}, "
        "normalize_embeddings=True)` under `torch.inference_mode()` (the embedder before ONNX; the reference the "
        "targets were set against). **ONNX**: the embedder's own code, `OnnxEncoder.encode_longest_first(texts, "
        "batch, streams)` on the encoder `onnx_int8.open_precision` opens from the machine's shared model cache (the "
        "file, precision, streams and batch size the embedder reported), in one call: every text tokenized, sorted by "
        f"token count longest first, batches padded to their longest, {streams}. **ONNX, one pass**: the same, one "
        f"batch of {ONE_PASS_BATCH} at a time on a session with as many intra-op threads as the embedder has streams "
        "(the embedder before 2026-12-05). The pipeline's ONNX ratio is taken against the faster of the two.",
        "",
        "|  | torch | ONNX | ONNX, one pass |",
        "|---|---:|---:|---:|",
    ]

    def row(label: str, torch_cell: str, onnx_cell: str, one_pass_cell: str) -> None:
        cells = (torch_cell if b else "-", onnx_cell if o else "-", one_pass_cell if p else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")

    def each(cell: Callable[[OnnxBare], str]) -> tuple[str, str]:
        return (cell(o) if o else "", cell(p) if p else "")

    row("chunks", f"{b.chunks:,}" if b else "", *each(lambda x: f"{x.chunks:,}"))
    row("texts encoded (the chunks' units)", f"{b.texts:,}" if b else "", *each(lambda x: f"{x.texts:,}"))
    row("model file", "the model directory", *each(lambda x: f"`{Path(x.file).name}` ({x.precision})"))
    row("streams x intra-op threads", f"1 x {b.threads}" if b else "", *each(lambda x: f"{x.streams} x {x.threads}"))
    row("batch", str(BARE_BATCH), *each(lambda x: str(x.batch)))
    row("load (not counted)", f"{b.load_s:.1f} s" if b else "", *each(lambda x: f"{x.load_s:.1f} s"))
    row(
        "encode",
        f"{b.encode_s:.1f} s: **{b.chunks_per_s:.1f} chunks/s**" if b else "",
        *each(lambda x: f"{x.encode_s:.1f} s: **{x.chunks_per_s:.1f} chunks/s**"),
    )
    best = r.onnx_best
    row(
        "pipeline ÷ bare",
        f"**{r.ratio:.2f}** (target ≥ {TORCH_RATIO_TARGET:.1f})" if r.ratio is not None else "-",
        *each(
            lambda x: (
                (f"**{r.onnx_ratio:.2f}** (target ≥ {RATIO_TARGET:.2f})" if x is best else "(the slower)")
                if r.onnx_ratio is not None
                else "-"
            )
        ),
    )

    def cos(mean: float | None, least: float | None) -> str:
        return "-" if mean is None or least is None else f"mean {mean:.6f}, min {least:.6f}"

    row(
        "cosine with the pipeline's `chunks.vector`",
        cos(b.vs_pipeline_mean_cos, b.vs_pipeline_min_cos) if b else "",
        *each(lambda x: cos(x.vs_pipeline_mean_cos, x.vs_pipeline_min_cos)),
    )
    row("cosine with the bare torch vectors", "1", *each(lambda x: cos(x.vs_torch_mean_cos, x.vs_torch_min_cos)))
    row(
        "CPU of the encode",
        f"{b.cpu_s:.0f} s ({b.cpu_s / b.encode_s:.2f} cores)" if b and b.encode_s else "-",
        *each(lambda x: f"{x.cpu_s:.0f} s ({x.cpu_s / x.encode_s:.2f} cores)" if x.encode_s else "-"),
    )
    row(
        "other load on the machine meanwhile (cores busy elsewhere / stolen)",
        f"{b.other_cores:.2f} / {b.steal_cores:.2f}" if b else "",
        *each(lambda x: f"{x.other_cores:.2f} / {x.steal_cores:.2f}"),
    )
    out.append("")
    if b and b.padding and b.tokens:
        whole, whole_onnx = b.padding[-1][1], b.padding[-1][2]
        out += [
            f"Padding: token positions the model runs when the {b.texts:,} texts ({b.tokens:,} tokens) are taken N "
            "at a time in chunk-id order, each pool sorted by character length and cut into batches (as `encode()` "
            "sorts one call; the indexer sorts `embed_batch` x `EMBED_LOOKAHEAD`, then the ONNX embedder sorts each "
            f"request by token count), in torch's batches of {BARE_BATCH} and the ONNX embedder's of {b.onnx_batch}:",
            "",
            f"| pools of N | positions, batches of {BARE_BATCH} | padding | vs one call | positions, batches of "
            f"{b.onnx_batch} | padding | vs one call |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *(
                f"| {name} | {n:,} | {n / b.tokens - 1:+.1%} | {n / whole - 1:+.1%} | {m:,} | {m / b.tokens - 1:+.1%} "
                f"| {m / whole_onnx - 1:+.1%} |"
                for name, n, m in b.padding
            ),
            "",
        ]
    if b and b.check:
        out += [
            f"Batching, in-process ({b.check_backend}): the first {b.check_chunks:,} chunks encoded in these ways, "
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
        backends = list(dict.fromkeys(name for _, rates in r.probes for name in rates))
        out += [
            "Machine speed: the first 96 abstracts encoded in-process (one call each), at these moments:",
            "",
            "| when | " + " | ".join(f"{name} texts/s" for name in backends) + " |",
            "|---|" + "---:|" * len(backends),
            *(
                f"| {label} | " + " | ".join(f"{rates[n]:.1f}" if n in rates else "-" for n in backends) + " |"
                for label, rates in r.probes
            ),
            "",
        ]
    return out


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
    out += _bare_section(r)
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
        from foldermind.workers.indexer.storage.vectors import DRAFT_EXPANSION_ADD, EXPANSION_ADD

        out += [
            f"## 6. usearch recall@{RECALL_K}",
            "",
            f"Run 1's vectors (`chunks.vector`: a vector per sentence unit, each under its chunk's id), the chunks of"
            f" the top-{RECALL_K} units of a usearch index (cosine, f16, multi) against the chunks of the exact top"
            " units (numpy dot products of the normalised vectors). The indexer searches exactly up to `[search]"
            " exact_search_vectors`, and builds the graph meanwhile as a draft (`expansion_add`"
            f" {DRAFT_EXPANSION_ADD}, `workers/indexer/storage/vectors.py`); once a draft outgrows the limit it is"
            f" rebuilt full (`expansion_add` {EXPANSION_ADD}, the first row), and only a full graph is walked. The"
            " target reads the rows of graphs that searches walk.",
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
    from foldermind.workers.embedding import onnx_model

    onnx_model.init_cxx_locale()  # before anything loads usearch: onnxruntime shares this process
    full = Kernel("full pipeline")
    from foldermind.workers.embedder import ONNX_INTRA_OP

    threads, onnx_batch = embedder_settings()
    progress(f"loading the model in this process (torch and ONNX, {threads} threads) for the bare floors and probes")
    model, load_s = load_model(threads)
    loaded, onnx_load_s = load_onnx(full.policy, ONNX_INTRA_OP)
    probe = SpeedProbe(
        {
            "torch": functools.partial(encode, model),
            "ONNX": functools.partial(loaded.encoder.encode_longest_first, batch_size=onnx_batch, streams=threads),
        },
        probe_texts(),
    )
    probe.measure("warm-up")
    probe.rows.clear()
    results.probes = probe.rows
    progress(f"  speed probe: {probe.measure('before run 1')}")
    lookahead = embed_lookahead()
    try:
        with step(results, "run 1 (full pipeline)"):
            progress("1/6 full pipeline with embeddings: starting a kernel")
            full.start()
            progress(f"  home {full.root}")
            results.full = index_folder(full, corpus, files, embed=True)
            d = results.full.embedder_details
            progress(f"  embedder: {results.full.embedder_note or d.get('backend')}")
        full.stop()
        if results.full and results.full.embedded_s:
            d = results.full.embedder_details
            ran_threads, ran_batch = int(d.get("threads") or threads), int(d.get("batch_size") or onnx_batch)
            intra_op = int(d.get("intra_op_threads") or ONNX_INTRA_OP)
            if d.get("backend") == "onnx":
                if intra_op != ONNX_INTRA_OP or (d.get("onnx_file") and str(loaded.path) != str(d["onnx_file"])):
                    progress(f"  reopening the ONNX encoder as the embedder ran it ({intra_op} intra-op threads)")
                    loaded, onnx_load_s = load_onnx(full.policy, intra_op)
                onnx_batch = ran_batch
            threads = ran_threads
            probe.encoders["ONNX"] = functools.partial(
                loaded.encoder.encode_longest_first, batch_size=onnx_batch, streams=threads
            )
            with step(results, "run 2 (bare encodes)"):
                progress("2/6 bare encodes of the same chunk texts (torch, then ONNX), no kernel running")
                set_threads(threads)
                progress(f"  speed probe: {probe.measure('after run 1, before the bare encodes')}")
                pool = full.policy.embed_batch * lookahead
                bare = bare_floor(model, load_s, full.db_path, threads, pool, onnx_batch)
                results.bare = bare
                progress(f"  torch: {bare.chunks} chunks in {bare.encode_s:.1f} s: {bare.chunks_per_s:.1f} chunks/s")
                progress(f"  speed probe: {probe.measure('after the torch encode, before the ONNX one')}")
                precision = onnx_model.precision_label(full.policy.embed_quantize)
                onnx = OnnxBare(str(loaded.path), precision, intra_op, onnx_batch, onnx_load_s, streams=threads)
                onnx_floor(onnx, loaded.encoder, full.db_path, bare.vectors)
                results.onnx = onnx
                progress(f"  ONNX: {onnx.chunks} chunks in {onnx.encode_s:.1f} s: {onnx.chunks_per_s:.1f} chunks/s")
                progress(f"  speed probe: {probe.measure('after the ONNX encode, before the one-pass one')}")
                one_pass, one_pass_load_s = load_onnx(full.policy, threads)
                slow = OnnxBare(str(one_pass.path), precision, threads, ONE_PASS_BATCH, one_pass_load_s)
                onnx_floor(slow, one_pass.encoder, full.db_path, bare.vectors)
                results.onnx_one_pass = slow
                del one_pass
                progress(f"  ONNX, one pass: {slow.chunks} chunks in {slow.encode_s:.1f} s: {slow.chunks_per_s:.1f}/s")
                progress(f"  speed probe: {probe.measure('after the ONNX encodes')}")
                if results.ratio is not None:
                    progress(f"  pipeline / bare torch = {results.ratio:.2f}")
                if results.onnx_ratio is not None:
                    progress(f"  pipeline / bare ONNX = {results.onnx_ratio:.2f}")
                ran_onnx = d.get("backend") == "onnx"
                own_ratio = results.onnx_ratio if ran_onnx else results.ratio
                if own_ratio is not None and own_ratio < RATIO_TARGET:
                    progress("  below target: timing the indexer's batching in-process")
                    _, texts, _ = chunk_rows(full.db_path)
                    check_with: Callable[[list[str]], object] = (
                        functools.partial(loaded.encoder.encode_longest_first, batch_size=onnx_batch, streams=threads)
                        if ran_onnx
                        else functools.partial(encode, model)
                    )
                    batching_check(
                        check_with, "ONNX" if ran_onnx else "torch", texts, full.policy.embed_batch, lookahead, bare
                    )
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
    del model, probe, loaded

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
    results.machine["load average after the run"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    text = render(results)
    print(text)
    if not args.no_write:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        # The sections it does not write (other benches', and measured by hand) stay where they were.
        REPORT.write_text(merged(REPORT, text), encoding="utf-8")
        say(f"wrote {REPORT.relative_to(REPO)}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
