"""How long a file saved during the vector graph's full rebuild waits to be found: by keyword, by meaning.

On a copy of a home whose SQLite holds many vectors (SciFact-all, 54,782 unit vectors), the graph file is marked
a draft (its ``.draft`` marker): outgrown, it is rebuilt from SQLite at the indexer's first idle moment. Once
py-spy sees ``VectorIndex.rebuilt`` on a thread of the indexer, a new file is written into the folder and searched
for until found. Run it with each build's own python, in turn, on fresh copies (docs/benchmarks/ingest.md):

    PYTHONPATH=TREE TREE/.venv/bin/python tests/bench/graph_wait.py --home COPY --folder DIR --spy PY_SPY

(``--home`` is the path the index records: a copy mounted there by /work/wt/ns.sh.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest, StatusReply, StatusRequest
from foldermind.protocol.runtime.home import Home

PROBE = "zz-graph-probe.txt"
REBUILD_WAIT_S = 1500.0
TEXT = "Quarantined walruses hummed sea shanties to the lighthouse keeper every foggy evening."


def ask(home: Home, request: SearchRequest) -> set[str]:
    with BusClient(home.bus_endpoint, name="bench") as client:
        reply = client.request("indexer", request, SearchReply, timeout=60).body
    return {Path(str(h["file_path"])).name for h in reply.to_body()["results"]}


def indexer_pid(home: Home) -> int:
    with BusClient(home.bus_endpoint, name="bench") as client:
        workers = client.request("kernel", StatusRequest(), StatusReply, timeout=20).body.workers
    return next(int(w["pid"]) for w in workers if w["name"] == "indexer" and w["state"] == "RUNNING")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--folder", type=Path, required=True)
    ap.add_argument("--spy", required=True)
    args = ap.parse_args()
    home = Home.resolve(args.home)
    (home.data_dir / "vectors.usearch.draft").touch()
    cli = [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(args.home)]
    subprocess.run([*cli, "start"], check=True, capture_output=True)
    out: dict[str, float | str] = {}
    try:
        start = time.monotonic()
        while True:  # the indexer's rebuild under way (its thread's stack), then the file written
            try:
                dump = subprocess.run(
                    [args.spy, "dump", "--pid", str(indexer_pid(home))], capture_output=True, text=True
                )
            except (StopIteration, Exception):
                time.sleep(0.5)
                continue
            watched = home.log_dir / "watcher.log"  # its first scan done: a file written now is seen
            if "rebuilt (" in dump.stdout and watched.exists() and "files scanned in" in watched.read_text():
                break
            if time.monotonic() - start > 600:
                raise SystemExit("no rebuild seen in 600 s")
            time.sleep(0.3)
        written = time.monotonic()
        (args.folder / PROBE).write_text(TEXT)
        keyword = SearchRequest("walruses shanties", "keyword")
        semantic = SearchRequest("marine mammals singing songs to a lighthouse keeper", "semantic")
        searches: list[float] = []
        while "keyword_s" not in out or "semantic_s" not in out:
            if "keyword_s" not in out and PROBE in ask(home, keyword):
                out["keyword_s"] = round(time.monotonic() - written, 1)
            asked = time.monotonic()
            if "semantic_s" not in out and PROBE in ask(home, semantic):
                out["semantic_s"] = round(time.monotonic() - written, 1)
            searches.append(time.monotonic() - asked)
            if time.monotonic() - written > 900:
                raise SystemExit(f"not found in 900 s: {out}")
            time.sleep(0.2)
        out["semantic_search_median_ms"] = round(sorted(searches)[len(searches) // 2] * 1000, 1)
        log = home.log_dir / "indexer.log"
        while "graph rebuilt full" not in log.read_text(errors="replace"):
            if time.monotonic() - written > REBUILD_WAIT_S:
                out["rebuild"] = f"not done {REBUILD_WAIT_S:g} s after the file was written"
                break
            time.sleep(1)
        else:
            line = [x for x in log.read_text(errors="replace").splitlines() if "graph rebuilt full" in x][-1]
            out["rebuild"] = line.split(": graph rebuilt full, ")[-1]
    finally:
        subprocess.run([*cli, "stop"], capture_output=True)
        (args.folder / PROBE).unlink(missing_ok=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
