"""``foldermind start`` and ``foldermind stop``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress

import click
import psutil

from foldermind.kernel import __version__
from foldermind.kernel.cli.clients.facts import CLIENTS
from foldermind.kernel.cli.common import (
    DEMO_DESCRIPTION,
    activate_hint,
    connect,
    current_config,
    current_home,
    home_option,
    stray_config,
    typed,
)
from foldermind.protocol.errors import BusError, KernelUnavailable
from foldermind.protocol.messages import (
    ConsoleLinkReply,
    ConsoleLinkRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    PingReply,
    PingRequest,
    StopReply,
    StopRequest,
)
from foldermind.protocol.runtime import logs
from foldermind.protocol.runtime.config import SupervisorConfig
from foldermind.protocol.runtime.home import Home, KernelLock


@click.command()
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
    home.check_writable()  # a read-only home: one line with the fix (main prints it), not a traceback
    config = current_config(home)
    if (stray := stray_config(home)) and not detached:
        click.echo(f"warning: {stray}", err=True)
    if port is not None:
        os.environ["FOLDERMIND_MCP_PORT"] = str(port)
    pid = home.running_pid()
    if pid is not None:
        _already_running(home, pid)
        return
    _refuse_shared_index(home)
    demo = os.path.abspath(demo_folder) if demo_folder else None
    if foreground or detached:
        sys.exit(_run_foreground(home, config, log_to_terminal=not detached, demo_folder=demo))
    _start_background(home, config)
    if demo:
        _register_demo(home, demo)


def _already_running(home: Home, pid: int | None) -> None:
    """A second `start` (a second `make run`, its first terminal forgotten): where the running one serves."""
    click.echo(f"foldermind is already running (pid {pid}).")
    if (mcp := home.serving_mcp_info()) is not None:
        click.echo(f"MCP: {mcp['url']}")
    if (console := home.serving_console_info()) is not None:
        click.echo(f"console: {console['url']}  (`{typed(home, 'console')}` opens it signed in)")
    click.echo(f"`{typed(home, 'status')}` shows it; `{typed(home, 'stop')}` stops it.")


def _refuse_shared_index(home: Home) -> None:
    """A kernel whose sockets are elsewhere (another XDG_RUNTIME_DIR) already serves this index: say where,
    instead of starting a second kernel on the same files."""
    if (holder := home.index_holder()) is not None:
        raise click.ClickException(
            f"another foldermind kernel already serves this index ({home.data_dir}) with its sockets in {holder},"
            f" not {home.runtime_dir}: run foldermind with the XDG_RUNTIME_DIR that kernel had, or stop it from there"
        )


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
            client.request("indexer", FolderAddRequest(folder, "demo", DEMO_DESCRIPTION), FolderAddReply)
        except BusError as exc:
            click.echo(f"could not register the demo folder: {exc}", err=True)
            return
    click.echo(f"registered {folder} as the demo Smart Folder: try `{typed(home, 'search', 'restart')}`")
    click.echo(
        f"     add your own with `{typed(home, 'folders', 'add', 'PATH', '--wait')}`;"
        f" `{typed(home, 'folders', 'remove', folder)}` takes the demo out"
    )
    hint = activate_hint()
    if hint:
        click.echo(hint)


def _run_foreground(home: Home, config: SupervisorConfig, log_to_terminal: bool, demo_folder: str | None = None) -> int:
    from foldermind.kernel.kernel import Kernel

    lock = KernelLock(home)
    if not lock.acquire():
        _refuse_shared_index(home)
        _already_running(home, home.running_pid())
        return 0
    logs.setup(
        home.log_file("kernel"),
        config.kernel.log_max_mb,
        config.kernel.log_backups,
        also_stderr=log_to_terminal,
    )
    try:
        kernel = Kernel(home, config)
        click.echo(
            f"foldermind {__version__} runs in this terminal (pid {os.getpid()}) until Ctrl-C stops it:"
            " type the commands below in another terminal."
        )
        threading.Thread(target=_announce, args=(home, 60, config), daemon=True).start()
        if demo_folder:
            # The kernel loop owns this thread; the demo registration is an ordinary bus client.
            threading.Thread(target=_register_demo, args=(home, demo_folder), daemon=True).start()
        return kernel.run()
    finally:
        lock.release()


def _announce(home: Home, wait_s: float, config: SupervisorConfig) -> None:
    """In the foreground (`make run`): the MCP URL, then a sign-in link to the console."""
    _announce_mcp(home, wait_s)
    _announce_console(home, config, wait_s, link=True)


def _announce_console(home: Home, config: SupervisorConfig, wait_s: float, link: bool) -> None:
    """The console's URL once it serves; with ``link``, a one-time sign-in link as well."""
    spec = config.workers.get("console")
    if spec is None or not spec.enabled:
        return
    give_up = time.monotonic() + wait_s
    while (info := home.serving_console_info()) is None:
        if time.monotonic() > give_up:
            click.echo("console: still starting; `foldermind status` shows its URL once it serves.")
            return
        time.sleep(0.1)
    opens = f"`{typed(home, 'console')}` opens it signed in"
    if link:
        with connect(home) as client, suppress(BusError):
            reply = client.request("console", ConsoleLinkRequest(), ConsoleLinkReply, timeout=10).body
            # A line of its own between blank ones, in one write: in `make run` the log lines fill the terminal
            # around it, and a new user missed the link at the end of a long line among them.
            click.echo(
                f"\nconsole: open this link to sign in (it works once, within {reply.expires_s:g} s; later {opens}):"
                f"\n{reply.link}\n"
            )
            return
    click.echo(f"console: {info['url']}  ({opens})")


def _announce_mcp(home: Home, wait_s: float) -> None:
    """Print the MCP URL once the front door has bound its port (and how to connect a client)."""
    info = home.wait_mcp_serving(wait_s)
    if info is None:
        click.echo("MCP: the front door is still starting; `foldermind status` shows its URL once it serves.")
        return
    click.echo(f"MCP: {info['url']}  (bearer token: `{typed(home, 'token', 'show')}`)")
    click.echo(f"     connect a client: `{typed(home, 'config', 'install', '--client', 'NAME')}`, NAME one of")
    click.echo(f"     {', '.join(CLIENTS)}; `{typed(home, 'doctor')}` checks the whole setup")


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
            # A map without the front door (a parser-only or remote-worker home) has no URL to wait for.
            if any(service == "frontdoor" for _, service in config.instances()):
                _announce_mcp(home, wait_s=20)
            _announce_console(home, config, wait_s=20, link=False)
            return
    raise click.ClickException(f"the kernel did not answer within {config.kernel.start_wait_s:g} s")


@click.command()
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
