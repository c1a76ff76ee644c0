"""The context a worker process is spawned with: who it is, where the bus is, its liveness and log policy.

The supervisor (and ``foldermind worker run``) writes it into the child's environment (:meth:`to_env`); the
worker reads it back (:meth:`from_env`). Its defaults are the declared config's own (:mod:`.config`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import ClassVar

from foldermind.protocol.runtime.config import BusPolicy, KernelPolicy

_BUS, _KERNEL = BusPolicy(), KernelPolicy()


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a worker process is told by whoever starts it (the supervisor or ``worker run``)."""

    name: str
    service: str
    bus_endpoint: str
    heartbeat_interval_s: float = _BUS.heartbeat_interval_s
    heartbeat_liveness: int = _BUS.heartbeat_liveness
    max_message_bytes: int = _BUS.max_message_bytes
    kernel_pid: int = 0
    log_file: str = ""
    log_max_mb: int = _KERNEL.log_max_mb
    log_backups: int = _KERNEL.log_backups
    home: str = ""
    curve_server_key: str = ""
    """A remote worker (``worker run NAME --connect``): the kernel's public key; both sockets are CURVE clients."""
    curve_keys: str = ""
    """... and the folder of this home's worker keypair (a path, so the secret key is never in an environment)."""
    idle_exit_s: float = 0.0
    """An on-demand worker exits cleanly after this long with no job in hand (0 = never): WorkerSpec.on_demand."""

    ENV: ClassVar[dict[str, str]] = {
        "name": "FOLDERMIND_WORKER_NAME",
        "service": "FOLDERMIND_WORKER_SERVICE",
        "bus_endpoint": "FOLDERMIND_BUS",
        "heartbeat_interval_s": "FOLDERMIND_HEARTBEAT_INTERVAL_S",
        "heartbeat_liveness": "FOLDERMIND_HEARTBEAT_LIVENESS",
        "max_message_bytes": "FOLDERMIND_MAX_MESSAGE_BYTES",
        "kernel_pid": "FOLDERMIND_KERNEL_PID",
        "log_file": "FOLDERMIND_LOG_FILE",
        "log_max_mb": "FOLDERMIND_LOG_MAX_MB",
        "log_backups": "FOLDERMIND_LOG_BACKUPS",
        "home": "FOLDERMIND_HOME",
        "curve_server_key": "FOLDERMIND_CURVE_SERVER_KEY",
        "curve_keys": "FOLDERMIND_CURVE_KEYS",
        "idle_exit_s": "FOLDERMIND_IDLE_EXIT_S",
    }

    def to_env(self) -> dict[str, str]:
        return {var: str(getattr(self, attr)) for attr, var in self.ENV.items()}

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> WorkerContext:
        env = dict(os.environ) if env is None else env
        missing = [cls.ENV[k] for k in ("name", "service", "bus_endpoint") if cls.ENV[k] not in env]
        if missing:
            raise SystemExit(f"worker started without {missing[0]}: start workers with foldermind")
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(cls.ENV[field.name])
            if raw is not None:
                kind = type(field.default) if field.default is not dataclasses.MISSING else str
                values[field.name] = kind(raw)
        return cls(**values)  # type: ignore[arg-type]
