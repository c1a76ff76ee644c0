"""The single-box ceiling bench's generator (tests/bench/synthetic.py) writes an index the real indexer serves
as current: a few SciFact abstracts indexed and embedded by a real kernel, a few thousand synthetic chunks
added through the indexer's storage code, then a real kernel (indexer, embedder, front door) answers over
MCP HTTP a keyword search that finds a synthetic chunk, a semantic search that finds the real abstract
among the random vectors, and ``index_status`` shows every chunk embedded with nothing embedded again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderListReply,
    FolderListRequest,
)
from foldermind.workers.indexer.storage.store import Store
from tests.bench.ceiling import serving_config
from tests.bench.scifact import scifact_dir, write_corpus
from tests.bench.synthetic import Synthetic
from tests.helpers import SEARCH_OVER_BUS, RunningKernel, cli, remove_tree, short_tmpdir, wait_for
from tests.mcpclient import call, mcp_info, token_of

REAL = 12
SYNTHETIC = 3000
CORPUS = scifact_dir() / "corpus.jsonl"

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"no SciFact corpus at {CORPUS}")


def _embedded_folders(k: RunningKernel) -> list[dict[str, Any]] | None:
    with k.client("ceiling-test") as c:
        folders = c.request("indexer", FolderListRequest(), FolderListReply, timeout=30).body.folders
    done = all(f["state"] == "ready" and f["chunks"] and f["chunks_embedded"] == f["chunks"] for f in folders)
    return [dict(f) for f in folders] if folders and done else None


def _tool(home: Path, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = call(str(mcp_info(home)["url"]), token_of(home), name, args)
    assert not result.is_error, result.content
    body = result.structured_content
    assert body is not None
    return dict(body)


def _first_abstract() -> tuple[str, str]:
    """(id, title) of the first SciFact abstract (the one write_corpus writes first)."""
    with CORPUS.open(encoding="utf-8") as fh:
        doc = json.loads(fh.readline())
    return str(doc["_id"]), str(doc["title"])


def test_a_synthetic_index_is_served_by_a_real_kernel_as_current_vectors() -> None:
    root = short_tmpdir("fmc-")
    try:
        write_corpus(root / "real", REAL)
        k = RunningKernel(root, SEARCH_OVER_BUS)
        k.start()
        try:
            cli(root, "folders", "add", str(root / "real"))
            wait_for(lambda: _embedded_folders(k), 180, 0.2, "the SciFact abstracts indexed and embedded")
        finally:
            k.stop()
        data = root / "data"
        gen = Synthetic(data, root / "synthetic", scifact_dir())
        grown = gen.grow(SYNTHETIC)
        gen.close()
        docs, synthetic = gen.counts()
        assert synthetic >= SYNTHETIC and grown.chunks == synthetic and docs == grown.docs

        store = Store(data / "index.sqlite")
        total = int(store.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        real_chunks = total - synthetic
        chunk_id, text, path = store.db.execute(
            "SELECT c.id, c.text, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.path LIKE ? ORDER BY c.id DESC LIMIT 1",
            (f"{root / 'synthetic'}/%",),
        ).fetchone()
        assert Path(path).read_text(encoding="utf-8").count(text) == 1  # the file holds the chunk it indexes

        k = RunningKernel(root, serving_config())
        k.start()
        try:
            # Two sentences of one synthetic chunk: only that chunk holds both (the pool has ~43k sentences).
            query = " ".join(re.split(r"(?<=[.!?])\s+", text)[:2])[:900]
            keyword = _tool(root, "search_documents", {"query": query, "mode": "keyword", "top_k": 5})
            assert keyword["results"][0]["chunk_id"] == chunk_id

            # The query model loads in the background at start, and semantic search answers from keyword search
            # (saying so) until it is ready: a loaded machine took longer than the keyword search above.
            with k.client("ceiling-test") as c:

                def query_model_ready() -> bool:
                    details = c.request("indexer", DescribeRequest(), DescribeReply, timeout=30).body.details
                    return bool(details["query_encoder"]["state"] == "ready")

                wait_for(query_model_ready, 120, 0.2, "the indexer's query model")
            doc_id, title = _first_abstract()
            semantic = _tool(root, "search_documents", {"query": title, "mode": "semantic", "top_k": 5})
            assert semantic["mode_used"] == "semantic", {key: v for key, v in semantic.items() if key != "results"}
            assert Path(semantic["results"][0]["file_path"]).name == f"{doc_id}.txt"

            with k.client("ceiling-test") as c:

                def probed() -> str | None:
                    details = c.request("indexer", DescribeRequest(), DescribeReply, timeout=30).body.details
                    return None if details["embedder_probe"] == "not yet" else str(details["embedder_probe"])

                # On a start the indexer compares the vectors the index records with the configured ones; had
                # the synthetic vectors been recorded as another model's or precision's, it would ask the
                # embedder, drop every vector and embed them all again.
                said = wait_for(probed, 60, 0.2, "the indexer past its first embedding step")
                status = _tool(root, "index_status", {})
                indexer = c.request("indexer", DescribeRequest(), DescribeReply, timeout=30).body.details
            assert said.startswith("not needed: the index holds the configured vectors"), said
            assert status["totals"]["chunks"] == status["totals"]["chunks_embedded"] == real_chunks + synthetic
            assert status["embedding"]["state"] == "ready" and not status["embedding"]["note"]
            assert indexer["vectors"] == indexer["chunks_in_bm25"] == real_chunks + synthetic
            reembedding = store.db.execute("SELECT value FROM meta WHERE key = 'embed_reembedding'").fetchone()
            assert reembedding in (None, ("",)), reembedding  # no re-embedding was started
        finally:
            k.stop()
    finally:
        remove_tree(root)
