"""Crash-consistency soak: index a mixed corpus while workers and the kernel are killed with SIGKILL and
the folder is edited, then compare the index with one built from scratch over the final folder.

    python -m tests.soak --files N --minutes M --seed S [--home DIR] [--report PATH]

What it does, all seeded by ``--seed`` (the moments of the kills are real time, so two runs with one
seed make the same corpus and the same sequence of choices, not the same interleaving):

1. Writes a corpus of ``--files`` txt/md/html/docx/pdf files (SciFact abstracts as text, a unique
   marker word per file version; a few files that must fail: a text-less PDF, a corrupt DOCX, a binary
   .txt), 60% of it before the folder is registered and the rest in bursts during the faults.
2. Starts a real kernel (``foldermind start``) and registers the folder, then for ``--minutes``:
   kill -9 of a random RUNNING worker (any of them), a few kill -9s of the kernel itself (its workers
   die with it) followed by ``foldermind start``, and edits, atomic saves, renames (across folders,
   over other files, changing the extension, whole folders), touches, deletes and new files in
   between, some of them while the kernel is down.
3. Waits until the index is quiet, checks live searches, stops the kernel, and reads SQLite, the
   Tantivy index and the usearch file directly. Then indexes the final folder from scratch in a fresh
   home with no faults and compares: the same documents with the same status and reason, the same
   chunks (count and text) per document, no duplicate chunk ids in any store, no chunk of a deleted or
   overwritten file version findable by keyword (its marker) or by vector (its key), every file
   indexed or failed with a reason.

Two limits of the system's policy are respected, not tested, by the kill schedule: a worker killed
more than ``max_restarts`` times in ``window_s`` is left FAILED on purpose (test_faults proves that),
so a worker is killed at most 3 times a minute; and a file whose parse loses its parser twice is
quarantined on purpose, so two parser kills are kept ``PARSER_KILL_GAP_S`` apart.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from foldermind.protocol.client import BusClient
from foldermind.protocol.messages import SearchReply, SearchRequest
from foldermind.workers.indexer.storage.database import SEARCHABLE
from tests.config import Config
from tests.filemakers import make_docx, make_pdf
from tests.helpers import RunningKernel, cli, kill9, short_tmpdir, wait_for

REPO = Path(__file__).resolve().parent.parent
SCIFACT_ENV = "FOLDERMIND_SCIFACT"
KINDS = ("txt", "md", "html", "docx", "pdf")
KIND_WEIGHTS = (30, 25, 15, 15, 15)
SUBDIRS = ("alpha", "beta", "gamma", "delta", "alpha/inner", "beta/deep/er")
PER_WORKER_KILLS_PER_MIN = 3  # under [restart] max_restarts = 5 per 60 s: no worker is pushed to FAILED
PARSER_KILL_GAP_S = 5.0
START_TIMEOUT_S = 300.0
# The soak runs on the production policy (restart backoff, the ONNX query encoder and all). Its homes share
# the machine's checked export (RunningKernel's tests/helpers.MODEL_CACHE), so an indexer killed and started
# again loads it instead of importing torch: the short soak's tree used ~67 CPU-s with torch queries.
SOAK_CONFIG: Config = {}
# The reference index is not what is under test: no background summaries competing for the CPU.
FRESH_CONFIG: Config = {"llm": {"analysis": False}}


# ---------------------------------------------------------------------------------------------
# the corpus


def scifact_texts(limit: int) -> list[tuple[str, str]]:
    """(title, abstract) pairs from SciFact; generated sentences when the corpus is not there."""
    path = Path(os.environ.get(SCIFACT_ENV) or REPO.parent / "shared" / "eval" / "scifact") / "corpus.jsonl"
    out: list[tuple[str, str]] = []
    if path.is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if len(out) >= limit:
                    break
                doc = json.loads(line)
                if doc.get("text", "").strip():
                    out.append((doc.get("title", "").strip() or "Untitled", doc["text"].strip()))
    if not out:  # no SciFact here: plain generated prose does the same job for the soak
        rng = random.Random(7)
        words = ["cell", "protein", "tissue", "signal", "growth", "response", "gene", "model", "rate", "study"]
        for i in range(limit):
            sents = [" ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(8)]
            out.append((f"Generated abstract {i}", " ".join(sents)))
    return out


def _latin1(text: str) -> str:
    return "".join(c if ord(c) < 256 else " " for c in text)


def _wrap(text: str, width: int = 90) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def marker_word(n: int) -> str:
    """A unique letters-only word (no stemmer changes it): zq + base-26 digits + vx."""
    digits = ""
    while True:
        n, r = divmod(n, 26)
        digits = chr(97 + r) + digits
        if n == 0:
            break
    return f"zq{digits}vx"


@dataclass
class Entry:
    marker: str | None  # None: a file made to fail (no text, corrupt, binary)
    kind: str


@dataclass
class Corpus:
    root: Path
    rng: random.Random
    texts: list[tuple[str, str]]
    files: dict[str, Entry] = field(default_factory=dict)  # relative path -> what it holds now
    dead: set[str] = field(default_factory=set)  # markers of deleted or overwritten versions
    ops: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)  # every operation, for tracing a discrepancy back
    short: bool = False
    _next_marker: int = 0
    _next_name: int = 0

    def note(self, what: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {what}")

    # -- writing files --------------------------------------------------------------------

    def _marker(self) -> str:
        self._next_marker += 1
        return marker_word(self._next_marker)

    def new_name(self, kind: str) -> str:
        self._next_name += 1
        folder = self.rng.choice(("", *SUBDIRS))
        name = f"doc{self._next_name:05d}.{kind}"
        return f"{folder}/{name}" if folder else name

    def _body(self) -> tuple[str, list[str]]:
        r = self.rng.random()
        if self.short and r < 0.95:  # the short soak: mostly one-chunk files (embedding is what takes time)
            title, text = self.rng.choice(self.texts)
            return title, [" ".join(text.split(". ")[:3])]
        if r < 0.2:  # a short note: one or two sentences
            title, text = self.rng.choice(self.texts)
            return title, [" ".join(text.split(". ")[:2])]
        if r < 0.9:
            title, text = self.rng.choice(self.texts)
            return title, [text]
        picks = [self.rng.choice(self.texts) for _ in range(self.rng.randint(2, 4))]
        return picks[0][0], [t for _, t in picks]

    def write(self, rel: str, fail: bool = False, atomic: bool = False) -> None:
        """(Re)write ``rel`` with fresh content; an existing version's marker becomes dead."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = path.suffix[1:]
        old = self.files.get(rel)
        if old and old.marker:
            self.dead.add(old.marker)
        target = path.with_name(f".{path.name}.saving") if atomic else path
        marker = None if fail else self._marker()
        if fail:
            self._write_failing(target, kind)
        else:
            assert marker is not None
            self._write_doc(target, kind, marker)
        if atomic:
            os.replace(target, path)  # an editor's save: a hidden temporary renamed over the file
        self.files[rel] = Entry(marker, kind)
        self.note(f"write {rel} {marker or 'failing'}{' atomic' if atomic else ''}")

    def _write_doc(self, path: Path, kind: str, marker: str) -> None:
        title, paras = self._body()
        tag = f"Reference code {marker} for this record."
        if kind == "txt":
            path.write_text(f"{title}\n\n" + "\n\n".join(paras) + f"\n\n{tag}\n", "utf-8")
        elif kind == "md":
            body = "\n\n".join(f"## Part {i + 1}\n\n{p}" for i, p in enumerate(paras))
            path.write_text(f"# {title}\n\n{body}\n\n{tag}\n", "utf-8")
        elif kind == "html":
            ps = "".join(f"<p>{_html_escape(p)}</p>" for p in paras)
            path.write_text(
                f"<html><head><title>{_html_escape(title)}</title></head><body><h1>{_html_escape(title)}</h1>"
                f"{ps}<p>{tag}</p></body></html>",
                "utf-8",
            )
        elif kind == "docx":
            make_docx(path.with_suffix(".docx.tmp"), title, [("Abstract", [*paras, tag])], [])
            os.replace(path.with_suffix(".docx.tmp"), path)
        elif kind == "pdf":
            lines = [_latin1(title)] + [ln for p in paras for ln in _wrap(_latin1(p))] + [tag]
            pages = [lines[i : i + 40] for i in range(0, len(lines), 40)]
            make_pdf(path, pages)
        else:
            raise ValueError(kind)

    def _write_failing(self, path: Path, kind: str) -> None:
        if kind == "pdf":
            make_pdf(path, [[], []])  # no text at all, like a scan
        elif kind == "docx":
            path.write_bytes(b"PK\x03\x04 not really a zip archive " + os.urandom(64))
        else:
            path.write_bytes(bytes(range(256)) * 32)  # binary: not a text file

    # -- the operations the driver picks from ----------------------------------------------

    def create(self) -> None:
        kind = self.rng.choices(KINDS, KIND_WEIGHTS)[0]
        self.write(self.new_name(kind), fail=self.rng.random() < 0.03)
        self.ops["create"] += 1

    def random_op(self) -> None:
        ops = (
            (self.edit, 30),
            (self.create, 14),
            (self.rename, 16),
            (self.move_over, 3),
            (self.change_extension, 3),
            (self.delete, 16),
            (self.touch, 8),
            (self.rename_folder, 2),
            (self.delete_folder, 1),
        )
        op = self.rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        if self.files or op is self.create:
            op()

    def _pick(self) -> str:
        return self.rng.choice(sorted(self.files))

    def edit(self) -> None:
        rel = self._pick()
        atomic = self.rng.random() < 0.4
        self.write(rel, fail=self.rng.random() < 0.03, atomic=atomic)
        self.ops["edit (atomic save)" if atomic else "edit (in place)"] += 1

    def rename(self) -> None:
        rel = self._pick()
        new = self.new_name(Path(rel).suffix[1:])
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.root / rel, self.root / new)
        self.files[new] = self.files.pop(rel)
        self.note(f"rename {rel} -> {new}")
        self.ops["rename"] += 1

    def move_over(self) -> None:
        """Rename a file over another of the same kind: the one replaced is gone."""
        rel = self._pick()
        others = [p for p in self.files if p != rel and Path(p).suffix == Path(rel).suffix]
        if not others:
            return
        victim = self.rng.choice(sorted(others))
        gone = self.files[victim]
        if gone.marker:
            self.dead.add(gone.marker)
        os.replace(self.root / rel, self.root / victim)
        self.files[victim] = self.files.pop(rel)
        self.note(f"rename {rel} -> over {victim}")
        self.ops["rename over another file"] += 1

    def change_extension(self) -> None:
        """notes.txt -> notes.md and back: the same bytes, now parsed as another format."""
        swaps = {".txt": ".md", ".md": ".txt"}
        candidates = sorted(p for p in self.files if Path(p).suffix in swaps)
        if not candidates:
            return
        rel = self.rng.choice(candidates)
        new = str(Path(rel).with_suffix(swaps[Path(rel).suffix]))
        if new in self.files:
            return
        os.rename(self.root / rel, self.root / new)
        entry = self.files.pop(rel)
        self.files[new] = Entry(entry.marker, Path(new).suffix[1:])
        self.note(f"rename {rel} -> {new}")
        self.ops["rename changing the extension"] += 1

    def delete(self) -> None:
        rel = self._pick()
        (self.root / rel).unlink()
        gone = self.files.pop(rel)
        if gone.marker:
            self.dead.add(gone.marker)
        self.note(f"delete {rel}")
        self.ops["delete"] += 1

    def touch(self) -> None:
        rel = self._pick()
        os.utime(self.root / rel, None)
        self.note(f"touch {rel}")
        self.ops["touch (mtime only)"] += 1

    def _pick_folder(self) -> str | None:
        folders = sorted({str(Path(p).parent) for p in self.files if "/" in p})
        return self.rng.choice(folders) if folders else None

    def rename_folder(self) -> None:
        old = self._pick_folder()
        if old is None:
            return
        self._next_name += 1
        new = f"{old}-moved{self._next_name}"
        os.rename(self.root / old, self.root / new)
        self.note(f"rename folder {old} -> {new}")
        prefix = old + "/"
        for rel in [p for p in self.files if p.startswith(prefix)]:
            self.files[new + "/" + rel[len(prefix) :]] = self.files.pop(rel)
        self.ops["rename a folder"] += 1

    def delete_folder(self) -> None:
        old = self._pick_folder()
        if old is None:
            return
        shutil.rmtree(self.root / old)
        self.note(f"delete folder {old}")
        prefix = old + "/"
        for rel in [p for p in self.files if p.startswith(prefix)]:
            gone = self.files.pop(rel)
            if gone.marker:
                self.dead.add(gone.marker)
        self.ops["delete a folder"] += 1

    def on_disk(self) -> set[str]:
        return {
            str(p.relative_to(self.root))
            for p in self.root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(self.root).parts)
        }


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---------------------------------------------------------------------------------------------
# reading an index back


@dataclass
class IndexState:
    docs: dict[str, dict[str, Any]]  # path -> status, error, chunks (column), rows, text hash, analysis
    chunk_ids: set[int]  # chunk ids of indexed documents (SQLite)
    embedded: set[int]
    duplicate_ordinals: list[str]
    tantivy_ids: list[int]
    usearch_keys: list[int]
    marker_hits: dict[str, set[str]]  # marker -> paths whose chunks Tantivy finds for it
    chunk_doc: dict[int, str]


def read_index(home: Path, markers: set[str]) -> IndexState:
    """Everything the three stores hold, read directly from disk (the kernel must be stopped)."""
    from foldermind.workers.indexer.storage.keyword.bm25 import KeywordIndex
    from foldermind.workers.indexer.storage.vectors import VectorIndex

    data = home / "data"
    db = sqlite3.connect(f"file:{data / 'index.sqlite'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    docs: dict[str, dict[str, Any]] = {}
    chunk_doc: dict[int, str] = {}
    chunk_ids: set[int] = set()
    embedded: set[int] = set()
    by_doc: dict[int, list[sqlite3.Row]] = {}
    for row in db.execute("SELECT id, doc_id, ordinal, text, vector IS NOT NULL AS v FROM chunks ORDER BY ordinal"):
        by_doc.setdefault(int(row["doc_id"]), []).append(row)
    analysed = {int(r[0]) for r in db.execute("SELECT doc_id FROM analysis")}
    dup_ordinals: list[str] = []
    for d in db.execute("SELECT id, path, status, error, chunks FROM documents"):
        rows = by_doc.get(int(d["id"]), [])
        ordinals = [int(r["ordinal"]) for r in rows]
        if len(ordinals) != len(set(ordinals)):
            dup_ordinals.append(d["path"])
        digest = hashlib.sha256("\x00".join(str(r["text"]) for r in rows).encode()).hexdigest()
        docs[d["path"]] = {
            "status": d["status"],
            "error": d["error"] or "",
            "chunks": int(d["chunks"]),
            "rows": len(rows),
            "text_sha": digest,
            "analysis": int(d["id"]) in analysed,
        }
        for r in rows:
            chunk_doc[int(r["id"])] = d["path"]
            if d["status"] in SEARCHABLE:
                chunk_ids.add(int(r["id"]))
                if r["v"]:
                    embedded.add(int(r["id"]))
    vector_dim = db.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()
    db.close()

    import tantivy

    bm25 = KeywordIndex(data / "tantivy")
    searcher = bm25.index.searcher()
    tantivy_ids: list[int] = []
    total = int(searcher.num_docs)
    if total:
        result = searcher.search(tantivy.Query.all_query(), total + 10)
        tantivy_ids = [int(searcher.doc(addr)["chunk_id"][0]) for _, addr in result.hits]
    marker_hits: dict[str, set[str]] = {}
    for marker in markers:
        hits, _ = bm25.search(marker, 20)
        marker_hits[marker] = {chunk_doc.get(h.chunk_id, f"<chunk {h.chunk_id} not in SQLite>") for h in hits}
    bm25.close()

    vectors = VectorIndex(data / "vectors.usearch", int(vector_dim[0]) if vector_dim else 384)
    usearch_keys = [int(k) for k in vectors.keys()]  # noqa: SIM118 (a method, not a dict)
    return IndexState(docs, chunk_ids, embedded, dup_ordinals, tantivy_ids, usearch_keys, marker_hits, chunk_doc)


def quiet_fingerprint(home: Path) -> tuple[Any, ...] | None:
    """A fingerprint of the index while nothing is pending, journaled or waiting for a vector; None while
    something is. The LLM's summaries are left out: they go on while the pipeline is idle."""
    try:
        db = sqlite3.connect(f"file:{home / 'data' / 'index.sqlite'}?mode=ro", uri=True, timeout=10)
        try:
            pending = db.execute("SELECT COUNT(*) FROM documents WHERE status = 'pending'").fetchone()[0]
            journal = db.execute("SELECT COUNT(*) FROM journal").fetchone()[0]
            unembedded = db.execute(
                "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                f"WHERE c.vector IS NULL AND d.status IN {SEARCHABLE!r}"
            ).fetchone()[0]
            if pending or journal or unembedded:
                return None
            return tuple(
                db.execute(
                    "SELECT (SELECT COUNT(*) FROM documents), (SELECT MAX(updated_at) FROM documents), "
                    "(SELECT MAX(id) FROM chunks), (SELECT COUNT(*) FROM chunks), "
                    "(SELECT group_concat(path) FROM (SELECT path FROM documents ORDER BY path))"
                ).fetchone()
            )
        finally:
            db.close()
    except sqlite3.Error:
        return None


def wait_quiet(home: Path, timeout: float, still_s: float = 4.0) -> bool:
    """Until the index has been quiet and unchanged for ``still_s`` (the watcher's debounce and any
    event still on its way are far shorter)."""
    give_up = time.monotonic() + timeout
    last: tuple[Any, ...] | None = None
    since = time.monotonic()
    while time.monotonic() < give_up:
        fp = quiet_fingerprint(home)
        if fp is None or fp != last:
            last, since = fp, time.monotonic()
        elif time.monotonic() - since >= still_s:
            return True
        time.sleep(0.5)
    return False


# ---------------------------------------------------------------------------------------------
# the run


@dataclass
class SoakReport:
    files: int
    seed: int
    fault_seconds: float
    worker_kills: Counter[str] = field(default_factory=Counter)
    kernel_kills: int = 0
    unplanned_restarts: Counter[str] = field(default_factory=Counter)
    kills_while_indexing: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    ops_while_down: int = 0
    discrepancies: list[str] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    final: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [
            "# Crash-consistency soak",
            "",
            f"- seed {self.seed}, {self.files} files at the start, {self.fault_seconds:.0f} s of faults",
            f"- final folder: {self.final.get('files', 0)} files, {self.final.get('indexed', 0)} indexed, "
            f"{self.final.get('failed', 0)} failed with a reason, {self.final.get('chunks', 0)} chunks",
            f"- worker kills (kill -9) survived: {sum(self.worker_kills.values())} "
            f"({self.kills_while_indexing} while documents were pending)",
        ]
        lines += [f"  - {name}: {n}" for name, n in sorted(self.worker_kills.items())]
        lines.append(f"- kernel kills (kill -9, then `foldermind start`): {self.kernel_kills}")
        if self.unplanned_restarts:
            lines.append(
                "- restarts the driver did not cause (the kernel's liveness checks on a loaded machine): "
                + ", ".join(f"{n} {c}" for n, c in sorted(self.unplanned_restarts.items()))
            )
        lines.append(f"- file operations: {sum(self.ops.values())} ({self.ops_while_down} while the kernel was down)")
        lines += [f"  - {name}: {n}" for name, n in sorted(self.ops.items())]
        lines.append("- durations (s): " + ", ".join(f"{k} {v:.1f}" for k, v in self.durations.items()))
        lines += [f"- {note}" for note in self.notes]
        lines.append(f"- **discrepancies: {len(self.discrepancies)}**")
        lines += [f"  - {d}" for d in self.discrepancies[:200]]
        if len(self.discrepancies) > 200:
            lines.append(f"  - ... and {len(self.discrepancies) - 200} more")
        return "\n".join(lines) + "\n"


def start_kernel(home: Path, config: Config) -> RunningKernel:
    """`foldermind start`, as RunningKernel.start does, with room for a loaded machine (its 60 s is tight
    when other kernels share the two cores)."""
    k = RunningKernel(home, config)
    cli(home, "start", timeout=START_TIMEOUT_S)
    k.kernel_pid = int(k.home.pid_file.read_text())
    k.connect_events()
    k.wait_all_running(timeout=START_TIMEOUT_S)
    return k


def say(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Soak:
    def __init__(
        self,
        files: int,
        seconds: float,
        seed: int,
        home: Path,
        kernel_kills: int | None = None,
        short: bool = False,
        min_worker_kills: int = 0,
    ) -> None:
        self.min_worker_kills = min_worker_kills
        self.rng = random.Random(seed)
        self.home = home
        self.root = home / "folder"
        self.files, self.seconds = files, seconds
        self.corpus = Corpus(self.root, random.Random(seed + 1), scifact_texts(2000), short=short)
        self.report = SoakReport(files=files, seed=seed, fault_seconds=seconds)
        self.kernel_kills = kernel_kills if kernel_kills is not None else max(1, round(seconds / 90))
        self.kernel: RunningKernel | None = None
        self._kill_times: dict[str, list[float]] = {}
        self._last_parser_kill = -1e9
        self._instance_kills: Counter[str] = Counter()

    # -- kernel ---------------------------------------------------------------------------

    def start_kernel(self) -> RunningKernel:
        k = start_kernel(self.home, SOAK_CONFIG)
        self.kernel = k
        self._instance_kills = Counter()
        self.corpus.note(f"kernel started (pid {k.kernel_pid})")
        return k

    def kill_kernel(self) -> None:
        k = self.kernel
        assert k is not None
        self.count_unplanned_restarts()
        workers = k.descendants()
        kill9(k.kernel_pid)
        wait_for(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers),
            30,
            what="every worker gone with the kernel",
        )
        k.stop()  # closes its sockets; the kernel is gone, so no `foldermind stop` runs
        self.kernel = None
        self.report.kernel_kills += 1
        self.corpus.note("kill -9 the kernel")

    @staticmethod
    def watcher_synced(k: RunningKernel | None) -> bool:
        if k is None:
            return False
        w = k.worker("watcher")
        return w["state"] == "RUNNING" and str(w.get("note") or "").startswith("watching")

    def count_unplanned_restarts(self) -> None:
        """Restarts of this kernel's workers that the driver did not cause: the kernel's own liveness
        checks (missed heartbeats, deadlines) on a loaded machine."""
        if self.kernel is None:
            return
        with contextlib.suppress(Exception):
            for w in self.kernel.status().workers:
                extra = int(w["restarts"]) - self._instance_kills[str(w["name"])]
                if extra > 0:
                    self.report.unplanned_restarts[str(w["name"])] += extra

    def kill_worker(self) -> None:
        k = self.kernel
        assert k is not None
        now = time.monotonic()
        candidates = []
        for w in k.status().workers:
            name = str(w["name"])
            recent = [t for t in self._kill_times.get(name, []) if now - t < 60]
            if w["state"] != "RUNNING" or not w["pid"] or len(recent) >= PER_WORKER_KILLS_PER_MIN:
                continue
            if name.startswith("parser") and now - self._last_parser_kill < PARSER_KILL_GAP_S:
                continue
            candidates.append((name, int(w["pid"])))
        if not candidates:
            return
        name, pid = self.rng.choice(sorted(candidates))
        with contextlib.suppress(ProcessLookupError):
            kill9(pid)
        self._kill_times.setdefault(name, []).append(now)
        if name.startswith("parser"):
            self._last_parser_kill = now
        self.report.worker_kills[name] += 1
        self._instance_kills[name] += 1
        self.corpus.note(f"kill -9 {name} (pid {pid})")
        if quiet_fingerprint(self.home) is None:
            self.report.kills_while_indexing += 1

    # -- phases ---------------------------------------------------------------------------

    def run(self) -> SoakReport:
        t0 = time.monotonic()
        corpus, rng = self.corpus, self.rng
        say(f"writing {self.files} files into {self.root}")
        first = int(self.files * 0.6)
        for _ in range(first):
            corpus.create()
        later = self.files - first
        corpus.ops.clear()  # the initial corpus is not a file operation
        self.report.durations["corpus"] = time.monotonic() - t0

        t1 = time.monotonic()
        self.start_kernel()
        cli(self.home, "folders", "add", str(self.root), "--name", "Soak")
        self.report.durations["first start"] = time.monotonic() - t1
        say(f"kernel up, folder registered; {self.seconds:.0f} s of faults with {self.kernel_kills} kernel kill(s)")

        t2 = time.monotonic()
        end = t2 + self.seconds
        kernel_kill_at = sorted(
            t2 + self.seconds * (i + rng.uniform(0.2, 0.8)) / self.kernel_kills for i in range(self.kernel_kills)
        )
        bursts = max(1, min(10, later // 20 or 1))
        burst_at = sorted(t2 + rng.uniform(0.0, 0.7) * self.seconds for _ in range(bursts))
        per_burst = [later // bursts + (1 if i < later % bursts else 0) for i in range(bursts)]
        # At least min_worker_kills kills, however slow the machine: past the window, until then (bounded).
        while time.monotonic() < end or (
            sum(self.report.worker_kills.values()) < self.min_worker_kills and time.monotonic() < end + 180
        ):
            time.sleep(rng.uniform(0.3, 3.0))
            now = time.monotonic()
            if kernel_kill_at and now >= kernel_kill_at[0]:
                kernel_kill_at.pop(0)
                say("kill -9 the kernel")
                self.kill_kernel()
                before = sum(corpus.ops.values())
                for _ in range(rng.randint(3, 12)):
                    corpus.random_op()
                self.report.ops_while_down += sum(corpus.ops.values()) - before
                time.sleep(rng.uniform(0.0, 2.0))
                down = time.monotonic()
                self.start_kernel()
                say("kernel restarted")
                end += time.monotonic() - down  # the window counts time with a kernel up, not its start-up
                continue
            if burst_at and now >= burst_at[0]:
                burst_at.pop(0)
                for _ in range(per_burst.pop(0)):
                    corpus.create()
                continue
            if rng.random() < 0.45:
                self.kill_worker()
            else:
                for _ in range(rng.randint(1, 5)):
                    corpus.random_op()
        for n in per_burst:  # bursts the clock did not reach
            for _ in range(n):
                corpus.create()
        self.report.ops = corpus.ops
        self.report.durations["faults"] = time.monotonic() - t2
        say(f"faults done: {dict(self.report.worker_kills)}, kernel kills {self.report.kernel_kills}")

        t3 = time.monotonic()
        if self.kernel is None:
            self.start_kernel()
        assert self.kernel is not None
        settle_s = max(600.0, self.files * 0.6)
        # The watcher notes "watching" once its start-up reconcile is in: a quiet index before that
        # proves nothing. Nothing else is asked of it (a sync now would hide a lost event).
        wait_for(lambda: self.watcher_synced(self.kernel), settle_s, 0.5, "the watcher's start-up reconcile")
        quiet = wait_quiet(self.home, timeout=settle_s, still_s=6.0)
        self.count_unplanned_restarts()
        if not quiet:
            self.report.discrepancies.append("the index did not become quiet (pending, journal or unembedded left)")
        self.report.durations["settle"] = time.monotonic() - t3
        self.check_live()
        self.kernel.stop()
        self.kernel = None
        say("soak index quiet; indexing the final folder from scratch")

        t4 = time.monotonic()
        fresh_home = short_tmpdir("fm-fresh-")
        try:
            fresh = self.build_fresh(fresh_home)
            self.report.durations["fresh index"] = time.monotonic() - t4
            markers = {e.marker for e in corpus.files.values() if e.marker} | corpus.dead
            self.compare(read_index(self.home, markers), fresh)
        finally:
            shutil.rmtree(fresh_home, ignore_errors=True)
        self.report.durations["total"] = time.monotonic() - t0
        return self.report

    def check_live(self) -> None:
        """Through the running system: every worker RUNNING, and a sample of searches for deleted and
        current markers and for deleted texts (semantic) return only files that exist."""
        k = self.kernel
        assert k is not None
        for w in k.status().workers:
            # IDLE: an on-demand worker that left with nothing to do (the embedder, released once every chunk is
            # embedded and the llm summarises): a legal state, not a crash.
            if w["state"] not in ("RUNNING", "IDLE"):
                self.report.discrepancies.append(f"worker {w['name']} is {w['state']} at the end ({w['last_error']})")
        dead = sorted(self.corpus.dead)
        live = sorted((rel, e.marker) for rel, e in self.corpus.files.items() if e.marker)
        sample_dead = self.rng.sample(dead, min(15, len(dead)))
        sample_live = self.rng.sample(live, min(15, len(live)))
        with BusClient(k.home.bus_endpoint, name="soak") as client:

            def search(query: str, mode: str) -> SearchReply:
                return client.request(
                    "indexer", SearchRequest(query, mode=mode, top_k=10), SearchReply, timeout=30
                ).body

            for marker in sample_dead:
                for hit in search(marker, "keyword").results:
                    self.report.discrepancies.append(
                        f"live keyword search for deleted marker {marker} found {hit['file_path']}"
                    )
            for rel, marker in sample_live:
                paths = {h["file_path"] for h in search(marker, "keyword").results}
                if paths != {str(self.root / rel)}:
                    self.report.discrepancies.append(f"live keyword search for {marker} of {rel} found {sorted(paths)}")
            for rel, _ in sample_live[:5]:
                for hit in search(f"Reference code record {Path(rel).stem}", "semantic").results:
                    if not os.path.exists(hit["file_path"]):
                        self.report.discrepancies.append(
                            f"live semantic search returned a gone file {hit['file_path']}"
                        )

    def build_fresh(self, fresh_home: Path) -> IndexState:
        k: RunningKernel | None = None
        try:
            k = start_kernel(fresh_home, FRESH_CONFIG)
            # Not --wait: on a loaded machine the indexer can miss heartbeats and be restarted, which
            # --wait reports as an error; the index is polled instead (the `folders add` reconcile is in).
            cli(fresh_home, "folders", "add", str(self.root), "--name", "Fresh", timeout=600)
            if not wait_quiet(fresh_home, timeout=max(600.0, self.files * 0.6)):
                self.report.discrepancies.append("the fresh reference index did not become quiet")
            restarts = {str(w["name"]): int(w["restarts"]) for w in k.status().workers if w["restarts"]}
            if restarts:
                self.report.notes.append(f"the reference build's workers restarted (missed heartbeats): {restarts}")
        finally:
            if k is not None:
                k.stop()
            else:  # a start that did not finish may still have left a kernel behind
                cli(fresh_home, "stop", check=False, timeout=60)
        return read_index(fresh_home, set())

    def compare(self, soak: IndexState, fresh: IndexState) -> None:
        bad = self.report.discrepancies
        root = str(self.root)
        expected = {root + "/" + rel for rel in self.corpus.on_disk()}
        model = {root + "/" + rel for rel in self.corpus.files}
        if expected != model:  # the driver's own bookkeeping, checked so the marker checks mean something
            bad.append(f"driver model differs from the disk: {sorted(expected ^ model)[:10]}")
        # documents, status, reasons, chunks
        for path in sorted(set(soak.docs) | set(fresh.docs) | expected):
            s, f = soak.docs.get(path), fresh.docs.get(path)
            rel = os.path.relpath(path, root)
            if s is None:
                bad.append(f"{rel}: on disk but not in the soak index" if f else f"{rel}: in neither index")
                continue
            if f is None:
                bad.append(f"{rel}: in the soak index ({s['status']}) but not in the fresh one (gone from the folder)")
                continue
            if s["status"] not in ("indexed", "failed", "skipped") or (s["status"] != "indexed" and not s["error"]):
                bad.append(f"{rel}: status {s['status']} without a reason ({s['error']!r})")
            if (s["status"], s["error"]) != (f["status"], f["error"]):
                bad.append(f"{rel}: {s['status']} ({s['error']}) in the soak, {f['status']} ({f['error']}) fresh")
            if s["chunks"] != s["rows"]:
                bad.append(f"{rel}: documents.chunks says {s['chunks']}, {s['rows']} chunk rows")
            if s["rows"] != f["rows"]:
                bad.append(f"{rel}: {s['rows']} chunks in the soak, {f['rows']} fresh")
            elif s["text_sha"] != f["text_sha"]:
                bad.append(f"{rel}: chunk texts differ from the fresh index")
            if s["analysis"] != f["analysis"]:
                bad.append(f"{rel}: analysis {'present' if s['analysis'] else 'missing'} in the soak only")
        bad.extend(f"{os.path.relpath(p, root)}: two chunks with one ordinal" for p in soak.duplicate_ordinals)
        # Tantivy
        t_counts = Counter(soak.tantivy_ids)
        dups = sorted(i for i, n in t_counts.items() if n > 1)
        if dups:
            bad.append(f"Tantivy holds {len(dups)} chunk ids more than once: {dups[:10]}")
        stale = sorted(set(t_counts) - soak.chunk_ids)
        if stale:
            where = sorted({soak.chunk_doc.get(i, "deleted") for i in stale})[:5]
            bad.append(f"Tantivy holds {len(stale)} chunks that are not indexed in SQLite ({where})")
        missing = sorted(soak.chunk_ids - set(t_counts))
        if missing:
            bad.append(f"Tantivy lacks {len(missing)} indexed chunks: {missing[:10]}")
        # usearch
        u_counts = Counter(soak.usearch_keys)
        dups = sorted(i for i, n in u_counts.items() if n > 1)
        if dups:
            bad.append(f"usearch holds {len(dups)} keys more than once: {dups[:10]}")
        stale = sorted(set(u_counts) - soak.embedded)
        if stale:
            bad.append(f"usearch holds {len(stale)} vectors of chunks that are gone or not indexed: {stale[:10]}")
        missing = sorted(soak.embedded - set(u_counts))
        if missing:
            bad.append(f"usearch lacks {len(missing)} vectors that SQLite has: {missing[:10]}")
        if soak.chunk_ids - soak.embedded:
            bad.append(f"{len(soak.chunk_ids - soak.embedded)} indexed chunks have no vector")
        # markers: every current version found at its file only; no deleted version found at all
        for rel, entry in sorted(self.corpus.files.items()):
            if entry.marker and soak.docs.get(root + "/" + rel, {}).get("status") == "indexed":
                found = soak.marker_hits.get(entry.marker, set())
                if found != {root + "/" + rel}:
                    bad.append(f"{rel}: its marker {entry.marker} finds {sorted(found)}")
        for marker in sorted(self.corpus.dead):
            if soak.marker_hits.get(marker):
                bad.append(f"deleted/overwritten version {marker} still findable in {sorted(soak.marker_hits[marker])}")
        self.report.final = {
            "files": len(expected),
            "indexed": sum(1 for d in soak.docs.values() if d["status"] == "indexed"),
            "failed": sum(1 for d in soak.docs.values() if d["status"] in ("failed", "skipped")),
            "chunks": len(soak.chunk_ids),
        }

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.stop()
        else:  # a start that did not finish may still have left a kernel behind
            cli(self.home, "stop", check=False, timeout=60)


@contextlib.contextmanager
def soak_home(home: Path | None) -> Iterator[Path]:
    if home is not None:
        if home.exists() and any(home.iterdir()):
            raise SystemExit(f"{home} is not empty: the soak needs a fresh home")
        home.mkdir(parents=True, exist_ok=True)
        yield home
        return
    path = short_tmpdir("fm-soak-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_soak(
    files: int,
    seconds: float,
    seed: int,
    home: Path | None = None,
    kernel_kills: int | None = None,
    ops_log: Path | None = None,
    short: bool = False,
    min_worker_kills: int = 0,
) -> SoakReport:
    """The soak in a throw-away home (or ``home``, kept); ``short`` makes mostly one-chunk files."""
    with soak_home(home) as path:
        soak = Soak(files, seconds, seed, path, kernel_kills, short, min_worker_kills)
        try:
            return soak.run()
        finally:
            soak.close()
            if ops_log is not None:
                ops_log.parent.mkdir(parents=True, exist_ok=True)
                ops_log.write_text("\n".join(soak.corpus.log) + "\n", "utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2500)
    ap.add_argument(
        "--minutes", type=float, default=4.0, help="minutes of faults (settling and the fresh index come after)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kernel-kills", type=int, default=None, help="default: one per 1.5 minutes of faults")
    ap.add_argument("--home", type=Path, default=None, help="keep the soak home here (must be empty)")
    ap.add_argument("--short", action="store_true", help="mostly one-chunk files (less to embed)")
    ap.add_argument("--report", type=Path, default=None, help="write the report (Markdown) here too")
    args = ap.parse_args(argv)
    ops_log = args.report.with_suffix(".ops.log") if args.report else None
    report = run_soak(args.files, args.minutes * 60, args.seed, args.home, args.kernel_kills, ops_log, args.short)
    text = report.markdown()
    print(text)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text, "utf-8")
    return 1 if report.discrepancies else 0


if __name__ == "__main__":
    sys.exit(main())
