"""Load, the short variant of ``make load``: a real kernel on a small Smart Folder of
generated abstracts, 8 real ``mcp`` SDK clients over HTTP (each its own session, the product's rate limit)
mixing search, summaries, reads, similar files, folder and index status and chat on the real SmolLM2-135M
for ~30 s, while a writer adds a new file to the folder every second. The run is
:func:`tests.bench.load.run`, the same code as the bench; its figures (latencies) are not asserted, only what
must hold under load."""

from __future__ import annotations

import importlib.metadata
import json
import random
from pathlib import Path

import pytest

from foldermind.workers.llm.model_file import BUNDLED_DISTRIBUTION
from tests.bench.load import CHAT, MIX, Plan, Results, render, rss_bound, run
from tests.bench.scifact import SCIFACT_ENV

pytest.importorskip("ctransformers", reason="the llm worker's default backend is not installed")
try:
    importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
except importlib.metadata.PackageNotFoundError:
    pytest.skip(f"{BUNDLED_DISTRIBUTION} (the default model) is not installed", allow_module_level=True)

PLAN = Plan(
    minutes=0.5,
    clients=8,
    docs=60,
    write_every_s=1.0,
    idle_queries=16,
    warmup_queries=4,
    drain_timeout_s=240.0,
    # Queries on the default ONNX backend (the machine's model cache holds the export): a torch query model
    # makes fp32 vectors the int8 index cannot use, so every query went to the embedder instead.
    # On a busy 2-core machine a worker loading its model can hold the GIL past the default liveness (3 s)
    # and be killed as hung, again at each restart (found by the load bench; workers/framework/memory.gc_paused
    # removes the worst of it). Hang detection is test_faults' subject; this test's is load: stalls get 10 s.
    extra_config={"bus": {"heartbeat_liveness": 10}},
)


def errors_by_tool(r: Results) -> dict[str, dict[str, int]]:
    return {tool: dict(s.codes) for tool, s in r.tools.items() if s.errors}


WORDS = (
    "cell",
    "protein",
    "tissue",
    "signal",
    "growth",
    "response",
    "gene",
    "model",
    "rate",
    "study",
    "patient",
    "dose",
    "trial",
    "receptor",
    "enzyme",
    "membrane",
    "pathway",
    "mutation",
    "infection",
    "immune",
    "insulin",
    "glucose",
    "neuron",
    "cortex",
    "memory",
    "sleep",
    "heart",
    "vessel",
    "pressure",
    "bone",
    "muscle",
    "liver",
    "kidney",
    "lung",
    "tumour",
    "therapy",
    "vaccine",
    "virus",
    "bacteria",
    "antibody",
    "blood",
    "oxygen",
)


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SciFact-shaped data set of generated abstracts and queries: the bench reads SciFact, which CI
    need not have (its licence keeps it out of the repository), and the test must not depend on it."""
    rng = random.Random(6)
    data = tmp_path / "scifact"
    data.mkdir()
    with open(data / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i in range(400):
            topic = rng.sample(WORDS, 4)
            pool = topic + list(WORDS)  # a document's own topic words come up more often
            sentences = [" ".join(rng.choice(pool) for _ in range(14)).capitalize() + "." for _ in range(6)]
            doc = {"_id": f"g{i}", "title": f"The {topic[0]} and {topic[1]} of study {i}", "text": " ".join(sentences)}
            fh.write(json.dumps(doc) + "\n")
    with open(data / "queries.jsonl", "w", encoding="utf-8") as fh:
        for i in range(60):
            fh.write(json.dumps({"_id": f"q{i}", "text": " ".join(rng.sample(WORDS, 3))}) + "\n")
    monkeypatch.setenv(SCIFACT_ENV, str(data))
    return data


@pytest.mark.slow
def test_eight_clients_mixing_tools_while_new_files_are_indexed(corpus: Path) -> None:
    r = run(PLAN)
    print(render(r))  # the figures, in the output of a failed run
    assert not r.failures, r.failures
    # Every client had its own session, every tool was called, chat included, and nothing failed.
    assert r.sessions == PLAN.clients
    assert set(r.tools) == set(MIX), sorted(r.tools)
    assert r.tools[CHAT].calls >= 1 and r.tools[CHAT].latency.samples
    assert r.calls >= 100, r.calls
    assert r.errors == 0, errors_by_tool(r)
    assert r.idle_errors == 0 and len(r.idle.samples) == PLAN.idle_queries
    # Every file written during the load was indexed, embedded, and reads back with its own marker.
    assert len(r.written) >= 20, len(r.written)
    assert r.indexed == len(r.written), r.not_indexed
    assert r.embedded[0] == r.embedded[1] > 0, r.embedded
    # No worker was restarted, and no process grew past the bound.
    assert r.restarts and not r.restarted(), r.restarts
    growth = r.growth()
    # Not the embedder: it leaves (released) once every chunk is embedded and the llm summarises.
    assert set(growth) >= {"kernel", "watcher", "indexer", "llm", "frontdoor"}, sorted(growth)
    assert not r.over_bound(), {n: (s, g, rss_bound(s)) for n, (s, g, _) in growth.items()}
