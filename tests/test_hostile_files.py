"""Hostile files through the whole pipeline, in one real kernel.

One Smart Folder holds every hostile input this suite knows, next to a few normal files: bombs (a DOCX
zip bomb, billion laughs and an external entity inside a DOCX, a PDF whose content stream inflates
past pypdf's limit), malformed PDFs (a cyclic page tree, 100,000 nested arrays, a petabyte declared
/Length), a 2 GB sparse file, invalid UTF-8 and NUL bytes in text, HTML nested 100,000 levels, file
names with a newline, invalid UTF-8 bytes and emoji, symlink loops (file and folder), a FIFO, a file
without read permission, and a file deleted between the indexer's look at it and the parse. Some
arrive before the folder is added (the reconcile scan), some while it is watched (live events).

Each one must end in a state decided here: indexed and findable with the right text, failed or
skipped with a specific reason, or never listed (what is not a regular file inside the folder). The
neighbours must index, every worker must be RUNNING at the end without a restart, and no parser may
get near its memory cap (its share of ``[ingest] parser_pool_memory_mb``): every parser's peak RSS
(VmHWM) and peak address space (VmPeak, what RLIMIT_AS caps) is sampled from /proc while it works.

Root reads any file whatever its mode, so the kernel is started without CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (``setpriv --bounding-set``): "no read permission" is then real for every worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp.types import CallToolResult

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    Message,
    SearchReply,
    SearchRequest,
)
from foldermind.workers import userfiles
from foldermind.workers.parser.formats import ParseError, decode_text, normalize, parse_file
from foldermind.workers.watcher import NAME_NOT_UTF8 as NAME_NOT_UTF8_REASON
from foldermind.workers.watcher import eligible_path, scan
from tests import mcpclient as mc
from tests.config import merge
from tests.filemakers import (
    make_billion_laughs_docx,
    make_cyclic_pdf,
    make_docx,
    make_flate_bomb_pdf,
    make_huge_stream_pdf,
    make_nested_html,
    make_nested_pdf,
    make_pdf,
    make_xxe_docx,
    make_zip_bomb_docx,
)
from tests.helpers import FAST_RESTART, RunningKernel, cli, remove_tree, short_tmpdir, wait_for

M = TypeVar("M", bound=Message)
MB = 1024 * 1024
PARSER_MEMORY_MB = 1024
HOLD_NEEDLE = "held-"
REPLY_NEEDLE = "late-"  # FOLDERMIND_TEST_PARSER_HOLD_REPLY: held after the parse, before the reply
BAD_NAME = os.fsdecode(b"bad-\xff\xfe-name.txt")  # not UTF-8: surrogate escapes in Python
BAD_NAME_SHOWN = "bad-\ufffd\ufffd-name.txt"  # how the index shows it (U+FFFD per undecodable byte)
BAD_LIVE = os.fsdecode(b"live-\xc3\x28.md")
BAD_LIVE_SHOWN = "live-\ufffd(.md"
NEWLINE_NAME = "two\nlines.txt"
EMOJI_NAME = "📚 reading list 🦜.txt"
NAME_NOT_UTF8 = "file name is not valid UTF-8"  # the start of the reason
NOT_PERMITTED = os.geteuid() == 0 and shutil.which("setpriv") is None


@dataclass
class Expect:
    """What one file must end as: ``state`` indexed (``word`` finds it, only it, with ``text`` in its
    extracted text), failed/skipped (``reason`` matches), or absent (never a document)."""

    state: str
    word: str = ""
    reason: str = ""
    text: list[str] = field(default_factory=list)
    shown: str = ""  # the path's name as the index shows it, when it differs from the file's


# ------------------------------------------------------------------------------------------------
# The folder


def make_folder(docs: Path, outside: Path) -> dict[str, Expect]:
    """Every hostile file (and the neighbours) present before the folder is added."""
    docs.mkdir(parents=True)
    expect: dict[str, Expect] = {}
    # Normal neighbours, one per format.
    (docs / "fine.txt").write_text("The neighbour file mentions capybaras.\n")
    (docs / "fine.md").write_text("# Field notes\n\nThe wombat digs at dusk.\n")
    (docs / "fine.html").write_text("<html><body><h1>Harbour</h1><p>Pelicans nest here.</p></body></html>")
    make_pdf(docs / "fine.pdf", [["Budget report about narwhals."]])
    make_docx(docs / "fine.docx", "Plan", [("Goals", ["Reach the glacier by spring."])], [])
    for name, word in (
        ("fine.txt", "capybaras"),
        ("fine.md", "wombat"),
        ("fine.html", "pelicans"),
        ("fine.pdf", "narwhals"),
        ("fine.docx", "glacier"),
    ):
        expect[name] = Expect("indexed", word)

    # Bombs: refused before they are inflated (zip-size check, libxml2's amplification limit, pypdf's
    # decompression limit). The external entity is never resolved.
    make_zip_bomb_docx(docs / "zip-bomb.docx", PARSER_MEMORY_MB + 100)  # inflates past the parser's cap
    expect["zip-bomb.docx"] = Expect("failed", reason=r"^suspicious DOCX \(zip bomb\?\)$")
    make_billion_laughs_docx(docs / "laughs.docx", "Ordinary paragraph about hedgehogs.")
    expect["laughs.docx"] = Expect("failed", reason=r"^corrupt DOCX: Maximum entity amplification factor exceeded")
    make_xxe_docx(docs / "xxe.docx", outside, "Paragraph about otters next to an external entity.")
    expect["xxe.docx"] = Expect("indexed", "otters")
    make_flate_bomb_pdf(docs / "flate-bomb.pdf", 200)
    expect["flate-bomb.pdf"] = Expect("failed", reason=r"^corrupt PDF: Limit reached while decompressing")
    # Malformed PDFs.
    make_cyclic_pdf(docs / "cyclic.pdf", "A page in a cyclic tree about lemurs.")
    expect["cyclic.pdf"] = Expect("failed", reason=r"^corrupt PDF: Detected cyclic page references\.$")
    make_nested_pdf(docs / "nested.pdf", 100_000)
    expect["nested.pdf"] = Expect("failed", reason=r"^corrupt PDF: .*(nest|recursion|Error reading)")
    make_huge_stream_pdf(docs / "huge-stream.pdf", 10**15)
    expect["huge-stream.pdf"] = Expect(
        "failed", reason=r"^corrupt PDF: Declared stream length of 1000000000000000 exceeds maximum allowed length"
    )
    # 2 GB, all holes: refused from its size (never sent to a parser, never hashed).
    with open(docs / "sparse.txt", "wb") as fh:
        fh.truncate(2 * 1024 * MB)
    expect["sparse.txt"] = Expect("skipped", reason=rf"^file too large \({2 * 1024 * MB} bytes > {50 * MB}\)$")
    # Text with invalid UTF-8 bytes and NUL bytes: the text survives, NULs are dropped.
    (docs / "mixed.txt").write_bytes(
        "Café notes about quetzals.\n".encode() + b"broken \xff\xfe bytes\x00 and NUL\x00s\n" + b"tail words\n" * 80
    )
    shown = ["Café notes about quetzals.", "broken \ufffd\ufffd bytes and NULs"]  # one U+FFFD per invalid byte
    expect["mixed.txt"] = Expect("indexed", "quetzals", text=shown)
    (docs / "nul-heavy.txt").write_bytes(b"\x00".join([b"axolotl"] * 200))
    expect["nul-heavy.txt"] = Expect("failed", reason=r"^not a text file$")
    # HTML nested 100,000 levels: the walker never recurses; the innermost text is kept.
    make_nested_html(docs / "deep.html", 100_000, "Innermost words about okapis.")
    expect["deep.html"] = Expect("indexed", "okapis", text=["Surface paragraph before the abyss."])
    # Names.
    (docs / NEWLINE_NAME).write_text("A name with a newline holds tapirs.\n")
    expect[NEWLINE_NAME] = Expect("indexed", "tapirs")
    (docs / EMOJI_NAME).write_text("The emoji-named file lists pangolins.\n")
    expect[EMOJI_NAME] = Expect("indexed", "pangolins")
    (docs / BAD_NAME).write_text("A badly named file about marmosets.\n")
    expect[BAD_NAME] = Expect("skipped", reason=rf"^{NAME_NOT_UTF8}", shown=BAD_NAME_SHOWN)
    # Symlink loops (a file, a pair, a folder pointing at its parent) and a FIFO: never documents.
    (docs / "self-loop.txt").symlink_to("self-loop.txt")
    (docs / "ping.txt").symlink_to("pong.txt")
    (docs / "pong.txt").symlink_to("ping.txt")
    (docs / "sub").mkdir()
    (docs / "sub" / "inner.md").write_text("Inside the looped folder lives a kinkajou.\n")
    expect["inner.md"] = Expect("indexed", "kinkajou")
    (docs / "sub" / "up").symlink_to("..", target_is_directory=True)
    (docs / "sub" / "round").symlink_to("round", target_is_directory=True)
    for name in ("self-loop.txt", "ping.txt", "pong.txt"):
        expect[name] = Expect("absent")
    os.mkfifo(docs / "pipe.txt")
    expect["pipe.txt"] = Expect("absent")
    # No read permission (real: the kernel runs without the capabilities that let root ignore it).
    locked = docs / "locked.txt"
    locked.write_text("Unreadable text about civets.\n")
    locked.chmod(0)
    expect["locked.txt"] = Expect("failed", reason=r"^unreadable: Permission denied$")
    return expect


def add_live_files(docs: Path) -> dict[str, Expect]:
    """Hostile names and non-files created while the folder is watched: they arrive as events."""
    expect: dict[str, Expect] = {}
    (docs / BAD_LIVE).write_text("# Live\n\nA live file with a broken name about ibexes.\n")
    expect[BAD_LIVE] = Expect("skipped", reason=rf"^{NAME_NOT_UTF8}", shown=BAD_LIVE_SHOWN)
    (docs / "live\nnewline.md").write_text("# Live\n\nLive newline name about gharials.\n")
    expect["live\nnewline.md"] = Expect("indexed", "gharials")
    (docs / "🦔 live.html").write_text("<p>Live emoji page about numbats.</p>")
    expect["🦔 live.html"] = Expect("indexed", "numbats")
    os.mkfifo(docs / "live-pipe.md")
    expect["live-pipe.md"] = Expect("absent")
    (docs / "live-loop.md").symlink_to("live-loop.md")
    expect["live-loop.md"] = Expect("absent")
    with open(docs / "live-sparse.md", "wb") as fh:
        fh.truncate(2 * 1024 * MB)
    expect["live-sparse.md"] = Expect("skipped", reason=rf"^file too large \({2 * 1024 * MB} bytes > {50 * MB}\)$")
    # The badly named file from before, renamed to a good name: its skipped entry goes, the file indexes.
    (docs / BAD_NAME).rename(docs / "renamed-from-bad.txt")
    expect[BAD_NAME] = Expect("absent", shown=BAD_NAME_SHOWN)
    expect["renamed-from-bad.txt"] = Expect("indexed", "marmosets")
    (docs / "after.txt").write_text("Written last: a live neighbour about quokkas.\n")
    expect["after.txt"] = Expect("indexed", "quokkas")
    return expect


# ------------------------------------------------------------------------------------------------
# Looking at the index


def documents(home: Path) -> dict[str, sqlite3.Row]:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute("SELECT * FROM documents").fetchall()
    finally:
        db.close()
    return {r["path"].rsplit("/", 1)[-1]: r for r in rows}


def extracted(home: Path, doc_id: int) -> str:
    db = sqlite3.connect(home / "data" / "index.sqlite")
    try:
        rows = db.execute("SELECT text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)).fetchall()
    finally:
        db.close()
    return "\n".join(r[0] for r in rows)


REPLACED = frozenset(
    {ErrorCode.WORKER_LOST, ErrorCode.SERVICE_UNAVAILABLE, ErrorCode.SHUTTING_DOWN, ErrorCode.DEADLINE_EXCEEDED}
)
"""What a request gets while its worker is being replaced."""


def ask(k: RunningKernel, to: str, request: Message, reply: type[M], timeout: float = 60) -> M:
    """One bus request, asked again while the worker is being replaced: on a loaded machine a starved
    worker misses heartbeats and is restarted (the restarts themselves are checked at the end)."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            with BusClient(k.home.bus_endpoint, name="hostile-test") as client:
                return client.request(to, request, reply, timeout=30).body
        except JobError as exc:
            if exc.code not in REPLACED or time.monotonic() > give_up:
                raise
            time.sleep(0.5)


def tool(url: str, token: str, name: str, args: dict[str, Any]) -> CallToolResult:
    """One MCP tool call, made again while the indexer is being replaced (see ``ask``)."""
    give_up = time.monotonic() + 60
    while True:
        result = mc.call(url, token, name, args)
        if mc.error_code(result) != "SERVICE_UNAVAILABLE" or time.monotonic() > give_up:
            return result
        time.sleep(0.5)


def found(k: RunningKernel, query: str) -> set[str]:
    reply = ask(k, "indexer", SearchRequest(query, "keyword", 10), SearchReply)
    return {r["file_path"].rsplit("/", 1)[-1] for r in reply.results}


def unsettled(k: RunningKernel) -> str:
    """What keeps the folder from being settled (its state, counts and the indexer's note), or nothing once it
    is ready: a step that never settles then says whether files wait for a parse or chunks for their vectors."""
    folders = ask(k, "indexer", FolderListRequest(), FolderListReply).folders
    if folders and all(f["state"] == "ready" for f in folders):
        return ""
    counts = ("state", "files_total", "files_indexed", "files_failed", "files_skipped", "chunks", "chunks_embedded")
    shown = "; ".join(", ".join(f"{c} {f[c]}" for c in counts) for f in folders) or "no folder"
    notes = {w["name"]: w["note"] for w in k.status().workers if w["name"] in ("indexer", "embedder", "llm")}
    return f"never settled: {shown}; notes {notes}"


def wait_matches(k: RunningKernel, expect: dict[str, Expect], timeout: float, what: str) -> None:
    """Poll until the folder is settled and every file is in its state; fail with the differences."""
    give_up = time.monotonic() + timeout
    problems: list[str] = ["never settled"]
    while time.monotonic() < give_up:
        if not (why := unsettled(k)):
            problems = check_states(k.root, expect)
            if not problems:
                return
        else:
            problems = [why]
        time.sleep(0.2)
    raise AssertionError(f"{what}: after {timeout:g} s\n" + "\n".join(problems))


def check_states(home: Path, expect: dict[str, Expect]) -> list[str]:
    """Every way the documents table differs from ``expect`` (empty when it matches)."""
    rows = documents(home)
    problems: list[str] = []
    for name, want in expect.items():
        row = rows.get(want.shown or name)
        if want.state == "absent":
            if row is not None:
                problems.append(f"{name!r}: listed as {row['status']} ({row['error']})")
            continue
        if row is None:
            problems.append(f"{name!r}: not in the index (want {want.state})")
            continue
        got = (row["status"], row["error"] or "")
        if got[0] != want.state:
            problems.append(f"{name!r}: {got} (want {want.state} {want.reason})")
        elif want.reason and not re.search(want.reason, got[1]):
            problems.append(f"{name!r}: reason {got[1]!r} does not match {want.reason!r}")
        elif want.state == "indexed":
            text = extracted(home, row["id"])
            problems += [f"{name!r}: {piece!r} missing from its text" for piece in want.text if piece not in text]
            if "\x00" in text:
                problems.append(f"{name!r}: NUL bytes in its text")
    return problems


def check_findable(k: RunningKernel, expect: dict[str, Expect]) -> list[str]:
    """Every indexed file is what a search for its word finds, and nothing else is."""
    problems = []
    for name, want in expect.items():
        if want.state == "indexed" and (hits := found(k, want.word)) != {name}:
            problems.append(f"{name!r}: a search for {want.word!r} found {sorted(hits)}")
    return problems


# ------------------------------------------------------------------------------------------------
# Parser memory, sampled from /proc while the parsers work


class ParserMemory(threading.Thread):
    """Peak RSS (VmHWM) and peak address space (VmPeak) of every parser process seen."""

    def __init__(self, kernel: RunningKernel) -> None:
        super().__init__(daemon=True)
        self.kernel = kernel
        self.peaks: dict[int, tuple[int, int]] = {}
        self.caps: dict[int, int] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.05):
            with contextlib.suppress(Exception):
                for proc in self.kernel.descendants():
                    if "foldermind.workers.parser" in " ".join(proc.cmdline()) or proc.pid in self.peaks:
                        self.sample(proc.pid)

    def sample(self, pid: int) -> None:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        hwm, peak = (int(fields[k].split()[0]) * 1024 for k in ("VmHWM", "VmPeak"))
        old = self.peaks.get(pid, (0, 0))
        self.peaks[pid] = (max(old[0], hwm), max(old[1], peak))
        if not self.caps.get(pid):  # read again until set: a parser just started on demand sets it in its setup
            for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
                if line.startswith("Max address space"):
                    soft = line.split()[3]
                    self.caps[pid] = int(soft) if soft.isdigit() else 0

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


# ------------------------------------------------------------------------------------------------
# The kernel, without the capabilities that let root read an unreadable file


def start_without_dac(k: RunningKernel) -> RunningKernel:
    if os.geteuid() != 0:  # an ordinary user cannot read a mode-000 file anyway
        return k.start()
    subprocess.run(
        [
            "setpriv",
            "--bounding-set",
            "-dac_override,-dac_read_search",
            sys.executable,
            "-m",
            "foldermind.kernel.cli",
            "--home",
            str(k.root),
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    k.kernel_pid = int(k.home.pid_file.read_text())
    k.connect_events()
    k.wait_all_running()
    return k


def effective_caps(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff for pid {pid}")


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1 << 1, 1 << 2


def starved(reason: str) -> bool:
    """A BACKOFF reason that says the worker was too starved of CPU to keep its heartbeats."""
    return "heartbeat" in reason or reason.startswith("exited 0")


@pytest.fixture
def hostile(home_dir: Path) -> Iterator[tuple[RunningKernel, Path, Path, dict[str, Expect]]]:
    root = short_tmpdir("fmh-")
    docs = root / "hostile"
    outside = root / "outside-secret.txt"
    outside.write_text("secret outside text about basilisks\n")
    expect = make_folder(docs, outside)
    flag = root / "hold-flag"
    holds = {
        "FOLDERMIND_TEST_PARSER_HOLD": f"{HOLD_NEEDLE}:{flag}",
        "FOLDERMIND_TEST_PARSER_HOLD_REPLY": f"{REPLY_NEEDLE}:{flag}",
    }
    config = merge(
        FAST_RESTART,
        {"ingest": {"parser_pool_memory_mb": 2 * PARSER_MEMORY_MB}},  # two parsers (the default pool)
        {"mcp": {"port": 0}, "workers": {"parser": {"env": holds}}},
    )
    k = RunningKernel(home_dir, config)
    try:
        start_without_dac(k)
        yield k, docs, flag, expect
    finally:
        k.stop()
        if os.environ.get("FM_KEEP_LOGS"):
            shutil.copytree(k.root / "logs", os.environ["FM_KEEP_LOGS"], dirs_exist_ok=True)
        with contextlib.suppress(OSError):
            (docs / "locked.txt").chmod(0o600)
        remove_tree(root)


@pytest.mark.skipif(NOT_PERMITTED, reason="root without setpriv cannot make a file unreadable to the kernel")
def test_hostile_files_end_failed_with_a_reason_or_indexed_and_no_worker_stays_down(
    hostile: tuple[RunningKernel, Path, Path, dict[str, Expect]],
) -> None:
    k, docs, flag, expect = hostile
    home = k.root
    t0 = time.monotonic()
    if os.geteuid() == 0:
        for w in k.status().workers:
            if w["state"] == "IDLE":
                continue  # on demand, no process yet: spawned later by the same kernel, with its capabilities
            assert w["pid"] and not effective_caps(w["pid"]) & (CAP_DAC_OVERRIDE | CAP_DAC_READ_SEARCH), w["name"]
    memory = ParserMemory(k)
    memory.start()
    try:
        # 1. Everything present before the folder is added: the watcher's reconcile scan.
        ask(k, "indexer", FolderAddRequest(str(docs), "Hostile"), FolderAddReply)
        wait_matches(k, expect, 60, "the hostile files present when the folder was added")
        t_scan = time.monotonic() - t0
        assert not check_findable(k, expect)
        assert documents(home)["sparse.txt"]["attempts"] == 0, "the 2 GB file went to a parser"

        # 2. The same kinds of names and non-files arriving as live events.
        expect.update(add_live_files(docs))
        wait_matches(k, expect, 30, "the hostile files that arrived as events")
        assert documents(home)["live-sparse.md"]["attempts"] == 0, "the 2 GB file went to a parser"

        # 3. A file deleted after the indexer hashed it, before the parser opens it: the parser holds
        # the job (test switch) until the file is gone, so the window is hit every time.
        flag.write_text("hold")
        (docs / "held-vanishing.txt").write_text("This file vanishes before it is parsed: wolverines.\n")
        wait_for(lambda: Path(f"{flag}.held").exists(), 30, 0.02, "the parser holding the file")
        (docs / "held-vanishing.txt").unlink()
        flag.unlink()
        stale: list[str] = []
        give_up = time.monotonic() + 15
        while time.monotonic() < give_up:
            row = documents(home).get("held-vanishing.txt")
            if row is None:
                break
            if row["status"] != "pending":
                stale.append(f"{row['status']}: {row['error']}")
            time.sleep(0.01)
        assert "held-vanishing.txt" not in documents(home), "the vanished file is still listed"
        assert not stale, f"a file that no longer exists was recorded as {stale[0]}"
        wait_matches(k, expect, 30, "settled after the vanished file")
        assert not check_findable(k, expect)

        # 4. A file saved in two writes whose first half fails to parse. The second write lands while
        # the parser holds the first half's failure (test switch), so the watcher's event for it
        # comes before that failure: the failure must not be kept over the finished file.
        whole = make_docx(
            flag.parent / "whole.docx", "Trip", [("Fauna", ["Axolotls regrow their gills."])], []
        ).read_bytes()
        half = whole[: len(whole) // 2]
        (flag.parent / "half.docx").write_bytes(half)
        assert isinstance(finishes(lambda: parse_file(flag.parent / "half.docx", MB)), ParseError), (
            "the first half parses"
        )
        late = docs / "late-save.docx"
        Path(f"{flag}.held").unlink()  # step 3's
        flag.write_text("hold")
        late.write_bytes(half)
        wait_for(lambda: Path(f"{flag}.held").exists(), 30, 0.02, "the parser holding the first half's failure")
        late.write_bytes(whole)
        wait_for(lambda: documents(home)["late-save.docx"]["attempts"] == 0, 30, 0.02, "the finished write's event")
        flag.unlink()
        expect["late-save.docx"] = Expect("indexed", "axolotls")
        wait_matches(k, expect, 30, "the file finished during its parse")
        assert not check_findable(k, expect)
    finally:
        memory.stop()

    # Emoji and newline names through the MCP tools (read_document, search_documents).
    url, token = str(mc.mcp_info(home)["url"]), mc.token_of(home)
    for name, word in ((EMOJI_NAME, "pangolins"), (NEWLINE_NAME, "tapirs"), ("🦔 live.html", "numbats")):
        path = str(docs / name)
        read = tool(url, token, "read_document", {"file_path": path})
        assert not read.is_error, read.content
        assert read.structured_content is not None and word in read.structured_content["text"]
        assert read.structured_content["file_path"] == path
        hits = tool(url, token, "search_documents", {"query": word, "mode": "keyword"})
        assert hits.structured_content is not None
        assert [r["file_path"] for r in hits.structured_content["results"]] == [path]
    # In a terminal, a newline in a name is shown escaped: one line per hit, no forged result lines.
    out = wait_for(lambda: cli(home, "search", "tapirs", "--mode", "keyword", check=False).stdout, 60, 0.5, "search")
    assert f"1. {docs}/two\\nlines.txt  (" in out and len(out.splitlines()) == 3, out
    bad = tool(url, token, "read_document", {"file_path": str(docs / BAD_NAME_SHOWN)})
    assert mc.error_code(bad) in ("INVALID_PATH", "FILE_NOT_INDEXED")
    status = json.loads(tool(url, token, "index_status", {"max_failures": 50}).content[0].text)  # type: ignore[union-attr]
    listed = {f["file_path"].rsplit("/", 1)[-1]: f["error"] for f in status["recent_failures"]}
    want_listed = {e.shown or n for n, e in expect.items() if e.state in ("failed", "skipped")}
    assert set(listed) == want_listed
    assert not found(k, "basilisks"), "an external entity was resolved"

    # Folder counts add up: every file is indexed, failed or skipped (counted apart), or pending.
    folder = json.loads(cli(home, "folders", "list", "--json").stdout)[0]
    n_indexed = sum(e.state == "indexed" for e in expect.values())
    n_failed = sum(e.state == "failed" for e in expect.values())
    n_skipped = sum(e.state == "skipped" for e in expect.values())
    assert (folder["files_indexed"], folder["files_failed"], folder["files_skipped"], folder["files_total"]) == (
        n_indexed,
        n_failed,
        n_skipped,
        n_indexed + n_failed + n_skipped,
    )

    # No worker stays down. A hostile file may cost a parser restart (two, then it is quarantined);
    # none here does, every one is a typed error. The one restart allowed is a worker replaced
    # for missed heartbeats (or leaving by itself when it stops hearing the kernel): on a loaded machine
    # a starved process misses them, and the kernel replacing it is the kernel working, not a file.
    workers = k.wait_all_running(60).workers  # settled: on-demand workers may be starting or leaving for a moment
    crashes = [(e.name, e.reason) for e in k.collect_events() if e.new == "BACKOFF" and not starved(e.reason)]
    assert not crashes, f"workers crashed: {crashes}"
    quarantined = {n: r["error"] for n, r in documents(home).items() if (r["error"] or "").startswith("quarantined")}
    assert not quarantined
    restarts = {w["name"]: w["restarts"] for w in workers if w["restarts"]}

    # Memory: every parser stayed far below its cap, and the cap was in place.
    assert memory.peaks, "no parser was sampled"
    for pid, (hwm, peak) in memory.peaks.items():
        assert memory.caps.get(pid) == PARSER_MEMORY_MB * MB, f"parser {pid} runs without the RLIMIT_AS cap"
        assert peak <= PARSER_MEMORY_MB * MB and hwm < PARSER_MEMORY_MB * MB
    report = {
        "scan_s": round(t_scan, 1),
        "total_s": round(time.monotonic() - t0, 1),
        "parser_peaks_mib": {pid: (hwm // MB, peak // MB) for pid, (hwm, peak) in memory.peaks.items()},
        "restarts": restarts,
    }
    print(f"hostile files: {json.dumps(report)}")


# ------------------------------------------------------------------------------------------------
# The same defences one level down, in this process (fast, and they say which layer broke)


def finishes(fn: Callable[[], object], seconds: float = 5.0) -> object:
    """``fn()``'s result or exception, failing the test if it blocks (a FIFO opened for reading would)."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"{fn} blocked for {seconds:g} s"
    return box[0]


def test_a_fifo_is_never_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    err = finishes(lambda: parse_file(fifo, MB))
    assert isinstance(err, ParseError) and (err.code, err.message) == ("unreadable", "unreadable: not a regular file")
    assert isinstance(finishes(lambda: userfiles.open_file(str(fifo), lambda _real: True)), userfiles.NotRegular)
    assert not eligible_path(str(fifo), str(tmp_path))
    assert finishes(lambda: scan(str(tmp_path))) == ([], {})


def test_scan_lists_a_name_that_is_not_utf8_as_skipped_and_follows_no_loop(tmp_path: Path) -> None:
    (tmp_path / BAD_NAME).write_text("text")
    (tmp_path / "good.txt").write_text("text")
    (tmp_path / "self.txt").symlink_to("self.txt")
    (tmp_path / "up").symlink_to(".", target_is_directory=True)
    listed = finishes(lambda: scan(str(tmp_path)))
    assert isinstance(listed, tuple)
    files, skipped = listed
    assert [Path(f["path"]).name for f in files] == ["good.txt"]
    assert skipped == {str(tmp_path / BAD_NAME_SHOWN): NAME_NOT_UTF8_REASON}


@pytest.mark.parametrize(
    ("maker", "reason"),
    [
        (lambda p: make_nested_pdf(p / "n.pdf", 100_000), "corrupt PDF: Error reading PDF file."),
        (lambda p: make_cyclic_pdf(p / "c.pdf", "x"), "corrupt PDF: Detected cyclic page references."),
        (lambda p: make_billion_laughs_docx(p / "l.docx", "x"), "corrupt DOCX: Maximum entity amplification"),
    ],
)
def test_malformed_documents_fail_with_the_reason(tmp_path: Path, maker: Callable[[Path], Path], reason: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_file(maker(tmp_path), 50 * MB)
    assert err.value.code == "parse_failed" and err.value.message.startswith(reason)


def test_every_line_break_becomes_a_newline_nuls_go_and_lone_surrogates_are_replaced() -> None:
    breaks = "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"
    text = "".join(f"line {i}{b}" for i, b in enumerate(breaks)) + "a\x00b \ud800 é\u00a0end"
    expected = "".join(f"line {i}\n" for i in range(len(breaks))) + "ab \ufffd é\u00a0end"
    assert normalize(text) == expected
    assert normalize("plain\nunchanged\ttext") == "plain\nunchanged\ttext"


def test_text_with_a_few_invalid_bytes_and_nuls_is_text_but_mostly_nuls_is_not() -> None:
    text = decode_text("Café\n".encode() + b"odd \xff byte\x00\n" + b"plain line\n" * 30)
    assert text.startswith("Café\nodd \ufffd byte")
    assert normalize(text).count("\x00") == 0
    latin1 = "Le café est très bon, la crème aussi.\n" * 5
    assert decode_text(latin1.encode("latin-1")) == latin1  # a Latin-1 "é" is not UTF-8 with a broken byte
    with pytest.raises(ParseError):
        decode_text(b"\x00".join([b"word"] * 100))
