"""Where one foldermind instance keeps everything: config, data, logs and runtime sockets.

``--home DIR`` (or ``FOLDERMIND_HOME``) puts all four under DIR, so tests and several instances
never collide; without it the platform's directories are used (platformdirs conventions).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import platformdirs

APP = "foldermind"
MODELS_SUBDIR = "models"
# sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS); keep room for the socket file name.
_MAX_SOCKET_DIR = 90


def model_cache_dir(configured: str = "") -> Path:
    """Where model exports are kept for every home of this user on this machine: ``configured``
    (``[ingest] model_cache_dir``), else ``<user cache dir>/foldermind/models``. Not per home: an export's
    name holds a digest of the model's files and the export format, so homes can share one file."""
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_cache_dir(APP, appauthor=False)) / MODELS_SUBDIR


@dataclass(frozen=True, slots=True)
class Home:
    root: Path | None
    config_dir: Path
    data_dir: Path
    log_dir: Path
    runtime_dir: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None) -> Home:
        if home is None:
            home = os.environ.get("FOLDERMIND_HOME") or None
        if home is not None:
            root = Path(home).expanduser().resolve()
            return cls(root, root / "config", root / "data", root / "logs", _runtime_dir(root / "run", root))
        dirs = platformdirs.PlatformDirs(APP, appauthor=False)
        with warnings.catch_warnings():
            # Without XDG_RUNTIME_DIR (a headless box, a container) platformdirs warns and falls
            # back to /tmp/runtime-UID, which is what we want anyway; the folder is made 0700 below.
            warnings.simplefilter("ignore")
            runtime = Path(dirs.user_runtime_dir)
        return cls(
            None,
            Path(dirs.user_config_dir),
            Path(dirs.user_data_dir),
            Path(dirs.user_log_dir),
            _runtime_dir(runtime, runtime),
        )

    def ensure(self) -> None:
        """Create the home's folders, private to this user: the token, the index (which holds document
        text) and the logs are nobody else's to read, and only this user may reach the sockets. A folder
        that cannot be made or fixed (a read-only disk, a file in its place) raises :class:`HomeNotWritable`."""
        try:
            made: list[Path] = []
            if self.root is not None and not self.root.exists():
                made += _missing(self.root)
                self.root.mkdir(parents=True, mode=0o700)
            for path in (self.config_dir, self.data_dir, self.log_dir, self.runtime_dir):
                made += _missing(path)
                path.mkdir(parents=True, exist_ok=True, mode=0o700)
                if path == self.runtime_dir:
                    # It may sit in a shared /tmp under a name anyone can predict: a folder or symlink
                    # planted there by another user would let them reach or replace the sockets. (The
                    # other folders may well be symlinks the user made, to another disk say.)
                    _check_owned(path)
                # mkdir's mode is masked by the umask and ignored for an existing folder: enforce it (only
                # when it differs, so a home on a read-only disk is reported as such, not as a failed chmod).
                if stat.S_IMODE(path.stat().st_mode) != 0o700:
                    os.chmod(path, 0o700)
            # A new folder's name is durable only once its parent is synced: a power cut before that took the
            # whole home with it, the registered folders, the token and the config (tests/powerloss.py).
            for parent in dict.fromkeys(p.parent for p in made):
                fsync_path(parent)
        except OSError as exc:
            raise HomeNotWritable.of(exc) from exc

    def check_writable(self) -> None:
        """Raise :class:`HomeNotWritable` unless a file can be made in each folder a running foldermind
        writes (the index, the logs, the sockets): as root a folder's mode alone proves nothing."""
        for path in (self.data_dir, self.log_dir, self.runtime_dir):
            try:
                with tempfile.TemporaryFile(dir=path, prefix=".write-check."):
                    pass
            except OSError as exc:
                raise HomeNotWritable.of(exc, path) from exc

    @property
    def bus_endpoint(self) -> str:
        return f"ipc://{self.runtime_dir / 'bus.sock'}"

    @property
    def events_endpoint(self) -> str:
        return f"ipc://{self.runtime_dir / 'events.sock'}"

    @property
    def socket_files(self) -> list[Path]:
        return [self.runtime_dir / "bus.sock", self.runtime_dir / "events.sock"]

    @property
    def mcp_file(self) -> Path:
        """Where the front door writes the MCP URL and port it actually bound (no secret in it)."""
        return self.runtime_dir / "mcp.json"

    @property
    def console_file(self) -> Path:
        """Where the console writes the URL and port it actually bound (no secret in it)."""
        return self.runtime_dir / "console.json"

    def read_mcp_info(self) -> dict[str, Any] | None:
        """``mcp.json`` as the front door last wrote it (``{url, port, state, error, pid}``), or None."""
        return _read_info(self.mcp_file)

    def write_mcp_info(self, info: dict[str, Any]) -> None:
        """Replace ``mcp.json`` atomically: a reader sees the old file or the new one, never half of one."""
        _write_info(self.mcp_file, info)

    def read_console_info(self) -> dict[str, Any] | None:
        """``console.json`` as the console last wrote it (``{url, port, state, error, pid}``), or None."""
        return _read_info(self.console_file)

    def write_console_info(self, info: dict[str, Any]) -> None:
        _write_info(self.console_file, info)

    def serving_mcp_info(self) -> dict[str, Any] | None:
        """``mcp.json`` while its front door serves: state running, and its process a child of the kernel that
        holds this home's lock (a file a stopped or killed kernel left behind says "running" too)."""
        return self._serving(self.read_mcp_info())

    def serving_console_info(self) -> dict[str, Any] | None:
        """``console.json`` while its console serves (as :meth:`serving_mcp_info`)."""
        return self._serving(self.read_console_info())

    def _serving(self, info: dict[str, Any] | None) -> dict[str, Any] | None:
        if not info or info.get("state") != "running":
            return None
        kernel = self.running_pid()
        if kernel is None or kernel < 0:  # -1: a kernel still writing its pid file has no front door yet
            return None
        import psutil  # here, not at the top: most commands never ask

        try:
            return info if psutil.Process(int(info.get("pid", 0))).ppid() == kernel else None
        except (psutil.Error, TypeError, ValueError):
            return None

    def wait_mcp_serving(self, timeout: float) -> dict[str, Any] | None:
        """The front door's info once it serves and this home's kernel runs; None after ``timeout``."""
        give_up = time.monotonic() + timeout
        while True:
            info = self.serving_mcp_info()
            if info:
                return info
            if time.monotonic() > give_up:
                return None
            time.sleep(0.05)

    @property
    def pid_file(self) -> Path:
        return self.runtime_dir / "kernel.pid"

    @property
    def lock_file(self) -> Path:
        return self.runtime_dir / "kernel.lock"

    @property
    def index_lock_file(self) -> Path:
        """Held by the running kernel beside the index, holding its runtime folder: the platform home's runtime
        folder follows XDG_RUNTIME_DIR, which differs between a shell and a client-launched bridge, and two
        kernels must never share one index whatever folder their sockets are in."""
        return self.data_dir / "kernel.lock"

    @property
    def supervisor_override(self) -> Path:
        return self.config_dir / "supervisor.toml"

    @property
    def keys_dir(self) -> Path:
        """The CURVE keys of the tcp bus (``bus/``: the kernel's; ``worker/``: this home's as a remote worker)
        and ``allowed.json``, the worker keys the kernel admits: config, not runtime state, so a restart keeps
        them; 0700, every file 0600."""
        return self.config_dir / "keys"

    @property
    def bus_keys(self) -> Path:
        return self.keys_dir / "bus"

    @property
    def worker_keys(self) -> Path:
        return self.keys_dir / "worker"

    @property
    def allowed_keys_file(self) -> Path:
        return self.keys_dir / "allowed.json"

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def running_pid(self) -> int | None:
        """The pid of the kernel that holds this home's lock, or None when none does."""
        if not _held(self.lock_file):
            return None
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return -1  # locked by a kernel still writing its pid file

    def index_holder(self) -> str | None:
        """The runtime folder of a kernel that holds this home's index (see :attr:`index_lock_file`), or None
        when none does."""
        if not _held(self.index_lock_file):
            return None
        try:
            return self.index_lock_file.read_text().strip() or "a folder it has not written yet"
        except OSError:
            return "a folder this user cannot read"

    def serving(self) -> Home:
        """This home as its running kernel's sockets are reached: itself, or when no kernel holds its runtime
        folder but one holds its index from another (a command or bridge launched without the kernel's
        XDG_RUNTIME_DIR), the same home with that folder, once it is safe (this user's own plain folder, 0700;
        else :class:`UnsafeHomeError`)."""
        if self.running_pid() is not None or not _held(self.index_lock_file):
            return self
        try:
            folder = Path(self.index_lock_file.read_text().strip())
        except OSError:
            return self
        if not folder.is_absolute() or folder == self.runtime_dir or not os.path.lexists(folder):
            return self
        _check_owned(folder)
        if (mode := stat.S_IMODE(os.lstat(folder).st_mode)) != 0o700:
            raise UnsafeHomeError(
                f"the running kernel's sockets are in {folder}, which others may reach (mode {mode:o}, not 700):"
                " refusing to use it; `chmod 700` it, or run foldermind with that kernel's XDG_RUNTIME_DIR"
            )
        return replace(self, runtime_dir=folder)


def _held(lock_file: Path) -> bool:
    """Whether a kernel holds the flock on ``lock_file`` (no file: none does)."""
    try:
        # Opened for reading: flock needs no write access, so a home on a read-only disk is read too.
        fh = open(lock_file)  # noqa: SIM115 - closed by the with below
    except (FileNotFoundError, NotADirectoryError):  # no file, or a file where its folder belongs: start says so
        return False
    with fh:
        try:
            # A shared probe: it cannot succeed while a kernel holds the exclusive lock.
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


class UnsafeHomeError(RuntimeError):
    """A folder of the home is not this user's own (another owner, or a symlink): refuse to use it."""


class HomeNotWritable(RuntimeError):
    """A folder of the home cannot be written (a read-only disk, no permission, a file in its place): one
    line saying which and how to fix it, for ``start`` and ``doctor`` to show instead of a traceback."""

    what: str = ""
    fix: str = ""

    @classmethod
    def of(cls, exc: OSError, path: Path | None = None) -> HomeNotWritable:
        where = path or exc.filename or "the home"
        if exc.errno == errno.EROFS:
            what, fix = f"{where} is on a read-only file system", "remount it read-write"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            what, fix = f"no permission to write {where}", "give this user write access to it"
        elif exc.errno in (errno.EEXIST, errno.ENOTDIR):
            what, fix = f"{where} (or a folder above it) is a file, not a folder", "move that file out of the way"
        else:
            what, fix = f"{where}: {exc.strerror or exc}", "make it writable"
        fix += ", or use --home DIR on a writable disk"
        error = cls(f"foldermind cannot write its home: {what}; fix: {fix}")
        error.what, error.fix = what, fix
        return error


def _check_owned(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeHomeError(f"{path} is not a plain folder (a symlink?): remove it and start again")
    if st.st_uid != os.geteuid():
        raise UnsafeHomeError(f"{path} belongs to uid {st.st_uid}, not to this user: remove it and start again")


def _missing(path: Path) -> list[Path]:
    """``path`` and those of its ancestors that do not exist yet."""
    return [p for p in (path, *path.parents) if not p.exists()]


def fsync_path(path: Path) -> None:
    """fsync(2) the file ``path`` (its bytes) or the folder ``path`` (the names in it: a new or renamed file, a
    new folder; a file's own fsync does not make its name durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _runtime_dir(preferred: Path, key: Path) -> Path:
    """``preferred`` unless its socket paths would exceed the unix-socket path limit."""
    if len(str(preferred)) <= _MAX_SOCKET_DIR:
        return preferred
    digest = hashlib.sha256(str(key).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"{APP}-{os.getuid()}-{digest}"


class KernelLock:
    """An exclusive lock on the home (its runtime folder and its index), held for the kernel's whole life.

    The OS drops it when the kernel dies, however it dies, so a leftover pid file or socket from a
    crash is recognised as stale by the next start instead of blocking it.
    """

    def __init__(self, home: Home) -> None:
        self.home = home
        self._fh = open(home.lock_file, "a+")  # noqa: SIM115 - held open for the kernel's life
        self._index_fh = open(home.index_lock_file, "a+")  # noqa: SIM115 - held open for the kernel's life

    def acquire(self) -> bool:
        if not _flock_briefly(self._fh):
            return False
        if not _flock_briefly(self._index_fh):
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            return False
        self._index_fh.truncate(0)
        self._index_fh.write(str(self.home.runtime_dir))
        self._index_fh.flush()
        for stale in [*self.home.socket_files, self.home.pid_file]:
            stale.unlink(missing_ok=True)
        tmp = self.home.pid_file.with_suffix(".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.replace(self.home.pid_file)
        return True

    def release(self) -> None:
        for path in [*self.home.socket_files, self.home.pid_file]:
            path.unlink(missing_ok=True)
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        fcntl.flock(self._index_fh, fcntl.LOCK_UN)
        self._index_fh.close()


def _flock_briefly(fh: IO[str]) -> bool:
    """An exclusive lock on ``fh``, retried briefly: a `status` probing it holds it for microseconds."""
    for attempt in range(20):
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt == 19:
                return False
            time.sleep(0.05)
    return False


def _read_info(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _write_info(path: Path, info: dict[str, Any]) -> None:
    """Replace ``path`` atomically: a reader sees the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh)
    os.replace(tmp, path)
