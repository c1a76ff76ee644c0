"""Faults that last until someone fixes them reach `foldermind status` with their fix, once.

A home on a read-only disk: the tests run as root, for whom a folder's mode stops no write, so the home is
made read-only for real with a read-only bind mount in a private mount namespace (`unshare -m`); where that
is not possible the test is skipped and says why. A folder in place of the vector index file is put there
while the kernel runs. A killed worker is the fault worker, killed with SIGKILL.
"""

from __future__ import annotations

import errno
import json
import logging
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foldermind.workers.indexer.storage.integrity import is_database_damage
from foldermind.workers.indexer.storage.persistent import NOTE_MAX, PersistentFault, named_fault, with_fix
from foldermind.workers.indexer.storage.storage import is_disk_full
from tests.config import merge
from tests.helpers import (
    FAST_RESTART,
    SEARCH_OVER_BUS,
    TESTWORKER,
    RunningKernel,
    cli,
    kill9,
    only_workers,
    status_json,
    wait_for,
)


def _private_mounts() -> str | None:
    """Why a read-only bind mount cannot be made here, or None when it can."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "mount", "--bind", "-o", "ro", "/", "/mnt"],
        capture_output=True,
        text=True,
    )
    return None if probe.returncode == 0 else f"no private mount namespace here: {probe.stderr.strip()}"


def _in_read_only_home(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`foldermind --home HOME ARGS` with HOME mounted read-only for that process alone."""
    command = " ".join([sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), *args])
    script = f"mount --bind -o ro {home} {home} && touch {home}/data/probe 2>/dev/null && exit 97; exec {command}"
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 97, "the bind mount let root write: the home was not read-only"
    return proc


def test_start_on_a_read_only_home_says_so_in_one_line_with_the_fix(home_dir: Path) -> None:
    if (why := _private_mounts()) is not None:
        pytest.skip(why)
    RunningKernel(home_dir, only_workers())  # makes the home's folders and its supervisor.toml, starts nothing
    proc = _in_read_only_home(home_dir, "start")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert re.fullmatch(
        rf"Error: foldermind cannot write its home: {re.escape(str(home_dir))}/\w+ is on a read-only file system; "
        r"fix: remount it read-write, or use --home DIR on a writable disk",
        lines[0],
    ), lines[0]
    assert not (home_dir / "run" / "kernel.pid").exists()  # no kernel was left behind
    doctor = _in_read_only_home(home_dir, "doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    home_check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "home")
    assert home_check["status"] == "fail" and "read-only file system" in home_check["detail"]
    assert "remount it read-write" in home_check["fix"]


def test_start_with_a_file_where_the_data_folder_belongs_says_so_in_one_line(home_dir: Path) -> None:
    (home_dir / "data").write_text("not a folder\n")
    proc = cli(home_dir, "start", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        f"Error: foldermind cannot write its home: {home_dir / 'data'} (or a folder above it) is a file, not a"
        " folder; fix: move that file out of the way, or use --home DIR on a writable disk"
    )


def test_a_folder_in_place_of_the_vector_file_is_shown_with_its_fix_logged_once_and_clears(home_dir: Path) -> None:
    docs = home_dir / "docs"
    docs.mkdir()
    (docs / "first.txt").write_text("The heron waits by the mill pond.\n")
    home = home_dir / "home"
    k = RunningKernel(home, merge(FAST_RESTART, SEARCH_OVER_BUS)).start()
    try:
        cli(home, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=120)
        vectors = home / "data" / "vectors.usearch"
        vectors.unlink(missing_ok=True)
        vectors.mkdir()  # the next save of the index (every 30 s, the first file's vectors) meets it
        (docs / "second.txt").write_text("A kingfisher dives into the weir.\n")

        def held() -> str | None:
            note = str(k.worker("indexer")["note"])
            tries = re.search(r"\(since [\d:]+, (\d+) tries\)", note)
            return note if tries and int(tries.group(1)) >= 3 else None

        note = wait_for(held, 120, 0.3, "the indexer's note after a few tries")
        assert note.startswith(f"indexing held: {vectors} is a folder where the index keeps a file (since ")
        assert note.endswith("; fix: move it away: the file is written again")
        what, fix = note.split(" (since ")[0], "; fix: move it away: the file is written again"
        line = next(x for x in cli(home, "status").stdout.splitlines() if x.startswith("indexer"))
        assert what in line and line.endswith(fix), line
        json_note = next(w for w in status_json(home)["workers"] if w["name"] == "indexer")["note"]
        assert json_note.startswith(what) and json_note.endswith(fix)
        log = home / "logs" / "indexer.log"
        wait_for(lambda: "ingest step still failing (2 times)" in log.read_text(), 10, 0.2, "the repeat summarised")
        text = log.read_text()
        assert text.count("Traceback") == 1 and text.count("IsADirectoryError") == 1, text[-3000:]
        assert "retrying shortly" not in text

        vectors.rmdir()
        wait_for(lambda: not k.worker("indexer")["note"].startswith("indexing held"), 60, 0.3, "the note to clear")
        assert vectors.is_file()
        assert "ingest step works again after" in log.read_text()
        assert log.read_text().count("Traceback") == 1
        # Polled over the bus (a CLI process is ~0.75 CPU-s), then asked of `foldermind search` once.
        wait_for(lambda: "second.txt" in json.dumps(k.search("kingfisher weir")), 60, 0.1, "the file indexed")
        hits = cli(home, "search", "kingfisher weir", "--mode", "keyword", "--json").stdout.count("second.txt")
        assert hits
    finally:
        k.stop()


def _immutable(path: Path, on: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True, text=True)


def test_a_data_folder_that_refuses_writes_while_running_is_shown_with_its_fix_and_clears(home_dir: Path) -> None:
    """The home made unwritable while the kernel runs: data/ and the SQLite files marked immutable (`chattr +i`),
    which stops even root, also through the files the indexer holds open (a read-only remount is refused while
    they are open for writing). Tantivy's own folder keeps the flag off: the flag is each entry's alone."""
    probe = home_dir / "probe"
    probe.mkdir()
    if shutil.which("chattr") is None or (flagged := _immutable(probe, True)).returncode != 0:
        pytest.skip(f"no immutable folders here: {flagged.stderr.strip() if shutil.which('chattr') else 'no chattr'}")
    _immutable(probe, False)
    docs, other = home_dir / "docs", home_dir / "other"
    docs.mkdir()
    other.mkdir()
    (docs / "first.txt").write_text("The heron waits by the mill pond.\n")
    home = home_dir / "home"
    k = RunningKernel(home, merge(FAST_RESTART, SEARCH_OVER_BUS)).start()
    data = home / "data"
    frozen = [data, *(data / f"index.sqlite{end}" for end in ("", "-wal", "-shm"))]
    try:
        cli(home, "folders", "add", str(docs), "--name", "Docs", "--wait", timeout=120)
        assert all(_immutable(path, True).returncode == 0 for path in frozen)
        try:
            (docs / "second.txt").write_text("A kingfisher dives into the weir.\n")
            refused = cli(home, "folders", "add", str(other), "--name", "Other", check=False)
            fix = f"; fix: give this user write access to {data}"
            assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
            assert refused.stderr.strip() == f"Error: no permission to write {data} (EPERM){fix}"
            note = wait_for(
                lambda: "tries)" in (n := str(k.worker("indexer")["note"])) and n, 60, 0.3, "the indexer's note"
            )
            # data/ itself (a write whose error names no file), or the vector index's draft marker or temporary file
            pattern = rf"indexing held: no permission to write {re.escape(str(data))}(/[\w.]+)? \(EPERM\) \(since .*"
            assert re.fullmatch(pattern, note) and note.endswith(fix), note
            line = next(x for x in cli(home, "status").stdout.splitlines() if x.startswith("indexer"))
            assert f"no permission to write {data}" in line, line
            doctor = cli(home, "doctor", "--json", check=False)
            checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
            assert doctor.returncode == 1 and checks["index writes"]["status"] == "fail", checks.get("index writes")
            assert checks["index writes"]["detail"].startswith(f"indexing held: no permission to write {data}")
            assert checks["index writes"]["fix"] == f"give this user write access to {data}"
            assert checks["home"]["status"] == "fail"  # data/ takes no new file either
        finally:
            # The files first, data/ last: a write between two of these steps then still finds data/ refusing
            # (the named fault), never data/ writable and a file not (an error no probe of data/ can name).
            for path in reversed(frozen):
                _immutable(path, False)
        wait_for(lambda: not k.worker("indexer")["note"].startswith("indexing held"), 60, 0.3, "the note to clear")
        wait_for(lambda: "second.txt" in json.dumps(k.search("kingfisher weir")), 60, 0.1, "the file indexed")
        found = "second.txt" in cli(home, "search", "kingfisher weir", "--mode", "keyword", "--json").stdout
        assert found
        text = (home / "logs" / "indexer.log").read_text()
        causes = len(re.findall(r"ERROR .* failed: no permission to write", text))  # each told once, with its traceback
        assert 1 <= causes <= 3 and text.count("Traceback") == causes, text[-3000:]
        assert "works again after" in text
        checks = {c["name"]: c for c in json.loads(cli(home, "doctor", "--json", check=False).stdout)["checks"]}
        assert checks["index writes"]["status"] == checks["home"]["status"] == "ok", checks
        refusals = (home / "logs" / "watcher.log").read_text().count("index_unwritable: no permission to write")
        assert 1 <= refusals <= 4  # the watcher's 1st, 2nd, 4th... refusal, not one a second
    finally:
        for path in frozen:
            _immutable(path, False)
        k.stop()


def test_a_killed_worker_that_runs_healthy_again_shows_the_kill_as_past(home_dir: Path) -> None:
    k = RunningKernel(home_dir, merge(FAST_RESTART, TESTWORKER, only_workers())).start()
    try:
        pid = k.worker("testworker")["pid"]
        killed_at = time.time()
        kill9(pid)
        now = k.wait_state("testworker", "RUNNING", other_pid_than=pid)
        assert "killed by signal 9" in (now["last_error"] or "") and now["past_error"] is None
        # stable_after_s (5 s in FAST_RESTART) of running later, the kill is no longer the worker's state
        past = wait_for(lambda: (w := k.worker("testworker"))["last_error"] is None and w, 30, 0.2, "the error past")
        assert past["pid"] == now["pid"] and past["state"] == "RUNNING"
        assert re.fullmatch(r"killed by signal 9 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", past["past_error"] or "")
        assert abs(float(past["error_at"]) - killed_at) < 5
        listed = next(w for w in status_json(home_dir)["workers"] if w["name"] == "testworker")
        assert listed["last_error"] is None and listed["past_error"] == past["past_error"], listed
        line = next(x for x in cli(home_dir, "status").stdout.splitlines() if x.startswith("testworker"))
        assert line.endswith(f"(earlier: {past['past_error']})") and "signal 9 (" not in line, line
        # A new failure is current again at once.
        kill9(past["pid"])
        again = k.wait_state("testworker", "RUNNING", other_pid_than=past["pid"])
        assert "killed by signal 9" in (again["last_error"] or "") and again["past_error"] is None
    finally:
        k.stop()


def test_a_write_the_database_refuses_is_named_with_its_fix_counted_and_cleared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In-process, on real failures: a SQLite file opened read-only, a file where a folder belongs."""
    db = tmp_path / "index.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    readonly = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as refused:
        readonly.execute("INSERT INTO t VALUES (1)")
    readonly.close()
    (tmp_path / "plain").write_text("a file\n")
    with pytest.raises(NotADirectoryError) as not_a_folder:
        open(tmp_path / "plain" / "segment", "wb")  # noqa: SIM115 - it fails
    assert named_fault(refused.value, tmp_path) and named_fault(not_a_folder.value, tmp_path)
    assert not named_fault(ValueError("a bug, with a writable folder"), tmp_path)

    fault = PersistentFault(tmp_path, logging.getLogger("test.persistent"))
    with caplog.at_level(logging.INFO, "test.persistent"):
        for _ in range(5):
            fault.failed(refused.value, "ingest step")
    note = fault.note
    assert note.startswith(f"indexing held: the database in {tmp_path} is read-only (since ")
    assert note.endswith(f", 5 tries); fix: make {tmp_path} writable again"), note
    assert not fault.due() and (fault.wait_ms() or 0) > 0
    assert sum(r.exc_info is not None for r in caplog.records) == 1  # the traceback once
    assert [m for r in caplog.records if "still failing" in (m := r.getMessage())] == [
        f"ingest step still failing (2 times): the database in {tmp_path} is read-only; next try in 1 s",
        f"ingest step still failing (4 times): the database in {tmp_path} is read-only; next try in 1 s",
    ]
    fault.failed(not_a_folder.value, "ingest step")  # another cause of the same hold: told, with its traceback
    assert fault.note.startswith(f"indexing held: a file stands where a folder of the index belongs ({tmp_path}")
    assert ", 6 tries); fix: move that file away" in fault.note
    assert sum(r.exc_info is not None for r in caplog.records) == 2
    fault.worked()
    assert fault.note == "" and fault.due() and fault.wait_ms() is None
    assert "ingest step works again after 6 failed tries" in caplog.records[-1].getMessage()
    long = with_fix("disk full (ENOSPC): " + "x" * 400, "; fix: free space on that disk")
    assert len(long) == NOTE_MAX and long.endswith("x...; fix: free space on that disk")


def test_a_refusal_a_full_disk_and_a_damaged_database_are_each_found_down_an_exception_chain(tmp_path: Path) -> None:
    """The three checks walk one chain (``storage.causes``): a real failure raised from, or while handling, another."""
    (tmp_path / "plain").write_text("a file\n")
    try:
        open(tmp_path / "plain" / "segment", "wb")  # noqa: SIM115 - it fails
    except NotADirectoryError as exc:
        refused: OSError = exc
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    try:
        sqlite3.connect(garbage).execute("SELECT * FROM sqlite_master")
    except sqlite3.DatabaseError as exc:
        damaged: sqlite3.DatabaseError = exc
    full = OSError(errno.ENOSPC, "No space left on device")

    def raised_from(cause: BaseException) -> BaseException:
        try:
            raise RuntimeError("a library's own error, naming no errno") from cause
        except RuntimeError as exc:
            return exc

    def raised_during(context: BaseException) -> BaseException:
        try:
            try:
                raise context
            except type(context):
                raise ValueError("cleanup failed too")  # noqa: B904 - raised while handling it, as a cleanup does
        except ValueError as exc:
            return exc

    for wrap in (lambda e: e, raised_from, raised_during, lambda e: raised_from(raised_during(e))):
        assert named_fault(wrap(refused), tmp_path) and not named_fault(wrap(full), tmp_path)
        assert is_disk_full(wrap(full), tmp_path) and not is_disk_full(wrap(refused), tmp_path)
        assert is_database_damage(wrap(damaged)) and not is_database_damage(wrap(full))
    assert not named_fault(RuntimeError("nothing below"), tmp_path) and not is_disk_full(RuntimeError("x"), tmp_path)
