"""A power-cut file system for tests: FUSE (fusepy over libfuse 2) over a backing folder, in the spirit of
LazyFS. Every call goes through to the backing folder at once (reads, mmap, sockets and locks behave as
on a disk), and what a power cut could lose is kept aside as undo records: for each file (by inode) the
bytes its writes and truncates replaced since its last fsync, and the creates, renames and unlinks since
the last fsync of their folder (a removed or replaced file is parked in a grave beside the backing folder).

`PowerCutMount.cut(mode)` is the power cut: the caller has killed every process using the mount; the
daemon is told the mode, unmounted, applies the undo records to the backing folder and exits; `mount()`
then starts a fresh daemon, as a machine boots. Modes:

- ``drop``: everything not synced is lost (files back to their last fsync, folders to theirs);
- ``torn``: for each file a random prefix of its unsynced writes survives, the last survivor cut to a
  random prefix of its bytes (a torn write), and a random prefix of the folder operations survives;
- ``reorder``: for each file a random subset of its unsynced writes survives, never all of them (a disk
  writes blocks out of order: a later write kept, an earlier one lost), and a random prefix of the folder
  operations (a journaling file system commits those in order).

The model is POSIX's, stricter than ext4's: fsync of a file does not make its name durable (a new or
renamed file needs an fsync of its folder), and sync(2) reaches no FUSE daemon here. Hard links are
refused (EPERM): nothing under test makes them. Run a daemon by hand:
``python -m tests.powercut_fs BACKING MOUNTPOINT``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import faulthandler
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldermind.protocol.runtime.home import fsync_path as fsync  # noqa: F401  (for the tests; reaches FUSE as fsyncdir)

MODES = ("drop", "torn", "reorder")


def fuse_missing() -> str | None:
    """Why a power-cut mount cannot run here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount") is None:
        return "fusermount not found (Debian package fuse: `make fuse`)"
    try:
        import fuse  # noqa: F401  (fusepy: it loads libfuse.so.2 on import)
    except (ImportError, OSError) as exc:
        return f"fusepy or libfuse 2 missing ({exc}; `make fuse`)"
    return None


@dataclass
class Undo:
    """One write or truncate: the file had ``size`` bytes and ``old`` at ``offset`` before it; ``data`` was
    written (a truncate: to ``offset`` bytes)."""

    offset: int
    old: bytes
    size: int
    data: bytes
    truncate: bool = False


@dataclass
class DirOp:
    """One create, unlink or rename, undone by moving names back; durable once ``pending`` folders synced."""

    kind: str  # "create", "remove" or "rename"
    path: str
    dest: str = ""
    parked: str = ""  # the grave entry holding a removed or replaced file
    pending: set[str] = field(default_factory=set)


def _parent(path: str) -> str:
    return os.path.dirname(path.rstrip("/")) or "/"


class PowerCutOps:
    """The fusepy operations (fusepy calls the methods by name); one lock keeps the undo records whole."""

    def __init__(self, backing: str, grave: str) -> None:
        self.root, self.grave = os.path.realpath(backing), grave
        self.lock = threading.RLock()
        self.files: dict[int, list[Undo]] = {}  # backing inode -> undo records since its last fsync
        self.dirops: list[DirOp] = []
        self._parked = 0

    def _b(self, path: str) -> str:
        return self.root + path

    def _park(self, backing_path: str) -> str:
        self._parked += 1
        parked = os.path.join(self.grave, str(self._parked))
        os.rename(backing_path, parked)
        return parked

    # -- attributes and names ------------------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._b(path))
        out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")}
        return out | {k: getattr(st, k + "_ns") for k in ("st_atime", "st_mtime", "st_ctime")}

    def access(self, path: str, amode: int) -> None:
        if not os.access(self._b(path), amode):
            raise OSError(errno.EACCES, path)

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._b(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._b(path))

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._b(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag")
        return {k: getattr(sv, k) for k in (*keys, "f_frsize", "f_namemax")}

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._b(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        os.chown(self._b(path), uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        os.utime(self._b(path), ns=times)

    # -- folder operations: done at once, undo recorded ----------------------------------------------

    def _created(self, path: str) -> None:
        self.dirops.append(DirOp("create", path, pending={_parent(path)}))

    def mknod(self, path: str, mode: int, dev: int) -> None:
        with self.lock:
            os.mknod(self._b(path), mode, dev)
            self._created(path)

    def mkdir(self, path: str, mode: int) -> None:
        with self.lock:
            os.mkdir(self._b(path), mode)
            self._created(path)

    def symlink(self, target: str, source: str) -> None:
        with self.lock:
            os.symlink(source, self._b(target))
            self._created(target)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self.lock:
            fd = os.open(self._b(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
            self._created(path)
            return fd

    def _remove(self, path: str, is_dir: bool) -> None:
        with self.lock:
            backing = self._b(path)
            if is_dir and os.listdir(backing):
                raise OSError(errno.ENOTEMPTY, path)
            if not is_dir and os.path.isdir(backing) and not os.path.islink(backing):
                raise OSError(errno.EISDIR, path)
            self.dirops.append(DirOp("remove", path, parked=self._park(backing), pending={_parent(path)}))

    def unlink(self, path: str) -> None:
        self._remove(path, is_dir=False)

    def rmdir(self, path: str) -> None:
        self._remove(path, is_dir=True)

    def rename(self, old: str, new: str) -> None:
        with self.lock:
            src, dst = self._b(old), self._b(new)
            parked = ""
            if os.path.lexists(dst):
                if os.path.isdir(dst) and not os.path.islink(dst):
                    if os.listdir(dst):
                        raise OSError(errno.ENOTEMPTY, new)
                    if not os.path.isdir(src):
                        raise OSError(errno.EISDIR, new)
                elif os.path.isdir(src) and not os.path.islink(src):
                    raise OSError(errno.ENOTDIR, new)
                parked = self._park(dst)
            try:
                os.rename(src, dst)
            except OSError:
                if parked:
                    os.rename(parked, dst)
                raise
            self.dirops.append(DirOp("rename", old, new, parked, pending={_parent(old), _parent(new)}))

    def link(self, target: str, source: str) -> None:
        raise OSError(errno.EPERM, "hard links are not modelled by the power-cut file system")

    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        with self.lock:
            for op in self.dirops:
                op.pending.discard(path)
            self.dirops = [op for op in self.dirops if op.pending]

    # -- file contents ------------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        # O_APPEND would make pwrite ignore the offset the kernel computed; O_TRUNC comes as truncate().
        access = os.O_RDONLY if flags & os.O_ACCMODE == os.O_RDONLY else os.O_RDWR
        return os.open(self._b(path), access | (flags & ~(os.O_ACCMODE | os.O_APPEND | os.O_TRUNC | os.O_CREAT)))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def _record(self, fd: int, offset: int, data: bytes, truncate: bool = False) -> None:
        st = os.fstat(fd)
        end = st.st_size if truncate else min(st.st_size, offset + len(data))
        old = os.pread(fd, max(0, end - offset), offset) if end > offset else b""
        self.files.setdefault(st.st_ino, []).append(Undo(offset, old, st.st_size, data, truncate))

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.lock:
            self._record(fh, offset, data)
            return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        with self.lock:
            fd = fh if fh is not None else os.open(self._b(path), os.O_RDWR)
            try:
                self._record(fd, length, b"", truncate=True)
                os.ftruncate(fd, length)
            finally:
                if fh is None:
                    os.close(fd)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        with self.lock:
            self.files.pop(os.fstat(fh).st_ino, None)

    def flush(self, path: str, fh: int) -> None:
        return None

    def release(self, path: str, fh: int) -> None:
        os.close(fh)

    # -- the cut ------------------------------------------------------------------------------------

    def cut(self, mode: str, rng: random.Random) -> dict[str, Any]:
        """Undo what a power cut in ``mode`` loses, on the backing folder (the mount is gone by now). Returns
        counts, and ``paths``: the paths (from the mount's root) of the files and names it took back."""
        with self.lock:
            ops = self.dirops
            keep = rng.randint(0, len(ops)) if mode != "drop" else 0
            for op in reversed(ops[keep:]):
                self._undo_dirop(op)
            inodes = self._inode_paths()
            torn = 0
            paths = {p for op in ops[keep:] for p in (op.path, op.dest) if p}
            for ino, records in self.files.items():
                path = inodes.get(ino)
                if path is None or not records:
                    continue
                paths.add(path[len(self.root) :])
                with open(path, "r+b") as fh:
                    if mode == "torn":
                        k = rng.randrange(len(records))
                        for rec in reversed(records[k + 1 :]):
                            _undo(fh, rec)
                        _tear(fh, records[k], rng)
                        torn += 1
                    else:
                        for rec in reversed(records):
                            _undo(fh, rec)
                    if mode == "reorder":  # back to the last fsync, then a strict subset written again in order
                        kept = [rng.random() < 0.5 for _ in records]
                        if all(kept):
                            kept[rng.randrange(len(kept))] = False
                        for rec, keep_it in zip(records, kept, strict=True):
                            if keep_it:
                                _redo(fh, rec)
            undone = sum(1 for ino in self.files if ino in inodes and self.files[ino])
            self.files, self.dirops = {}, []
            return {"dirops_undone": len(ops) - keep, "files_undone": undone, "torn": torn, "paths": sorted(paths)}

    def _undo_dirop(self, op: DirOp) -> None:
        with contextlib.suppress(OSError):  # a name a durable later operation moved on: nothing to put back
            if op.kind == "create":
                self._park(self._b(op.path))
            elif op.kind == "remove":
                os.rename(op.parked, self._b(op.path))
            else:
                os.rename(self._b(op.dest), self._b(op.path))
                if op.parked:
                    os.rename(op.parked, self._b(op.dest))

    def _inode_paths(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for folder, _, names in os.walk(self.root):
            for name in names:
                p = os.path.join(folder, name)
                st = os.lstat(p)
                if os.path.isfile(p) and not os.path.islink(p):
                    out[st.st_ino] = p
        return out


def _undo(fh: Any, rec: Undo) -> None:
    fh.truncate(rec.size)
    fh.seek(rec.offset)
    fh.write(rec.old)


def _redo(fh: Any, rec: Undo) -> None:
    """Write ``rec`` again over the file as its last fsync left it (a write past the end leaves a hole)."""
    if rec.truncate:
        fh.truncate(rec.offset)
        return
    fh.seek(rec.offset)
    fh.write(rec.data)


def _tear(fh: Any, rec: Undo, rng: random.Random) -> None:
    """Keep a random prefix of the write ``rec`` (a truncate is kept or undone whole)."""
    if not rec.data:  # a truncate (or an empty write)
        if rng.random() < 0.5:
            _undo(fh, rec)
        return
    prefix = rng.randrange(len(rec.data))
    fh.seek(rec.offset + prefix)
    fh.write(rec.old[prefix:])
    fh.truncate(max(rec.size, rec.offset + prefix) if prefix else rec.size)


# ---------------------------------------------------------------------------------------------------
# the daemon and its controller


def serve(backing: str, mountpoint: str, control: str) -> None:
    """Mount, serve until unmounted, then apply the cut ``control`` asks for (a clean unmount: none)."""
    from fuse import FUSE  # fusepy

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a daemon that will not end shows where it waits
    grave = backing.rstrip("/") + ".grave"
    shutil.rmtree(grave, ignore_errors=True)
    os.makedirs(grave)
    ops = PowerCutOps(backing, grave)
    options = {"foreground": True, "nothreads": False, "big_writes": True, "default_permissions": True}
    # libfuse 2's loop runs in a thread: it did not always end after an unmount (1 cut in ~5 here, every
    # thread idle), so this one watches the mount point instead and finishes once it is gone.
    loop = threading.Thread(target=FUSE, args=(_Adapter(ops), mountpoint), kwargs=options, daemon=True)
    loop.start()
    seen = False
    while loop.is_alive():
        mounted = os.path.ismount(mountpoint)
        if seen and not mounted:
            break
        seen = seen or mounted
        time.sleep(0.05)
    loop.join(timeout=5.0)
    with ops.lock:  # no call in flight once it is held; none can come, the mount is gone
        if os.path.exists(control):
            order = json.loads(Path(control).read_text())
            result = ops.cut(order["mode"], random.Random(order["seed"]))
            Path(control).unlink()
            Path(control + ".done").write_text(json.dumps(result))
    shutil.rmtree(grave, ignore_errors=True)
    print(f"calls that failed: {dict(failures)}", flush=True)
    os._exit(0)  # not waiting for a libfuse thread that missed the unmount


failures: Counter[str] = Counter()  # "op ERRNO" -> how often, written to the daemon's log at the end


def _Adapter(ops: PowerCutOps) -> Any:
    """PowerCutOps as a fusepy Operations (its defaults for the rest): an OSError becomes FUSE's errno."""
    from fuse import FuseOSError, Operations  # fusepy

    class Adapter(Operations):  # type: ignore[misc]
        use_ns = True  # times in nanoseconds, as os.stat gives them

        def __call__(self, op: str, *args: Any) -> Any:
            method = getattr(ops, op, None)
            try:
                return super().__call__(op, *args) if method is None else method(*args)
            except OSError as exc:
                failures[f"{op} {errno.errorcode.get(exc.errno or errno.EIO, exc.errno)}"] += 1
                raise FuseOSError(exc.errno or errno.EIO) from None

    return Adapter()


class PowerCutMount:
    """A power-cut file system at ``mountpoint`` over ``backing``, its daemon a child process."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing, self.mountpoint = backing, mountpoint
        self.control = str(backing).rstrip("/") + ".cut.json"
        self.daemon: subprocess.Popen[bytes] | None = None
        self.log = Path(str(backing).rstrip("/") + ".fuse.log")

    def mount(self, timeout: float = 30.0) -> PowerCutMount:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.daemon = subprocess.Popen(
                [sys.executable, "-m", "tests.powercut_fs", str(self.backing), str(self.mountpoint)],
                stdout=log,
                stderr=log,
                cwd=Path(__file__).resolve().parent.parent,
            )
        give_up = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self.daemon.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"the power-cut file system did not mount: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def _unmount(self, timeout: float = 60.0) -> None:
        assert self.daemon is not None
        give_up = time.monotonic() + timeout
        while os.path.ismount(self.mountpoint):
            done = subprocess.run(["fusermount", "-u", str(self.mountpoint)], capture_output=True)
            if done.returncode == 0:
                break
            if time.monotonic() > give_up:  # something still holds it open: detach it and stop the daemon
                subprocess.run(["fusermount", "-u", "-z", str(self.mountpoint)], capture_output=True)
                self.daemon.kill()
                self.daemon.wait()
                self.daemon = None
                raise RuntimeError(f"{self.mountpoint} stayed busy (a process still had a file open): detached")
            time.sleep(0.2)
        try:
            self.daemon.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.daemon.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            self.daemon.kill()
            self.daemon.wait()
            raise RuntimeError(f"the daemon did not end once unmounted: {self.log.read_text()[-4000:]}") from None
        finally:
            self.daemon = None

    def cut(self, mode: str = "drop", seed: int = 0) -> dict[str, Any]:
        """The power cut (every process using the mount must be dead): unsynced state dropped or torn,
        the file system unmounted. Returns what was undone; `mount()` boots again."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        Path(self.control).write_text(json.dumps({"mode": mode, "seed": seed}))
        self._unmount()
        done = Path(self.control + ".done")
        result: dict[str, Any] = json.loads(done.read_text())
        done.unlink()
        return result

    def close(self) -> None:
        """A clean unmount: nothing is lost."""
        if self.daemon is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.control)
            self._unmount()

    def __enter__(self) -> PowerCutMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def powercut_mount() -> Iterator[PowerCutMount]:
    """A fresh power-cut mount in a short temporary folder, unmounted and removed after."""
    base = Path(tempfile.mkdtemp(prefix="fm-pcfs-"))
    m = PowerCutMount(base / "backing", base / "mnt").mount()
    try:
        yield m
    finally:
        m.close()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    args = ap.parse_args(argv)
    serve(args.backing, args.mountpoint, args.backing.rstrip("/") + ".cut.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
