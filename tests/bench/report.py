"""The markdown report (printed, and written to docs/benchmarks/README.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.bench.costs import Cost
from tests.bench.idle import Idle
from tests.bench.markdown import table as _table
from tests.bench.markdown import verdict as _verdict
from tests.bench.suites import Row, Suite, Wakeup

SEQ_RATIO_TARGET = 3.0
PIPE_TARGET = 15_000
IDLE_TARGET = 2.0
NOISY_CORES = 0.25
"""Other load (cores) above which the report warns that the run was disturbed."""


@dataclass(slots=True)
class Results:
    machine: dict[str, str]
    bare: Suite
    relay: Suite
    brokered: Suite
    costs: list[Cost]
    costs_payload: str
    wakeup: Wakeup | None
    idle: Idle | None
    elapsed_s: float
    errors: list[str]

    @property
    def usable_cores(self) -> int:
        try:
            return int(self.machine["cores"].split(",")[2].split()[0])
        except (KeyError, IndexError, ValueError):
            return 1


def _us(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _rate(x: float) -> str:
    return f"{x:,.0f}"


def _span(values: list[float], fmt: Callable[[float], str] = _rate) -> str:
    return f"{fmt(min(values))} to {fmt(max(values))}" if values else "-"


def _payload(row: Row) -> str:
    where = "raw frame" if row.payload.raw else "in the body"
    return f"{row.payload.label} ({row.payload.size:,} B {where})"


def _suite_table(suite: Suite, base: Suite | None) -> list[str]:
    header = [
        "payload",
        "median µs",
        "p99 µs",
        "round medians µs",
        "sequential rt/s",
        "64 in flight rt/s",
        "rounds rt/s",
    ]
    if base is not None:
        header += ["median ÷ bare", "p99 ÷ bare", "in flight ÷ bare"]
    rows = []
    for r in suite.rows:
        cells = [
            _payload(r),
            _us(r.seq.median_us),
            _us(r.seq.p99_us),
            _span(r.seq.round_medians_us, _us),
            _rate(r.seq.per_s),
            _rate(r.pipe.per_s),
            _span(r.pipe.round_rates),
        ]
        if base is not None:
            b = base.row(r.payload.label)
            cells += [
                f"{r.seq.median_us / b.seq.median_us:.2f}",
                f"{r.seq.p99_us / b.seq.p99_us:.2f}",
                f"{r.pipe.per_s / b.pipe.per_s:.2f}",
            ]
        rows.append(cells)
    return _table(header, rows)


def _cpu_table(suites: list[Suite], pipelined: bool) -> list[str]:
    rows = []
    for s in suites:
        client_role, *middle, end_role = s.roles
        for r in s.rows:
            stat = r.pipe if pipelined else r.seq
            cpu = stat.cpu_us
            wall = 1e6 / stat.per_s
            total = sum(cpu.values())
            rows.append(
                [
                    s.name,
                    r.payload.label,
                    _us(cpu[client_role]),
                    f"{_us(cpu[middle[0]])} ({middle[0]})" if middle else "—",
                    f"{_us(cpu[end_role])} ({end_role})",
                    _us(total),
                    _us(wall),
                    f"{total / wall:.2f}",
                    f"{stat.other_cores:.2f}",
                ]
            )
    return _table(
        [
            "chain",
            "payload",
            "client",
            "middle",
            "echo end",
            "total CPU",
            "wall µs / rt",
            "cores busy",
            "other load (cores)",
        ],
        rows,
        "llrrrrrrr",
    )


def _targets(res: Results) -> tuple[list[list[str]], bool]:
    rows, all_ok = [], True
    for r in res.brokered.rows:
        b = res.bare.row(r.payload.label)
        ratio = r.seq.median_us / b.seq.median_us
        all_ok &= ratio <= SEQ_RATIO_TARGET
        rows.append(
            [
                f"brokered sequential round trip within {SEQ_RATIO_TARGET:g}x of the bare echo, {r.payload.label}",
                f"{ratio:.2f}x (median {_us(r.seq.median_us)} vs {_us(b.seq.median_us)} µs; "
                f"p99 {r.seq.p99_us / b.seq.p99_us:.2f}x)",
                _verdict(ratio <= SEQ_RATIO_TARGET),
            ]
        )
    for r in res.brokered.rows:
        b = res.bare.row(r.payload.label)
        all_ok &= r.pipe.per_s >= PIPE_TARGET
        rows.append(
            [
                f"brokered ≥ {PIPE_TARGET:,} round trips/s with 64 in flight, {r.payload.label}",
                f"{_rate(r.pipe.per_s)} rt/s (bare echo {_rate(b.pipe.per_s)}, "
                f"relay {_rate(res.relay.row(r.payload.label).pipe.per_s)})",
                _verdict(r.pipe.per_s >= PIPE_TARGET),
            ]
        )
    if res.idle is not None:
        ok = res.idle.percent_of_core < IDLE_TARGET
        missing = res.idle.not_running
        rows.append(
            [
                f"default process tree idle below {IDLE_TARGET:g}% of one core",
                f"{res.idle.percent_of_core:.2f}% ({len(res.idle.procs)} processes"
                + (f"; not running: {', '.join(f'{n} {s}' for n, s in missing.items())}" if missing else "")
                + ")",
                _verdict(ok) + (" (incomplete tree)" if missing else ""),
            ]
        )
    return rows, all_ok


def _analysis(res: Results) -> list[str]:
    cores = res.usable_cores
    small = res.brokered.rows[0].payload.label
    b, rl, k = (s.row(small) for s in (res.bare, res.relay, res.brokered))
    out = []
    if res.wakeup is not None:
        w = res.wakeup
        out.append(
            f"- **Wake-ups dominate small round trips here.** Pinned to one CPU the bare echo takes "
            f"{_us(w.same_cpu_us)} µs; with client and server on two CPUs {_us(w.two_cpus_us)} µs. "
            f"Waking a process on another CPU costs about {(w.two_cpus_us - w.same_cpu_us) / 2:.0f} µs "
            "per hop on this machine (an IPI and, in a VM, an exit to the hypervisor), and every extra "
            "process in the chain adds such hops."
        )
    out.append(
        f"- **The hop itself ({small}, sequential).** Bare echo {_us(b.seq.median_us)} µs, pure-pyzmq "
        f"relay {_us(rl.seq.median_us)} µs ({rl.seq.median_us / b.seq.median_us:.2f}x bare), foldermind "
        f"{_us(k.seq.median_us)} µs ({k.seq.median_us / b.seq.median_us:.2f}x bare). A broker doubles "
        f"the socket hops (4 instead of 2), so {rl.seq.median_us / b.seq.median_us:.1f}x of the "
        f"{SEQ_RATIO_TARGET:g}x budget goes on having a broker process at all; foldermind's own work "
        f"adds {k.seq.median_us - rl.seq.median_us:.0f} µs per round trip on top "
        f"({k.seq.median_us / rl.seq.median_us:.2f}x the relay)."
    )
    kc, rc = k.pipe.cpu_us, rl.pipe.cpu_us
    k_total, r_total = sum(kc.values()), sum(rc.values())
    out.append(
        f"- **CPU per round trip ({small}, 64 in flight).** foldermind: client {_us(kc['client'])}, "
        f"kernel {_us(kc['kernel'])}, testworker {_us(kc['testworker'])} = {_us(k_total)} µs. Relay: "
        f"client {_us(rc['client'])}, relay {_us(rc['relay'])}, worker {_us(rc['echo worker'])} = "
        f"{_us(r_total)} µs. Each foldermind process costs "
        f"{kc['client'] / rc['client']:.1f}x / {kc['kernel'] / rc['relay']:.1f}x / "
        f"{kc['testworker'] / rc['echo worker']:.1f}x its pure-pyzmq counterpart: the overhead is spread "
        "over all three, not only the broker."
    )
    out.append(
        f"- **Throughput ceiling.** At {_us(k_total)} µs of CPU per round trip on {cores} usable core(s), "
        f"the chain cannot exceed about {_rate(cores * 1e6 / k_total)} rt/s (measured "
        f"{_rate(k.pipe.per_s)}); the kernel's single-threaded loop alone, at {_us(kc['kernel'])} µs per "
        f"round trip (two messages in, two out), caps it near {_rate(1e6 / kc['kernel'])} rt/s even with "
        f"a core to itself. {PIPE_TARGET:,} rt/s needs the kernel under "
        f"{1e6 / PIPE_TARGET:.0f} µs per round trip"
        + (f" and the whole chain under {cores * 1e6 / PIPE_TARGET:.0f} µs on this machine." if cores else ".")
    )
    if cores <= 2:
        out.append(
            f"- **Only {cores} usable core(s).** Client, broker and worker (and ZeroMQ's I/O thread in "
            "each) share them in the brokered and relay chains while the bare echo has two processes, "
            "so the ratios against bare are worse here than on a machine with 4+ cores."
        )
    if res.idle is not None and res.idle.procs:
        idle = res.idle
        wakes = sum(p.wakeups for p in idle.procs)
        if wakes:
            out.append(
                f"- **Idle ({idle.percent_of_core:.2f}% of a core).** The tree woke {wakes / idle.seconds:.0f} "
                f"times a second (all threads) and spent {idle.cpu_s * 1e6 / wakes:.0f} µs of CPU per wake-up: "
                "almost all of it heartbeats. The cost of a wake-up depends on cache and CPU state (cold "
                "caches after a second asleep, a VM's wake-up latency) and varies from run to run at the same "
                "wake-up rate: judge the idle target over several runs."
            )
    py = sum(c.us * c.per_round_trip for c in res.costs if not c.what.startswith(("socket", "the same", "one")))
    hop = next((c for c in res.costs if c.what.startswith("socket I/O")), None)
    one = next((c for c in res.costs if c.what.startswith("one payload frame")), None)
    if hop is not None and one is not None:
        out.append(
            f"- **Python per message ({res.costs_payload}, section 5).** Envelopes and msgpack come to "
            f"about {_us(py)} µs per brokered round trip, and the 4 hops' socket I/O to "
            f"{_us(4 * hop.us)} µs (against {_us(2 * one.us)} µs for the bare echo's 2 single-frame hops), "
            "measured hot in one process. Across processes every step also pays wake-ups and cold caches, "
            "which is why section 4's CPU per round trip is several times this sum."
        )
    return out


SUGGESTIONS = [
    "**Profile notes** (py-spy `record -f raw` of the kernel, the testworker and the client under the "
    "64-in-flight 1 KB load, after the magic moved into the header frame, frames are sent one by one and "
    "drains ask `frames.readable` first; these notes are written by hand, not regenerated: re-profile "
    "after kernel changes):",
    "",
    "1. **The kernel is bound by ZeroMQ sends.** ~45% of its busy samples are inside the C call of "
    "`Socket.send` (`frames._send_parts`, called by `frames.forward`): the last frame of each message "
    "wakes ZeroMQ's I/O thread (an eventfd write, and on a VM a cross-CPU wake-up). Python work is the "
    "rest: `frames.parse` + `Envelope.from_wire` ~17%, `Broker._dispatch`/`_on_request`/`_on_reply`/"
    "`_assign` bookkeeping ~15%, `recv_frames` ~9%. Halving the Python part would gain ~25%, not 2x: "
    "reaching 15,000 rt/s here needs fewer wake-ups per message (batching replies, or fewer processes on "
    "the hot path), not only leaner Python.",
    "2. **The client polls before every receive.** `BusClient.receive` (`protocol/client.py`) calls "
    "`sock.poll()`, which builds a fresh `zmq.Poller`, before every `recv`; checking "
    "`frames.readable(sock)` first (as the broker and the worker loop now do) skips it whenever a reply "
    "is already waiting, which under load is most of the time.",
    "3. **The worker and the client each cost about as much CPU as the kernel** (section 4). For echo-like "
    "handlers `_Runner._run_job` is mostly envelope work: `parse`, body decode, a `Request`, a reply "
    "`Envelope` with a fresh id and `time.time()`, re-encode. On a 2-core machine all three processes "
    "share the cores, so client- and worker-side savings raise throughput as much as the kernel's.",
    "4. **Idle CPU is wake-ups times cold caches.** After a second asleep, a heartbeat's Python work costs "
    "~10x what it costs hot (measured ~400 µs against ~40 µs on the machine above), so the idle figure "
    "scales with wake-ups (section 6): each worker's heartbeat thread wakes ~4 times per beat cycle "
    "(send, its I/O thread twice, the reply) and the kernel handles all of them plus a liveness check "
    "every half interval. A longer `bus.heartbeat_interval_s` while a worker is idle, or checking "
    "liveness only when a heartbeat arrives, cuts idle CPU proportionally.",
]


def render(res: Results) -> str:
    target_rows, all_ok = _targets(res)
    out = [
        "# foldermind bus benchmarks",
        "",
        "Generated by `make bench` (`python -m tests.bench.run_all`); every run overwrites this file. "
        f"The whole run took {res.elapsed_s:.0f} s.",
        "",
        "## Machine",
        "",
        *_table(["", ""], [[k, v] for k, v in res.machine.items()], "ll"),
        "",
        "## Targets",
        "",
        *_table(["target", "measured", "verdict"], target_rows, "llc"),
        "",
    ]
    others = [st.other_cores for s in (res.bare, res.relay, res.brokered) for r in s.rows for st in (r.seq, r.pipe)]
    if others and max(others) > NOISY_CORES:
        out += [
            f"**Noisy run:** other processes on this machine kept up to {max(others):.2f} core(s) busy "
            f"(mean {sum(others) / len(others):.2f}) while chains were measured (section 4, *other load*); "
            "every chain was slowed alike, but absolute figures are pessimistic. Re-run on a quiet machine.",
            "",
        ]
    if not all_ok:
        out += [
            "Some targets are missed on this machine: see *Where the time goes* below.",
            "",
        ]
    if res.errors:
        out += ["**Errors during this run:**", "", *(f"- {e}" for e in res.errors), ""]
    out += [
        "Ratios compare the same payload measured in the same rounds; 'rt' is a round trip (request out, reply back).",
        "",
        "## 1. Bare floor: pyzmq DEALER ↔ ROUTER echo, two processes, ipc://",
        "",
        "The client sends the payload as one frame and the echo process sends it back; nothing is encoded or parsed.",
        "",
        *_suite_table(res.bare, None),
        "",
        "## 2. Reference: a pure-pyzmq relay (three processes)",
        "",
        "Client DEALER → relay ROUTER → echo DEALER and back; the relay reads only the identity frame. "
        "It is the least any broker can cost, so it splits the brokered overhead into 'one more hop' "
        "and 'foldermind's own work'.",
        "",
        *_suite_table(res.relay, res.bare),
        "",
        "## 3. Brokered: client → foldermind kernel → testworker → back",
        "",
        "`BusClient.request` (sequential) and `BusClient.send`/`receive` (64 in flight) to the "
        "`testworker` service (`FOLDERMIND_CAPACITY=64`) of a real kernel started with `foldermind "
        "start` in a temporary home that runs only that worker "
        f"({res.brokered.info}). 1 KB and 100 KB travel in the msgpack body (`EchoRequest.data`); the "
        "64x384 float32 matrix as a raw buffer frame, checked byte for byte.",
        "",
        *_suite_table(res.brokered, res.bare),
        "",
        "## 4. CPU time per round trip (µs), by process",
        "",
        "User + system time of each process (all its threads, ZeroMQ's I/O thread included) over the "
        "timed sections, divided by the round trips made. *cores busy* = total CPU ÷ wall time; "
        "*other load* = CPU the rest of the machine used meanwhile (noise from outside the benchmark).",
        "",
        "Sequential:",
        "",
        *_cpu_table([res.bare, res.relay, res.brokered], pipelined=False),
        "",
        "64 in flight:",
        "",
        *_cpu_table([res.bare, res.relay, res.brokered], pipelined=True),
        "",
        f"## 5. foldermind's Python work per message ({res.costs_payload}), timed in-process",
        "",
        *_table(
            ["step", "µs per call", "times per brokered rt"],
            [[c.what, f"{c.us:.1f}", str(c.per_round_trip) if c.per_round_trip else "(reference)"] for c in res.costs],
            "lrr",
        ),
        "",
    ]
    if res.idle is not None:
        idle = res.idle
        out += [
            "## 6. Idle: the default process tree doing nothing",
            "",
            "A second kernel with the default process map (no override), every worker settled "
            f"{idle.ready_s:.1f} s after `foldermind start`, left to settle for {idle.settle_s:.1f} s (until "
            "the tree used under 5% of a core over one second), then "
            f"measured for {idle.seconds:.1f} s. CPU is user + system time of each process (10 ms "
            "resolution); wake-ups are voluntary context switches; RSS is what `foldermind status` "
            f"reports (`StatusReply`). Meanwhile the rest of the machine kept {idle.other_cores:.2f} core(s) busy.",
            "",
            *_table(
                ["process", "pid", "CPU ms", "% of one core", "wake-ups/s", "RSS MiB"],
                [
                    [
                        p.name,
                        str(p.pid),
                        f"{p.cpu_s * 1000:.0f}",
                        f"{100 * p.cpu_s / idle.seconds:.2f}",
                        f"{p.wakeups / idle.seconds:.1f}",
                        "-" if p.rss_bytes is None else f"{p.rss_bytes / 2**20:.1f}",
                    ]
                    for p in idle.procs
                ]
                + [
                    [
                        "**whole tree**",
                        "",
                        f"**{idle.cpu_s * 1000:.0f}**",
                        f"**{idle.percent_of_core:.2f}**",
                        f"**{sum(p.wakeups for p in idle.procs) / idle.seconds:.1f}**",
                        f"**{idle.rss_bytes / 2**20:.1f}**",
                    ]
                ],
            ),
            "",
        ]
        if idle.not_running:
            out += [
                "**Incomplete tree:** "
                + ", ".join(f"{n} was {s}" for n, s in idle.not_running.items())
                + " when the window began (see the worker's log); the figures cover the processes "
                "that ran.",
                "",
            ]
        if idle.vanished:
            out += [f"Processes that exited during the window: {', '.join(idle.vanished)}.", ""]
    out += [
        "## Where the time goes",
        "",
        *_analysis(res),
        "",
        *SUGGESTIONS,
        "",
        "## Method",
        "",
        "- One run of `python -m tests.bench.run_all`; every figure above comes from that run.",
        "- The three chains run side by side and are measured in turns: 5 rounds per payload, in rotating "
        "order, each round 0.4 s of sequential round trips then 0.5 s with 64 in flight (after a few "
        "untimed round trips to re-prime). A machine whose speed drifts (VM neighbours, CPU placement) "
        "then shifts all chains alike; the *round* columns show how far single rounds strayed.",
        "- Before the rounds: 300 round trips and a 0.2 s in-flight burst per chain and payload "
        "(imports, socket connections, allocator and caches warm).",
        "- Timing with `time.perf_counter_ns` around each round trip; median and p99 pool all rounds; "
        "sequential rt/s = 1 / mean latency. In flight: 64 requests kept outstanding, rt/s = replies "
        "÷ elapsed time including the final drain. Replies are checked: content for sequential, size "
        "and correlation id (`env.cid`) in flight.",
        "- Every peer is a separate OS process; every socket is `ipc://` in a short temporary folder.",
        "- Targets are reported, not asserted: `make bench` does not fail on a MISS.",
        "",
    ]
    return "\n".join(out)
