"""The vector graph is rebuilt beside the one in use: a real kernel (watcher, parser, embedder, indexer) whose
draft graph outgrows exact search builds its full graph on a thread of its own, held there by the indexer's test
switch (``FOLDERMIND_TEST_INDEXER_HOLD=graph:FLAG``, the slow rebuild of walk2's 39,720 vectors made as long as
the test needs). Meanwhile a new file is indexed, embedded and found by meaning (on main the ingest thread built
the graph itself and took nothing new until it was done); a kill -9 of the indexer mid-rebuild leaves an index that
answers, and the rebuild after the restart ends with a full graph that holds the files added while it was built."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from foldermind.protocol.messages import DescribeReply, DescribeRequest
from tests.config import merge
from tests.helpers import FAST_RESTART, ONE_PARSER, RunningKernel, cli, kill9, only_workers, wait_for
from tests.test_ingest import search

LIMIT = 30
"""``[search] exact_search_vectors``: the four ledgers' ~50 unit vectors outgrow it."""


def found(home: Path, query: str) -> set[str]:
    return {Path(h["file_path"]).name for h in search(home, query, "semantic")["results"]}


def graph(k: RunningKernel) -> str:
    """The indexer's vector graph in use: "draft" or "full"."""
    details = k.client().request("indexer", DescribeRequest(), DescribeReply, timeout=20).body.details
    return str(details["vector_graph"])


def unit_vectors_in_sqlite(home: Path) -> int:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    try:
        return int(db.execute("SELECT COALESCE(SUM(length(vector)), 0) / (384 * 4) FROM chunks").fetchone()[0])
    finally:
        db.close()


def test_new_files_are_found_by_meaning_while_the_graph_is_rebuilt_and_a_kill_mid_rebuild_loses_nothing(
    home_dir: Path,
) -> None:
    docs, flag = home_dir / "docs", home_dir / "graph.flag"
    docs.mkdir()
    for i in range(4):  # 4 files of 12 sentences: ~50 unit vectors, above the limit
        (docs / f"ledger{i}.txt").write_text(
            " ".join(f"Entry {j} of ledger {i} records {j * 3} crates of pears shipped north." for j in range(12))
        )
    flag.touch()
    held = Path(f"{flag}.held")
    switch = {"workers": {"indexer": {"env": {"FOLDERMIND_TEST_INDEXER_HOLD": f"graph:{flag}"}}}}
    config = merge(
        FAST_RESTART,
        only_workers("watcher", "parser", "embedder", "indexer"),
        ONE_PARSER,
        {"search": {"exact_search_vectors": LIMIT}},
        switch,
    )
    k = RunningKernel(home_dir, config).start()
    data = home_dir / "data"
    marker = data / "vectors.usearch.draft"
    try:
        cli(home_dir, "folders", "add", str(docs))
        # Indexed and embedded, the draft outgrew exact search: the rebuild began and holds.
        wait_for(held.exists, 180, 0.1, "the graph's rebuild begun (and held)")
        (docs / "harbour.txt").write_text(
            "The lighthouse keeper counted pelicans on the harbour wall at dawn. "
            "Gulls and pelicans crowded the harbour while the keeper lit the lamp."
        )
        wait_for(lambda: "harbour.txt" in found(home_dir, "seabirds near the lighthouse"), 180, 0.5, "harbour.txt")
        assert held.exists() and flag.exists() and graph(k) == "draft"  # the draft still in use: built beside
        assert "vector graph being built" in k.worker("indexer")["note"]

        # kill -9 mid-rebuild: the last saved file (the draft) and SQLite are what the next start has.
        pid = k.worker("indexer")["pid"]
        held.unlink()  # the rebuild after the restart holds again
        kill9(pid)
        k.wait_state("indexer", "RUNNING", 60, other_pid_than=pid)
        wait_for(held.exists, 180, 0.1, "the rebuild begun again after the restart (and held)")
        everything = {f"ledger{i}.txt" for i in range(4)} | {"harbour.txt"}
        wait_for(
            lambda: found(home_dir, "crates of pears shipped north") | found(home_dir, "pelicans") >= everything,
            120,
            0.5,
            "every file found by meaning after the kill",
        )
        (docs / "orchard.txt").write_text("Apple trees in the orchard blossom in spring; bees carry their pollen.")
        wait_for(lambda: "orchard.txt" in found(home_dir, "fruit trees flowering"), 180, 0.5, "orchard.txt")
        assert graph(k) == "draft"

        flag.unlink()  # the rebuild goes on and takes the draft's place
        wait_for(lambda: graph(k) == "full", 180, 0.2, "the full graph in the draft's place")
        wait_for(lambda: (data / "vectors.usearch").exists() and not marker.exists(), 60, 0.2, "the full graph saved")
        details = k.client().request("indexer", DescribeRequest(), DescribeReply, timeout=20).body.details
        assert details["unit_vectors"] == unit_vectors_in_sqlite(home_dir) > LIMIT
        # Through the full graph: the file added while it was built (replayed into it) and the ones before.
        assert "orchard.txt" in found(home_dir, "fruit trees flowering")
        assert found(home_dir, "crates of pears shipped north") >= {f"ledger{i}.txt" for i in range(4)}
        logged = "".join(p.read_text(errors="replace") for p in k.home.log_dir.glob("indexer.log*"))
        assert "graph rebuilt full" in logged
    finally:
        flag.unlink(missing_ok=True)
        k.stop()
