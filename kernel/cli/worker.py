"""``foldermind worker run``: one worker of the process map in this terminal."""

from __future__ import annotations

import os
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


@click.group()
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
