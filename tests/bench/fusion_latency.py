"""Hybrid search's latency over the bus with each fusion, read against keyword and semantic search in one run.

``python -m tests.bench.fusion_latency --home DIR [--rounds N]`` from the repository root, on the SciFact home
:mod:`tests.bench.fusion_lists` indexed (``--corpus scifact``: all 5,183 abstracts). A real kernel starts on it,
and each of the 150 judged claims goes to ``search.request`` (top_k 10) in every mode and fusion in turn, query by
query, ``--rounds`` times, so that a shared machine's load falls on all of them alike. Printed per mode: the
median and 95th percentile of the round trip and of the indexer's own ``fuse`` stage (``evidence`` adds one SQLite
row, one pass of the analyzer and a term lookup per query word there), and the load average before and after.
``--lists FILE`` (the home's dump) then checks that the indexer's ``evidence`` ranking is the offline one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.protocol.runtime.config import SearchPolicy
from foldermind.workers.indexer.search.fusion import spread
from foldermind.workers.indexer.search.fusion_evidence import EvidenceWeights, evidence
from tests.bench.fusion_eval import documents_of, share_of
from tests.bench.fusion_lists import corpus_folder
from tests.bench.kernels import Kernel, say
from tests.bench.mcpclient import kernel_config
from tests.bench.scifact import index_corpus, judged_queries
from tests.bench.stats import pct

MODES = (
    ("keyword", ""),
    ("semantic", ""),
    ("hybrid", "weighted"),
    ("hybrid", "rrf"),
    ("hybrid", "blend"),
    ("hybrid", "evidence"),
)


def _held(held: dict[int, float], chunks: Sequence[int]) -> dict[int, float]:
    return {c: held.get(c, 0.0) for c in chunks}


def check(client: BusClient, dumped: list[dict[str, Any]]) -> tuple[int, int]:
    """How many dumped queries the indexer's ``evidence`` fusion ranks (top_k 10) as
    :func:`foldermind.workers.indexer.search.fusion_evidence.evidence` and the repeat penalty do offline on their lists
    (40 a side), with the ``[search]`` parameters."""
    weights = EvidenceWeights.of(SearchPolicy())
    same = 0
    for d in dumped:
        kw, sem = d["keyword"][:40], d["semantic"][:40]
        held = {h[0]: share_of(d["terms"], h[5]) for h in kw + sem}
        pairs = [[(h[0], h[1]) for h in side] for side in (kw, sem)]
        ranked = evidence(pairs[0], pairs[1], partial(_held, held), weights)
        documents = documents_of({h[0]: h[2] for h in kw + sem})
        offline = spread(ranked, documents, SearchPolicy().evidence_repeat_penalty)[:10]
        reply = client.request("indexer", SearchRequest(d["item"]["text"], "hybrid", 10, None, "evidence"), SearchReply)
        same += [r["chunk_id"] for r in reply.body.results] == [c for c, _ in offline]
    return same, len(dumped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fusion_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--home", required=True, help="the SciFact home of tests.bench.fusion_lists")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lists", default="", help="the home's dumped lists: check the indexer fuses as offline")
    args = parser.parse_args(argv)
    home = Path(args.home).resolve()
    folder, files = corpus_folder("scifact", home)
    kernel = Kernel("fusion-latency", kernel_config(), home)
    wall: dict[str, list[float]] = {f"{m} {f}".strip(): [] for m, f in MODES}
    fuse: dict[str, list[float]] = {k: [] for k in wall}
    try:
        kernel.start()
        index_corpus(kernel, folder, files)
        load_before = os.getloadavg()
        queries = judged_queries()
        with kernel.client("bench-fusion-latency") as client:
            for q in queries[:10]:  # warm: the first searches read postings and vectors from disk
                client.request("indexer", SearchRequest(q.text, "hybrid", 10), SearchReply, timeout=60)
            for _ in range(args.rounds):
                for q in queries:
                    for mode, fusion in MODES:
                        t0 = time.perf_counter()
                        reply = client.request(
                            "indexer", SearchRequest(q.text, mode, 10, None, fusion), SearchReply, timeout=60
                        ).body
                        label = f"{mode} {fusion}".strip()
                        wall[label].append((time.perf_counter() - t0) * 1000)
                        fuse[label].append(float((reply.timings or {}).get("fuse", 0.0)))
            load_after = os.getloadavg()
            if args.lists:
                same, n = check(client, json.loads(Path(args.lists).read_text("utf-8")))
                print(f"the indexer's evidence top 10 equals the offline fusion's for {same} of {n} queries")
    finally:
        kernel.stop()
        kernel.cleanup()
    print(f"load average before {load_before}, after {load_after}; {len(wall['keyword'])} searches per mode")
    print("| mode | round trip median ms | p95 ms | fuse stage median ms | p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for label in wall:
        w, f = wall[label], fuse[label]
        print(f"| {label} | {pct(w, 0.5):.2f} | {pct(w, 0.95):.2f} | {pct(f, 0.5):.3f} | {pct(f, 0.95):.3f} |")
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
