"""Factoid answers over MCP HTTP: does ``chat_with_documents`` give the short answer, cite the file that
holds it, keep its ``[n]`` markers honest, and how fast, per answer mode.

``python -m tests.bench.answers [--home DIR] [--modes auto,extractive,generative] [--split
all|tune|held_out|fresh|fresh2|fresh3|fresh4|fresh5|fresh6|fresh7] [--corpus all|scifact|django-docs|manuals] [--limit
N] [--index all|asked] [--hogs N] [--no-write] [--report PATH] [--json PATH] [--search KEY=VALUE ...] [--llm KEY=VALUE
...]`` from the repository root. A real kernel (default process map; the front door on an OS-assigned port, the rate
limit raised, the model's background analysis off, the parse deadline raised as the lookup bench does for gnuplot's
311-page manual) indexes the three corpora of :mod:`tests.bench.factoids` as three Smart Folders (1,595 SciFact
abstracts: the first 1,500 and every gold one; Django 4.2.16's 587 doc files, fetched from PyPI once; the 109 files of
the Debian manuals, fetched with ``apt-get download`` once) and waits until every file is indexed and every chunk
embedded, the indexer's query model and the llm worker's model are ready. Every corpus is indexed whatever
``--corpus`` picks, so a kept home stays the same (``--index asked``: only the corpora of the picked questions, for a
smaller slice in a home of its own). Then, after waiting for a quiet machine (and starting ``--hogs N`` busy-loop
processes, :mod:`tests.bench.hogs`, which run until the last answer), for each question:

1. ``search_documents`` (hybrid, top_k 5) with the question: is the gold file among the five? This bounds
   what an answer can cite, so "gold file cited" is reported over all questions and over those;
2. ``chat_with_documents`` once per mode (``{"query", "answer_mode"}``, no ``session_id``: every question a
   new session), called by the ``mcp`` SDK client with a progress callback: the time to the first progress
   notification whose message carries text, the time to the result; the answer (its ``[n]`` markers
   stripped) searched for the gold pattern, the citations for the gold file (by path: several Django files
   share a name), every marker checked to name a citation (1..len) and the markers' first-use order checked
   to be 1, 2, 3...; ``answer_mode_used``, ``dropped_sentences`` and the other contract fields recorded,
   a missing one noted as missing rather than failing the run.

One warm-up question per mode runs first and is not counted. ``--limit N`` takes the first N questions
with the corpora interleaved (sf-01, dj-01, mn-01, sf-02, ...). While the new tool has not landed (no
``answer_mode`` in its input schema), the calls go without it and only ``auto`` can run.

The report, ``## Summary`` first (per mode and split; then per corpus; then every miss, with an excerpt of
the answer), is printed and written to ``docs/benchmarks/answers.md`` unless ``--no-write`` (``--report
PATH`` writes it elsewhere). ``--home DIR`` keeps the home (index and corpora) in DIR, and a later run
reuses it instead of indexing again (~5 minutes on 2 cores); ``--json PATH`` keeps every answer as JSON for
reading the misses. The quality targets are judged on the newest fresh set the run asked: the fresh4
questions (all held out, written after fresh3 had been asked four times) when it asked any, else the fresh3
ones (written after fresh2 had been asked twice), else the fresh2 ones (written after the fresh ones had been
asked once), else the fresh ones (written after the first held-out third had been seen while tuning), else
the held-out ones; every split is reported beside, fresh2 and fresh3 too (tuned on since the next set was
written). The time targets are judged on all.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcp.shared.dispatcher import ProgressFnT
from mcp.types import CallToolResult

from foldermind.protocol.errors import BusError
from foldermind.protocol.runtime.config import load
from tests.bench import answer_shapes, answer_times, hogs, machine
from tests.bench.cpu import total_cpu_seconds
from tests.bench.factoids import (
    CORPORA,
    DJANGO,
    MANUALS,
    SCIFACT,
    SPLITS,
    Corpus,
    Question,
    build_corpora,
    load_questions,
)
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.llm import wait_llm_ready
from tests.bench.markdown import merged, para, table, verdict
from tests.bench.mcpclient import BlockingClient, front_door, kernel_config, settings
from tests.bench.scifact import wait_query_model
from tests.bench.stats import pct
from tests.bench.transports import REPO
from tests.config import Config, merge

REPORT = REPO / "docs" / "benchmarks" / "answers.md"
CHAT = "chat_with_documents"
SEARCH = "search_documents"
MODES = ("auto", "extractive", "generative")
TOP_K = 5
INDEX_TIMEOUT_S = 3600.0
WARMUP_QUESTION = "What do these documents say about configuration defaults?"
SLOW_PARSES: Config = {"ingest": {"parse_timeout_s": 900}}
"""gnuplot's 311-page manual can miss the default parse deadline on a loaded 2-core machine and be
quarantined (:mod:`tests.bench.lookup` met it): this bench measures answers, not parse speed."""
JUDGED = ("fresh7", "fresh6", "fresh5", "fresh4", "fresh3", "fresh2", "fresh", "held_out")
"""The splits the quality targets are judged on, the first the run asked: the fresh questions were written
after the held-out third had been seen while tuning, the fresh2 ones after the fresh ones had been asked,
the fresh3 ones after fresh2 had been asked twice, the fresh4 ones after fresh3 had been asked four times, the
fresh5 ones (names and figures only) before any run on them, as the held-out part of those two answer shapes, the
fresh6 ones (figures only) after fresh5 had been read once, the fresh7 ones (figures only) after fresh6 had been
read, as every set before them counts as tune."""

AIM_CONTAINS = 0.85  # the answer contains the gold answer
AIM_CITED_TOP5 = 0.90  # the gold file is cited, where retrieval had it in the top 5
AIM_MARKERS = 1.0  # every [n] marker names a citation

CONTRACT: tuple[str, ...] = ("answer", "citations", "grounded", "answer_mode_used", "dropped_sentences")
CONTRACT += ("session_id", "tokens_used", "model", "note")
CITATION = ("id", "file_path", "file_name", "snippet", "quote", "location", "chunk_id", "chunk_index")
MARKER = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")


# --------------------------------------------------------------------------------------------
# results


@dataclass(slots=True)
class Retrieved:
    """The hybrid top 5 for a question."""

    files: list[str] = field(default_factory=list)  # file paths, best first
    rank: int | None = None  # the gold file's rank (1-based); None: not in the top 5
    error: str = ""


@dataclass(slots=True)
class Answer:
    question: Question
    mode: str
    retrieved: Retrieved | None = None
    answer: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    grounded: bool | None = None
    mode_used: str | None = None
    dropped: int | None = None
    fallback_reason: str | None = None
    note: str = ""
    model: str = ""
    completion_tokens: int = 0  # the model's tokens (0: the model did not run)
    missing: list[str] = field(default_factory=list)  # contract fields absent from the result
    first_text_s: float = math.nan  # request sent -> first progress notification that carries text
    first_progress_s: float = math.nan  # ... -> first progress notification of any kind
    total_s: float = math.nan
    cpu_s: float = math.nan  # CPU seconds the kernel and its workers spent while the call ran
    progress: int = 0  # notifications received
    streamed_chars: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def contains_gold(self) -> bool:
        """The gold pattern in the answer, its [n] markers taken out (a bare 5 must not match [5])."""
        return self.question.answered_by(MARKER.sub(" ", self.answer))

    @property
    def cited_paths(self) -> list[str]:
        return [str(c.get("file_path") or c.get("file_name") or "") for c in self.citations]

    @property
    def gold_cited(self) -> bool:
        return any(self.question.is_gold(p) for p in self.cited_paths if p)

    @property
    def in_top5(self) -> bool | None:
        if self.retrieved is None or self.retrieved.error:
            return None
        return self.retrieved.rank is not None

    @property
    def markers(self) -> list[int]:
        """Every [n] in the answer, in order (``[1, 2]`` counts as 1 then 2)."""
        return [int(n) for m in MARKER.finditer(self.answer) for n in re.split(r"\s*[,;]\s*", m.group(1))]

    @property
    def markers_resolve(self) -> bool:
        """Every marker names a citation: 1..len(citations), and an ``id`` of one where ids are given."""
        ids = {c.get("id") for c in self.citations if "id" in c}
        n = len(self.citations)
        return all(1 <= m <= n and (not ids or m in ids) for m in self.markers)

    @property
    def first_use_order(self) -> bool | None:
        """The markers' first uses run 1, 2, 3... and the citations carry ids 1..len in list order; None
        for an answer without markers."""
        seen: list[int] = []
        for m in self.markers:
            if m not in seen:
                seen.append(m)
        if not seen:
            return None
        ids = [c.get("id") for c in self.citations]
        ids_ok = all(i is None for i in ids) or ids == list(range(1, len(ids) + 1))
        return ids_ok and seen == list(range(1, len(seen) + 1))

    @property
    def failures(self) -> list[str]:
        """What went wrong with this answer, for the appendix; empty when nothing did."""
        if self.error:
            return [f"error: {self.error}"]
        out = []
        if not self.contains_gold:
            out.append("no gold answer")
        if not self.gold_cited:
            out.append("gold file not cited" + (" (it was in the top 5)" if self.in_top5 else ""))
        if not self.markers_resolve:
            out.append(f"markers {sorted(set(self.markers))} vs {len(self.citations)} citations")
        if self.first_use_order is False:
            out.append("citations not in first-use order")
        return out


@dataclass(slots=True)
class IndexedCorpus:
    name: str
    folder: str
    files: int = 0  # indexed
    failed: int = 0
    chunks: int = 0
    ready_s: float = math.nan  # from the start of the indexing wait until this folder was done
    reused: bool = False


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    args: dict[str, Any]
    corpora: list[IndexedCorpus] = field(default_factory=list)
    index_s: float = math.nan
    encoder: dict[str, Any] = field(default_factory=dict)
    llm_note: str = ""
    llm_wait_s: float = math.nan
    timeout_s: float = math.nan
    quiet: tuple[float, float] = (math.nan, math.nan)  # CPU % when the questions began, seconds waited
    load: dict[str, str] = field(default_factory=dict)  # when -> the load average (1, 5, 15 min) then
    hogs: hogs.Hogs = field(default_factory=lambda: hogs.Hogs(0))
    answer_mode_arg: bool = True  # the tool's input schema has answer_mode
    modes: list[str] = field(default_factory=list)
    skipped_modes: list[str] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    warmup: dict[str, str] = field(default_factory=dict)  # mode -> "1.2 s" or the error
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# the kernel: every corpus indexed, the models ready


def _same(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def index_corpora(kernel: Kernel, corpora: dict[str, Corpus], results: Results) -> None:
    """Register each corpus folder (unless this home has it already) and wait until every file is indexed
    or failed and every chunk embedded, then for the indexer's query model. The home must index nothing
    else."""
    with kernel.client("bench-answers-index") as client:
        registered = [str(f["path"]) for f in kernel.folders(client)]
        if others := [p for p in registered if not any(_same(p, c.folder) for c in corpora.values())]:
            raise BenchFailure(f"{kernel.root} indexes other folders too ({others}): use another home")
        t0 = time.monotonic()
        for c in corpora.values():
            ix = IndexedCorpus(c.name, str(c.folder))
            ix.reused = any(_same(p, c.folder) for p in registered)
            results.corpora.append(ix)
            if not ix.reused:
                added = kernel.cli("folders", "add", str(c.folder), "--name", c.name)
                if added.returncode != 0:
                    raise BenchFailure(
                        f"folders add {c.folder} exited {added.returncode}: {added.stdout}{added.stderr}"
                    )
        by_name = {ix.name: ix for ix in results.corpora}
        last_say = 0.0
        while True:
            now = time.monotonic() - t0
            folders = kernel.folders(client)
            lines = []
            for c in corpora.values():
                f = next((f for f in folders if _same(str(f["path"]), c.folder)), None)
                ix = by_name[c.name]
                if f is None:
                    lines.append(f"{c.name}: not registered yet")
                    continue
                done = f["files_indexed"] + f["files_failed"] + f.get("files_skipped", 0)
                ready = (
                    f["files_total"] == c.files
                    and done >= c.files
                    and f["state"] == "ready"
                    and f["chunks"]
                    and f["chunks_embedded"] >= f["chunks"]
                )
                if ready and math.isnan(ix.ready_s):
                    ix.ready_s = now
                    ix.files, ix.failed, ix.chunks = f["files_indexed"], f["files_failed"], f["chunks"]
                lines.append(
                    f"{c.name}: {done}/{f['files_total']} files, {f['chunks_embedded']}/{f['chunks']} embedded"
                )
            if all(not math.isnan(ix.ready_s) for ix in results.corpora):
                results.index_s = now
                break
            if now - last_say >= 15:
                last_say = now
                say(f"  {now:5.0f} s: " + "; ".join(lines))
            if now > INDEX_TIMEOUT_S:
                raise BenchFailure(f"not indexed after {INDEX_TIMEOUT_S:g} s: {lines}")
            time.sleep(1.0)
        results.encoder = wait_query_model(kernel, client)


# --------------------------------------------------------------------------------------------
# the calls


class ToolClient(BlockingClient):
    """A :class:`BlockingClient` that calls any tool, with an optional progress callback."""

    def __enter__(self) -> ToolClient:
        super().__enter__()
        return self

    def call(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None = None, timeout: float | None = None
    ) -> CallToolResult:
        assert self._portal is not None and self._client is not None
        call = functools.partial(
            self._client.call_tool, name, arguments, read_timeout_seconds=timeout, progress_callback=progress
        )
        return self._portal.call(call)

    def input_schema(self, name: str) -> dict[str, Any]:
        assert self._portal is not None and self._client is not None
        tools = self._portal.call(self._client.list_tools).tools
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            raise BenchFailure(f"the front door offers no {name} tool")
        return dict(tool.input_schema)


def tool_error(result: CallToolResult) -> str:
    text = " ".join(str(getattr(c, "text", "")) for c in result.content)
    return text[:300] or "error without text"


def retrieve(http: ToolClient, q: Question) -> Retrieved:
    out = Retrieved()
    try:
        result = http.call(SEARCH, {"query": q.question, "mode": "hybrid", "top_k": TOP_K}, timeout=60)
    except Exception as exc:  # a transport failure: this question only
        out.error = f"{type(exc).__name__}: {exc}"[:300]
        return out
    body = result.structured_content
    if result.is_error or not body:
        out.error = tool_error(result)
        return out
    if body.get("mode_used") != "hybrid":
        out.error = f"answered as {body.get('mode_used')}: {body.get('note')}"
    out.files = [str(r.get("file_path") or r.get("file_name") or "") for r in body.get("results", [])]
    out.rank = next((i for i, p in enumerate(out.files, 1) if q.is_gold(p)), None)
    return out


def ask(http: ToolClient, answer: Answer, text: str, with_mode: bool, timeout: float) -> None:
    """One ``chat_with_documents`` call, its timings and its result in ``answer``."""
    started = time.perf_counter()
    seen = {"any": math.nan, "text": math.nan}
    counts = [0, 0]  # notifications, streamed characters

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        now = time.perf_counter()
        counts[0] += 1
        if math.isnan(seen["any"]):
            seen["any"] = now
        if message and message.strip():
            counts[1] += len(message)
            if math.isnan(seen["text"]):
                seen["text"] = now

    args: dict[str, Any] = {"query": text}
    if with_mode:
        args["answer_mode"] = answer.mode
    try:
        result = http.call(CHAT, args, on_progress, timeout)
    except Exception as exc:  # a transport failure or timeout: this call only
        answer.error = f"{type(exc).__name__}: {exc}"[:300]
        return
    finally:
        answer.progress, answer.streamed_chars = counts
        answer.first_progress_s = seen["any"] - started
        answer.first_text_s = seen["text"] - started
    answer.total_s = time.perf_counter() - started
    body = result.structured_content
    if result.is_error or not body:
        answer.error = tool_error(result)
        return
    answer.missing = [k for k in CONTRACT if k not in body]
    answer.answer = str(body.get("answer") or "")
    answer.citations = [dict(c) for c in body.get("citations") or []]
    for key in CITATION:
        if answer.citations and any(key not in c for c in answer.citations):
            answer.missing.append(f"citations[].{key}")
    answer.grounded = bool(body["grounded"]) if "grounded" in body else None
    answer.mode_used = str(body["answer_mode_used"]) if body.get("answer_mode_used") is not None else None
    dropped = body.get("dropped_sentences")
    answer.dropped = int(dropped) if isinstance(dropped, int) else None
    answer.fallback_reason = str(body["fallback_reason"]) if body.get("fallback_reason") else None
    answer.note = str(body.get("note") or "")
    answer.model = str(body.get("model") or "")
    answer.completion_tokens = int((body.get("tokens_used") or {}).get("completion") or 0)


def pick_questions(split: str, corpus: str, limit: int) -> list[Question]:
    """The questions of ``split`` and ``corpus``, the corpora interleaved, the first ``limit`` (0: all)."""
    by_corpus = [load_questions(split, c) for c in CORPORA if corpus in ("all", c)]
    longest = max((len(qs) for qs in by_corpus), default=0)
    mixed = [qs[i] for i in range(longest) for qs in by_corpus if i < len(qs)]
    return mixed[: limit or None]


def run(args: argparse.Namespace, results: Results) -> None:
    questions = pick_questions(args.split, args.corpus, args.limit)
    if not questions:
        raise BenchFailure("no questions picked")
    results.questions = questions
    llm = {"load": "at_start", "idle_unload_s": 0, **settings(args.llm)}
    config = merge(kernel_config(settings(args.search), llm=llm), SLOW_PARSES)
    kernel = Kernel("answers", config, Path(args.home) if args.home else None)
    try:
        # Every question's corpus, whatever --split / --limit picked: a kept home's index stays the same.
        # With --index asked, only the corpora of the picked questions (a smaller home, its own).
        asked = {q.corpus for q in questions} if args.index == "asked" else set(CORPORA)
        corpora = build_corpora(kernel.root / "corpora", load_questions(), asked)
        say("corpora: " + ", ".join(f"{c.name} {c.files} files in {c.folder}" for c in corpora.values()))
        kernel.start()
        say("indexing the corpora (~10 min on 2 cores) or checking the kept index")
        index_corpora(kernel, corpora, results)
        say(f"  indexed and embedded after {results.index_s:.0f} s: {results.corpora}")
        with kernel.client("bench-answers") as client:
            say("waiting for the llm worker")
            results.llm_note, results.llm_wait_s = wait_llm_ready(kernel, client)
            procs = list(kernel.processes(client).values())
        results.timeout_s = load(kernel.home.supervisor_override).llm.timeout_s + 30
        url, token = front_door(kernel.root)
        results.quiet = machine.wait_for_quiet(max_s=args.quiet_wait)
        results.load["when the questions began"] = _loadavg()
        with hogs.running(args.hogs) as results.hogs, ToolClient(url, token) as http:
            props = http.input_schema(CHAT).get("properties", {})
            results.answer_mode_arg = "answer_mode" in props
            results.modes = args.modes if results.answer_mode_arg else [m for m in args.modes if m == "auto"]
            results.skipped_modes = [m for m in args.modes if m not in results.modes]
            if results.skipped_modes:
                say(f"the tool takes no answer_mode yet: skipping {results.skipped_modes}")
            if not results.modes:
                raise BenchFailure("no mode left to run (the tool takes no answer_mode: use --modes auto)")
            for mode in results.modes:
                warm = Answer(questions[0], mode)
                ask(http, warm, WARMUP_QUESTION, results.answer_mode_arg, results.timeout_s)
                results.warmup[mode] = warm.error or f"{warm.total_s:.2f} s"
            for q in questions:
                retrieved = retrieve(http, q)
                for mode in results.modes:
                    a = Answer(q, mode, retrieved)
                    cpu = total_cpu_seconds(procs)
                    ask(http, a, q.question, results.answer_mode_arg, results.timeout_s)
                    a.cpu_s = total_cpu_seconds(procs) - cpu
                    results.answers.append(a)
                    say(
                        f"  {q.id} {mode}: {'ERROR ' + a.error if a.error else ''}first text {a.first_text_s:.2f} s,"
                        f" total {a.total_s:.2f} s, {a.mode_used}, gold {'yes' if a.contains_gold else 'no'},"
                        f" cited {'yes' if a.gold_cited else 'no'} (top 5: {retrieved.rank}): {_excerpt(a.answer, 100)}"
                    )
            results.load["when the last answer came"] = _loadavg()
        if any(a.error for a in results.answers):
            kernel.keep = True  # the logs say why
    except BaseException:
        kernel.keep = True
        raise
    finally:
        kernel.stop()
        kernel.cleanup()


# --------------------------------------------------------------------------------------------
# the report


def _loadavg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _short(path: str) -> str:
    """A cited file as the report names it: the path under the Django docs or the manuals folder (the
    last folder so named), else the file name."""
    parts = Path(path).parts
    named = [i for i, part in enumerate(parts[:-1]) if part.startswith(f"{DJANGO}-") or part == MANUALS]
    at = named[-1] if named else None
    return "/".join(parts[at + 1 :]) if at is not None else Path(path).name


def _excerpt(text: str, n: int = 240) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _share(answers: list[Answer], pick: Callable[[Answer], bool | None]) -> tuple[int, int]:
    vals = [pick(a) for a in answers if a.ok]
    known = [v for v in vals if v is not None]
    return sum(1 for v in known if v), len(known)


def _pct(hit: int, n: int) -> str:
    return f"{hit}/{n} ({100 * hit / n:.0f}%)" if n else "-"


def _ratio(hit: int, n: int) -> float:
    return hit / n if n else math.nan


def _s(values: list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "-"
    return f"{statistics.median(vals):.2f} / {pct(vals, 0.95):.2f}"


def _median(values: list[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return statistics.median(vals) if vals else math.nan


def _cells(answers: list[Answer]) -> list[str]:
    ok = [a for a in answers if a.ok]
    return [
        f"{len(ok)}/{len(answers)}",
        _pct(*_share(answers, lambda a: a.contains_gold)),
        _pct(*_share(answers, lambda a: a.gold_cited)),
        _pct(*_share([a for a in answers if a.in_top5], lambda a: a.gold_cited)),
        _pct(*_share(answers, lambda a: a.in_top5)),
        _pct(*_share(answers, lambda a: a.markers_resolve)),
        _pct(*_share(answers, lambda a: a.first_use_order)),
        _s([a.first_text_s for a in ok]),
        _s([a.total_s for a in ok]),
    ]


HEADER = [
    "answered",
    "answer contains gold",
    "gold file cited",
    "cited, where gold in top 5",
    "gold in top 5 (retrieval)",
    "markers resolve",
    "first-use order",
    "first text s, median / p95",
    "total s, median / p95",
]


def _of(r: Results, mode: str, split: str = "all", corpus: str = "all") -> list[Answer]:
    return [
        a
        for a in r.answers
        if a.mode == mode
        and (split == "all" or a.question.split == split)
        and (corpus == "all" or a.question.corpus == corpus)
    ]


def _target_share(
    r: Results, mode: str, split: str, pick: Callable[[Answer], bool | None], top5: bool
) -> tuple[int, int]:
    answers = _of(r, mode, split)
    return _share([a for a in answers if a.in_top5] if top5 else answers, pick)


def judged_split(r: Results) -> str:
    """The split the quality targets are judged on: the first of :data:`JUDGED` the run asked."""
    asked = {q.split for q in r.questions}
    return next((s for s in JUDGED if s in asked), "all")


def render_targets(r: Results) -> list[str]:
    """Each target beside its figures: the quality ones judged on :func:`judged_split`, the time ones on all."""
    quality: list[tuple[str, Callable[[Answer], bool | None], float, bool]] = [
        ("answer contains gold", lambda a: a.contains_gold, AIM_CONTAINS, False),
        ("gold file cited, where gold in top 5", lambda a: a.gold_cited, AIM_CITED_TOP5, True),
        ("[n] markers resolve", lambda a: a.markers_resolve, AIM_MARKERS, False),
    ]
    judged = judged_split(r)
    limits = answer_times.limits(r.hogs.n)
    columns = (*SPLITS, "all")
    blank = ["-"] * len(SPLITS)
    rows = []
    for mode in r.modes:
        every = _of(r, mode)
        for name, pick, aim, top5 in quality:
            h, n = _target_share(r, mode, judged, pick, top5)
            ok = _ratio(h, n) >= aim if n else None
            figures = [_pct(*_target_share(r, mode, split, pick, top5)) for split in columns]
            rows.append([mode, name, *figures, f">= {aim:.0%}", verdict(ok)])
        ok_answers = [a for a in every if a.ok]
        if mode in answer_times.JUDGED_MODES:
            for name, values, limit in (
                ("first text, median", [a.first_text_s for a in ok_answers], limits[0]),
                ("whole answer, median", [a.total_s for a in ok_answers], limits[1]),
            ):
                value = _median(values)
                ok = None if math.isnan(value) else value <= limit
                rows.append([mode, name, *blank, f"{value:.2f} s", f"<= {limit:g} s", verdict(ok)])
        errors = len(every) - len(ok_answers)
        ok = errors == 0 if every else None
        rows.append(
            [mode, "calls answered without an error", *blank, f"{len(ok_answers)}/{len(every)}", "all", verdict(ok)]
        )
    header = ["mode", "figure", *(s.replace("_", " ") for s in columns), "target", "verdict"]
    return table(header, rows, "ll" + "r" * len(columns) + "lc")


def render_summary(r: Results) -> list[str]:
    m = r.machine
    per_corpus = Counter(q.corpus for q in r.questions)
    per_split = Counter(q.split for q in r.questions)
    names = {SCIFACT: "SciFact", DJANGO: "Django docs", MANUALS: "Debian manuals"}
    judged = judged_split(r)
    why = {
        "fresh7": "the fresh7 questions (figures, written 2026-12-07 after every earlier set had been read; all held"
        " out)",
        "fresh6": "the fresh6 questions (figures, written 2026-12-07 after fresh5 had been read once; all held out)",
        "fresh5": "the fresh5 questions (names and figures, written 2026-12-06 for those answer shapes; all held out)",
        "fresh4": "the fresh4 questions (written after the fresh3 ones had been asked four times; all held out)",
        "fresh3": "the fresh3 questions (written after the fresh2 ones had been asked twice; no fresh4 ones were"
        " asked)",
        "fresh2": "the fresh2 questions (written after the fresh ones had been asked once; no fresh3 or fresh4 ones"
        " were asked)",
        "fresh": "the fresh questions (written after the held-out ones had been seen while tuning; all held out;"
        " no fresh2, fresh3 or fresh4 ones were asked)",
        "held_out": "the held-out questions (no fresh, fresh2, fresh3 or fresh4 ones were asked)",
    }
    lines = [
        *para(
            f"Machine: {m.get('CPU', '?')}, {m.get('cores', '?')}, {m.get('RAM', '?')}; run {m.get('date (UTC)', '?')}"
            f" UTC, foldermind {m.get('foldermind', '?')}. {len(r.questions)} questions ("
            + ", ".join(f"{per_corpus[c]} {names.get(c, c)}" for c in CORPORA if per_corpus[c])
            + "; "
            + ", ".join(f"{s.replace('_', ' ')} {per_split[s]}" for s in SPLITS if per_split[s])
            + f"), modes {', '.join(r.modes) or '-'}"
            + (f" (skipped, the tool takes no answer_mode: {', '.join(r.skipped_modes)})" if r.skipped_modes else "")
            + f". The llm worker: {r.llm_note or '?'}. Beside the questions: {r.hogs.describe()}. The load average"
            " (1, 5, 15 min) " + "; ".join(f"{k}: {v}" for k, v in r.load.items()) + "."
        ),
        "",
        f"Targets: the quality ones judged on {why.get(judged, 'all the questions')}, every split beside;"
        " the time ones on all" + (f" (their limits doubled beside {r.hogs.n} CPU hogs)" if r.hogs.n else "") + ":",
        "",
        *render_targets(r),
        "",
    ]
    rows = []
    for mode in r.modes:
        for split in (*SPLITS, "all"):
            answers = _of(r, mode, split)
            if answers:
                rows.append([mode, split.replace("_", " "), *_cells(answers)])
    lines += ["Per mode and split:", "", *table(["mode", "split", *HEADER], rows, "ll" + "r" * len(HEADER)), ""]
    return lines


def render_corpora(r: Results) -> list[str]:
    rows = []
    for mode in r.modes:
        for corpus in CORPORA:
            for split in SPLITS:
                answers = _of(r, mode, split, corpus)
                if answers:
                    rows.append([mode, corpus, split.replace("_", " "), *_cells(answers)])
    return table(["mode", "corpus", "split", *HEADER], rows, "lll" + "r" * len(HEADER))


def render_modes_used(r: Results) -> list[str]:
    rows = []
    for mode in r.modes:
        answers = [a for a in _of(r, mode) if a.ok]
        used = Counter(a.mode_used or "missing" for a in answers)
        dropped = [a.dropped for a in answers if a.dropped is not None]
        reasons = Counter(re.sub(r"\d+", "N", a.fallback_reason) for a in answers if a.fallback_reason)
        missing = Counter(k for a in answers for k in a.missing)
        grounded, n = _share(answers, lambda a: a.grounded)
        rows.append(
            [
                mode,
                ", ".join(f"{k} {v}" for k, v in sorted(used.items())) or "-",
                f"{sum(dropped)} in {sum(1 for d in dropped if d)} answers" if dropped else "missing",
                ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "-",
                _pct(grounded, n),
                f"{statistics.fmean(len(a.citations) for a in answers):.2f}" if answers else "-",
                f"{_median([float(a.progress) for a in answers]):.0f}" if answers else "-",
                _pct(*_share(answers, lambda a: bool(a.markers))),
                ", ".join(f"`{k}` ({v})" for k, v in missing.most_common()) or "none",
            ]
        )
    header = [
        "mode",
        "answer_mode_used",
        "dropped_sentences",
        "fallback reasons",
        "grounded",
        "citations / answer",
        "progress msgs, median",
        "answers with [n] markers",
        "contract fields missing",
    ]
    return table(header, rows, "llllrrrrl")


def render_setup(r: Results) -> list[str]:
    rows = [
        [
            ix.name,
            f"`{ix.folder}`",
            f"{ix.files:,}" + (f" ({ix.failed} failed)" if ix.failed else ""),
            f"{ix.chunks:,}",
            "reused (`--home`)" if ix.reused else f"{ix.ready_s:.0f} s",
        ]
        for ix in r.corpora
    ]
    lines = [*table(["corpus", "folder", "files", "chunks", "indexed and embedded in"], rows, "llrrr"), ""]
    enc = r.encoder
    lines += para(
        f"The folders were registered at once and indexed side by side: everything indexed and embedded after"
        f" {r.index_s:.0f} s (with a kept home: the time to find it so). Query model: {enc.get('backend', '?')}"
        f" ({enc.get('state', '?')}). The llm worker was ready {r.llm_wait_s:.0f} s after that; each chat call"
        f" may take {r.timeout_s:.0f} s. Warm-up (not counted): "
        + ", ".join(f"{k} {v}" for k, v in r.warmup.items())
        + f". CPU in use when the questions began: {r.quiet[0]:.0f}% (waited {r.quiet[1]:.0f} s for a quiet"
        f" machine). Calls carry `answer_mode`: {'yes' if r.answer_mode_arg else 'no (the tool has none yet)'};"
        " no `session_id` and no `max_context_files` (the tool's default). The run's options: "
        + ", ".join(f"`{k}={v}`" for k, v in r.args.items())
        + "."
    )
    return lines


def render_misses(r: Results) -> list[str]:
    rows = []
    for a in r.answers:
        if why := a.failures:
            rank = "-" if a.retrieved is None or a.retrieved.error else str(a.retrieved.rank or "no")
            cited = ", ".join(sorted({_short(p) for p in a.cited_paths if p})) or "-"
            rows.append(
                [
                    a.question.id,
                    a.mode,
                    a.question.split.replace("_", " "),
                    "; ".join(why),
                    rank,
                    _excerpt(a.question.question, 120),
                    "`" + a.question.answer.replace("|", "\\|") + "`",
                    _excerpt(a.answer) or "(empty)",
                    cited,
                ]
            )
    if not rows:
        return ["No misses."]
    header = ["id", "mode", "split", "what failed", "gold rank in top 5", "question", "gold", "answer", "cited"]
    return table(header, rows, "lllllllll")


def render(r: Results) -> str:
    lines = [
        "# Factoid answers: chat_with_documents on SciFact, the Django docs and Debian manuals",
        "",
        "Generated by `python -m tests.bench.answers`. A real kernel (default process map) indexes three corpora",
        "nobody on the project wrote, then answers hand-written factoid questions (`tests/bench/factoids.py`",
        "says how they were made and split) with `chat_with_documents` over MCP HTTP, to the `mcp` SDK client.",
        "",
        "## Summary",
        "",
        *render_summary(r),
        "## Time targets by corpus",
        "",
        *answer_times.render(r.answers, r.modes, CORPORA, r.hogs.n),
        "",
        "## By corpus",
        "",
        *render_corpora(r),
        "",
        "## By question shape: the model's text kept (auto, generative)",
        "",
        *answer_shapes.render(r.answers, SPLITS),
        "",
        "## Answer modes used, dropped sentences, contract",
        "",
        *render_modes_used(r),
        "",
        "## Setup",
        "",
        *render_setup(r),
        "",
        "## Machine",
        "",
        *table(["", ""], [[k, v] for k, v in r.machine.items()], "ll"),
        "",
    ]
    if r.errors:
        lines += ["## Errors", "", *(f"- {e}" for e in r.errors), ""]
    lines += ["## Appendix: every miss", "", *render_misses(r), "", f"Run took {r.elapsed_s / 60:.1f} min.", ""]
    return "\n".join(lines)


def dump(r: Results, path: Path) -> None:
    rows = []
    for a in r.answers:
        row = asdict(a)
        row["question"] = a.question.id
        row.update(
            contains_gold=a.contains_gold,
            gold_cited=a.gold_cited,
            in_top5=a.in_top5,
            markers_resolve=a.markers_resolve,
            first_use_order=a.first_use_order,
        )
        rows.append(row)
    path.write_text(json.dumps(rows, indent=1, default=str, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.answers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default="", help="keep the kernel's home (index, corpora) here and reuse it")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"answer modes, comma-separated (default {','.join(MODES)})"
    )
    parser.add_argument("--split", default="all", choices=("all", *SPLITS), help="which questions (default all)")
    parser.add_argument("--corpus", default="all", choices=("all", *CORPORA), help="which corpus (default all)")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions, corpora interleaved (0: all)")
    parser.add_argument(
        "--index",
        default="all",
        choices=("all", "asked"),
        help="index every corpus (default: a kept home stays the same) or only those of the picked questions",
    )
    parser.add_argument("--hogs", type=int, default=0, help="run the questions beside N busy-loop processes")
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="wait at most this for a quiet machine (s)")
    parser.add_argument("--report", default="", help=f"write the report here instead of {REPORT.relative_to(REPO)}")
    parser.add_argument("--json", default="", help="also write every answer as JSON here")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [search] setting for the run, VALUE in TOML (e.g. blend_repeat_penalty=0); repeatable",
    )
    parser.add_argument(
        "--llm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='an [llm] setting for the run, VALUE in TOML (e.g. auto_model_shapes=["figure"]); repeatable',
    )
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or not set(args.modes) <= set(MODES):
        parser.error(f"--modes: one or more of {', '.join(MODES)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the workers inherit it: nothing is downloaded

    t0 = time.monotonic()
    facts = machine.facts(REPO)
    machine.versions(facts, *machine.MCP_STACK)
    shown = ("modes", "split", "corpus", "limit", "index", "llm", "hogs")
    options = {k: (",".join(v) if isinstance(v, list) else v) for k, v in vars(args).items() if k in shown}
    results = Results(machine=facts, args=options)
    try:
        run(args, results)
    except (BenchFailure, BusError, OSError) as exc:
        traceback.print_exc()
        results.errors.append(f"{type(exc).__name__}: {exc}")
        say(f"bench failed: {exc}")
    results.elapsed_s = time.monotonic() - t0
    text = render(results)
    print(text)
    if args.json:
        dump(results, Path(args.json))
    if not args.no_write:
        out = Path(args.report) if args.report else REPORT
        out.write_text(merged(out, text), encoding="utf-8")  # a section written by hand is kept
        say(f"wrote {out}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
