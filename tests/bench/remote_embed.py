"""Embedding throughput of the local embedder alone, then with a remote member (docs/benchmarks/README.md).

``python -m tests.bench.remote_embed [--docs N]``: a kernel with only its embedder listens on loopback tcp
(CURVE); SciFact abstracts (title and text, as the indexer would send a one-chunk document) are embedded in
``embed.request``s of 32 texts, 4 in flight, as the indexer keeps them. First with the local embedder alone,
then with `foldermind worker run embedder --connect` from a second home joined (its model loaded first).
The replies say who embedded what, so each member's share is counted.

On one machine the "remote" member shares the same cores: this proves the mechanism (the pool splits the
work by measured speed, over tcp with CURVE), not a speedup; on two machines each would bring its own cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import EmbedReply, EmbedRequest
from foldermind.protocol.runtime.home import Home
from tests.config import Config, merge
from tests.helpers import RunningKernel, cli, remove_tree, short_tmpdir, status_json, wait_for, with_model_cache

SCIFACT = Path(os.environ.get("FOLDERMIND_SCIFACT", "/work/shared/eval/scifact")) / "corpus.jsonl"
BATCH, IN_FLIGHT = 32, 4
ONLY_EMBEDDER: Config = {
    "workers": {name: {"enabled": False} for name in ("watcher", "parser", "indexer", "llm", "frontdoor")}
}


def texts(n: int) -> list[str]:
    out: list[str] = []
    with SCIFACT.open() as fh:
        for line in fh:
            doc = json.loads(line)
            out.append(f"{doc['title']}\n\n{doc['text']}")
            if len(out) == n:
                break
    return out


def embed_all(client: BusClient, corpus: list[str]) -> tuple[float, Counter[str]]:
    """Seconds to embed ``corpus`` through the pool, and the texts each member embedded."""
    batches = [corpus[i : i + BATCH] for i in range(0, len(corpus), BATCH)]
    pending: dict[str, int] = {}
    done: Counter[str] = Counter()
    t0 = time.monotonic()
    while batches or pending:
        while batches and len(pending) < IN_FLIGHT:
            batch = batches.pop()
            pending[client.send("embedder", EmbedRequest(batch), timeout=300).id] = len(batch)
        packet = client.receive(300)
        count = pending.pop(packet.env.cid)
        if packet.env.status != "ok":
            raise SystemExit(f"an embed failed: {packet.env.error}")
        assert isinstance(packet.body(), EmbedReply)
        done[packet.env.src] += count
    return time.monotonic() - t0, done


def warm(client: BusClient, name: str) -> bool:
    try:
        client.request(name, EmbedRequest(["warm"]), EmbedReply, timeout=120)
    except JobError:
        return False  # model_unavailable while it loads
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000)
    args = parser.parse_args()
    corpus = texts(args.docs)
    root, other = short_tmpdir(), short_tmpdir("fm-r-")
    port = free_port()
    kernel = RunningKernel(root, merge(ONLY_EMBEDDER, {"bus": {"listen_tcp": f"127.0.0.1:{port}"}}))
    member: subprocess.Popen[str] | None = None
    try:
        kernel.start()
        client = kernel.client("bench")
        embed_all(client, corpus[:64])  # the local model loaded and warm
        load0 = os.getloadavg()
        local_s, local_done = embed_all(client, corpus)
        home = Home.resolve(other)
        home.ensure()
        home.supervisor_override.write_text(with_model_cache({}))
        worker_key = json.loads(cli(other, "worker", "keys", "--json").stdout)["public_key"]
        server_key = json.loads(cli(root, "bus", "keys", "--json").stdout)["public_key"]
        cli(root, "bus", "allow", "bench", worker_key)
        connect = ("worker", "run", "embedder", "--connect", f"tcp://127.0.0.1:{port}", "--server-key", server_key)
        member = subprocess.Popen(
            [sys.executable, "-m", "foldermind.kernel.cli", "--home", str(other), *connect],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        name = wait_for(
            lambda: next((w["name"] for w in status_json(root)["workers"] if w.get("remote")), None), 60, 0.3
        )
        # Its model loaded (a request by name answers once it is), so neither phase times a model load.
        wait_for(lambda: warm(client, name), 120, 0.5, "the remote model loaded")
        both_s, both_done = embed_all(client, corpus)
        load1 = os.getloadavg()
        n = len(corpus)
        print(f"texts: {n} SciFact abstracts, {BATCH} per request, {IN_FLIGHT} in flight")
        print(f"load average before/after: {load0[0]:.1f} / {load1[0]:.1f} (1 min); cores: {os.cpu_count()}")
        print(f"local embedder alone: {local_s:.1f} s, {n / local_s:.1f} texts/s  {dict(local_done)}")
        print(f"local + remote (tcp, CURVE): {both_s:.1f} s, {n / both_s:.1f} texts/s  {dict(both_done)}")
        for who, count in both_done.items():
            print(f"  {who}: {count} texts ({100 * count / n:.0f} %)")
    finally:
        if member is not None and member.poll() is None:
            member.kill()
            member.wait(10)
        kernel.stop()
        remove_tree(root)
        remove_tree(other)


if __name__ == "__main__":
    main()
