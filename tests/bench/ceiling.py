"""The single-box ceiling: how far one machine carries the index, at ~100k, ~300k and ~1M chunks.

``python -m tests.bench.ceiling [--home DIR] [--sizes 0,100000,300000,1000000] [--rounds 2] [--no-write]``
from the repository root (``make bench-ceiling``). One kept home grows step by step (the index is added to,
never rebuilt; ~11 GB of disk at 1M chunks):

0. SciFact as files, indexed and embedded by a real kernel with the real model (:mod:`tests.bench.scifact`;
   skipped when the home has it): the quality subset, whose judged queries give nDCG@10 at every size;
1. for each size, synthetic documents (:mod:`tests.bench.synthetic`: SciFact sentences recombined, random
   vectors) are written into the same index through the indexer's own storage code until the index holds
   that many chunks in all (``0``: measure the SciFact index alone), timing each part (text, SQLite,
   Tantivy, usearch);
2. then a real kernel (indexer, embedder and front door; no watcher, no parser, no llm) starts on the home:
   its time to every worker RUNNING and to a loaded query model, the first search, ``index_status`` (every
   chunk embedded, nothing to embed again), then every judged SciFact query in every mode through the real
   ``mcp`` SDK client over HTTP (``search_documents``, top_k 20, the query-vector cache off), ``--rounds``
   times: median and p95 per mode, nDCG@10 per mode (the first round), the indexer's stage times (the same
   hybrid searches over the bus), the disk by store and each process's RSS (now, and its peak). The kernel
   is stopped before the index grows again.

Each step's figures are kept in ``DIR/ceiling.json``, so a run cut short (or one size at a time) resumes
where it stopped and the report always shows every size measured; SIGTERM ends a growth at its next batch with
the index consistent (Tantivy committed, the usearch file saved), so the next run goes on without redoing
inserts. The report (:mod:`.ceiling_report`) is
written to ``docs/benchmarks/ceiling.md`` with its plot ``docs/benchmarks/ceiling.svg``, and its Summary
into ``docs/benchmarks/README.md`` under "Single-box ceiling" (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import IndexStatusReply, IndexStatusRequest, SearchReply, SearchRequest
from foldermind.protocol.runtime.config import PROCESS_MAP
from tests.bench import ceiling_report, machine
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.manuals import CACHE_ENV, cache_dir
from tests.bench.mcpclient import MODES, BlockingClient, front_door, kernel_config
from tests.bench.retrieval import best_rank_docs, ndcg
from tests.bench.scifact import SCIFACT_DOCS, doc_id_of, indexed_kernel, judged_queries, scifact_dir, wait_query_model
from tests.bench.stats import Series
from tests.bench.synthetic import Synthetic, corpus_bytes, disk, tantivy_segments
from tests.bench.transports import REPO
from tests.config import Config, merge

STATE = "ceiling.json"
TOP_K = 20  # two chunks a document for the ten nDCG@10 counts (most abstracts are one or two chunks)
WARMUP = 10
SERVING = ("indexer", "embedder", "frontdoor")
STOP = threading.Event()
"""Set by SIGTERM: the growth ends at the next batch with the index consistent, and no further step starts."""
START_TIMEOUT_S = 1800.0  # loading a 1M-vector usearch file and checking it against SQLite takes a while


def serving_config() -> Config:
    """The search benches' override (front door on port 0, rate limit raised, cache off, no background
    analysis) with only the workers that serve a search: nothing parses, watches or chats."""
    off = {name: {"enabled": False} for name in PROCESS_MAP if name not in SERVING}
    return merge(kernel_config(), {"workers": off})


# --------------------------------------------------------------------------------------------
# state kept in the home


def load_state(root: Path) -> dict[str, Any]:
    path = root / STATE
    return json.loads(path.read_text()) if path.exists() else {"steps": []}


def save_state(root: Path, state: dict[str, Any]) -> None:
    tmp = root / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, root / STATE)


def put_step(state: dict[str, Any], step: dict[str, Any]) -> None:
    state["steps"] = sorted(
        [s for s in state["steps"] if s["target"] != step["target"]] + [step], key=lambda s: s["target"]
    )


# --------------------------------------------------------------------------------------------
# 0. the real subset


def real_subset(root: Path, state: dict[str, Any]) -> None:
    """SciFact indexed by a real kernel (default map), unless the home already indexes it."""
    data = root / "data" / "index.sqlite"
    if data.exists() and "scifact" in state:
        return
    with indexed_kernel(root, SCIFACT_DOCS, kernel_config()) as (_, index):
        state["scifact"] = {
            "files": index.files,
            "chunks": index.chunks,
            "seconds": None if index.reused else index.seconds,
            "encoder": index.encoder,
        }


# --------------------------------------------------------------------------------------------
# 2. a kernel on the grown index


def _peak_rss(pid: int) -> int:
    """VmHWM: the most resident memory the process has had (Linux)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _rss(procs: dict[str, psutil.Process]) -> dict[str, dict[str, int]]:
    out = {}
    for name, proc in procs.items():
        with contextlib.suppress(psutil.Error):
            out[name] = {"rss": proc.memory_info().rss, "peak": _peak_rss(proc.pid)}
    return out


def _status(client: BusClient) -> dict[str, Any]:
    reply = client.request("indexer", IndexStatusRequest(), IndexStatusReply, timeout=120).body
    embedding = dict(reply.embedding)
    return {
        "chunks": reply.totals["chunks"],
        "chunks_embedded": reply.totals["chunks_embedded"],
        "files": reply.totals["files_indexed"],
        "embedding": {k: embedding.get(k) for k in ("model", "precision", "state", "note")},
    }


def _stages(client: BusClient, queries: list[str]) -> dict[str, float]:
    """The indexer's stage medians (ms) over hybrid searches asked over the bus."""
    stages: dict[str, Series] = {}
    for q in queries:
        reply = client.request("indexer", SearchRequest(q, "hybrid", TOP_K), SearchReply, timeout=120).body
        for name, value in reply.timings.items():
            stages.setdefault(name, Series()).add(value)
        stages.setdefault("query_ms", Series()).add(reply.query_ms)
    return {name: s.median for name, s in stages.items()}


def measure(root: Path, rounds: int) -> dict[str, Any]:
    """A kernel on the home as it is now: start, status, searches, memory; stopped again."""
    queries = judged_queries()
    out: dict[str, Any] = {"load_before": list(os.getloadavg())}
    kernel = Kernel("ceiling", serving_config(), root)
    t0 = time.monotonic()
    try:
        kernel.start(timeout=START_TIMEOUT_S)
        out["running_s"] = time.monotonic() - t0
        with kernel.client("bench-ceiling") as client:
            out["encoder"] = wait_query_model(kernel, client, timeout=START_TIMEOUT_S)
            out["query_model_s"] = time.monotonic() - t0
            url, token = front_door(root)
            latency: dict[str, Series] = {m: Series() for m in MODES}
            indexer_ms: dict[str, Series] = {m: Series() for m in MODES}
            quality: dict[str, float] = dict.fromkeys(MODES, 0.0)
            distractors: dict[str, int] = dict.fromkeys(MODES, 0)  # synthetic hits in the first round's top 10
            synthetic = str(root / "synthetic") + os.sep
            with BlockingClient(url, token) as http:
                s = time.perf_counter()
                http.search(queries[0].text, "hybrid", TOP_K)
                out["first_search_ms"] = (time.perf_counter() - s) * 1000
                out["first_search_s"] = time.monotonic() - t0
                out["status"] = _status(client)
                # The machine is shared: the rounds begin once it has quietened (at most a minute).
                out["quiet_cpu_percent"], out["quiet_wait_s"] = machine.wait_for_quiet(max_s=60)
                for q in queries[:WARMUP]:
                    for mode in MODES:
                        http.search(q.text, mode, TOP_K)
                for r in range(rounds):
                    for q in queries:
                        for mode in MODES:
                            s = time.perf_counter()
                            body = http.search(q.text, mode, TOP_K)
                            latency[mode].add((time.perf_counter() - s) * 1000)
                            indexer_ms[mode].add(float(body["query_ms"]))
                            if r == 0:
                                docs = best_rank_docs([doc_id_of(h["file_path"]) for h in body["results"]], 10)
                                quality[mode] += ndcg(docs, q.relevant)
                                top = body["results"][:10]
                                distractors[mode] += sum(h["file_path"].startswith(synthetic) for h in top)
            out["queries"] = len(queries)
            out["latency"] = {m: {"median": s.median, "p95": s.p95, "n": len(s.samples)} for m, s in latency.items()}
            out["indexer_ms"] = {m: s.median for m, s in indexer_ms.items()}
            out["ndcg10"] = {m: v / len(queries) for m, v in quality.items()}
            out["synthetic_in_top10"] = {m: v / (10 * len(queries)) for m, v in distractors.items()}
            out["stages"] = _stages(client, [q.text for q in queries])
            out["details"] = {
                k: v for k, v in kernel.describe(client, "indexer").items() if k in ("chunks_in_bm25", "vectors")
            }
            out["rss"] = _rss(kernel.processes(client))
        out["load_after"] = list(os.getloadavg())
    finally:
        kernel.stop()
    return out


# --------------------------------------------------------------------------------------------


def step(root: Path, state: dict[str, Any], target: int, rounds: int) -> dict[str, Any]:
    data = root / "data"
    folder = root / "synthetic"
    gen = Synthetic(data, folder, scifact_dir())
    try:
        real = int(state["scifact"]["chunks"])
        _, have = gen.counts()
        want = max(0, target - real)
        say(f"size {target:,}: {have:,} synthetic chunks, growing to {want:,}")
        build = gen.grow(want, say, STOP) if want > have else None
        docs, synthetic = gen.counts()
    finally:
        gen.close()
        del gen  # its usearch copy (the whole index, in RAM) goes before the kernel loads its own
    if STOP.is_set():
        raise BenchFailure(f"stopped (SIGTERM) at {synthetic:,} synthetic chunks; the home is consistent: run again")
    record: dict[str, Any] = {
        "target": target,
        "synthetic_chunks": synthetic,
        "synthetic_docs": docs,
        "build": asdict(build) if build else None,
        "disk": disk(data),
        "corpus_bytes": corpus_bytes(folder),
        "tantivy_segments": tantivy_segments(data),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": machine.facts(REPO)["foldermind"],
    }
    say(f"size {target:,}: built ({record['build'] and round(record['build']['total_s'])} s); starting a kernel")
    record.update(measure(root, rounds))
    status = record["status"]
    say(
        f"size {target:,}: {status['chunks']:,} chunks ({status['chunks_embedded']:,} embedded), hybrid"
        f" {record['latency']['hybrid']['median']:.1f} / {record['latency']['hybrid']['p95']:.1f} ms,"
        f" nDCG@10 {record['ndcg10']['hybrid']:.4f}, indexer RSS {record['rss']['indexer']['rss'] / 2**20:,.0f} MiB"
    )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--home",
        default=str(cache_dir() / "ceiling"),
        help="the kept home that grows, resumed when it exists (default: ceiling/ in the bench cache,"
        f" ${CACHE_ENV} or ~/.cache/foldermind-bench)",
    )
    parser.add_argument(
        "--sizes", default="0,100000,300000,1000000", help="chunks in all, comma-separated (0: SciFact alone)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="passes over the judged queries per mode (default 2)")
    parser.add_argument("--remeasure", action="store_true", help="measure sizes the home already has figures for")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("FOLDERMIND_SCIFACT", str(scifact_dir()))
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    root = Path(args.home).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = load_state(root)
    errors = 0
    try:
        real_subset(root, state)
        save_state(root, state)
        for target in sorted(int(s) for s in args.sizes.split(",") if s.strip()):
            done = next((s for s in state["steps"] if s["target"] == target), None)
            if STOP.is_set():
                raise BenchFailure("stopped (SIGTERM) before this size")
            if done is not None and not args.remeasure:
                say(f"size {target:,}: measured on {done['date']}, kept (--remeasure to measure again)")
                continue
            put_step(state, step(root, state, target, args.rounds))
            save_state(root, state)
    except BenchFailure as exc:
        say(f"bench failed: {exc}")
        errors = 1
    state["machine"] = machine.facts(REPO)
    state["ram_bytes"] = psutil.virtual_memory().total
    text, svg = ceiling_report.render(state, root)
    print(text)
    if not args.no_write:
        ceiling_report.write(text, svg)
        overview = ceiling_report.OVERVIEW.relative_to(REPO)
        say(f"wrote {ceiling_report.REPORT.relative_to(REPO)}, its plot, and its Summary into {overview}")
    return errors


if __name__ == "__main__":
    sys.exit(main())
