"""The power-cut file system (tests/powercut_fs.py) proves itself before anything is tested on it: what was
fsynced survives a cut, what was not is gone, an unsynced rename or unlink is undone, a folder's fsync keeps
its own names only, a torn write leaves a prefix, a reordered cut a strict subset of the writes, and SQLite in
WAL mode loses exactly what its synchronous level leaves unsynced. Real FUSE mounts; skipped with the reason
where /dev/fuse, fusermount or fusepy (libfuse 2) is missing (`make fuse`)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powercut_fs import PowerCutMount, fsync, fuse_missing, powercut_mount

pytestmark = pytest.mark.skipif(fuse_missing() is not None, reason=str(fuse_missing()))


@pytest.fixture
def mount() -> Iterator[PowerCutMount]:
    with powercut_mount() as m:
        yield m


def write_synced(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    fsync(path)
    fsync(path.parent)


def test_a_file_written_without_fsync_is_gone_after_a_cut_and_an_fsynced_one_is_kept(mount: PowerCutMount) -> None:
    root = mount.mountpoint
    write_synced(root / "kept.txt", b"synced bytes")
    (root / "lost.txt").write_bytes(b"never synced")
    (root / "sub").mkdir()
    (root / "sub" / "also-lost.txt").write_bytes(b"in a new folder")
    undone = mount.cut("drop")
    assert undone == {  # lost.txt, sub/, sub/also-lost.txt
        "dirops_undone": 3,
        "files_undone": 0,
        "torn": 0,
        "paths": ["/lost.txt", "/sub", "/sub/also-lost.txt"],
    }
    assert sorted(os.listdir(mount.backing)) == ["kept.txt"]
    mount.mount()
    assert sorted(os.listdir(root)) == ["kept.txt"]
    assert (root / "kept.txt").read_bytes() == b"synced bytes"


def test_unsynced_writes_and_truncates_of_a_synced_file_are_undone_and_its_name_without_a_folder_fsync_is_not_kept(
    mount: PowerCutMount,
) -> None:
    root = mount.mountpoint
    write_synced(root / "f.bin", b"A" * 10_000)
    with open(root / "f.bin", "r+b") as fh:
        fh.seek(5_000)
        fh.write(b"B" * 20_000)  # over the end
        fh.truncate(7_000)
        fh.seek(100)
        fh.write(b"C" * 10)
    (root / "named.txt").write_bytes(b"data synced, name not")
    fsync(root / "named.txt")
    mount.cut("drop")
    mount.mount()
    assert (root / "f.bin").read_bytes() == b"A" * 10_000
    assert not (root / "named.txt").exists()  # POSIX: a new name needs an fsync of its folder


def test_an_unsynced_rename_over_a_file_and_an_unsynced_unlink_are_undone(mount: PowerCutMount) -> None:
    root = mount.mountpoint
    write_synced(root / "config.json", b"old")
    write_synced(root / "other.txt", b"other")
    write_synced(root / ".config.tmp", b"new")  # data and name synced: only the rename is not
    os.replace(root / ".config.tmp", root / "config.json")
    (root / "other.txt").unlink()
    assert (root / "config.json").read_bytes() == b"new"
    mount.cut("drop")
    mount.mount()
    assert (root / "config.json").read_bytes() == b"old"
    assert (root / ".config.tmp").read_bytes() == b"new"
    assert (root / "other.txt").read_bytes() == b"other"


def test_a_rename_followed_by_an_fsync_of_its_folder_survives(mount: PowerCutMount) -> None:
    root = mount.mountpoint
    write_synced(root / "token", b"old")
    write_synced(root / ".token.tmp", b"rotated")
    os.replace(root / ".token.tmp", root / "token")
    fsync(root)
    mount.cut("drop")
    mount.mount()
    assert sorted(os.listdir(root)) == ["token"]
    assert (root / "token").read_bytes() == b"rotated"


def test_a_torn_write_keeps_a_prefix_of_it(mount: PowerCutMount) -> None:
    root = mount.mountpoint
    data = os.urandom(64 * 1024)
    write_synced(root / "f.bin", b"")
    kept = []
    for seed in range(3):
        with open(root / "f.bin", "r+b") as fh:
            fh.write(data)  # one write (big_writes: up to 128 KiB reach the file system whole)
        assert mount.cut("torn", seed)["torn"] == 1
        mount.mount()
        got = (root / "f.bin").read_bytes()
        assert data.startswith(got) and len(got) < len(data)
        kept.append(len(got))
        with open(root / "f.bin", "r+b") as fh:  # back to empty, durably, for the next round
            fh.truncate(0)
            os.fsync(fh.fileno())
    assert any(kept), kept  # 0 bytes three times in a row: a prefix is not being kept


CHILD = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=" + sys.argv[2])
for i in range(20):
    db.execute("INSERT INTO t VALUES (?)", (i,))  # each one a committed transaction
print("committed", flush=True)
os._exit(0)  # like kill -9: no close, no checkpoint
"""


@pytest.mark.parametrize(("level", "kept"), [("NORMAL", 0), ("FULL", 20)])
def test_sqlite_in_wal_mode_keeps_after_a_cut_what_its_synchronous_level_synced(
    mount: PowerCutMount, level: str, kept: int
) -> None:
    """NORMAL syncs the WAL only at a checkpoint: commits acknowledged before one are lost by a power
    cut (SQLite documents it); FULL syncs at every commit. Both open cleanly after the cut."""
    db_path = mount.mountpoint / "t.sqlite"
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()  # the last connection: checkpointed and synced
    fsync(mount.mountpoint)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(db_path), level], capture_output=True, text=True
    )
    assert done.stdout.strip() == "committed", done.stderr
    mount.cut("drop")
    mount.mount()
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM t").fetchone() == (kept,)
    finally:
        db.close()


def test_an_fsync_of_one_folder_keeps_its_names_only(mount: PowerCutMount) -> None:
    """Names are durable folder by folder: a rename between two folders needs both synced."""
    root = mount.mountpoint
    for sub in ("a", "b", "c"):
        (root / sub).mkdir()
    fsync(root)
    write_synced(root / "c" / "moved.txt", b"moved")
    (root / "a" / "kept.txt").write_bytes(b"")
    (root / "b" / "lost.txt").write_bytes(b"")
    os.rename(root / "c" / "moved.txt", root / "a" / "moved.txt")
    fsync(root / "a")  # not b, not c
    mount.cut("drop")
    mount.mount()
    assert sorted(os.listdir(root / "a")) == ["kept.txt"]
    assert os.listdir(root / "b") == []
    assert (root / "c" / "moved.txt").read_bytes() == b"moved"


def test_a_reorder_cut_keeps_a_strict_subset_of_the_unsynced_writes_in_any_order(mount: PowerCutMount) -> None:
    """Three unsynced writes of three blocks: after each cut some subset survives, never all three, and over
    a few seeds a later block survives without an earlier one (a prefix model never shows that)."""
    root = mount.mountpoint
    blocks = [bytes([65 + i]) * 4096 for i in range(3)]
    write_synced(root / "f.bin", b"\0" * 3 * 4096)
    seen: set[tuple[bool, ...]] = set()
    for seed in range(8):
        fd = os.open(root / "f.bin", os.O_WRONLY)
        try:
            for i, block in enumerate(blocks):
                os.pwrite(fd, block, i * 4096)  # one write call each: they reach the file system apart
        finally:
            os.close(fd)
        mount.cut("reorder", seed)
        mount.mount()
        got = (root / "f.bin").read_bytes()
        assert len(got) == 3 * 4096
        kept = tuple(got[i * 4096 : (i + 1) * 4096] == blocks[i] for i in range(3))
        for i, was_kept in enumerate(kept):
            assert was_kept or got[i * 4096 : (i + 1) * 4096] == b"\0" * 4096  # a block is whole: kept or not
        assert not all(kept), seed
        seen.add(kept)
        write_synced(root / "f.bin", b"\0" * 3 * 4096)  # back to zeros, durably, for the next round
    assert any(not kept[0] and (kept[1] or kept[2]) for kept in seen), seen
