"""What a scoped client key costs a search: hybrid search over MCP HTTP at SciFact size, the owner's token beside
two client keys, in the same rounds.

``python -m tests.bench.keys [--home DIR] [--queries N] [--report PATH]``: SciFact indexed as in
``tests.bench.search`` (``--home`` keeps and reuses it), then a second, small folder and a criteria folder that
matches nothing are added, and three sessions of the real ``mcp`` SDK client ask each query in turn:

- ``owner``: the owner's token (every folder);
- ``one folder``: a key scoped to the SciFact folder (searched as ``smart_folder_id`` searches one folder);
- ``folders + criteria``: a key scoped to the SciFact folder and the criteria folder (its documents as a set,
  applied inside Tantivy and the vector search; the second folder's documents are the ones it keeps out);
- ``owner, smart_folder_id``: the owner's token asking for the SciFact folder, what the one-folder key does.

Reported: the client's wall time and the indexer's ``query_ms``, median and p95, with the machine and its load.
The second folder, the criteria folder and the keys are removed at the end, so a kept home stays reusable.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import TokenStore
from tests import mcpclient
from tests.bench import machine
from tests.bench.kernels import REPO, BenchFailure, say
from tests.bench.mcpclient import kernel_config, search_args
from tests.bench.scifact import SCIFACT_DOCS, bench_args, indexed_kernel

SECOND_FILES = 200
OWNER_FOLDER = "owner, smart_folder_id"
"""The owner's token asking for the SciFact folder: what scoping a search to that folder cost before keys."""


def _cli(kernel: Any, *args: str) -> str:
    out = kernel.cli(*args)
    if out.returncode != 0:
        raise BenchFailure(f"foldermind {' '.join(args)}: {out.stdout}{out.stderr}")
    return str(out.stdout)


async def _rounds(
    url: str, tokens: dict[str, str], queries: list[str], warmup: int, folder: str
) -> dict[str, dict[str, list[float]]]:
    names = [*tokens, OWNER_FOLDER]
    found: dict[str, dict[str, list[float]]] = {name: {"wall": [], "query_ms": []} for name in names}
    async with (
        mcpclient.http_client(url, tokens["owner"]) as owner,
        mcpclient.http_client(url, tokens["one folder"]) as one,
        mcpclient.http_client(url, tokens["folders + criteria"]) as two,
    ):
        clients = {"owner": owner, "one folder": one, "folders + criteria": two, OWNER_FOLDER: owner}
        for n, query in enumerate(queries):
            order = list(clients.items())
            order = order[n % len(order) :] + order[: n % len(order)]  # each one first in turn
            for name, client in order:
                arguments = search_args(query, "hybrid")
                if name == OWNER_FOLDER:
                    arguments["smart_folder_id"] = folder
                t0 = time.perf_counter()
                result = await client.call_tool("search_documents", arguments)
                wall = (time.perf_counter() - t0) * 1000
                if result.is_error or result.structured_content is None:
                    raise BenchFailure(f"{name}: {result.content}")
                if n >= warmup:
                    found[name]["wall"].append(wall)
                    found[name]["query_ms"].append(float(result.structured_content["query_ms"]))
    return found


def _paired(values: list[float], owner: list[float]) -> float:
    return statistics.median(a - b for a, b in zip(values, owner, strict=True))


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def _measure(
    kernel: Any, second: Path, queries: list[str], warmup: int
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str], tuple[Any, Any], str]:
    """The second folder, the criteria folder and the keys made, then the rounds."""
    second.mkdir(exist_ok=True)
    for n in range(SECOND_FILES):
        (second / f"s{n:04d}.txt").write_text(f"Second folder note {n}: cell biology protein expression.\n")
    _cli(kernel, "folders", "add", str(second), "--wait")
    _cli(kernel, "folders", "add-criteria", "--name", "bench-none", "--query", "zzqqxxnothing")
    listed = json.loads(_cli(kernel, "folders", "list", "--json"))
    scifact = next(f["id"] for f in listed if f.get("kind") != "criteria" and "scifact" in f["path"])
    tokens = {"owner": TokenStore(Home.resolve(kernel.root)).load_or_create()}
    for name, folders in (("bench-one", scifact), ("bench-two", f"{scifact},bench-none")):
        made = json.loads(_cli(kernel, "token", "add", name, "--folders", folders, "--json"))
        tokens["one folder" if name == "bench-one" else "folders + criteria"] = made["token"]
    url = str(mcpclient.mcp_info(kernel.root)["url"])
    facts = machine.facts(REPO)
    load_before = os.getloadavg()
    say(f"{len(queries)} queries x 4, hybrid, over MCP HTTP")
    found = anyio.run(_rounds, url, tokens, queries, warmup, scifact)
    return found, facts, (load_before, os.getloadavg()), scifact


def main(argv: list[str] | None = None) -> int:
    args, home, queries = bench_args(__doc__, 300, REPO / "docs" / "benchmarks" / "keys.md", argv)
    with indexed_kernel(home, SCIFACT_DOCS, kernel_config()) as (kernel, index):
        second = kernel.root / "second"
        try:
            found, facts, loads, _ = _measure(kernel, second, queries, args.warmup)
        finally:  # the kept home indexes SciFact alone again
            for name in ("bench-one", "bench-two"):
                kernel.cli("token", "revoke", name)
            kernel.cli("folders", "remove", "bench-none")
            kernel.cli("folders", "remove", str(second))
    load_before, load_after = loads
    lines = [
        "# Client keys: what a scoped key costs a search",
        "",
        "Generated by `python -m tests.bench.keys` (issue 40). Hybrid `search_documents` over MCP HTTP (the `mcp` SDK",
        f"client, one session per token), {len(queries) - args.warmup} SciFact queries after {args.warmup} warm-up"
        " ones,",
        "each asked in turn (the first one rotating) with the three tokens, and with the owner's naming the SciFact",
        "folder in `smart_folder_id` (what scoping to that folder cost before keys). SciFact "
        f"({index.files} files, {index.chunks} chunks) in one folder, plus a second folder of {SECOND_FILES} notes.",
        "",
        *machine.facts_table(facts, load_before, load_after),
        "",
        "| token | wall median ms | wall p95 ms | indexer query_ms median | query_ms p95 |",
        "|---|---|---|---|---|",
    ]
    for name, got in found.items():
        wall, inside = got["wall"], got["query_ms"]
        lines.append(
            f"| {name} | {statistics.median(wall):.2f} | {_p95(wall):.2f} | {statistics.median(inside):.2f} |"
            f" {_p95(inside):.2f} |"
        )
    owned = found["owner"]
    owner = statistics.median(owned["wall"])
    lines += [
        "",
        "Difference of medians against the owner's token (wall): "
        + ", ".join(f"{n} {statistics.median(g['wall']) - owner:+.2f} ms" for n, g in found.items() if n != "owner"),
        "",
        "Median of the per-query differences against the owner's token (the same query in the same round, so the"
        " load of that moment falls on both), wall / indexer query_ms: "
        + ", ".join(
            f"{n} {_paired(g['wall'], owned['wall']):+.2f} / {_paired(g['query_ms'], owned['query_ms']):+.2f} ms"
            for n, g in found.items()
            if n != "owner"
        ),
        "",
    ]
    Path(args.report).write_text("\n".join(lines))
    say("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
