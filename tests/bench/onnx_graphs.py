"""Dense SciFact retrieval and encode rate of ONNX files side by side (docs/benchmarks/onnx.md, section 7).

``python -m tests.bench.onnx_graphs NAME=FILE [NAME=FILE ...] [--batch B]``: every file encodes all 5,183
abstracts (title and text, cut at the model's 256 tokens) the embedder's way (longest first, batches of B, 2
intra-op threads) and the 150 judged queries one at a time; nDCG@10 by exact cosine, the rate, and each file's
cosine to the first one's vectors. The files need the bundled model's tokenizer (any export of it, fp32 or int8,
of any export format); the preprocessing is read from the first file's check record, else the machine's export.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from foldermind.protocol.runtime.home import model_cache_dir
from foldermind.workers.embedding import model_files, onnx_model
from tests.bench.retrieval import ndcg
from tests.bench.scifact import judged_queries, scifact_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="NAME=PATH of an .onnx file")
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    root = scifact_dir()
    model_dir = model_files.model_dir(None)
    records = [onnx_model.check_file(Path(spec.partition("=")[2])) for spec in args.files]
    records.append(
        onnx_model.check_file(
            onnx_model.cache_file(
                model_cache_dir(""), model_files.model_name(model_dir), onnx_model.model_digest(model_dir)
            )
        )
    )
    prep = onnx_model.Check.from_file(next(r for r in records if r.is_file())).preprocessing
    docs = [json.loads(line) for line in (root / "corpus.jsonl").open()]
    ids, texts = [d["_id"] for d in docs], [f"{d['title']}\n\n{d['text']}" for d in docs]
    judged = judged_queries()
    first: np.ndarray | None = None
    for spec in args.files:
        name, _, path = spec.partition("=")
        encoder = onnx_model.OnnxEncoder(Path(path), model_dir, prep, 2)
        started = time.perf_counter()
        vectors = encoder.encode_longest_first(texts, args.batch)
        rate = len(texts) / (time.perf_counter() - started)
        asked = np.concatenate([encoder.encode([q.text]) for q in judged])
        scores = asked @ vectors.T
        ndcgs = [ndcg([ids[j] for j in np.argsort(-scores[i])[:10]], q.relevant) for i, q in enumerate(judged)]
        first = vectors if first is None else first
        cosine = np.sum(vectors * first, axis=1)
        print(
            f"{name:14s} nDCG@10 {np.mean(ndcgs):.4f} ({len(judged)} queries)  {rate:6.1f} abstracts/s"
            f"  cosine to the first: mean {cosine.mean():.6f}, least {cosine.min():.6f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
