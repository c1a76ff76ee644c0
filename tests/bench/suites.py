"""The three chains, measured with every payload in interleaved rounds.

The machine's speed wanders (a VM's vCPUs, other work, which cores the scheduler picks), by as much
as 3x over a minute on small VMs. So all three chains run side by side and are measured in turns,
round after round, in rotating order; each figure pools all its rounds, and the per-round spread is
reported so the noise is visible.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.bench import measure
from tests.bench.cpu import CpuProbe
from tests.bench.kernels import BenchKernel, echo_only_config
from tests.bench.payloads import Payload
from tests.bench.stats import Pipelined, Sequential, summarize
from tests.bench.transports import BenchError, KernelClient, Peer, ZmqClient

ROUNDS = 5
SEQ_ROUND_S = 0.4
PIPE_ROUND_S = 0.5
PRIME_ROUND_TRIPS = 20


@dataclass(slots=True)
class Chain:
    name: str
    roles: list[str]
    """The processes of the chain, client first (the columns of the CPU table)."""
    transport: measure.Transport
    procs: dict[str, psutil.Process]
    info: str = ""


@dataclass(frozen=True, slots=True)
class Row:
    payload: Payload
    seq: Sequential
    pipe: Pipelined


@dataclass(slots=True)
class Suite:
    name: str
    roles: list[str]
    rows: list[Row] = field(default_factory=list)
    info: str = ""

    def row(self, label: str) -> Row:
        return next(r for r in self.rows if r.payload.label == label)


def _short_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fmb-"))


@contextmanager
def bare_chain() -> Iterator[Chain]:
    """Client DEALER <-> echo ROUTER in another process, over ipc://."""
    tmp = _short_dir()
    endpoint = f"ipc://{tmp / 'echo.sock'}"
    server = Peer("echo", endpoint)
    try:
        server.wait_ready()
        client = ZmqClient(endpoint)
        try:
            yield Chain(
                "bare echo",
                ["client", "echo server"],
                client,
                {"client": psutil.Process(), "echo server": psutil.Process(server.proc.pid)},
            )
        finally:
            client.close()
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def relay_chain() -> Iterator[Chain]:
    """Client DEALER -> relay ROUTER -> echo DEALER and back: a broker that only routes."""
    tmp = _short_dir()
    endpoint = f"ipc://{tmp / 'relay.sock'}"
    hub = Peer("relay", endpoint)
    worker = Peer("worker", endpoint)
    try:
        worker.wait_ready()
        hub.wait_ready()
        client = ZmqClient(endpoint)
        try:
            yield Chain(
                "bare relay",
                ["client", "relay", "echo worker"],
                client,
                {
                    "client": psutil.Process(),
                    "relay": psutil.Process(hub.proc.pid),
                    "echo worker": psutil.Process(worker.proc.pid),
                },
            )
        finally:
            client.close()
    finally:
        worker.stop()
        hub.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def brokered_chain() -> Iterator[Chain]:
    """Client -> foldermind kernel (broker) -> testworker and back, BusClient on the client side."""
    with BenchKernel(echo_only_config(), "echo kernel") as kernel:
        workers = {w["name"]: w for w in kernel.status().workers}
        pid = workers.get("testworker", {}).get("pid")
        if set(workers) != {"testworker"} or pid is None:
            raise BenchError(f"expected only the testworker to run, got {sorted(workers)}")
        client = KernelClient(kernel.home.bus_endpoint)
        try:
            yield Chain(
                "brokered",
                ["client", "kernel", "testworker"],
                client,
                {
                    "client": psutil.Process(),
                    "kernel": psutil.Process(kernel.kernel_pid),
                    "testworker": psutil.Process(pid),
                },
                info=f"kernel pid {kernel.kernel_pid}, testworker pid {pid}, "
                f"RUNNING {kernel.ready_s:.1f} s after `foldermind start`",
            )
        finally:
            client.close()


def run(chains: list[Chain], payloads: list[Payload], say: Callable[[str], None]) -> list[Suite]:
    suites = {c.name: Suite(c.name, c.roles, info=c.info) for c in chains}
    for p in payloads:
        say(f"  {p.label}: warming up")
        for c in chains:
            measure.warm_up(c.transport, p)
        seq_rounds: dict[str, list[list[int]]] = {c.name: [] for c in chains}
        seq_probe = {c.name: CpuProbe(c.procs) for c in chains}
        pipe_probe = {c.name: CpuProbe(c.procs) for c in chains}
        pipe_done = dict.fromkeys(seq_rounds, 0)
        pipe_ns = dict.fromkeys(seq_rounds, 0)
        pipe_rates: dict[str, list[float]] = {c.name: [] for c in chains}
        for r in range(ROUNDS):
            order = chains[r % len(chains) :] + chains[: r % len(chains)]
            for c in order:
                for _ in range(PRIME_ROUND_TRIPS):
                    c.transport.roundtrip(p)
                seq_probe[c.name].start()
                seq_rounds[c.name].append(measure.sequential(c.transport, p, SEQ_ROUND_S))
                seq_probe[c.name].stop()
            for c in order:
                measure.pipelined(c.transport, p, 0.05)
                pipe_probe[c.name].start()
                done, ns = measure.pipelined(c.transport, p, PIPE_ROUND_S)
                pipe_probe[c.name].stop()
                pipe_done[c.name] += done
                pipe_ns[c.name] += ns
                pipe_rates[c.name].append(done * 1e9 / ns)
        for c in chains:
            n_seq = sum(len(x) for x in seq_rounds[c.name])
            seq = summarize(seq_rounds[c.name], seq_probe[c.name].per_op_us(n_seq), seq_probe[c.name].other_cores)
            pipe = Pipelined(
                n=pipe_done[c.name],
                window=measure.WINDOW,
                seconds=pipe_ns[c.name] / 1e9,
                round_rates=pipe_rates[c.name],
                cpu_us=pipe_probe[c.name].per_op_us(pipe_done[c.name]),
                other_cores=pipe_probe[c.name].other_cores,
            )
            suites[c.name].rows.append(Row(p, seq, pipe))
            say(
                f"    {c.name:<11} median {seq.median_us:8.1f} us  p99 {seq.p99_us:8.1f} us  "
                f"{seq.per_s:9,.0f}/s seq  {pipe.per_s:9,.0f}/s x{pipe.window}"
            )
    return [suites[c.name] for c in chains]


@dataclass(frozen=True, slots=True)
class Wakeup:
    """Bare echo latency with both processes pinned to one CPU, and to two different CPUs."""

    same_cpu_us: float
    two_cpus_us: float


def _pin(procs: list[psutil.Process], cpus: set[int]) -> None:
    for proc in procs:
        for thread in proc.threads():  # ZeroMQ's I/O thread too: a process mask is per thread
            os.sched_setaffinity(thread.id, cpus)


def wakeup_penalty(chain: Chain, p: Payload, seconds: float = 0.6) -> Wakeup | None:
    """How much of a round trip is the cost of waking a process on another CPU (large on VMs)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    client, server = (chain.procs[r] for r in chain.roles)
    saved = {t.id: os.sched_getaffinity(t.id) for proc in (client, server) for t in proc.threads()}
    medians = []
    try:
        for server_cpu in (cpus[0], cpus[1]):
            _pin([client], {cpus[0]})
            _pin([server], {server_cpu})
            for _ in range(PRIME_ROUND_TRIPS * 5):
                chain.transport.roundtrip(p)
            medians.append(statistics.median(measure.sequential(chain.transport, p, seconds)) / 1000)
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)
    return Wakeup(medians[0], medians[1])
