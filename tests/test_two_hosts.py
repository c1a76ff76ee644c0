"""Two hosts in network namespaces this test makes: the kernel in one, a remote parser and a remote embedder in
the other, joined by a veth pair with a /30 of their own (10.254.19.0/30; nothing leaves the machine, and the
namespaces are removed however the test ends). It needs CAP_NET_ADMIN (`ip netns add`): without it the test
is skipped and says why.

SciFact abstracts are indexed through both hosts' members (the remote parser gets each file's bytes in the
job: it cannot read the kernel's paths); the link is cut mid-batch (`ip link set ... down`): no chunk is lost
or embedded twice, the local members finish the batch, and the remote members join again when the link is
back up. Real processes, real tcp with CURVE, the real model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import DescribeReply, DescribeRequest
from foldermind.protocol.runtime.home import Home
from tests.bench.scifact import scifact_dir
from tests.config import Config, merge
from tests.helpers import (
    FAST_RESTART,
    SEARCH_OVER_BUS,
    RunningKernel,
    cli,
    remove_tree,
    short_tmpdir,
    status_json,
    wait_for,
    with_model_cache,
)

SCIFACT = scifact_dir() / "corpus.jsonl"
KERNEL_IP, WORKER_IP, PORT = "10.254.19.1", "10.254.19.2", 47019  # the namespaces' own link: no clash possible
DOCS = 120


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=20)


@dataclass
class Link:
    kernel_ns: str
    worker_ns: str
    worker_dev: str

    def set(self, up: bool) -> None:
        ip("netns", "exec", self.worker_ns, "ip", "link", "set", self.worker_dev, "up" if up else "down")


@pytest.fixture
def link() -> Iterator[Link]:
    tag = uuid.uuid4().hex[:6]
    kns, wns = f"fm-k-{tag}", f"fm-w-{tag}"
    probe = ip("netns", "add", kns, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a network namespace here (`ip netns add`: {probe.stderr.strip()}); needs root")
    try:
        ip("netns", "add", wns)
        kdev, wdev = f"vk{tag}", f"vw{tag}"
        ip("link", "add", kdev, "type", "veth", "peer", "name", wdev)
        ip("link", "set", kdev, "netns", kns)
        ip("link", "set", wdev, "netns", wns)
        for ns, dev, addr in ((kns, kdev, KERNEL_IP), (wns, wdev, WORKER_IP)):
            ip("netns", "exec", ns, "ip", "addr", "add", f"{addr}/30", "dev", dev)
            ip("netns", "exec", ns, "ip", "link", "set", dev, "up")
            ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield Link(kns, wns, wdev)
    finally:
        ip("netns", "del", wns, check=False)  # takes the veth pair with it
        ip("netns", "del", kns, check=False)


def in_ns(ns: str, home: Path, *args: str, **popen: Any) -> subprocess.Popen[str]:
    command = ["ip", "netns", "exec", ns, sys.executable, "-m", "foldermind.kernel.cli", "--home", str(home), *args]
    return subprocess.Popen(command, text=True, **popen)


class KernelInNamespace(RunningKernel):
    """A test kernel started inside a network namespace (its ipc sockets are files, so the test's clients in
    this namespace still reach it; its tcp bus is on the namespace's own address)."""

    def __init__(self, root: Path, config: Config, ns: str) -> None:
        super().__init__(root, config)
        self.ns = ns

    def start(self, *args: str) -> RunningKernel:
        try:
            started = in_ns(self.ns, self.root, "start", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out, _ = started.communicate(timeout=120)
            assert started.returncode == 0, out
            self.kernel_pid = int(self.home.pid_file.read_text())
            self.connect_events()
            self.wait_all_running(60)
        except BaseException:
            self._stop_after_failed_start()
            raise
        return self


def write_corpus(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    with SCIFACT.open() as fh:
        for i, line in zip(range(n), fh, strict=False):
            doc = json.loads(line)
            (folder / f"{i:04d}-{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n")


def remote(kernel: KernelInNamespace, state: str | None = None) -> dict[str, dict[str, Any]]:
    return {
        w["service"]: w
        for w in status_json(kernel.root)["workers"]
        if w.get("remote") and (state is None or w["state"] == state)
    }


def progress(kernel: KernelInNamespace) -> dict[str, Any]:
    folders = json.loads(cli(kernel.root, "folders", "list", "--json").stdout)
    assert len(folders) == 1
    return dict(folders[0])


def describe(kernel: KernelInNamespace, name: str) -> dict[str, Any]:
    """A member's own counters (its describe waits behind the job it holds, one at a time). A remote member
    that joined again meanwhile (on a loaded machine its heartbeats can come late; it keeps its name, its
    process and its counters) fails the request with worker_lost: it is asked again."""
    give_up = time.monotonic() + 120
    while True:
        try:
            with kernel.client() as client:
                return client.request(name, DescribeRequest(), DescribeReply, timeout=60).body.details
        except JobError as exc:
            if exc.info.code not in (ErrorCode.WORKER_LOST, ErrorCode.UNKNOWN_WORKER) or time.monotonic() > give_up:
                raise
            time.sleep(0.5)


def members_said(other: Path) -> str:
    """The last lines the remote members logged: what a failure on a loaded CI machine needs to be read."""
    tails = []
    for service in ("parser", "embedder"):
        out = other / f"{service}.out"
        lines = out.read_text(errors="replace").splitlines()[-15:] if out.exists() else ["(no output)"]
        tails.append(f"--- remote {service}:\n" + "\n".join(lines))
    return "\n".join(tails)


@pytest.mark.skipif(not SCIFACT.exists(), reason=f"no SciFact corpus at {SCIFACT}")
@pytest.mark.slow
def test_files_are_indexed_through_a_remote_host_and_a_cut_link_loses_no_chunk_and_the_members_rejoin(
    link: Link,
) -> None:
    root, other, docs = short_tmpdir(), short_tmpdir("fm-r-"), short_tmpdir("fm-d-") / "scifact"
    # The ingestion pipeline over the bus and the CLI: no llm, no front door (~2.4 CPU-s and the wait for its
    # URL at start), one local parser.
    config = merge(FAST_RESTART, {"bus": {"listen_tcp": f"{KERNEL_IP}:{PORT}"}}, SEARCH_OVER_BUS)
    kernel = KernelInNamespace(root, config, link.kernel_ns)
    members: list[subprocess.Popen[str]] = []
    try:
        kernel.start()
        home = Home.resolve(other)
        home.ensure()
        home.supervisor_override.write_text(with_model_cache({}))
        worker_key = json.loads(cli(other, "worker", "keys", "--json").stdout)["public_key"]
        server_key = json.loads(cli(root, "bus", "keys", "--json").stdout)["public_key"]
        cli(root, "bus", "allow", "other-host", worker_key)
        for service in ("parser", "embedder"):
            connect = ("worker", "run", service, "--connect", f"tcp://{KERNEL_IP}:{PORT}", "--server-key", server_key)
            log = (other / f"{service}.out").open("w")
            members.append(in_ns(link.worker_ns, other, *connect, stdout=log, stderr=subprocess.STDOUT))
        joined = wait_for(lambda: len(r := remote(kernel, "REMOTE")) == 2 and r, 60, 0.3, "both remote members")
        assert {m["key"] for m in joined.values()} == {"other-host"}
        assert all(m["name"].startswith(f"{s}@") for s, m in joined.items())

        write_corpus(docs, DOCS)
        cli(root, "folders", "add", str(docs), "--name", "SciFact")
        # Both remote members serve part of the batch (the parser from the bytes sent to it), then the link
        # goes down with the batch half done.
        wait_for(
            lambda: (
                describe(kernel, joined["embedder"]["name"])["texts_embedded"] > 0
                and describe(kernel, joined["parser"]["name"])["parsed"] > 0
            ),
            180,
            0.5,
            "the remote members' first jobs",
        )
        before = progress(kernel)
        assert before["chunks_embedded"] < before["chunks"] or before["files_indexed"] < DOCS, "too late to cut"
        link.set(False)
        lost = wait_for(lambda: len(r := remote(kernel, "LOST")) == 2 and r, 30, 0.3, "both remote members LOST")
        assert all("missed" in (m["last_error"] or "") for m in lost.values())

        # The local members finish the batch: every file, every chunk embedded once.
        done = wait_for(
            lambda: (p := progress(kernel))["state"] == "ready" and p["chunks_embedded"] == p["chunks"] and p,
            600,
            1.0,
            "the batch finished by the local members",
        )
        assert done["files_indexed"] == DOCS and done["files_failed"] == 0, done
        indexer = describe(kernel, "indexer")
        assert indexer["vectors"] == indexer["chunks_in_bm25"] == done["chunks"], indexer
        # The local members settle, none failed (the local embedder may be leaving for a moment: it hands over to
        # the llm once every chunk is embedded).
        wait_for(
            lambda: all(w["state"] in ("RUNNING", "IDLE") for w in status_json(root)["workers"] if not w.get("remote")),
            60,
            0.3,
            "the local workers settled",
        )

        # The link comes back: the same processes join again (same names) and serve.
        link.set(True)
        back = wait_for(lambda: len(r := remote(kernel, "REMOTE")) == 2 and r, 60, 0.5, "both members back")
        assert {m["name"] for m in back.values()} == {m["name"] for m in joined.values()}
        assert all(p.poll() is None for p in members)
        assert describe(kernel, back["embedder"]["name"])["texts_embedded"] > 0
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{members_said(other)}") from exc
    finally:
        for proc in members:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        if hasattr(kernel, "kernel_pid"):
            kernel.stop()
        for tree in (root, other, docs.parent):
            remove_tree(tree)
