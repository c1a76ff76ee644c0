"""The memory budget with on-demand workers: the tree's peak while SciFact is indexed, and the idle tree.

``python -m tests.bench.memory_budget --root DIR [--limit N] [--skip-ingest]``; prints a markdown report.

1. **Ingest**: a kernel with the default map (the llm, the embedder and the parsers on demand) in ``DIR/home``
   indexes the SciFact abstracts (one ``.txt`` each, in ``DIR/scifact``) as :mod:`tests.bench.ingest`'s run 1 does (its
   ``index_folder``: peak RSS of each process and of the whole tree from ``ctl.status`` every 0.5 s, from
   ``folders add`` to fully embedded); then the tree is sampled :data:`AFTER_S` more seconds: once every chunk
   is embedded the indexer releases the embedder (it frees its model and exits), then the llm starts its
   summaries (:mod:`foldermind.workers.indexer.ingest.turns`).
2. **Idle**: for each of :data:`CONFIGS` (the llm and the embedder on demand; the parsers too, the
   defaults; all of them always running), a kernel on that index with every idle time :data:`IDLE_S` and the
   summaries off (else the llm summarises every file first): a hybrid search, a new file embedded, a generative
   answer (every model loaded), then each process's RSS from ``status`` once the on-demand workers are IDLE,
   or :data:`IDLE_S` + 15 s on (the models unloaded). Then what the next requests cost after idle: a hybrid
   search, a new file found by keyword and embedded, a generative answer (``foldermind ask --mode generative``,
   the CLI's start-up included).

3. **Saved while summarising**: a kernel with the default map and policy on that index (its summaries far from
   done): once the llm holds its model and the embedder has left, a new file is written, and the tree is
   sampled from then until the file's chunk is embedded and :data:`SAVED_AFTER_S` more (the indexer releases
   the llm before the embedder starts: the summary in hand stops, asked for again later).

Memory is not moved by other processes' CPU load; the times are, and the report says what the machine did.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from tests.bench import machine
from tests.bench.ingest import Sampler, index_folder
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.scifact import write_corpus
from tests.config import Config, merge

IDLE_S = 30
"""Both idle times in part 2 (the defaults are 600 s: the same code path, 20x sooner)."""
AFTER_S = 60.0
SAVED_AFTER_S = 30.0
RUNNING: Config = {"workers": {"llm": {"on_demand": False}, "embedder": {"on_demand": False}}}
PARSERS_RUNNING: Config = {"workers": {"parser": {"on_demand": False}}}
PARSERS: Config = {"workers": {"parser": {"on_demand": True, "idle_exit_s": IDLE_S}}}
MODELS = ("llm", "embedder")
CONFIGS = (
    ("llm and embedder on demand", PARSERS_RUNNING, MODELS),
    ("the parsers too", PARSERS, (*MODELS, "parser#1", "parser#2")),
    ("always running", merge(RUNNING, PARSERS_RUNNING), ()),
)
"""Each spelled out, whatever the defaults: the defaults are the second."""
QUIET: Config = {"ingest": {"embed_idle_unload_s": IDLE_S}, "llm": {"idle_unload_s": IDLE_S, "analysis": False}}
MIB = 1024 * 1024


def _mib(n: int | None) -> str:
    return f"{n / MIB:,.0f}" if n else "—"


def ingest(root: Path, corpus: Path, files: int) -> list[str]:
    home = root / "home"
    shutil.rmtree(home, ignore_errors=True)
    kernel = Kernel("on demand, ingest", root=home)
    kernel.start()
    try:
        run = index_folder(kernel, corpus, files, embed=True)
        after = Sampler(kernel)
        after.start()
        time.sleep(AFTER_S)
        after.finish()
    finally:
        kernel.stop()
    names = sorted(set(run.peak_rss) | set(after.peak_rss))
    lines = [
        f"SciFact, {run.files_indexed:,} files, {run.chunks:,} chunks: keyword-indexed in {run.keyword_s:.1f} s,"
        f" fully embedded in {run.embedded_s or 0:.1f} s.",
        "",
        f"| process | peak RSS, `folders add` to fully embedded (MiB) | peak RSS, the {AFTER_S:g} s after (MiB) |",
        "|---|---:|---:|",
        *(f"| {n} | {_mib(run.peak_rss.get(n))} | {_mib(after.peak_rss.get(n))} |" for n in names),
        f"| **whole tree** (`tree_rss_bytes`, largest sample) | **{_mib(run.tree.tree)}**"
        f" | **{_mib(after.tree.tree)}** |",
    ]
    return lines


def _tree(kernel: Kernel, client: BusClient) -> tuple[dict[str, int], int]:
    st = kernel.status(client)
    rss = {"kernel": int(st.kernel["rss_bytes"] or 0)}
    rss.update({w["name"]: int(w["rss_bytes"] or 0) for w in st.workers})
    return rss, int(st.kernel["tree_rss_bytes"] or 0)


def _timed(what: Callable[[], object]) -> float:
    t0 = time.monotonic()
    what()
    return time.monotonic() - t0


def _search(client: BusClient) -> None:
    reply = client.request("indexer", SearchRequest("vitamin D deficiency", "hybrid", 10), SearchReply, timeout=30)
    if not reply.body.results:
        raise BenchFailure("the search found nothing")


def _new_file(kernel: Kernel, client: BusClient, corpus: Path, n: int) -> tuple[float, float]:
    """A new file in the folder: seconds until a keyword search finds it, and until its chunk is embedded (the
    watcher's debounce included)."""
    before = (kernel.folder(client) or {}).get("chunks_embedded", 0)
    word = f"zqxnote{n}word"
    t0 = time.monotonic()
    (corpus / f"zz-new-{n}.txt").write_text(f"New note {n}\n\nIt says {word} about vitamin D.\n", "utf-8")
    searchable = 0.0
    while True:
        now = time.monotonic() - t0
        if now > 120:
            raise BenchFailure("the new file was not searchable and embedded within 120 s")
        if not searchable:
            found = client.request("indexer", SearchRequest(word, "keyword", 1), SearchReply, timeout=10).body
            searchable = now if found.results else 0.0
        elif (kernel.folder(client) or {}).get("chunks_embedded", 0) > before:
            return searchable, now
        time.sleep(0.05)


def _scans(kernel: Kernel) -> int:
    """How many folder scans the watcher's log records (its first scan follows its start)."""
    log = kernel.home.log_dir / "watcher.log"
    return log.read_text("utf-8").count(" files scanned in ") if log.exists() else 0


def _ask(kernel: Kernel) -> None:
    out = kernel.cli("ask", "What does vitamin D deficiency cause?", "--mode", "generative", timeout=180)
    if out.returncode != 0:
        raise BenchFailure(f"ask exited {out.returncode}: {out.stderr}")


def idle(
    root: Path, corpus: Path, label: str, config: Config, n: int, waits: tuple[str, ...]
) -> tuple[dict[str, int], int, list[float], float]:
    """The idle tree (per process, whole tree), the first search / new file / answer after idle, and how long
    the tree took to reach it."""
    kernel = Kernel(label, config=merge(QUIET, config), root=root / "home")
    scans = _scans(kernel)
    kernel.start()
    try:
        # A file written before the watcher has listed the folder and watches it would be missed by both.
        give_up = time.monotonic() + 60
        while _scans(kernel) <= scans and time.monotonic() < give_up:
            time.sleep(0.1)
        with kernel.client("bench-idle") as client:
            _search(client)
            _new_file(kernel, client, corpus, n)
            _ask(kernel)
            t0 = time.monotonic()
            settled = t0 + IDLE_S + 15
            while time.monotonic() < settled:
                states = {w["name"]: w["state"] for w in kernel.status(client).workers}
                if waits and all(states.get(w) == "IDLE" for w in waits):
                    break
                time.sleep(0.5)
            waited = time.monotonic() - t0
            time.sleep(2)  # what the exits return to the system is counted
            rss, tree = _tree(kernel, client)
            after = [
                _timed(lambda: _search(client)),
                *_new_file(kernel, client, corpus, n + 1),
                _timed(lambda: _ask(kernel)),
            ]
    finally:
        kernel.stop()
    return rss, tree, after, waited


def _summarising(kernel: Kernel, client: BusClient, scans: int) -> None:
    """Until the llm holds its model for summaries, the embedder has left (after the start's probe) and the
    watcher has listed the folder."""
    give_up = time.monotonic() + 180
    while time.monotonic() < give_up:
        workers = {w["name"]: (w["state"], w["note"]) for w in kernel.status(client).workers}
        (_, llm_note), (embedder, _) = workers.get("llm", ("", "")), workers.get("embedder", ("", ""))
        if llm_note.endswith("ready") and embedder == "IDLE" and _scans(kernel) > scans:
            return
        time.sleep(0.5)
    raise BenchFailure("the llm was not summarising with the embedder gone within 180 s")


def saved(root: Path, corpus: Path, n: int) -> list[str]:
    """A file saved while the llm summarises: peak RSS per process and of the tree, from the save until the
    file's chunk is embedded and SAVED_AFTER_S after."""
    kernel = Kernel("saved while summarising", root=root / "home")
    scans = _scans(kernel)
    kernel.start()
    try:
        with kernel.client("bench-saved") as client:
            _summarising(kernel, client, scans)
            sampler = Sampler(kernel)
            sampler.start()
            try:
                searchable, embedded = _new_file(kernel, client, corpus, n)
                time.sleep(SAVED_AFTER_S)
            finally:
                sampler.finish()
    finally:
        kernel.stop()
    return [
        f"A new file saved while the llm summarises: found by keyword after {searchable:.2f} s, embedded after"
        f" {embedded:.2f} s (the llm released first).",
        "",
        f"| process | peak RSS, the save to embedded and {SAVED_AFTER_S:g} s after (MiB) |",
        "|---|---:|",
        *(f"| {name} | {_mib(rss)} |" for name, rss in sorted(sampler.peak_rss.items())),
        f"| **whole tree** (`tree_rss_bytes`, largest sample) | **{_mib(sampler.tree.tree)}** |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.memory_budget", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="where the corpus and the kept home go")
    parser.add_argument("--limit", type=int, default=None, help="only the first N abstracts")
    parser.add_argument("--skip-ingest", action="store_true", help="reuse the home's index (parts 2 and 3)")
    parser.add_argument("--saved-only", action="store_true", help="reuse the home's index (part 3 only)")
    args = parser.parse_args(argv)
    corpus = args.root / "scifact"
    for old in corpus.glob("zz-new-*.txt"):
        old.unlink()
    files = write_corpus(corpus, args.limit)
    facts = machine.facts(Path(__file__).resolve().parents[2])
    report = ["# memory budget", "", *(f"- {k}: {v}" for k, v in facts.items()), ""]
    if args.saved_only:
        say("3/3 a file saved while the llm summarises")
        print("\n".join([*report, "## saved while summarising", "", *saved(args.root, corpus, 100)]))
        return 0
    if not args.skip_ingest:
        say("1/3 indexing SciFact with the default map")
        report += ["## ingest", "", *ingest(args.root, corpus, files), ""]
        print("\n".join(report), flush=True)  # an hour's run: kept even if part 2 fails
        report = []
    rows: dict[str, tuple[dict[str, int], int, list[float], float]] = {}
    for i, (label, config, waits) in enumerate(CONFIGS):
        say(f"2/3 the idle tree: {label}")
        rows[label] = idle(args.root, corpus, label, config, 10 * i, waits)
    names = sorted({n for rss, *_ in rows.values() for n in rss})
    report += [
        "## idle",
        "",
        f"| process | {' | '.join(f'{label} (MiB)' for label in rows)} |",
        f"|---|{'---:|' * len(rows)}",
        *(f"| {n} | {' | '.join(_mib(r[0].get(n)) for r in rows.values())} |" for n in names),
        f"| **whole tree** | {' | '.join(f'**{_mib(r[1])}**' for r in rows.values())} |",
        f"| reached after (s) | {' | '.join(f'{r[3]:.0f}' for r in rows.values())} |",
        "",
        f"| after idle | {' | '.join(rows)} |",
        f"|---|{'---:|' * len(rows)}",
    ]
    whats = ("hybrid search over the bus", "a new file found by keyword", "... and embedded", "`foldermind ask`")
    for i, what in enumerate(whats):
        report.append(f"| {what} (s) | {' | '.join(f'{r[2][i]:.2f}' for r in rows.values())} |")
    print("\n".join(report), flush=True)
    say("3/3 a file saved while the llm summarises")
    print("\n".join(["", "## saved while summarising", "", *saved(args.root, corpus, 100)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
