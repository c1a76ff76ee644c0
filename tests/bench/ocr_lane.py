"""How soon a folder's text files are indexed while its images are read with OCR: a fresh copy of a folder added to a
fresh home, each document's status read from the index's SQLite every 0.5 s until all are done (indexed, failed or
skipped) or ``--timeout`` passes. Run it for two builds in turn (docs/benchmarks/ingest.md):

    python -m tests.bench.ocr_lane --folder /work/homes/walk2-docs --work DIR [--old COMMIT] [--timeout 600]

``--old COMMIT``: that commit's code runs the kernel (``git archive``, through ``PYTHONPATH``, as
:mod:`tests.bench.paired_kernels` does); else this tree's. The map is the default one without the llm, the front
door and the console (no summaries competing with the parse, no port taken). Printed as JSON: when N of the other
files were done, when each image was, and the longest stretch in which no file was done while files were left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

from foldermind.workers.ingest_rules import read_with_ocr
from tests.bench.kernels import Kernel, say
from tests.bench.paired_kernels import old_code
from tests.helpers import MODEL_CACHE

DONE = ("indexed", "failed", "skipped")
MARKS = (25, 50, 100, 200, 300, 400)


def statuses(db: Path) -> dict[str, str]:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            return {str(p): str(s) for p, s in conn.execute("SELECT path, status FROM documents")}
    except sqlite3.Error:
        return {}


def run(folder: Path, work: Path, label: str, timeout: float) -> dict[str, object]:
    docs = work / f"docs-{label}"
    shutil.rmtree(docs, ignore_errors=True)
    shutil.copytree(folder, docs, symlinks=True)
    config = {
        "workers": {name: {"enabled": False} for name in ("llm", "frontdoor", "console")},
        "ingest": {"model_cache_dir": str(MODEL_CACHE)},
    }
    kernel = Kernel(label, config)
    done: dict[str, float] = {}
    load = os.getloadavg()[0]
    try:
        kernel.start()
        out = kernel.cli("folders", "add", str(docs))
        if out.returncode != 0:
            raise SystemExit(f"folders add: {out.stderr}")
        t0 = time.monotonic()
        seen: dict[str, str] = {}
        while time.monotonic() - t0 < timeout:
            seen = statuses(kernel.db_path)
            now = round(time.monotonic() - t0, 1)
            for path, status in seen.items():
                if status in DONE and path not in done:
                    done[path] = now
            if seen and len(done) == len(seen) and now > 30:
                break
            time.sleep(0.5)
        total = len(seen)
    finally:
        kernel.stop()
        kernel.cleanup()
        shutil.rmtree(docs, ignore_errors=True)
    images = sorted((t, Path(p).name) for p, t in done.items() if read_with_ocr(p))
    others = sorted(t for p, t in done.items() if not read_with_ocr(p))
    n_images = sum(read_with_ocr(p) for p in seen)
    times = sorted(done.values())
    gaps = [(b - a, a) for a, b in zip([0.0, *times], times, strict=False)]
    stall = max(gaps, default=(0.0, 0.0))
    return {
        "label": label,
        "load_at_start": round(load, 1),
        "files": total,
        "done": len(done),
        "others": f"{len(others)} of {total - n_images}",
        "others_done_at": {n: others[n - 1] for n in MARKS if len(others) >= n},
        "others_all_done_s": others[-1] if others else None,
        "images": f"{len(images)} of {n_images}",
        "images_done_at": [t for t, _ in images],
        "last_done_s": times[-1] if times else None,
        "longest_stall_s": [round(stall[0], 1), "from", stall[1]],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--old", default="")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.old:
            code = stack.enter_context(old_code(args.old))
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(code), os.environ.get("PYTHONPATH"))))
        label = f"old-{args.old[:7]}" if args.old else "tree"
        say(f"{label}: adding {args.folder}")
        print(json.dumps(run(args.folder, args.work, label, args.timeout)), flush=True)


if __name__ == "__main__":
    main()
