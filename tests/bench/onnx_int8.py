"""int8 against fp32: SciFact dense retrieval with the checked ONNX export of MiniLM and its int8 dynamic
quantisation (onnxruntime.quantization.quantize_dynamic, QInt8 weights), the same tokenizer and texts.

    python -m tests.bench.onnx_int8 [--threads 2]

Every SciFact abstract (title and text, cut at the model's 256 tokens) is encoded by both, then each of the
150 judged queries ranks all 5,183 by exact cosine: nDCG@10 and recall@100 per precision, the encode rate of
each in this run, and the least and median cosine between an abstract's two vectors. Nothing is tuned: one
fixed comparison, so all 150 queries count. The int8 copy is written beside this run, not into the cache.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from foldermind.workers import model_files, onnx_export, onnx_model
from tests.bench.machine import facts
from tests.bench.scifact import scifact_dir
from tests.helpers import MODEL_CACHE


def ndcg(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    sf = scifact_dir()
    docs = [json.loads(line) for line in (sf / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    ids = [d["_id"] for d in docs]
    texts = [(d.get("title", "") + " " + d["text"]).strip() for d in docs]
    lines = (sf / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    qrels: dict[str, dict[str, int]] = {}
    with open(sf / "qrels.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    qids = [q for q in qrels if q in queries]
    model_dir = model_files.model_dir()
    loaded = onnx_export.open_checked(model_dir, model_files.model_name(model_dir), MODEL_CACHE, args.threads)
    work = Path(tempfile.mkdtemp(prefix="fm-int8-"))
    int8_path = work / "minilm-int8.onnx"
    quantize_dynamic(str(loaded.path), str(int8_path), weight_type=QuantType.QInt8)
    int8 = onnx_model.OnnxEncoder(int8_path, model_dir, loaded.encoder.prep, args.threads)
    machine = facts(Path(__file__).resolve().parents[2])
    rows, vectors = [], {}
    for label, encoder in (("fp32", loaded.encoder), ("int8", int8)):
        started = time.perf_counter()
        matrix = encoder.encode_longest_first(texts, 8)
        seconds = time.perf_counter() - started
        scores = encoder.encode_longest_first([queries[q] for q in qids], 8) @ matrix.T
        nd, rc = [], []
        for i, q in enumerate(qids):
            ranked = [ids[j] for j in np.argsort(-scores[i])[:100]]
            nd.append(ndcg(ranked, qrels[q]))
            rc.append(len(set(ranked) & set(qrels[q])) / len(qrels[q]))
        vectors[label] = matrix
        rows.append((label, float(np.mean(nd)), float(np.mean(rc)), len(texts) / seconds))
    cos = np.sum(vectors["fp32"] * vectors["int8"], axis=1)
    sizes = {label: path.stat().st_size / 2**20 for label, path in (("fp32", loaded.path), ("int8", int8_path))}
    print(
        f"Machine: {machine['CPU']}, {machine['cores']}; {machine['date (UTC)']} UTC; load before the run"
        f" {machine['load average before the run']}; {len(qids)} queries, {len(texts)} abstracts,"
        f" {args.threads} threads."
    )
    print("\n| precision | nDCG@10 | recall@100 | abstracts/s | file |\n|---|---:|---:|---:|---:|")
    for label, n, r, rate in rows:
        print(f"| {label} | {n:.4f} | {r:.4f} | {rate:.1f} | {sizes[label]:.0f} MiB |")
    print(
        f"\nint8 against fp32, cosine of an abstract's two vectors: least {cos.min():.4f}, median {np.median(cos):.4f}."
    )


if __name__ == "__main__":
    main()
