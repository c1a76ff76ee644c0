"""The ``foldermind`` command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import click
import psutil

from foldermind.kernel import __version__
from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import BusError, JobError, KernelUnavailable
from foldermind.protocol.messages import (
    AttachReply,
    AttachRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    PingReply,
    PingRequest,
    RestartReply,
    RestartRequest,
    SearchReply,
    SearchRequest,
    StatusReply,
    StatusRequest,
    StopReply,
    StopRequest,
    WatchSyncReply,
    WatchSyncRequest,
)
from foldermind.protocol.runtime import logs
from foldermind.protocol.runtime.config import ConfigError, SupervisorConfig, load
from foldermind.protocol.runtime.home import Home, KernelLock, UnsafeHomeError

F = TypeVar("F", bound=Callable[..., Any])

NOT_RUNNING_EXIT = 3


def home_option(func: F) -> F:
    """``--home`` on the group and on every command (``foldermind status --home X`` reads naturally)."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            ctx.meta["foldermind.home"] = value
        return value

    return click.option(
        "--home",
        type=click.Path(file_okay=False),
        default=None,
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Folder for config, data, logs and sockets (default: platform dirs; env FOLDERMIND_HOME).",
    )(func)


def current_home() -> Home:
    ctx = click.get_current_context()
    return Home.resolve(ctx.meta.get("foldermind.home") or os.environ.get("FOLDERMIND_HOME") or None)


def current_config(home: Home) -> SupervisorConfig:
    try:
        return load(home.supervisor_override)
    except ConfigError as exc:
        raise click.ClickException(f"invalid supervisor config: {exc}") from exc


@contextmanager
def connect(home: Home) -> Iterator[BusClient]:
    client = BusClient(home.bus_endpoint, name="cli")
    try:
        yield client
    finally:
        client.close()


def kernel_running(home: Home) -> bool:
    return home.running_pid() is not None


def require_running(home: Home) -> None:
    if not kernel_running(home):
        raise click.ClickException(f"foldermind is not running (home: {home.root or 'platform default'})")


@click.group()
@click.version_option(__version__, prog_name="foldermind")
@home_option
def cli() -> None:
    """foldermind: search and chat with your folders from any MCP client, locally."""


# ------------------------------------------------------------------------------------------
# start / stop


@cli.command()
@home_option
@click.option("--foreground", is_flag=True, help="Run the kernel in this terminal (service managers, debugging).")
@click.option("--port", type=int, default=None, help="MCP port (default 53827; env FOLDERMIND_MCP_PORT).")
@click.option("--detached", is_flag=True, hidden=True, help="Set by `start` for the kernel it spawns.")
@click.option(
    "--demo-folder",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Register this folder when no Smart Folder is registered yet (`make run` passes docs/).",
)
def start(foreground: bool, port: int | None, detached: bool, demo_folder: str | None) -> None:
    """Start the supervisor and every worker."""
    home = current_home()
    home.ensure()
    config = current_config(home)
    if port is not None:
        os.environ["FOLDERMIND_MCP_PORT"] = str(port)
    pid = home.running_pid()
    if pid is not None:
        click.echo(f"foldermind is already running (pid {pid}).")
        return
    demo = os.path.abspath(demo_folder) if demo_folder else None
    if foreground or detached:
        sys.exit(_run_foreground(home, config, log_to_terminal=not detached, demo_folder=demo))
    _start_background(home, config)
    if demo:
        _register_demo(home, demo)


def _register_demo(home: Home, folder: str) -> None:
    """Register ``folder`` if no Smart Folder exists yet, so the first search answers at once."""
    with connect(home) as client:
        give_up = time.monotonic() + 60
        while True:
            try:
                existing = client.request("indexer", FolderListRequest(), FolderListReply, timeout=5).body.folders
                break
            except BusError:
                if time.monotonic() > give_up:
                    return
                time.sleep(0.5)
        if existing:
            return
        try:
            client.request("indexer", FolderAddRequest(folder, "demo", "foldermind's own docs"), FolderAddReply)
            client.request("watcher", WatchSyncRequest(), WatchSyncReply, timeout=60)
        except BusError as exc:
            click.echo(f"could not register the demo folder: {exc}", err=True)
            return
    click.echo(f"registered {folder} as the demo Smart Folder: try `foldermind search restart`")


def _run_foreground(home: Home, config: SupervisorConfig, log_to_terminal: bool, demo_folder: str | None = None) -> int:
    from foldermind.kernel.kernel import Kernel

    lock = KernelLock(home)
    if not lock.acquire():
        click.echo(f"foldermind is already running (pid {home.running_pid()}).")
        return 0
    logs.setup(
        home.log_file("kernel"),
        config.kernel.log_max_mb,
        config.kernel.log_backups,
        also_stderr=log_to_terminal,
    )
    try:
        kernel = Kernel(home, config)
        click.echo(f"foldermind {__version__} running in the foreground (pid {os.getpid()}); Ctrl-C stops it.")
        threading.Thread(target=_announce_mcp, args=(home, 60), daemon=True).start()
        if demo_folder:
            # The kernel loop owns this thread; the demo registration is an ordinary bus client.
            threading.Thread(target=_register_demo, args=(home, demo_folder), daemon=True).start()
        return kernel.run()
    finally:
        lock.release()


def _announce_mcp(home: Home, wait_s: float) -> None:
    """Print the MCP URL once the front door has bound its port (and how to connect a client)."""
    info = home.wait_mcp_serving(wait_s)
    if info is None:
        click.echo("MCP: the front door is still starting; `foldermind status` shows its URL once it serves.")
        return
    flag = f" --home {home.root}" if home.root is not None else ""
    click.echo(f"MCP: {info['url']}  (bearer token: `foldermind{flag} token show`)")
    click.echo(f"     client config: `foldermind{flag} config snippet --client claude-desktop|claude-code|cursor|zed`")


def _start_background(home: Home, config: SupervisorConfig) -> None:
    args = [sys.executable, "-m", "foldermind.kernel.cli"]
    if home.root is not None:
        args += ["--home", str(home.root)]
    args += ["start", "--detached"]
    # Only what escapes logging (an interpreter crash) lands in this file; the log is kernel.log.
    with open(home.log_dir / "kernel.stderr.log", "ab") as out:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True
        )
    give_up = time.monotonic() + config.kernel.start_wait_s
    with connect(home) as client:
        while time.monotonic() < give_up:
            if proc.poll() is not None:
                raise click.ClickException(
                    f"the kernel exited with status {proc.returncode}; see {home.log_dir / 'kernel.log'}"
                )
            try:
                client.request("kernel", PingRequest(), PingReply, timeout=0.5)
            except KernelUnavailable:
                continue
            click.echo(f"foldermind started (pid {proc.pid}).")
            click.echo(f"home: {home.root or 'platform default'}; logs: {home.log_dir}")
            _announce_mcp(home, wait_s=20)
            return
    raise click.ClickException(f"the kernel did not answer within {config.kernel.start_wait_s:g} s")


@cli.command()
@home_option
def stop() -> None:
    """Stop every worker, then the kernel (SIGTERM, a grace period, then SIGKILL)."""
    home = current_home()
    pid = home.running_pid()
    if pid is None:
        click.echo("foldermind is not running.")
        return
    config = current_config(home)
    grace = max(config.restart.stop_grace_s, *(config.restart_policy_for(s).stop_grace_s for s in config.workers))
    report: dict[str, str] | None = None
    with connect(home) as client:
        try:
            report = client.request("kernel", StopRequest(), StopReply, timeout=grace + 10).body.report
        except BusError as exc:
            click.echo(f"the kernel did not report back ({exc}); signalling it directly", err=True)
    if report is not None:
        for name, how in report.items():
            click.echo(f"  {name:<14} {how}")
    if not _wait_gone(pid, grace + 5):
        _signal(pid, signal.SIGTERM)
        if not _wait_gone(pid, grace + 5):
            _signal(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
            click.echo(f"kernel pid {pid} killed")
    click.echo("foldermind stopped.")


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_gone(pid: int, seconds: float) -> bool:
    if pid <= 0:
        return True
    try:
        psutil.Process(pid).wait(timeout=seconds)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


# ------------------------------------------------------------------------------------------
# status / restart / logs


def fetch_status(home: Home) -> StatusReply | None:
    if not kernel_running(home):
        return None
    with connect(home) as client:
        try:
            status = client.request("kernel", StatusRequest(), StatusReply, timeout=5).body
        except KernelUnavailable:
            return None
        try:  # folder progress lives with the indexer; status still answers while it restarts
            status.folders = [
                dict(f) for f in client.request("indexer", FolderListRequest(), FolderListReply, timeout=3).body.folders
            ]
        except BusError:
            status.folders = []
        return status


def _one_line(name: str) -> str:
    """A file name on one terminal line: control characters (a newline in a name) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:.0f} MiB"


def _fmt_uptime(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@cli.command()
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Every worker's state, pid, uptime, restarts, jobs in flight and last error."""
    home = current_home()
    st = fetch_status(home)
    if st is None:
        if as_json:
            click.echo(json.dumps({"kernel": None, "workers": [], "mcp": None, "folders": []}))
        else:
            click.echo("foldermind is not running.")
        sys.exit(NOT_RUNNING_EXIT)
    if as_json:
        click.echo(json.dumps(st.to_body(), indent=2))
        return
    k = st.kernel
    uptime, rss = _fmt_uptime(k["uptime_s"]), _fmt_bytes(k["rss_bytes"])
    click.echo(f"kernel  pid {k['pid']}  up {uptime}  v{k['version']}  {rss}")
    header = f"{'WORKER':<14}{'STATE':<10}{'PID':>8}{'UPTIME':>9}{'RESTARTS':>10}{'JOBS':>6}{'RSS':>9}"
    click.echo(f"{header}  LAST ERROR / NOTE")
    for w in st.workers:
        click.echo(
            f"{w['name']:<14}{w['state']:<10}{w['pid'] or '-':>8}{_fmt_uptime(w['uptime_s']):>9}"
            f"{w['restarts']:>10}{w['in_flight']:>6}{_fmt_bytes(w['rss_bytes']):>9}  "
            f"{w['last_error'] or w.get('note') or ''}"
        )
    mcp = st.mcp
    click.echo(f"mcp     {mcp['state']}" + (f"  {mcp['url']}" if mcp["url"] else ""))
    for f in st.folders:
        click.echo(
            f"folder  {f['name']}  {f['path']}  {f['state']}: {f['files_indexed']}/{f['files_total']} files indexed, "
            f"{f['files_failed']} failed, {f['chunks']} chunks ({f['chunks_embedded']} embedded)"
        )


@cli.command()
@home_option
@click.argument("worker")
def restart(worker: str) -> None:
    """Restart one worker (parser#2) or a pool (parser) while the rest keep serving."""
    home = current_home()
    require_running(home)
    with connect(home) as client:
        try:
            names = client.request("kernel", RestartRequest(worker), RestartReply, timeout=10).body.restarted
        except JobError as exc:
            raise click.ClickException(exc.message) from exc
    click.echo(f"restarting {', '.join(names)}")


def _log_files(home: Home, worker: str) -> list[Path]:
    if worker == "kernel":
        return [home.log_file("kernel")]
    config = current_config(home)
    names = [name for name, service in config.instances() if worker in (name, service)]
    if not names:
        known = ", ".join(["kernel", *(n for n, _ in config.instances())])
        raise click.ClickException(f"no worker named {worker!r} (known: {known})")
    return [home.log_file(name) for name in names]


@cli.command(name="logs")
@home_option
@click.argument("worker")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
@click.option("-n", "--lines", default=200, show_default=True, help="How many last lines to show first.")
def logs_cmd(worker: str, follow: bool, lines: int) -> None:
    """Show a worker's log (WORKER, a pool name, or `kernel`)."""
    home = current_home()
    files = _log_files(home, worker)
    positions: dict[Path, int] = {}
    for path in files:
        if len(files) > 1:
            click.echo(f"==> {path.name} <==")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            click.echo(f"(no log yet: {path})", err=True)
            positions[path] = 0
            continue
        for line in data.decode("utf-8", "replace").splitlines()[-lines:]:
            click.echo(line)
        positions[path] = len(data)
    while follow:
        for path in files:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size < positions[path]:  # rotated
                positions[path] = 0
            if size > positions[path]:
                with open(path, "rb") as fh:
                    fh.seek(positions[path])
                    chunk = fh.read()
                positions[path] += len(chunk)
                prefix = f"[{path.stem}] " if len(files) > 1 else ""
                for line in chunk.decode("utf-8", "replace").splitlines():
                    click.echo(prefix + line)
        time.sleep(0.25)


# ------------------------------------------------------------------------------------------
# worker run


@cli.group()
def worker() -> None:
    """Developer commands for single workers."""


@worker.command("run")
@home_option
@click.argument("name")
def worker_run(name: str) -> None:
    """Run worker NAME in this terminal against the running kernel (for a debugger or profiler).

    The supervisor stands its own copy down meanwhile and takes the worker back when this exits.
    """
    from foldermind.workers.__main__ import load_worker_class
    from foldermind.workers.base import WorkerContext, run

    home = current_home()
    require_running(home)
    config = current_config(home)
    services = dict(config.instances())
    if name not in services:
        raise click.ClickException(f"no worker named {name!r} (known: {', '.join(services)})")
    spec = config.workers[services[name]]
    worker_cls = load_worker_class(spec.module)
    with connect(home) as client:
        try:
            client.request("kernel", AttachRequest(name, os.getpid()), AttachReply, timeout=10)
        except JobError as exc:
            raise click.ClickException(exc.message) from exc
        # Wait until the supervisor's copy has gone, so our READY is the only one for this name.
        give_up = time.monotonic() + config.restart_policy_for(services[name]).stop_grace_s + 10
        while time.monotonic() < give_up:
            st = client.request("kernel", StatusRequest(), StatusReply, timeout=5).body
            if any(w["name"] == name and w["pid"] == os.getpid() and w["state"] == "STARTING" for w in st.workers):
                break
            time.sleep(0.1)
        else:
            raise click.ClickException(f"the supervisor's copy of {name} did not stand down")
    os.environ.update({**config.ingest_env(), **spec.env})
    logs.setup(home.log_file(name), config.kernel.log_max_mb, config.kernel.log_backups, also_stderr=True)
    click.echo(f"{name} running in the foreground (pid {os.getpid()}); Ctrl-C hands it back to the supervisor.")
    ctx = WorkerContext(
        name=name,
        service=services[name],
        bus_endpoint=home.bus_endpoint,
        heartbeat_interval_s=config.bus.heartbeat_interval_s,
        heartbeat_liveness=config.bus.heartbeat_liveness,
        max_message_bytes=config.bus.max_message_bytes,
        kernel_pid=0,
        log_file=str(home.log_file(name)),
        log_max_mb=config.kernel.log_max_mb,
        log_backups=config.kernel.log_backups,
        home=str(home.root or ""),
    )
    sys.exit(run(worker_cls, ctx, configure_logging=False))


# ------------------------------------------------------------------------------------------
# Smart Folders and search


def _call(home: Home, to: str, msg: Any, reply: Any, timeout: float = 30) -> Any:
    require_running(home)
    with connect(home) as client:
        try:
            return client.request(to, msg, reply, timeout=timeout).body
        except JobError as exc:
            raise click.ClickException(exc.message) from exc
        except BusError as exc:
            raise click.ClickException(str(exc)) from exc


@cli.group()
def folders() -> None:
    """Register, list and remove Smart Folders."""


@folders.command("add")
@home_option
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--name", default="", help="Display name (default: the folder's name).")
@click.option("--description", default="", help="What the folder holds.")
@click.option("--wait", is_flag=True, help="Show progress until the folder is indexed.")
def folders_add(path: str, name: str, description: str, wait: bool) -> None:
    """Register PATH as a Smart Folder and index it."""
    home = current_home()
    folder = _call(home, "indexer", FolderAddRequest(os.path.abspath(path), name, description), FolderAddReply).folder
    click.echo(f"registered {folder['name']} ({folder['id']}): {folder['path']}")
    _call(home, "watcher", WatchSyncRequest(), WatchSyncReply, timeout=120)
    if wait:
        _wait_indexed(home, folder["id"])


def _folder(home: Home, folder_id: str) -> dict[str, Any]:
    for f in _call(home, "indexer", FolderListRequest(), FolderListReply, timeout=10).folders:
        if f["id"] == folder_id:
            return dict(f)
    raise click.ClickException("the folder was removed meanwhile")


def _wait_indexed(home: Home, folder_id: str) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[extra]}"),
    ) as bar:
        files = bar.add_task("files    ", total=None, extra="")
        embedded = bar.add_task("embedding", total=None, extra="")
        postponed = ""
        while True:
            f = _folder(home, folder_id)
            done = f["files_indexed"] + f["files_failed"]
            bar.update(files, total=max(f["files_total"], 1), completed=done, extra=f"{f['files_failed']} failed")
            bar.update(embedded, total=max(f["chunks"], 1), completed=f["chunks_embedded"], extra="chunks")
            if f["state"] == "ready" and done >= f["files_total"]:
                if f["chunks_embedded"] >= f["chunks"]:
                    break
                postponed = _embedder_trouble(home)
                if postponed:  # keyword search works already; vectors follow once the model loads
                    break
            time.sleep(0.3)
    click.echo(
        f"indexed: {f['files_indexed']} files ({f['files_failed']} failed), {f['chunks']} chunks, "
        f"{f['chunks_embedded']} embedded"
    )
    if postponed:
        click.echo(f"embedding postponed: {postponed}")


def _embedder_trouble(home: Home) -> str:
    """Why the embedder cannot embed now ('' when it can)."""
    status = fetch_status(home)
    for w in status.workers if status else []:
        if w["service"] == "embedder":
            if w["state"] != "RUNNING":
                return f"the embedder is {w['state']}: {w['last_error'] or ''}".rstrip(": ")
            if w.get("note", "").startswith("model failed"):
                return str(w["note"])
    return ""


@folders.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def folders_list(as_json: bool) -> None:
    """Every Smart Folder with its indexing progress."""
    found = _call(current_home(), "indexer", FolderListRequest(), FolderListReply, timeout=10).folders
    if as_json:
        click.echo(json.dumps([dict(f) for f in found], indent=2))
        return
    if not found:
        click.echo("no Smart Folders yet: foldermind folders add PATH")
    for f in found:
        click.echo(f"{f['id']}  {f['name']:<20} {f['path']}")
        click.echo(
            f"    {f['state']}: {f['files_indexed']}/{f['files_total']} files, {f['files_failed']} failed, "
            f"{f['chunks']} chunks"
        )


@folders.command("remove")
@home_option
@click.argument("folder")
def folders_remove(folder: str) -> None:
    """Unregister a Smart Folder (by id or path) and purge its index entries; files are never touched."""
    home = current_home()
    target = os.path.abspath(folder) if os.path.exists(folder) else folder
    reply = _call(home, "indexer", FolderRemoveRequest(target), FolderRemoveReply)
    _call(home, "watcher", WatchSyncRequest(), WatchSyncReply, timeout=60)
    click.echo(f"removed {reply.folder['name']} ({reply.documents_purged} documents purged from the index)")


@cli.command()
@home_option
@click.argument("query")
@click.option("--mode", type=click.Choice(["hybrid", "semantic", "keyword"]), default="hybrid", show_default=True)
@click.option("--top-k", type=click.IntRange(1, 50), default=10, show_default=True)
@click.option("--folder", "folder_id", default=None, help="Only this Smart Folder (id).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def search(query: str, mode: str, top_k: int, folder_id: str | None, as_json: bool) -> None:
    """Search the indexed documents (the search_documents tool from a terminal)."""
    reply = _call(current_home(), "indexer", SearchRequest(query, mode, top_k, folder_id), SearchReply)
    if as_json:
        click.echo(json.dumps(reply.to_body(), indent=2, ensure_ascii=False))
        return
    if reply.note:
        click.echo(f"({reply.note})")
    for i, r in enumerate(reply.results, 1):
        loc = r["location"]
        where = ", ".join(
            x
            for x in (
                f"p. {loc['page']}" if "page" in loc else "",
                loc.get("heading", ""),
                f"lines {loc['line_start']}-{loc['line_end']}",
            )
            if x
        )
        click.echo(f"{i}. {_one_line(r['file_path'])}  ({where})  score {r['score']:.3f}")
        click.echo(f"   {' '.join(r['snippet'].split())}")
    click.echo(f"{len(reply.results)} of {reply.total_matches} matches, {reply.query_ms:.1f} ms, {reply.mode_used}")


def main() -> None:
    # The client-facing commands live in their own module (it imports this one's helpers).
    from foldermind.kernel.cli import clients

    clients.register(cli)
    try:
        cli(prog_name="foldermind")
    except UnsafeHomeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
