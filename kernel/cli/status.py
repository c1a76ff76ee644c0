"""``foldermind status``, ``restart`` and ``logs``: looking at the running workers and acting on one."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from foldermind.kernel.cli.common import (
    NOT_RUNNING_EXIT,
    chunks_line,
    connect,
    current_config,
    current_home,
    failed_and_not_read,
    home_option,
    kernel_running,
    require_running,
)
from foldermind.protocol.errors import BusError, JobError, KernelUnavailable
from foldermind.protocol.messages import (
    FolderListReply,
    FolderListRequest,
    RestartReply,
    RestartRequest,
    StatusReply,
    StatusRequest,
    WorkerInfo,
)
from foldermind.protocol.runtime.home import Home


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


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:.0f} MiB"


def _fmt_uptime(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _remote_note(w: WorkerInfo) -> str:
    """A remote member says so, with its key's allow-list name (the kernel cannot restart it)."""
    return f"remote, key {w.get('key')}; " if w.get("remote") else ""


def _past(w: WorkerInfo) -> str:
    """An error the worker has run healthy since: shown as earlier, not as its state now."""
    past = w.get("past_error")
    return f" (earlier: {past})" if past else ""


def worker_table(workers: list[WorkerInfo]) -> list[str]:
    """The workers' table, its first two columns as wide as their longest entry (a remote member's name,
    SERVICE@HOST:PID, is long), so no name runs into its state."""
    name_w = max([12, *(len(w["name"]) for w in workers)]) + 2
    state_w = max([8, *(len(w["state"]) for w in workers)]) + 2
    header = f"{'WORKER':<{name_w}}{'STATE':<{state_w}}{'PID':>8}{'UPTIME':>9}{'RESTARTS':>10}{'JOBS':>6}{'RSS':>9}"
    lines = [f"{header}  LAST ERROR / NOTE"]
    for w in workers:
        lines.append(
            f"{w['name']:<{name_w}}{w['state']:<{state_w}}{w['pid'] or '-':>8}{_fmt_uptime(w['uptime_s']):>9}"
            f"{w['restarts']:>10}{w['in_flight']:>6}{_fmt_bytes(w['rss_bytes']):>9}  "
            f"{_remote_note(w)}{w['last_error'] or w.get('note') or ''}{_past(w)}"
        )
    return lines


def disabled_rows(home: Home, workers: list[WorkerInfo]) -> list[WorkerInfo]:
    """A row for each worker the config turns off (``enabled = false``) and the kernel runs none of: left out,
    a person cannot tell turned off from missing. None when the config cannot be read (status still answers)."""
    try:
        config = current_config(home)
    except click.ClickException:
        return []
    running = {w["service"] for w in workers}
    return [
        WorkerInfo(
            name=service,
            service=service,
            state="DISABLED",
            pid=None,
            uptime_s=None,
            restarts=0,
            in_flight=0,
            last_error=None,
            rss_bytes=None,
            note=f"enabled = false in [workers.{service}]",
            remote=False,
            key=None,
            past_error=None,
            error_at=None,
        )
        for service, spec in config.workers.items()
        if not spec.enabled and service not in running
    ]


@click.command()
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Every worker's state, pid, uptime, restarts, jobs in flight and last error."""
    home = current_home()
    st = fetch_status(home)
    if st is None:
        if as_json:
            click.echo(json.dumps({"kernel": None, "workers": [], "mcp": None, "folders": [], "console": None}))
        else:
            click.echo("foldermind is not running.")
            if (holder := home.index_holder()) is not None:
                # Its sockets are where this command's XDG_RUNTIME_DIR does not point (docs/architecture.md).
                click.echo(f"(another foldermind kernel serves this index with its sockets in {holder})")
        sys.exit(NOT_RUNNING_EXIT)
    if as_json:
        click.echo(json.dumps(st.to_body(), indent=2))
        return
    k = st.kernel
    uptime, rss = _fmt_uptime(k["uptime_s"]), _fmt_bytes(k["rss_bytes"])
    tree = _fmt_bytes(k["tree_rss_bytes"])
    click.echo(f"kernel  pid {k['pid']}  up {uptime}  v{k['version']}  {rss}  (whole tree {tree})")
    for line in worker_table(st.workers + disabled_rows(home, st.workers)):
        click.echo(line)
    mcp = st.mcp
    click.echo(f"mcp     {mcp['state']}" + (f"  {mcp['url']}" if mcp["url"] else ""))
    web = st.console
    if web["state"] != "disabled":
        click.echo(
            f"console {web['state']}" + (f"  {web['url']}  (`foldermind console` signs you in)" if web["url"] else "")
        )
    for f in st.folders:
        click.echo(
            f"folder  {f['name']}  {f['path']}  {f['state']}: {f['files_indexed']}/{f['files_total']} files indexed, "
            f"{failed_and_not_read(f)}, {chunks_line(f)}"
        )


@click.command()
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


@click.command(name="logs")
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
