"""``foldermind worker run``: one worker of the process map in this terminal, for this home's kernel or (with
``--connect``) as a remote member of a pool on another machine's kernel; ``worker keys``: this home's key for
that."""

from __future__ import annotations

import os
import socket
import sys
import time

import click

from foldermind.kernel.cli.common import (
    connect,
    current_config,
    current_home,
    home_option,
    require_running,
)
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    AttachReply,
    AttachRequest,
    StatusReply,
    StatusRequest,
)
from foldermind.protocol.runtime import logs
from foldermind.protocol.runtime.config import SupervisorConfig
from foldermind.protocol.runtime.context import WorkerContext
from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.keys import ensure_keypair, valid_key


@click.group()
def worker() -> None:
    """Single workers: one in this terminal, here or for a kernel on another machine (run --connect)."""


@worker.command("keys")
@home_option
@click.option("--json", "as_json", is_flag=True, help='Print {"public_key": ...}.')
def worker_keys(as_json: bool) -> None:
    """Print this home's worker public key (made on first use), for the kernel's `foldermind bus allow`."""
    from foldermind.kernel.cli.bus import show_public_key

    show_public_key(lambda home: home.worker_keys, as_json)


@worker.command("run")
@home_option
@click.argument("name")
@click.option(
    "--connect",
    "endpoint",
    metavar="tcp://HOST:PORT",
    default=None,
    help="Join that kernel's tcp bus as a member of pool NAME.",
)
@click.option("--server-key", default=None, help="With --connect: the kernel's public key (its `bus keys`).")
def worker_run(name: str, endpoint: str | None, server_key: str | None) -> None:
    """Run worker NAME in this terminal against the running kernel (for a debugger or profiler).

    The supervisor stands its own copy down meanwhile and takes the worker back when this exits. With
    --connect, NAME is a service (a pool such as embedder or parser) and the worker joins the kernel at that
    address over CURVE with this home's worker key (`foldermind worker keys`, admitted there with `foldermind
    bus allow`); that kernel cannot restart it.
    """
    if endpoint is not None or server_key is not None:
        _run_remote(name, endpoint, server_key)
        return
    from foldermind.workers.__main__ import load_worker_class
    from foldermind.workers.framework.runner import run

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
    ctx = _context(home, config, name, services[name], home.bus_endpoint)
    sys.exit(run(worker_cls, ctx, configure_logging=False))


def _run_remote(service: str, endpoint: str | None, server_key: str | None) -> None:
    """``worker run SERVICE --connect tcp://HOST:PORT --server-key KEY``: a member of SERVICE's pool there."""
    from foldermind.workers.__main__ import load_worker_class
    from foldermind.workers.framework.runner import run

    if not endpoint or not endpoint.startswith("tcp://"):
        raise click.ClickException("--connect takes tcp://HOST:PORT (the kernel's [bus] listen_tcp)")
    if not server_key or not valid_key(server_key):
        raise click.ClickException("--server-key takes the kernel's public key, as its `foldermind bus keys` prints it")
    home = current_home()
    home.ensure()
    config: SupervisorConfig = current_config(home)
    spec = config.workers.get(service)
    if spec is None:
        raise click.ClickException(f"no service named {service!r} here (known: {', '.join(config.workers)})")
    worker_cls = load_worker_class(spec.module)
    public = ensure_keypair(home.worker_keys)
    # SERVICE@HOST:PID: unique among the pool's members on every machine, and never a local slot's name.
    name = f"{service}@{socket.gethostname()}:{os.getpid()}"
    os.environ.update({**config.ingest_env(), **spec.env})
    logs.setup(home.log_file(name), config.kernel.log_max_mb, config.kernel.log_backups, also_stderr=True)
    liveness = config.bus.heartbeat_interval_s * config.bus.heartbeat_liveness
    click.echo(
        f"{name} joining {endpoint} (worker key {public[:8]}...); it exits if the kernel does not answer within"
        f" {liveness:g} s: is this key allowed there (`foldermind bus allow NAME KEY`)?"
    )
    ctx = _context(home, config, name, service, endpoint, server_key)
    sys.exit(run(worker_cls, ctx, configure_logging=False))


def _context(
    home: Home, config: SupervisorConfig, name: str, service: str, endpoint: str, server_key: str = ""
) -> WorkerContext:
    """What a foreground worker is told: this home's config and logs, the bus at ``endpoint`` (a remote one
    with the kernel's ``server_key`` and this home's worker keypair)."""
    return WorkerContext(
        name=name,
        service=service,
        bus_endpoint=endpoint,
        heartbeat_interval_s=config.bus.heartbeat_interval_s,
        heartbeat_liveness=config.bus.heartbeat_liveness,
        max_message_bytes=config.bus.max_message_bytes,
        kernel_pid=0,  # not the kernel's child: its heartbeats alone tie it to the kernel
        log_file=str(home.log_file(name)),
        log_max_mb=config.kernel.log_max_mb,
        log_backups=config.kernel.log_backups,
        home=str(home.root or ""),
        curve_server_key=server_key,
        curve_keys=str(home.worker_keys) if server_key else "",
    )
