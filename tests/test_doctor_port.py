"""`doctor` judges the port by what the running instance was asked to bind (`start --port`, its
environment, its config), not by the config alone; and the console's port: who holds it, whether the console moved
off it, and whether the console answers there."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.config import merge
from tests.helpers import RunningKernel, cli, only_workers, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_check(home: Path) -> dict[str, Any]:
    checks = json.loads(cli(home, "doctor", "--json", check=False).stdout)["checks"]
    return next(c for c in checks if c["name"] == "port")


def test_doctor_takes_the_port_start_was_given_and_warns_only_when_it_was_taken(home_dir: Path) -> None:
    configured, chosen = free_port(), free_port()
    config = merge(only_workers("frontdoor"), {"mcp": {"port": configured}})
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


def console_check(home: Path) -> dict[str, Any]:
    checks = json.loads(cli(home, "doctor", "--json", check=False).stdout)["checks"]
    return next(c for c in checks if c["name"] == "console")


def test_doctor_names_who_holds_the_console_port_and_that_the_console_moved_off_it(home_dir: Path) -> None:
    port = free_port()
    config = merge(only_workers("console"), {"console": {"port": port}})
    RunningKernel(home_dir, config)  # the home and its config, not started
    assert console_check(home_dir)["status"] == "ok"
    with socket.socket() as held:  # another program holds the console's port
        held.bind(("127.0.0.1", port))
        held.listen()
        check = console_check(home_dir)
        assert check["status"] == "warn" and f"port {port} is taken (pid " in check["detail"], check
        assert "would bind another port at start" in check["detail"] and "[console] port" in check["fix"], check
        k = RunningKernel(home_dir, config).start()
        try:
            check = console_check(home_dir)
            url = k.status().console["url"]
            assert url and f":{port}/" not in url, url  # it bound another port
            assert check["status"] == "warn" and f"the console serves {url}, not its port {port}" in check["detail"]
            assert f"free port {port}" in check["fix"] and "[console] port" in check["fix"], check
        finally:
            k.stop()


def test_doctor_fails_a_console_whose_worker_runs_but_whose_web_server_does_not_answer(home_dir: Path) -> None:
    flag = home_dir / "hang"
    switch = {"workers": {"console": {"env": {"FOLDERMIND_TEST_CONSOLE_HANG": flag}}}}
    # stall_s: the console's own watchdog must not restart it while doctor looks.
    config = merge(only_workers("console"), {"console": {"port": 0, "stall_s": 600}}, switch)
    k = RunningKernel(home_dir / "home", config).start()
    try:
        check = console_check(k.root)
        assert check["status"] == "ok" and "the console serves http://127.0.0.1:" in check["detail"], check
        url = str(k.status().console["url"])
        link = cli(k.root, "console", "--url").stdout.strip()
        flag.touch()
        stuck = subprocess.Popen(  # a page that blocks the console's event loop (workers/framework/faults.py)
            [sys.executable, "-c", STUCK_PAGE, link], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_for(Path(f"{flag}.held").exists, 60, 0.05, "the console's event loop blocked")
            check = console_check(k.root)
            assert check["status"] == "fail", check
            assert f"the console's worker runs but {url} does not answer (no answer within" in check["detail"], check
            assert "restart console" in check["fix"], check
        finally:
            flag.unlink()
            stuck.kill()
            stuck.wait()
        wait_for(lambda: console_check(k.root)["status"] == "ok", 60, 0.5, "the console to answer again")
    finally:
        k.stop()


STUCK_PAGE = """
import http.client, sys
from urllib.parse import urlsplit
link = urlsplit(sys.argv[1])
conn = http.client.HTTPConnection(link.hostname, link.port, timeout=600)
conn.request("GET", f"{link.path}?{link.query}")
response = conn.getresponse()
cookie = response.getheader("set-cookie").split(";", 1)[0]
response.read()
conn.request("GET", "/search?q=fox", headers={"Cookie": cookie})
conn.getresponse().read()
"""
"""Signs in with the link, then asks for a search page, which blocks while the hang switch's file exists."""
