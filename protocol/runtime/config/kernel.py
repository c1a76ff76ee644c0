"""The kernel's own tables: the internal bus ([bus]), how workers are restarted ([restart]) and the kernel process
([kernel])."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from foldermind.protocol import frames
from foldermind.protocol.runtime.config.strict import Strict

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "*", ""})
"""Hosts that listen on every interface: [bus] listen_tcp takes one only with listen_tcp_any."""


def split_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ValueError says what is wrong."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT with a port from 1 to 65535")
    return host.removeprefix("[").removesuffix("]"), int(port)


class BusPolicy(Strict):
    """The internal bus (ZeroMQ between the kernel and its workers)."""

    heartbeat_interval_s: float = Field(
        1.0, gt=0, description="How often the kernel and every worker send each other a heartbeat (seconds)."
    )
    heartbeat_liveness: int = Field(
        3,
        ge=1,
        description="Heartbeats a peer may miss before it is lost: its jobs fail with worker_lost; a worker hearing"
        " none that long exits.",
    )
    loading_liveness: int = Field(
        15,
        ge=1,
        description="The same while a worker loads a model, which can hold the GIL for seconds on a starved CPU"
        " (slow, not hung).",
    )
    default_deadline_s: float = Field(
        30.0, gt=0, description="Deadline given to a request that carries none (seconds)."
    )
    overrun_grace_s: float = Field(
        10.0,
        ge=0,
        description="A worker still busy at a job's deadline is sent a cancel and given this long to answer before"
        " it is killed and replaced (seconds; 0 = at once); its caller gets deadline_exceeded at once. Slow is not"
        " hung.",
    )
    max_message_mb: int = Field(
        frames.DEFAULT_MAX_BYTES // (1024 * 1024),
        ge=1,
        description="Largest message accepted, all frames together (MiB); a bigger request fails with"
        " message_too_large.",
    )
    tcp_debug_endpoint: str = Field(
        "", description="Bind the internal bus on TCP as well (host:port) for remote debugging; empty = ipc:// only."
    )
    listen_tcp: str = Field(
        "",
        description="HOST:PORT where workers on other machines join (`foldermind worker run NAME --connect"
        " tcp://HOST:PORT`); empty = off. Always CURVE-encrypted; only keys admitted with `foldermind bus allow` get"
        " in.",
    )
    listen_tcp_any: bool = Field(
        False, description="true = listen_tcp may name a wildcard host and listen on every interface."
    )

    @model_validator(mode="after")
    def _tcp_spelled_out(self) -> BusPolicy:
        if self.listen_tcp:
            host, _port = split_host_port(self.listen_tcp)
            if host in WILDCARD_HOSTS and not self.listen_tcp_any:
                raise ValueError(
                    f"[bus] listen_tcp = {self.listen_tcp!r} listens on every interface: set listen_tcp_any = true"
                    " as well if that is meant, or name one address"
                )
        return self

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    @property
    def liveness_s(self) -> float:
        return self.heartbeat_interval_s * self.heartbeat_liveness

    @property
    def loading_liveness_s(self) -> float:
        return self.heartbeat_interval_s * max(self.loading_liveness, self.heartbeat_liveness)


class RestartPolicy(Strict):
    """How a worker that ended is restarted (a worker's own ``restart`` table may override any key)."""

    policy: Literal["always", "on-failure", "never"] = Field(
        "always",
        description='"always" restarts a worker however it ended, "on-failure" after a crash or non-zero exit,'
        ' "never" leaves it EXITED.',
    )
    backoff_initial_s: float = Field(
        0.5,
        ge=0,
        description="Restart n waits backoff_initial_s * 2**(n-1) seconds, capped at backoff_max_s, spread by"
        " backoff_jitter.",
    )
    backoff_max_s: float = Field(30.0, ge=0, description="The longest delay before a restart (seconds).")
    backoff_jitter: float = Field(0.2, ge=0, lt=1, description="The spread of each delay, a fraction of it.")
    stable_after_s: float = Field(
        10.0,
        ge=0,
        description='A worker RUNNING this long is "stable": its backoff starts over from backoff_initial_s.',
    )
    max_restarts: int = Field(
        5,
        ge=0,
        description="More than max_restarts restarts within window_s -> FAILED until `foldermind restart WORKER`.",
    )
    window_s: float = Field(60.0, gt=0, description="The window max_restarts is counted in (seconds).")
    start_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A spawned worker must send READY within this time or it is killed and counted as a failure; one"
        " still working on a busy CPU gets it again, up to this many CPU-seconds.",
    )
    stop_grace_s: float = Field(
        5.0,
        ge=0,
        description="Stopping: SIGTERM, wait this long for a clean exit, then SIGKILL; a worker still working on a"
        " busy CPU gets it again, up to this many CPU-seconds.",
    )


class KernelPolicy(Strict):
    """The kernel process itself."""

    start_wait_s: float = Field(
        30.0,
        gt=0,
        description="How long `foldermind start` waits for the kernel to answer before it reports a failure.",
    )
    log_max_mb: int = Field(10, ge=1, description="Per-worker log files rotate at this size (MiB) ...")
    log_backups: int = Field(3, ge=0, description="... keeping this many old files.")
