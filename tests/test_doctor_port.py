"""`doctor` judges the port by what the running instance was asked to bind (`start --port`, its
environment, its config), not by the config alone."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.helpers import RunningKernel, cli, only_workers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_check(home: Path) -> dict[str, Any]:
    checks = json.loads(cli(home, "doctor", "--json", check=False).stdout)["checks"]
    return next(c for c in checks if c["name"] == "port")


def test_doctor_takes_the_port_start_was_given_and_warns_only_when_it_was_taken(home_dir: Path) -> None:
    configured, chosen = free_port(), free_port()
    config = only_workers("frontdoor") + f"[mcp]\nport = {configured}\n"
    k = RunningKernel(home_dir, config).start("--port", str(chosen))
    try:
        check = port_check(home_dir)
        assert check["status"] == "ok" and f":{chosen}/" in check["detail"], check
    finally:
        k.stop()
    with socket.socket() as held:  # now the chosen port is taken: the front door binds another
        held.bind(("127.0.0.1", chosen))
        held.listen()
        k = RunningKernel(home_dir, config).start("--port", str(chosen))
        try:
            check = port_check(home_dir)
            assert check["status"] == "warn", check
            assert f"not the port {chosen} it was to bind (it was taken at start)" in check["detail"], check
        finally:
            k.stop()
