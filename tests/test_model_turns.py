"""The indexer's ingest holds one large model at a time: once every chunk is embedded it releases the embedder
(which frees its model and, on demand, exits at once) before the llm writes summaries, and a file saved
later releases the llm before its chunks go to the embedder (:mod:`foldermind.workers.indexer.ingest.turns`).

Real processes and the real models (all-MiniLM-L6-v2 on ONNX, SmolLM2-135M on ctransformers), both on demand
with the default idle times (600 s): without the releases the embedder would wait out its 10 minutes beside
the llm. The order is read from the workers' own log lines (millisecond timestamps): the embedder's model
freed before the llm's is loaded, and the other way round for the saved file, also when a summary is in hand
as the file comes (the release stops it, retryable, and it is written later).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    AnalyzeRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    SummaryReply,
    SummaryRequest,
)
from tests.config import merge
from tests.helpers import (
    FAST_RESTART,
    ONE_PARSER,
    RunningKernel,
    only_workers,
    remove_tree,
    require_bundled_model,
    short_tmpdir,
    wait_for,
)

require_bundled_model()

# Both models on demand with their 600 s defaults, spelled out: the releases, not an idle time, let them go.
CONFIG = merge(
    FAST_RESTART,
    ONE_PARSER,
    only_workers("watcher", "parser", "embedder", "indexer", "llm"),
    {"ingest": {"embed_idle_unload_s": 600.0}, "llm": {"idle_unload_s": 600.0, "analysis": True}},
)
FILES = {
    "budget.txt": "The budget for the obsidianwave project is forty thousand dollars, approved in March.",
    "garden.txt": "Tomatoes need six hours of sun a day and deep watering twice a week in summer.",
}
EMBEDDER_FREED = "embedding model unloaded when released"
EMBEDDER_READY = "embedding model all-MiniLM-L6-v2 ready"
LLM_READY = re.compile(r"model .* ready on ")
LLM_FREED = "(released)"


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[RunningKernel, Path]]:
    root = short_tmpdir("fmt-")
    k = RunningKernel(root / "home", CONFIG)
    try:
        k.start()
        docs = root / "docs"
        docs.mkdir()
        for name, text in FILES.items():
            (docs / name).write_text(text, encoding="utf-8")
        client = k.client("turns-test")
        client.request("indexer", FolderAddRequest(str(docs), "docs"), FolderAddReply, timeout=20)
        yield k, docs
    finally:
        k.stop()
        remove_tree(root)


def times(k: RunningKernel, worker: str, line: str | re.Pattern[str]) -> list[datetime]:
    """When ``worker``'s log says ``line``, in order (every process of the slot appends to one file)."""
    log = k.home.log_dir / f"{worker}.log"
    text = log.read_text("utf-8", errors="replace") if log.exists() else ""
    found = [x for x in text.splitlines() if (line.search(x) if isinstance(line, re.Pattern) else line in x)]
    return [datetime.strptime(x[:23], "%Y-%m-%d %H:%M:%S,%f") for x in found]


def summarised(k: RunningKernel, path: Path) -> bool:
    try:
        with k.client("turns-summary") as client:
            body = client.request("indexer", SummaryRequest(str(path)), SummaryReply, timeout=20).body
    except JobError as exc:
        if exc.code != ErrorCode.FILE_NOT_ANALYZED:
            raise
        return False  # not indexed yet
    return bool(body.analysis.get("summary_model"))


def embedded(k: RunningKernel) -> bool:
    with k.client("turns-list") as client:
        folders = client.request("indexer", FolderListRequest(), FolderListReply, timeout=20).body.folders
    return (
        bool(folders)
        and folders[0]["files_total"] == len(FILES) + 1
        and folders[0]["chunks"] == folders[0]["chunks_embedded"]
    )


def test_the_embedder_lets_its_model_go_and_exits_before_the_llm_loads_for_summaries(
    world: tuple[RunningKernel, Path],
) -> None:
    k, docs = world
    wait_for(lambda: summarised(k, docs / "budget.txt"), 240, 0.5, "the llm's summary of budget.txt")
    # Long before its 600 s idle time: the release let it go (an exit of its own, no restart counted).
    assert "went idle" in k.collect_reason("embedder", "IDLE", timeout=30)
    assert k.worker("embedder")["restarts"] == 0
    freed, loaded = times(k, "embedder", EMBEDDER_FREED), times(k, "llm", LLM_READY)
    assert freed and loaded, (freed, loaded)
    assert freed[0] <= loaded[0], "the llm loaded its model while the embedder still held its own"


def test_a_file_saved_after_the_summaries_began_is_embedded_once_the_llm_let_its_model_go(
    world: tuple[RunningKernel, Path],
) -> None:
    k, docs = world
    wait_for(lambda: summarised(k, docs / "budget.txt"), 240, 0.5, "the llm's summary of budget.txt")
    (docs / "later.txt").write_text("A note saved later: the obsidianwave kickoff moved to May.", encoding="utf-8")
    wait_for(lambda: embedded(k), 180, 0.5, "later.txt embedded")
    llm_freed, embedder_ready = times(k, "llm", LLM_FREED), times(k, "embedder", EMBEDDER_READY)
    assert llm_freed and len(embedder_ready) >= 2, (llm_freed, embedder_ready)  # the embedder started again
    assert llm_freed[0] <= embedder_ready[1], "the embedder loaded its model while the llm still held its own"
    # On demand, it leaves at the release, not 600 s later: RUNNING -> STOPPING for its idle exit. It then goes
    # IDLE, or straight back to STARTING when later.txt's summary was already waiting as it exited (seen on a
    # quiet machine: the embedder's turn for one small file was over within the llm's 0.8 s exit).
    assert "exits until a request needs it" in k.collect_reason("llm", "STOPPING", timeout=30)


def resident(k: RunningKernel, worker: str, ready: str | re.Pattern[str]) -> list[tuple[datetime, datetime]]:
    """When ``worker`` held its model, from its log: from each ``ready`` line to the next line saying the model
    was unloaded or the process stopped (or now, if neither came yet)."""
    log = k.home.log_dir / f"{worker}.log"
    spans, start = [], None
    for line in log.read_text("utf-8", errors="replace").splitlines() if log.exists() else []:
        at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") if line[:4].isdigit() else None
        if at is None:
            continue
        if start is None and (ready.search(line) if isinstance(ready, re.Pattern) else ready in line):
            start = at
        elif start is not None and ("model unloaded" in line or "stopped cleanly" in line):
            spans.append((start, at))
            start = None
    return spans if start is None else [*spans, (start, datetime.now())]


def test_a_file_saved_while_a_summary_is_in_hand_stops_it_and_the_two_models_are_never_resident_together() -> None:
    # Each summary waits 10 s in the llm worker before it starts (a test switch): the file comes while one is
    # in hand. The release stops it (retryable, asked again 1 s after), before the embedder loads.
    slow = {"workers": {"llm": {"env": {"FOLDERMIND_TEST_DELAY": f"{AnalyzeRequest.KIND}:10"}}}}
    root = short_tmpdir("fmt-")
    docs = root / "docs"
    docs.mkdir()
    (docs / "budget.txt").write_text(FILES["budget.txt"], encoding="utf-8")
    try:
        k = RunningKernel(root / "home", merge(CONFIG, slow, {"llm": {"analysis_retry_s": 1.0}})).start()
        try:
            client = k.client("turns-test")
            client.request("indexer", FolderAddRequest(str(docs), "docs"), FolderAddReply, timeout=20)
            wait_for(lambda: k.worker("llm")["in_flight"] > 0, 180, 0.2, "budget.txt's summary in the llm's hands")
            (docs / "later.txt").write_text("A note saved later: the kickoff moved to May.", encoding="utf-8")
            for name in ("budget.txt", "later.txt"):  # nothing lost: the stopped summary is written too
                wait_for(functools.partial(summarised, k, docs / name), 300, 0.5, f"the llm's summary of {name}")
            llm, embedder = resident(k, "llm", LLM_READY), resident(k, "embedder", EMBEDDER_READY)
            assert llm and len(embedder) >= 2, (llm, embedder)  # the embedder came back for later.txt
            both = [(a, b) for a in llm for b in embedder if a[0] < b[1] and b[0] < a[1]]
            assert not both, f"both models resident at once: llm {llm}, embedder {embedder}"
            lines = (k.home.log_dir / "llm.log").read_text("utf-8", errors="replace")
            assert "llm released by" in lines
        finally:
            k.stop()
    finally:
        remove_tree(root)


def test_summaries_after_a_restart_over_an_embedded_index_never_start_the_embedder() -> None:
    root = short_tmpdir("fmt-")
    docs = root / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text, encoding="utf-8")
    try:
        # Indexed and embedded with no llm: every summary is still to write.
        k = RunningKernel(root / "home", merge(CONFIG, {"llm": {"analysis": False}})).start()
        try:
            client = k.client("turns-test")
            client.request("indexer", FolderAddRequest(str(docs), "docs"), FolderAddReply, timeout=20)

            def all_embedded() -> bool:
                f = client.request("indexer", FolderListRequest(), FolderListReply, timeout=20).body.folders
                return bool(f) and f[0]["files_total"] == len(FILES) and f[0]["chunks"] == f[0]["chunks_embedded"] > 0

            wait_for(all_embedded, 180, 0.3, "every file embedded")
        finally:
            k.stop()
        # The restart has nothing to embed: the llm's turn must not start the embedder just to release it.
        k = RunningKernel(root / "home", CONFIG).start()
        try:
            wait_for(lambda: summarised(k, docs / "budget.txt"), 240, 0.5, "the llm's summary of budget.txt")
            started = [e for e in k.collect_events() if e.name == "embedder" and e.new != "IDLE"]
            assert not started, started
            assert (k.worker("embedder")["state"], k.worker("embedder")["pid"]) == ("IDLE", None)
        finally:
            k.stop()
    finally:
        remove_tree(root)
