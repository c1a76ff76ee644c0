"""The embedder's encode, ONNX Runtime against torch, on real SciFact chunks; and what a worker start costs.

``python -m tests.bench.onnx_embed [--docs N] [--rounds R] [--no-write]`` from the repository root.

1. The first ``--docs`` SciFact abstracts (``../shared/eval/scifact/`` or ``$FOLDERMIND_SCIFACT``) are cut
   into chunks by the parsers' own chunker (256 tokens, 32 of overlap), as the pipeline stores them.
2. torch (``SentenceTransformer.encode``, batch 32, the embedder's former setting) and ONNX Runtime (the
   embedder's path: :meth:`OnnxEncoder.encode_longest_first`) encode them at several batch sizes and
   intra-op thread counts, in ``--rounds`` interleaved rounds (the machine is shared: the best round of
   each is reported, and the order alternates so neither side always runs second).
3. Every ONNX vector is compared with torch's: the least cosine over all chunks and settings.

The report goes to ``docs/benchmarks/onnx.md``. The worker-start figures in that file's second section come
from ``python -m tests.bench.onnx_embed --starts``, which starts real kernels (see :func:`start_costs`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tests.bench import machine
from tests.bench.scifact import _lines, scifact_dir
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks" / "onnx.md"
BATCHES = (8, 16, 32)
THREADS = (1, 2)
TORCH_BATCH = 32


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def scifact_chunks(docs: int) -> list[str]:
    """The chunk texts the pipeline would store for the first ``docs`` abstracts."""
    from foldermind.workers.parser.chunker import chunk, load_tokenizer
    from foldermind.workers.parser.formats.document import Segment

    tokenizer = load_tokenizer()
    texts: list[str] = []
    for n, doc in enumerate(_lines("corpus.jsonl")):
        if n >= docs:
            break
        segments = [Segment(text=doc.get("title") or ""), Segment(text=doc.get("text") or "")]
        texts.extend(c["text"] for c in chunk([s for s in segments if s.text], tokenizer, 256, 32))
    return texts


@dataclass
class Timing:
    label: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def best(self) -> float:
        return min(self.seconds)


def run(docs: int, rounds: int) -> dict[str, Any]:
    import torch
    from sentence_transformers import SentenceTransformer

    from foldermind.workers.embedding import model_files, onnx_export

    texts = scifact_chunks(docs)
    say(f"{len(texts)} chunks from {docs} SciFact abstracts")
    path = model_files.model_dir()
    model = SentenceTransformer(str(path), device="cpu")
    model.eval()
    cache = Path(tempfile.mkdtemp(prefix="fm-onnx-bench-"))
    encoders = {t: onnx_export.open_checked(path, "all-MiniLM-L6-v2", cache, t).encoder for t in THREADS}

    def torch_encode(threads: int) -> NDArray[np.float32]:
        torch.set_num_threads(threads)
        with torch.inference_mode():
            out = model.encode(texts, batch_size=TORCH_BATCH, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    timings: dict[tuple[str, int, int], Timing] = {}
    reference = torch_encode(2)
    least = 1.0
    for r in range(rounds):
        plan: list[tuple[str, int, int]] = [("torch", t, TORCH_BATCH) for t in THREADS]
        plan += [("onnx", t, b) for t in THREADS for b in BATCHES]
        for key in plan if r % 2 == 0 else reversed(plan):
            backend, threads, batch = key
            started, cpu = time.perf_counter(), time.process_time()
            got = torch_encode(threads) if backend == "torch" else encoders[threads].encode_longest_first(texts, batch)
            elapsed = time.perf_counter() - started
            timing = timings.setdefault(key, Timing(f"{backend} {threads}t b{batch}"))
            timing.seconds.append(elapsed)
            timing.cpu.append(time.process_time() - cpu)
            least = min(least, float(np.min(np.sum(got * reference, axis=1))))
            say(f"round {r + 1}: {backend} threads {threads} batch {batch}: {len(texts) / elapsed:.1f} chunks/s")
    return {
        "chunks": len(texts),
        "docs": docs,
        "rounds": rounds,
        "least_cosine": least,
        "rates": {f"{b}|{t}|{n}": len(texts) / v.best() for (b, t, n), v in timings.items()},
        "cpu_per_chunk_ms": {f"{b}|{t}|{n}": 1000 * min(v.cpu) / len(texts) for (b, t, n), v in timings.items()},
    }


def start_costs(repo: Path, label: str) -> dict[str, Any]:
    """CPU seconds and RSS of the embedder and the indexer from spawn until both models are ready, on a
    kernel whose model cache already holds the checked export (a second start): what every test kernel
    and every user's later start pays. Runs with the code of ``repo`` (its tests.helpers)."""
    import psutil

    from foldermind.protocol.messages import DescribeReply, DescribeRequest
    from tests.helpers import FAST_RESTART, RunningKernel, remove_tree, short_tmpdir, wait_for

    def settled(k: RunningKernel) -> dict[str, Any] | None:
        client = k.client()
        emb = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
        idx = client.request("indexer", DescribeRequest(), DescribeReply, timeout=10).body.details
        query = idx["query_encoder"]
        if emb["state"] == "loading" or query["state"] == "loading" or "loading" in (query["backend_note"] or ""):
            return None
        return {"embedder": emb, "indexer": query}

    out: dict[str, Any] = {"label": label}
    for attempt in range(2):  # the first start may export; the second is the one reported
        root = short_tmpdir()
        k = RunningKernel(root, FAST_RESTART)
        try:
            k.start()
            details = wait_for(lambda k=k: settled(k), 300, 0.2, "both models ready")
            for name in ("embedder", "indexer"):
                proc = psutil.Process(k.worker(name)["pid"])
                times = proc.cpu_times()
                out[name] = {
                    "cpu_s": round(times.user + times.system + times.children_user + times.children_system, 2),
                    "rss_mib": round(proc.memory_info().rss / 1048576),
                    "backend": details[name].get("backend"),
                    "torch_loaded": details[name].get("torch_loaded"),
                }
            out["attempt"] = attempt + 1
        finally:
            k.stop()
            remove_tree(root)
    return out


def render(result: dict[str, Any], facts: dict[str, str], starts: list[dict[str, Any]]) -> str:
    lines = ["# The embedder's encode: ONNX Runtime against torch", "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in facts.items()]
    lines += [
        "",
        f"## 1. Encode rate on {result['chunks']} SciFact chunks ({result['docs']} abstracts)",
        "",
        "Chunks per second, the best of "
        f"{result['rounds']} interleaved rounds (the machine was shared). torch is `SentenceTransformer.encode`"
        f" (batch {TORCH_BATCH}, its own longest-first sort); ONNX is the embedder's path (`tokenizers`, texts"
        " sorted longest first by token count, each batch padded to its longest).",
        "",
        "| backend | threads | batch | chunks/s | vs torch, same threads | CPU ms per chunk |",
        "|---|---|---|---|---|---|",
    ]
    rates, cpu = result["rates"], result["cpu_per_chunk_ms"]
    for key, rate in sorted(rates.items(), key=lambda kv: (kv[0].split("|")[0], kv[0])):
        backend, threads, batch = key.split("|")
        base = rates.get(f"torch|{threads}|{TORCH_BATCH}")
        ratio = f"{rate / base:.2f}x" if base else "-"
        lines.append(f"| {backend} | {threads} | {batch} | {rate:.1f} | {ratio} | {cpu[key]:.1f} |")
    lines += ["", f"Least cosine, ONNX against torch, over every chunk and setting: {result['least_cosine']:.6f}.", ""]
    if starts:
        lines += [
            "## 2. What a worker start costs (a kernel whose model cache holds the checked export)",
            "",
            "CPU seconds (user + system, children included) and RSS of each worker from spawn until its model is"
            " ready, read with psutil on a real kernel (default process map).",
            "",
            "| code | worker | backend | torch imported | CPU s | RSS MiB |",
            "|---|---|---|---|---|---|",
        ]
        for s in starts:
            for name in ("embedder", "indexer"):
                w = s[name]
                lines.append(
                    f"| {s['label']} | {name} | {w['backend'] or 'torch'} | {w['torch_loaded']} | {w['cpu_s']}"
                    f" | {w['rss_mib']} |"
                )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.onnx_embed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=160, help="SciFact abstracts to chunk (default 160)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--starts", default="", help="JSON files of start_costs() results to add to the report")
    parser.add_argument("--measure-start", default="", help="measure start costs with this label, print JSON")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.measure_start:
        print(json.dumps(start_costs(REPO, args.measure_start)))
        return 0
    say(f"SciFact at {scifact_dir()}")
    facts = machine.facts(REPO)
    machine.versions(facts, "torch", "onnxruntime", "tokenizers", "sentence-transformers")
    result = run(args.docs, args.rounds)
    starts = [json.loads(Path(p).read_text()) for p in args.starts.split(",") if p]
    report = render(result, facts, starts)
    print(report)
    if not args.no_write:
        REPORT.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
